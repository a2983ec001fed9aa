"""Toleration matching as Kubernetes does it, written out here again rather than imported from the
controller: the checker must not share the code it judges."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Toleration = Mapping[str, Any]
Taint = Mapping[str, Any]

NO_EXECUTE = "NoExecute"
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
LIFECYCLE_KEYS = (NOT_READY, UNREACHABLE)
# KEP-2268: an operator's word that a not-Ready node is really down (taintkeeper fence)
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Upstream `Toleration.ToleratesTaint`."""
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if key and key != (taint.get("key") or ""):
        return False
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def grace_seconds(tolerations: Sequence[Toleration], taint: Taint) -> float:
    """How long a pod may stay under `taint`: the FIRST tolerating toleration decides; 0 when none
    tolerates it (or its seconds are negative), infinite when it has no tolerationSeconds."""
    for toleration in tolerations:
        if tolerates(toleration, taint):
            seconds = toleration.get("tolerationSeconds")
            if seconds is None:
                return math.inf
            return max(0.0, float(seconds))
    return 0.0


def already_tolerates(tolerations: Iterable[Toleration], key: str) -> bool:
    """The admission rule (DefaultTolerationSeconds): some toleration with this key or an empty key,
    and effect NoExecute or empty; operator, value and seconds do not matter."""
    return any(
        (toleration.get("key") or "") in ("", key) and (toleration.get("effect") or "") in ("", NO_EXECUTE)
        for toleration in tolerations
    )


def has_default_tolerations(tolerations: Iterable[Toleration]) -> bool:
    listed = list(tolerations)
    return all(already_tolerates(listed, key) for key in LIFECYCLE_KEYS)


def is_lifecycle_taint(taint: Taint) -> bool:
    return taint.get("effect") == NO_EXECUTE and taint.get("key") in LIFECYCLE_KEYS
