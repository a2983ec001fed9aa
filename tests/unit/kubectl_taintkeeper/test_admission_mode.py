"""`status` says who gives pods their default tolerations: the webhook, the policy, both or neither, and
what keeps the policy from giving them (its parameter missing or malformed), from the objects as read."""

from __future__ import annotations

from typing import Any

import pytest

from kubectl_taintkeeper.admission_mode import admission_status
from kubectl_taintkeeper.reading import Reading

ABSENT: Reading[Any] = Reading()
WEBHOOK = Reading({"metadata": {"name": "taintkeeper"}})
BINDING = Reading({"spec": {"paramRef": {"name": "taintkeeper-defaults", "namespace": "taintkeeper-system"}}})
GOOD = Reading({"data": {"default-not-ready-toleration-seconds": "30", "default-unreachable-toleration-seconds": "45"}})
FORBIDDEN: Reading[Any] = Reading(error="forbidden (bind the ClusterRole taintkeeper-viewer)")

ROWS = [
    ("the webhook alone is the webhook mode", WEBHOOK, ABSENT, None, "webhook", None, None),
    ("the policy with its parameter gives its seconds", ABSENT, BINDING, GOOD, "policy", (30, 45), None),
    ("the policy without its parameter says pods go bare", ABSENT, BINDING, ABSENT, "policy", None, "is missing"),
    (
        "a malformed parameter says what it needs",
        ABSENT,
        BINDING,
        Reading({"data": {"default-not-ready-toleration-seconds": "soon"}}),
        "policy",
        None,
        "malformed",
    ),
    (
        "a parameter with spaces is malformed: the policy's int() takes none",
        ABSENT,
        BINDING,
        Reading(
            {"data": {"default-not-ready-toleration-seconds": " 30", "default-unreachable-toleration-seconds": "45"}}
        ),
        "policy",
        None,
        "plain digits",
    ),
    (
        "a binding without a parameter reference gives nothing",
        ABSENT,
        Reading({"spec": {}}),
        None,
        "policy",
        None,
        "names no parameter",
    ),
    ("both registered says to keep one", WEBHOOK, BINDING, GOOD, "both", (30, 45), "keep one"),
    ("neither says only the backfill gives them", ABSENT, ABSENT, None, "none", None, "only from the backfill"),
    ("a refused read is unknown, naming the role", FORBIDDEN, ABSENT, None, "unknown", None, "taintkeeper-viewer"),
    (
        "a refused parameter read is unknown",
        ABSENT,
        BINDING,
        Reading(error="forbidden (bind the Role taintkeeper-viewer in taintkeeper-system)"),
        "unknown",
        None,
        "cannot read the parameter taintkeeper-system/taintkeeper-defaults",
    ),
]


@pytest.mark.parametrize(
    ("webhook", "binding", "parameter", "mode", "seconds", "problem"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_admission_status(webhook, binding, parameter, mode, seconds, problem):
    status = admission_status(webhook, binding, parameter)
    assert status.mode == mode
    got_seconds = None if status.not_ready_seconds is None else (status.not_ready_seconds, status.unreachable_seconds)
    assert got_seconds == seconds
    if problem is None:
        assert status.problem is None
    else:
        assert status.problem is not None and problem in status.problem
