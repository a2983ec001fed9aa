"""Node taints: the NoExecute subset, the taints node conditions call for, and taint diffs.

Taint identity is key + effect (upstream `MatchTaint`): two taints with the same key and effect
but different values or `timeAdded` are the same taint.

Shared because the webhook takes the failure taints' keys from here (through defaults.py); the
rest serves the controller, kept beside those keys so there is one definition of each taint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# API JSON: a value may be anything JSON holds.
Taint = Mapping[str, Any]
Node = Mapping[str, Any]

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
PID_PRESSURE = "node.kubernetes.io/pid-pressure"
NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
# Non-graceful node shutdown (KEP-2268): put on a node known to be down, its pods are force-deleted.
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"

# (condition type, condition status) -> taint key, upstream `nodeConditionToTaintKeyStatusMap`.
CONDITION_TAINT_KEYS: Mapping[tuple[str, str], str] = {
    ("Ready", "False"): NOT_READY,
    ("Ready", "Unknown"): UNREACHABLE,
    ("MemoryPressure", "True"): MEMORY_PRESSURE,
    ("DiskPressure", "True"): DISK_PRESSURE,
    ("NetworkUnavailable", "True"): NETWORK_UNAVAILABLE,
    ("PIDPressure", "True"): PID_PRESSURE,
}

# The NoSchedule taint keys the controller owns; every other taint on a node is left alone.
MANAGED_NO_SCHEDULE_KEYS: frozenset[str] = frozenset(CONDITION_TAINT_KEYS.values()) | {UNSCHEDULABLE}

# The NoExecute taint keys the controller owns (mutually exclusive on a node).
MANAGED_NO_EXECUTE_KEYS: frozenset[str] = frozenset({NOT_READY, UNREACHABLE})


def taint_identity(taint: Taint) -> tuple[str, str]:
    """What makes two taints the same taint: key and effect."""
    return (str(taint.get("key") or ""), str(taint.get("effect") or ""))


def is_node_failure_taint(taint: Taint) -> bool:
    """The `not-ready` or `unreachable` NoExecute taint: the two the node lifecycle swaps for each other."""
    return taint_identity(taint) in ((NOT_READY, NO_EXECUTE), (UNREACHABLE, NO_EXECUTE))


def node_taints(node: Node) -> list[Taint]:
    """The taints in a node's spec (an absent or null list reads as empty)."""
    spec = node.get("spec") or {}
    return list(spec.get("taints") or [])


def no_execute_taints(taints: Iterable[Taint]) -> list[Taint]:
    """Only the taints with effect NoExecute, upstream `getNoExecuteTaints`."""
    return [taint for taint in taints if taint.get("effect") == NO_EXECUTE]


def ready_status(node: Node) -> str | None:
    """The status of the node's Ready condition ("True", "False", "Unknown"), None if absent."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status"))
    return None


def desired_no_schedule_taints(
    conditions: Iterable[Mapping[str, object]], unschedulable: bool = False
) -> list[dict[str, str]]:
    """The NoSchedule taints a node's conditions and `spec.unschedulable` call for.

    A node without a Ready condition gets no not-ready/unreachable NoSchedule taint here, as
    upstream; the health monitor marks it Unknown once its startup grace period runs out.
    """
    desired: list[dict[str, str]] = []
    for condition in conditions:
        key = CONDITION_TAINT_KEYS.get((str(condition.get("type")), str(condition.get("status"))))
        if key is not None:
            desired.append({"key": key, "effect": NO_SCHEDULE})
    if unschedulable:
        desired.append({"key": UNSCHEDULABLE, "effect": NO_SCHEDULE})
    return desired


def managed_no_schedule_taints(taints: Iterable[Taint]) -> list[Taint]:
    """The node's current NoSchedule taints that the controller owns."""
    return [t for t in taints if t.get("effect") == NO_SCHEDULE and t.get("key") in MANAGED_NO_SCHEDULE_KEYS]


def taint_diff(current: Iterable[Taint], desired: Iterable[Taint]) -> tuple[list[Taint], list[Taint]]:
    """(to add, to remove) to turn `current` into `desired`, upstream `TaintSetDiff` by identity."""
    current_list = list(current)
    desired_list = list(desired)
    current_ids = {taint_identity(t) for t in current_list}
    desired_ids = {taint_identity(t) for t in desired_list}
    to_add = [t for t in desired_list if taint_identity(t) not in current_ids]
    to_remove = [t for t in current_list if taint_identity(t) not in desired_ids]
    return to_add, to_remove
