"""What `helm test` judges (kubectl_taintkeeper/release_check.py): the tolerations a dry-run pod was given, and
whether the controller's Lease has a live holder."""

from __future__ import annotations

from typing import Any

import pytest

from kubectl_taintkeeper.release_check import lease_problems, probe_pod, toleration_problems

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"


def toleration(key: str, seconds: int | None, effect: str = "NoExecute") -> dict[str, Any]:
    found: dict[str, Any] = {"key": key, "operator": "Exists", "effect": effect}
    if seconds is not None:
        found["tolerationSeconds"] = seconds
    return found


def pod(*tolerations: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"tolerations": list(tolerations)}}


TOLERATIONS = [
    ("both, with the configured seconds", pod(toleration(NOT_READY, 300), toleration(UNREACHABLE, 300)), []),
    (
        "none: admitted without taintkeeper",
        pod(),
        [
            f"no {NOT_READY}:NoExecute toleration (want tolerationSeconds 300)",
            f"no {UNREACHABLE}:NoExecute toleration (want tolerationSeconds 300)",
        ],
    ),
    (
        "other seconds than configured",
        pod(toleration(NOT_READY, 300), toleration(UNREACHABLE, 60)),
        [f"{UNREACHABLE}:NoExecute tolerationSeconds 60, want 300"],
    ),
    (
        "without seconds: tolerated forever",
        pod(toleration(NOT_READY, None), toleration(UNREACHABLE, 300)),
        [f"{NOT_READY}:NoExecute tolerationSeconds unset, want 300"],
    ),
    (
        "another effect does not count",
        pod(toleration(NOT_READY, 300, "NoSchedule"), toleration(UNREACHABLE, 300)),
        [f"no {NOT_READY}:NoExecute toleration (want tolerationSeconds 300)"],
    ),
    (
        "no tolerations field at all",
        {"spec": {}},
        [
            f"no {NOT_READY}:NoExecute toleration (want tolerationSeconds 300)",
            f"no {UNREACHABLE}:NoExecute toleration (want tolerationSeconds 300)",
        ],
    ),
]


@pytest.mark.parametrize(("given", "expected"), [t[1:] for t in TOLERATIONS], ids=[t[0] for t in TOLERATIONS])
def test_a_pod_has_the_default_tolerations_with_the_configured_seconds(given, expected):
    assert toleration_problems(given, not_ready=300, unreachable=300) == expected


NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def lease(holder: str | None, renewed: str | None, duration: int | None = 15) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if holder is not None:
        spec["holderIdentity"] = holder
    if renewed is not None:
        spec["renewTime"] = renewed
    if duration is not None:
        spec["leaseDurationSeconds"] = duration
    return {"spec": spec}


LEASES = [
    ("renewed 3 s ago", lease("controller-a_1", "2027-01-15T07:59:57.000000Z"), []),
    ("renewed just within its duration", lease("controller-a_1", "2027-01-15T07:59:45.500000Z"), []),
    (
        "renewed longer ago than its duration: the holder is gone",
        lease("controller-a_1", "2027-01-15T07:59:30.000000Z"),
        ["the Lease's holder controller-a_1 last renewed it 30.0 s ago, more than its 15 s duration"],
    ),
    ("released: no holder", lease("", "2027-01-15T07:59:59.000000Z"), ["the Lease has no holder"]),
    ("never held", lease(None, None), ["the Lease has no holder"]),
    ("held but never renewed", lease("controller-a_1", None), ["the Lease's holder controller-a_1 never renewed it"]),
]


@pytest.mark.parametrize(("given", "expected"), [t[1:] for t in LEASES], ids=[t[0] for t in LEASES])
def test_the_lease_has_a_live_holder(given, expected):
    assert lease_problems(given, now=NOW) == expected


def test_the_probe_pod_meets_the_restricted_pod_security_standard_and_asks_for_no_tolerations():
    spec = probe_pod("taintkeeper:0.1.0")["spec"]
    assert "tolerations" not in spec
    assert spec["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    (container,) = spec["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
