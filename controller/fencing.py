"""Fencing a node: the `node.kubernetes.io/out-of-service` taint (KEP-2268, non-graceful node
shutdown), the annotations that say who fenced it and when, whether `fence` may fence a node, and
the JSON patches that fence and unfence it. Pure: raw node JSON and `now` in, decisions and patches out.

Used by `fence`/`unfence` (kubectl_taintkeeper/fencing_command.py) and by the controller's --auto-fence-after
(controller/outofservice/), so a node is fenced the same way whoever fences it.

"Fencing" here is the node's: it is not the write fence of kube/fence.py, which keeps a replica that
lost its lease from writing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.describe import describe_duration
from kube.timestamps import format_time, parse_time
from shared.taints import NO_EXECUTE, OUT_OF_SERVICE, Taint

Json = Mapping[str, Any]  # API JSON

# Who fenced the node (`alice@laptop as kubernetes-admin`, or the controller's auto-fence) and when (RFC 3339).
FENCED_BY_ANNOTATION = "taintkeeper.io/fenced-by"
FENCED_AT_ANNOTATION = "taintkeeper.io/fenced-at"
# Written by an external fencing agent the operator trusts (a BMC power-off hook, a cloud
# instance-terminated hook): the node's machine is known to be off as of this time (RFC 3339).
CONFIRMED_AT_ANNOTATION = "taintkeeper.io/fencing-confirmed-at"
# The taint's value: KEP-2268's documentation uses `nodeshutdown`; any value works.
FENCE_TAINT_VALUE = "nodeshutdown"
DEFAULT_MIN_DOWN = 300.0  # `fence --min-down`: 5m


def is_out_of_service(taint: Taint) -> bool:
    """The out-of-service taint: that key with effect NoExecute, whatever its value."""
    return taint.get("key") == OUT_OF_SERVICE and taint.get("effect") == NO_EXECUTE


def out_of_service_taint(taints: Sequence[Taint]) -> Taint | None:
    return next((taint for taint in taints if is_out_of_service(taint)), None)


def fence_taint(now: float, value: str = FENCE_TAINT_VALUE) -> dict[str, Any]:
    """The taint `fence` (and --auto-fence-after) puts on, with timeAdded as the node lifecycle's taints have."""
    return {"key": OUT_OF_SERVICE, "value": value, "effect": NO_EXECUTE, "timeAdded": format_time(now)}


def ready_condition(node: Json) -> Json | None:
    return next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)


def node_name(node: Json) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


def node_annotations(node: Json) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("annotations") or {}


def fence_refusal(node: Json, min_down: float, now: float) -> str | None:
    """Why `fence` must not fence this node now (one line), or None: only a node whose Ready condition
    has not been True for at least `min_down` seconds may be fenced."""
    name = node_name(node)
    ready = ready_condition(node)
    if ready is None:
        return f"node {name} has no Ready condition: cannot tell how long it has been down; not fencing it"
    status = str(ready.get("status") or "")
    if status == "True":
        return (
            f"node {name} is Ready: its kubelet is reporting, so its pods may be running; not fencing it "
            f"(fence only a node that is powered off, cut off, or whose workloads are known to be stopped)"
        )
    since = parse_time(ready.get("lastTransitionTime"))
    if since is None:
        return (
            f"node {name} is not Ready ({status or 'no status'}) but its Ready condition has no "
            f"lastTransitionTime: cannot tell since when; not fencing it"
        )
    down = now - since
    if down < min_down:
        return (
            f"node {name} has not been Ready for only {describe_duration(down)} (since {format_time(since)}), "
            f"less than --min-down {describe_duration(min_down)}; not fencing it yet"
        )
    return None


def _escape(key: str) -> str:
    """A JSON pointer token (RFC 6901): `~` -> `~0`, `/` -> `~1`."""
    return key.replace("~", "~0").replace("/", "~1")


def _version_test(node: Json) -> dict[str, Any]:
    """Refuse the patch (422) if the node changed since it was read: no concurrent taint edit is lost."""
    return {
        "op": "test",
        "path": "/metadata/resourceVersion",
        "value": str((node.get("metadata") or {}).get("resourceVersion") or ""),
    }


@dataclass(frozen=True)
class FencePatch:
    """A JSON patch (RFC 6902) for the node, and the taint and annotations it adds."""

    ops: tuple[dict[str, Any], ...]
    taint: dict[str, Any]
    annotations: dict[str, str]


def fence_patch(node: Json, who: str, now: float, value: str = FENCE_TAINT_VALUE) -> FencePatch | None:
    """Add the out-of-service taint and the fenced-by/fenced-at annotations, against the node's
    resourceVersion; None when it already carries the taint (nothing is changed then)."""
    taints = list((node.get("spec") or {}).get("taints") or [])
    if out_of_service_taint(taints) is not None:
        return None
    taint = fence_taint(now, value)
    ops: list[dict[str, Any]] = [_version_test(node)]
    if (node.get("spec") or {}).get("taints") is None:
        ops.append({"op": "add", "path": "/spec/taints", "value": [taint]})
    else:
        ops.append({"op": "add", "path": f"/spec/taints/{len(taints)}", "value": taint})
    marks = {FENCED_BY_ANNOTATION: who, FENCED_AT_ANNOTATION: format_time(now)}
    if (node.get("metadata") or {}).get("annotations") is None:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": marks})
    else:
        ops += [
            {"op": "add", "path": f"/metadata/annotations/{_escape(key)}", "value": value}
            for key, value in marks.items()
        ]
    return FencePatch(tuple(ops), taint, marks)


def unfence_patch(node: Json) -> tuple[dict[str, Any], ...]:
    """Remove every out-of-service taint and the fencing annotations (the confirmation too: the
    fencing it confirmed is over), against the node's resourceVersion; () when there is nothing to remove."""
    taints = list((node.get("spec") or {}).get("taints") or [])
    removals: list[dict[str, Any]] = []
    for index in reversed(range(len(taints))):  # from the end, so the earlier indexes stay valid
        if is_out_of_service(taints[index]):
            removals += [
                {"op": "test", "path": f"/spec/taints/{index}/key", "value": OUT_OF_SERVICE},
                {"op": "remove", "path": f"/spec/taints/{index}"},
            ]
    present = node_annotations(node)
    removals += [
        {"op": "remove", "path": f"/metadata/annotations/{_escape(key)}"}
        for key in (FENCED_BY_ANNOTATION, FENCED_AT_ANNOTATION, CONFIRMED_AT_ANNOTATION)
        if key in present
    ]
    if not removals:
        return ()
    return (_version_test(node), *removals)


def fenced_text(node: Json) -> str:
    """`by WHO at WHEN` from the annotations, as far as they say."""
    marks = node_annotations(node)
    who = marks.get(FENCED_BY_ANNOTATION)
    when = marks.get(FENCED_AT_ANNOTATION)
    return (
        " ".join(part for part in (f"by {who}" if who else "", f"at {when}" if when else "") if part)
        or "by someone else (no taintkeeper.io/fenced-by annotation)"
    )
