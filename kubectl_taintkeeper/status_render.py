"""A ClusterStatus (kubectl_taintkeeper/status.py) as people read it, plain or in ANSI colour, and as JSON.

The JSON's names are a contract for scripts and alerts: the top-level `zones`, `brake`, `nodes`,
`leader`, `pendingEvictions`, and each pending eviction's `namespace`, `pod`, `node`, `taint`,
`deadline` (RFC 3339), `secondsLeft` (and, added since, `waitingFor`, and the top-level `admission`
with its `mode`). Add fields if needed; never rename or drop these.
"""

from __future__ import annotations

from typing import Any

from controller.describe import describe_duration
from controller.zones import ZoneState
from kube.timestamps import format_time
from kubectl_taintkeeper.admission_mode import AdmissionStatus
from kubectl_taintkeeper.status import ClusterStatus, LeaderStatus, PendingEviction, TaintAge, TaintedNode, ZoneStatus

# ANSI SGR codes (the text between ESC[ and m).
BOLD = "1"
RED = "31"
GREEN = "32"
YELLOW = "33"
CYAN = "36"
DIM = "2"

STATE_STYLES = {
    ZoneState.NORMAL: GREEN,
    ZoneState.INITIAL: CYAN,
    ZoneState.PARTIAL_DISRUPTION: YELLOW,
    ZoneState.FULL_DISRUPTION: RED,
}
SOON = 60.0  # seconds: a pending eviction this close is shown in yellow
NAMES_SHOWN = 8  # a zone's node names shown in text; JSON has them all

Cell = tuple[str, str]  # (text, style; "" for none)


def paint(text: str, style: str, colour: bool) -> str:
    return f"\x1b[{style}m{text}\x1b[0m" if colour and style and text else text


