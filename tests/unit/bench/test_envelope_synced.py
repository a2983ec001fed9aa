"""bench/envelope.py: when each controller's caches count as synced, read from its own log."""

from __future__ import annotations

import pytest

from bench.envelope import caches_synced

# kube-controller-manager 1.37.2 with --controllers=node-lifecycle-controller,taint-eviction-controller:
# the contextual logger drops the controller's name from these two lines.
KCM_137_WAITING = """\
I1127 03:15:03.836238    8612 node_lifecycle_controller.go:459] "Starting node controller"
I1127 03:15:03.836301    8612 shared_informer.go:524] "Waiting for caches to sync"
I1127 03:15:03.836455    8612 taint_eviction.go:283] "Starting" controller="taint-eviction-controller"
I1127 03:15:03.836512    8612 shared_informer.go:524] "Waiting for caches to sync"
"""
ONE_SYNCED = 'I1127 03:15:03.910071    8612 shared_informer.go:531] "Caches are synced"\n'
KCM_120 = """\
I0113 10:00:01.000000    1234 shared_informer.go:240] Waiting for caches to sync for taint
I0113 10:00:01.100000    1234 shared_informer.go:240] Waiting for caches to sync for node
I0113 10:00:02.000000    1234 shared_informer.go:247] Caches are synced for taint
"""

CASES = [
    ("1.37: both controllers still waiting", "kube-controller-manager", KCM_137_WAITING, False),
    ("1.37: one of the two synced", "kube-controller-manager", KCM_137_WAITING + ONE_SYNCED, False),
    ("1.37: both synced", "kube-controller-manager", KCM_137_WAITING + ONE_SYNCED * 2, True),
    ("1.20: the node controller still waiting", "kube-controller-manager", KCM_120, False),
    (
        "1.20: both synced",
        "kube-controller-manager",
        KCM_120 + "I0113 10:00:02.100000    1234 shared_informer.go:247] Caches are synced for node\n",
        True,
    ),
    ("nothing logged yet", "kube-controller-manager", "", False),
    ("taintkeeper says it once", "taintkeeper", '{"msg": "caches synced", "seconds": 4.2}\n', True),
]


@pytest.mark.parametrize(("name", "log", "synced"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_caches_count_as_synced_once_every_waiting_controller_said_so(name: str, log: str, synced: bool):
    assert caches_synced(name, log) is synced
