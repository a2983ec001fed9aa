"""The DisruptionTarget condition taintkeeper writes before deleting a pod, against what upstream's
taint eviction controller writes (pkg/controller/tainteviction, 1.37: reason DeletionByTaintManager,
and observedGeneration = the pod's generation where the server tracks it)."""

from __future__ import annotations

import pytest

from controller.objects import pod_view
from controller.tainteviction.api import disruption_target_patch

NOW = 1_800_000_000.0
UPSTREAM_CONDITION = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "DeletionByTaintManager",
    "message": "Taint manager: deleting due to NoExecute taint",
    "lastTransitionTime": "2027-01-15T08:00:00Z",
}

CASES = {
    "a pod on a server that counts no generations (1.20) gets upstream's condition as 1.20 writes it": (
        {},
        UPSTREAM_CONDITION,
    ),
    "a pod at generation 3 (1.33+) gets observedGeneration 3, as 1.37 writes it": (
        {"generation": 3},
        {**UPSTREAM_CONDITION, "observedGeneration": 3},
    ),
}


@pytest.mark.parametrize(("metadata", "condition"), CASES.values(), ids=CASES.keys())
def test_the_disruption_target_condition(metadata: dict, condition: dict) -> None:
    pod = pod_view(
        {"metadata": {"name": "web", "namespace": "ns", "uid": "u-1", **metadata}, "spec": {"nodeName": "n1"}}
    )
    assert disruption_target_patch(pod.uid, NOW, pod.generation) == {
        "metadata": {"uid": "u-1"},
        "status": {"conditions": [condition]},
    }