def _table(rows: list[list[Cell]], colour: bool, indent: str = "  ") -> list[str]:
    """Columns aligned on the plain text, then painted (escape codes take no room on screen)."""
    widths = [max(len(row[i][0]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [paint(text, style, colour) + " " * (widths[i] - len(text)) for i, (text, style) in enumerate(row)]
        lines.append((indent + "  ".join(cells)).rstrip())
    return lines


def _heading(text: str, colour: bool) -> str:
    return paint(text, BOLD, colour)


def _zone_name(zone: str) -> str:
    return zone or "(no zone)"


def _names(names: tuple[str, ...]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (f", +{len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else "")


def _zone_lines(status: ClusterStatus, colour: bool) -> list[str]:
    settings = status.settings
    lines = [
        _heading("ZONES", colour) + f"  (--node-eviction-rate {settings.node_eviction_rate:g}, "
        f"--secondary-node-eviction-rate {settings.secondary_node_eviction_rate:g}, "
        f"--large-cluster-size-threshold {settings.large_cluster_size_threshold}, "
        f"--unhealthy-zone-threshold {settings.unhealthy_zone_threshold:g})"
    ]
    if not status.zones:
        return [*lines, "  no nodes"]
    rows: list[list[Cell]] = [[("ZONE", DIM), ("STATE", DIM), ("NODES", DIM), ("NOT READY", DIM), ("RATE", DIM)]]
    for zone in status.zones:
        counted = f"{zone.size}" + (f" (+{len(zone.excluded)} excluded)" if zone.excluded else "")
        rows.append(
            [
                (_zone_name(zone.zone), ""),
                (zone.state.value, STATE_STYLES[zone.state]),
                (counted, ""),
                (str(zone.not_ready), YELLOW if zone.not_ready else ""),
                (f"{zone.rate:g} nodes/s: {zone.rate_reason}", RED if zone.rate == 0 else ""),
            ]
        )
    lines += _table(rows, colour)
    lines += [
        f"  {_zone_name(zone.zone)} nodes: {_names(zone.nodes)}"
        + (f"; excluded from disruption checks: {_names(zone.excluded)}" if zone.excluded else "")
        for zone in status.zones
    ]
    return lines


def _brake_line(status: ClusterStatus, colour: bool) -> str:
    if status.brake:
        return (
            _heading("BRAKE", colour)
            + "  "
            + paint(
                "ON: every zone is fully disrupted; nothing is tainted NoExecute (the controller removes the not-ready "
                "and unreachable NoExecute taints) until a zone recovers",
                RED + ";" + BOLD,
                colour,
            )
        )
    return _heading("BRAKE", colour) + "  " + paint("off", GREEN, colour) + " (a zone is not fully disrupted)"


def _age(taint: TaintAge) -> str:
    if taint.age is None or taint.since is None:
        if taint.effect == "NoExecute":
            return "age unknown (no timeAdded)"
        return "age unknown (a NoSchedule taint has no timeAdded)"
    return f"{describe_duration(taint.age)} (since {format_time(taint.since)}, {taint.since_source})"


def _node_lines(nodes: tuple[TaintedNode, ...], colour: bool) -> list[str]:
    lines = [_heading("TAINTED NODES", colour) + "  (taintkeeper's taints)"]
    if not nodes:
        return [*lines, "  none"]
    for node in nodes:
        ready = f"Ready={node.ready}" if node.ready is not None else "no Ready condition"
        lines.append(
            f"  {node.name}  zone {_zone_name(node.zone)}  "
            + paint(ready, GREEN if node.ready == "True" else RED, colour)
        )
        lines += _table(
            [[(t.taint, RED if t.effect == "NoExecute" else YELLOW), (_age(t), "")] for t in node.taints],
            colour,
            indent="      ",
        )
    return lines


def _time_left(pending: PendingEviction) -> Cell:
    if pending.seconds_left > 0:
        return f"in {describe_duration(pending.seconds_left)}", YELLOW if pending.seconds_left <= SOON else ""
    if round(pending.seconds_left) == 0:
        return "due now", RED
    return f"overdue {describe_duration(pending.seconds_left)}", RED


def _why(pending: PendingEviction) -> str:
    taint = pending.taint + (" (no timeAdded: counted from now)" if pending.counted_from_now else "")
    waiting = f"; waiting for {pending.waiting_for}" if pending.waiting_for else ""
    if pending.toleration is None:
        return f"{taint} not tolerated{waiting}"
    return f"{taint}, toleration {pending.toleration}{waiting}"


def _pending_lines(pending: tuple[PendingEviction, ...], colour: bool) -> list[str]:
    lines = [_heading("PENDING EVICTIONS", colour) + f"  ({len(pending)}, soonest first)"]
    if not pending:
        return [*lines, "  none"]
    rows: list[list[Cell]] = [[("DEADLINE", DIM), ("LEFT", DIM), ("POD", DIM), ("NODE", DIM), ("WHY", DIM)]]
    rows += [
        [(format_time(p.deadline), ""), _time_left(p), (f"{p.namespace}/{p.pod}", ""), (p.node, ""), (_why(p), "")]
        for p in pending
    ]
    return lines + _table(rows, colour)


def _leader_lines(leader: LeaderStatus, colour: bool) -> list[str]:
    heading = _heading("LEADER", colour) + "  "
    if leader.lease_error is not None:
        first = heading + paint(f"unknown: cannot read the Lease {leader.lease}: {leader.lease_error}", YELLOW, colour)
    elif leader.holder is None:
        first = (
            heading
            + paint("none", RED, colour)
            + f" (the Lease {leader.lease} "
            + ("has no holder)" if leader.lease_found else "does not exist)")
        )
    else:
        renewed = (
            f"renewed {describe_duration(leader.renewed_ago)} ago"
            if leader.renewed_ago is not None
            else "never renewed"
        )
        expired = (
            paint(f"; expired: not renewed within its {leader.lease_duration}s", RED, colour) if leader.expired else ""
        )
        first = heading + f"{leader.pod} (Lease {leader.lease} held by {leader.holder}, {renewed}{expired})"
    if leader.last_pass_ago is not None:
        second = f"  last monitor pass {describe_duration(leader.last_pass_ago)} ago"
    else:
        second = "  last monitor pass: " + paint(f"cannot tell: {leader.last_pass_error}", YELLOW, colour)
    return [first, second]


def _admission_lines(admission: AdmissionStatus, colour: bool) -> list[str]:
    heading = _heading("ADMISSION", colour) + "  "
    if admission.mode == "webhook":
        said = f"webhook (MutatingWebhookConfiguration {admission.webhook_configuration})"
    elif admission.mode in ("policy", "both"):
        seconds = (
            f", {admission.not_ready_seconds}s not-ready, {admission.unreachable_seconds}s unreachable"
            if admission.not_ready_seconds is not None
            else ""
        )
        said = (
            f"{'webhook and ' if admission.mode == 'both' else ''}policy (MutatingAdmissionPolicyBinding "
            f"{admission.policy_binding}, parameter {admission.parameter}{seconds})"
        )
    else:
        said = admission.mode
    lines = [heading + said]
    if admission.problem:
        lines.append("  " + paint(admission.problem, RED if admission.mode == "none" else YELLOW, colour))
    return lines


def render_text(status: ClusterStatus, colour: bool = False) -> str:
    """The report; `colour` adds ANSI escapes (for a terminal only)."""
    lines = [_heading(f"taintkeeper status at {format_time(status.now)}", colour), ""]
    lines += _zone_lines(status, colour)
    lines += [_brake_line(status, colour), ""]
    lines += [*_node_lines(status.nodes, colour), ""]
    lines += [*_pending_lines(status.pending, colour), ""]
    lines += _leader_lines(status.leader, colour)
    if status.admission is not None:
        lines += ["", *_admission_lines(status.admission, colour)]
    return "\n".join(lines)


def _optional_time(epoch: float | None) -> str | None:
    return None if epoch is None else format_time(epoch)


def _optional_seconds(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds)


def _zone_json(zone: ZoneStatus) -> dict[str, Any]:
    return {
        "zone": zone.zone,
        "state": zone.state.value,
        "nodes": list(zone.nodes),
        "excluded": list(zone.excluded),
        "size": zone.size,
        "notReady": zone.not_ready,
        "evictionRate": zone.rate,
        "evictionRateReason": zone.rate_reason,
    }


def _node_json(node: TaintedNode) -> dict[str, Any]:
    return {
        "name": node.name,
        "zone": node.zone,
        "ready": node.ready,
        "taints": [
            {
                "key": t.key,
                "effect": t.effect,
                "since": _optional_time(t.since),
                "sinceSource": t.since_source,
                "ageSeconds": _optional_seconds(t.age),
            }
            for t in node.taints
        ],
    }


def _leader_json(leader: LeaderStatus) -> dict[str, Any]:
    return {
        "lease": leader.lease,
        "holder": leader.holder,
        "pod": leader.pod,
        "renewTime": _optional_time(leader.renewed),
        "renewedSecondsAgo": _optional_seconds(leader.renewed_ago),
        "leaseDurationSeconds": leader.lease_duration,
        "expired": leader.expired,
        "error": leader.lease_error,
        "lastMonitorPass": _optional_time(leader.last_pass),
        "lastMonitorPassSecondsAgo": _optional_seconds(leader.last_pass_ago),
        "lastMonitorPassError": leader.last_pass_error,
    }


def _pending_json(pending: PendingEviction) -> dict[str, Any]:
    return {
        "namespace": pending.namespace,
        "pod": pending.pod,
        "node": pending.node,
        "taint": pending.taint,
        "deadline": format_time(pending.deadline),
        "secondsLeft": round(pending.seconds_left),
        "waitingFor": pending.waiting_for,
    }


def _admission_json(admission: AdmissionStatus) -> dict[str, Any]:
    return {
        "mode": admission.mode,
        "webhookConfiguration": admission.webhook_configuration,
        "policyBinding": admission.policy_binding,
        "parameter": admission.parameter,
        "notReadySeconds": admission.not_ready_seconds,
        "unreachableSeconds": admission.unreachable_seconds,
        "problem": admission.problem,
    }


def status_json(status: ClusterStatus) -> dict[str, Any]:
    """The machine-readable form (`-o json`); see the module docstring for what is a contract."""
    return {
        "zones": [_zone_json(z) for z in status.zones],
        "brake": status.brake,
        "nodes": [_node_json(n) for n in status.nodes],
        "leader": _leader_json(status.leader),
        "pendingEvictions": [_pending_json(p) for p in status.pending],
        "admission": None if status.admission is None else _admission_json(status.admission),
    }
