"""kube/acting_term.py on the real apiserver: each write a leading controller makes names, in its User-Agent, the
term of the Lease it acts for, which is the Lease's acquireTime as the apiserver stored it; a replica that
leads later writes under its own. kube-apiserver's audit log is the record read (`--audit`), so the soak's
judge (bench/soak, I4) can tell a write of an ended term from one of the term held.
"""

from __future__ import annotations

import re
import uuid

import pytest
from kubernetes import client

from tests.integration.kube import audit_events, raw, wait_for
from tests.integration.simulated import Cluster

LEASE_ELECTION = (
    "--leader-elect=true",
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=1s",
)
READS = ("get", "list", "watch")
_TERM = re.compile(r"; term ([^()]+)\)$")


def term_of(user_agent: str) -> str | None:
    match = _TERM.search(user_agent)
    return match.group(1) if match else None


def acquired(cluster: Cluster, name: str) -> str:
    lease = raw(client.CoordinationV1Api(cluster.local.api_client).read_namespaced_lease, name, cluster.namespace)
    return lease["spec"]["acquireTime"]


def writes_of(cluster: Cluster, replica: str) -> list[dict]:
    return [event for event in audit_events(cluster.local, f"({replica}") if event["verb"] not in READS]


def kill_a_node_and_wait_for_its_pod(cluster: Cluster, node: str) -> None:
    pod = cluster.pods(node, None, "doomed")
    cluster.sim.stop_heartbeats(node)
    wait_for(lambda: cluster.deleted(pod), 30, f"{pod} deleted")


def test_each_write_names_the_term_its_replica_held_and_a_new_leader_writes_under_its_own(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    lease = f"terms-{uuid.uuid4().hex[:8]}"
    election = (
        *LEASE_ELECTION,
        f"--leader-elect-resource-name={lease}",
        f"--leader-elect-resource-namespace={cluster.namespace}",
    )
    nodes = cluster.sim.add_nodes(5, zones=["a"])  # two of five down: the zone stays Normal
    terms: dict[str, str] = {}
    for replica, node in (("first", nodes[0]), ("second", nodes[1])):
        name = f"{replica}-{uuid.uuid4().hex[:8]}"
        monkeypatch.setenv("POD_NAME", name)  # the controller's User-Agent names it
        if cluster.controller is not None:
            cluster.controller.kill()  # no release: the next one waits out the Lease
        cluster.start_controller(*election)
        kill_a_node_and_wait_for_its_pod(cluster, node)
        terms[name] = acquired(cluster, lease)

    for name, term in terms.items():
        writes = writes_of(cluster, name)
        on_lease = [w for w in writes if w["objectRef"].get("resource") == "leases"]
        acting = [w for w in writes if w["objectRef"].get("resource") != "leases"]
        what = {(w["verb"], w["objectRef"]["resource"], w["objectRef"].get("subresource", "")) for w in acting}
        print(name, term, sorted(what))
        assert ("patch", "nodes", "") in what  # the monitor's taint
        assert {("delete", "pods", ""), ("create", "pods", "eviction")} & what  # the eviction manager's removal
        assert ("create", "events", "") in what  # an event, posted from the recorder's thread
        assert {term_of(w["userAgent"]) for w in acting} == {term}, [w["userAgent"] for w in acting]
        assert on_lease and {term_of(w["userAgent"]) for w in on_lease} == {None}  # the elector acts for no term
    assert len(set(terms.values())) == 2
