"""Leader election against the real kube-apiserver: replicas are threads, each with its own LeaseClient
(its own connection pool). Short timings: lease 3 s, renew deadline 2 s, retry period 0.5 s.

Cutting a replica off from the apiserver swaps its LeaseClient for one pointed at an endpoint that
refuses connections, or at a TLS server that accepts requests and never answers (a frozen apiserver).
"""

from __future__ import annotations

import copy
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from controller.nodelifecycle.lease_annotation import LAST_MONITOR_PASS_ANNOTATION
from hack.servers import ControllerProcess
from kube.leader import LeaderElectionConfig, LeaderElector, LeaseApi, LeaseClient, LeaseConflict
from kube.timestamps import format_micro_time, parse_time
from tests.integration.kube import LocalCluster, raw, wait_for

LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 3.0, 2.0, 0.5
CAMPAIGN_PERIOD_MAX = RETRY_PERIOD * 1.2  # campaign attempts are jittered up to +20%
SLACK = 0.3  # request latency and thread scheduling on a busy test machine
ELECTOR_ONLY = pytest.mark.version_independent(
    "the elector's own timing and hand-over; the Lease requests it makes are LeaseClient's, which "
    "test_lease_client_reads_creates_and_replaces_with_optimistic_concurrency keeps on 1.20"
)


class HungApiserver:
    """Completes TLS handshakes with the apiserver's own certificate, then never answers."""

    def __init__(self, pki: Path) -> None:
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(pki / "apiserver.crt", pki / "apiserver.key")
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.url = f"https://127.0.0.1:{self._listener.getsockname()[1]}"
        self._held: list[socket.socket] = []
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="hung-apiserver", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closing.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            connection.settimeout(5)
            try:
                self._held.append(self._context.wrap_socket(connection, server_side=True))
            except OSError:  # the client gave up during the handshake
                connection.close()

    def close(self) -> None:
        self._closing.set()
        self._thread.join(5)
        self._listener.close()
        for connection in self._held:
            connection.close()


class RefusingEndpoint:
    """A bound, never-listening port: every connection is refused at once."""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.url = f"https://127.0.0.1:{self._socket.getsockname()[1]}"

    def close(self) -> None:
        self._socket.close()


class CrashedApi:
    """The API as seen by a process that has died: nothing it would send arrives."""

    def get(self, name: str, namespace: str) -> dict | None:
        raise RuntimeError("crashed")

    def create(self, body: dict) -> dict:
        raise RuntimeError("crashed")

    def replace(self, body: dict) -> dict:
        raise RuntimeError("crashed")


def lease_client_for(local_cluster: LocalCluster, url: str | None = None) -> LeaseClient:
    configuration = copy.deepcopy(local_cluster.api_client.configuration)
    if url is not None:
        # The kubeconfig loader's hook re-applies the kubeconfig's server before every request.
        configuration.refresh_api_key_hook = None
        configuration.host = url
    api_client = client.ApiClient(configuration)
    try:
        return LeaseClient(api_client, retry_period=RETRY_PERIOD)
    finally:
        api_client.close()  # LeaseClient has its own copy and pool


class SwitchableLeaseApi:
    """A replica's path to the apiserver: the real one until `cut_off` is set, then `cut_off_api`.
    Notes when its last successful acquire/renew attempt began, for the timing assertions."""

    def __init__(self, real: LeaseClient, cut_off_api: LeaseApi) -> None:
        self._real = real
        self._cut_off_api = cut_off_api
        self.cut_off = False
        self._read_at = 0.0
        self.renewal_read_at = 0.0  # monotonic: the read that began the last successful write
        self.write_sent_at = 0.0  # monotonic: when that write was sent (before the apiserver stored it)

    def _target(self) -> LeaseApi:
        return self._cut_off_api if self.cut_off else self._real

    def get(self, name: str, namespace: str) -> dict | None:
        self._read_at = time.monotonic()
        return self._target().get(name, namespace)

    def create(self, body: dict) -> dict:
        return self._write(self._target().create, body)

    def replace(self, body: dict) -> dict:
        return self._write(self._target().replace, body)

    def _write(self, write: Callable[[dict], dict], body: dict) -> dict:
        sent_at = time.monotonic()
        written = write(body)
        self.renewal_read_at, self.write_sent_at = self._read_at, sent_at
        return written

    def close(self) -> None:
        self._real.close()


@dataclass
class Replica:
    identity: str
    api: SwitchableLeaseApi
    elector: LeaderElector = field(init=False)
    stop: threading.Event = field(default_factory=threading.Event)
    started: list[float] = field(default_factory=list)  # monotonic times of on_started_leading
    stopped: list[float] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=self.identity, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.elector.run(self.stop)
        except BaseException as error:
            self.errors.append(error)

    def halt(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(10)
            assert not self.thread.is_alive(), f"{self.identity} did not stop"


@dataclass
class Election:
    local_cluster: LocalCluster
    namespace: str
    lease_name: str
    replicas: list[Replica] = field(default_factory=list)

    def replica(self, identity: str, cut_off_api: LeaseApi | None = None) -> Replica:
        """A replica campaigning in its own thread; cut off, it reaches `cut_off_api` (default: crashed)."""
        config = LeaderElectionConfig(
            self.lease_name, self.namespace, identity, LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD
        )
        made = Replica(identity, SwitchableLeaseApi(lease_client_for(self.local_cluster), cut_off_api or CrashedApi()))
        made.elector = LeaderElector(
            config,
            made.api,
            lambda: made.started.append(time.monotonic()),
            lambda: made.stopped.append(time.monotonic()),
        )
        self.replicas.append(made)
        made.start()
        return made

    def lease(self) -> dict:
        return raw(
            client.CoordinationV1Api(self.local_cluster.api_client).read_namespaced_lease,
            self.lease_name,
            self.namespace,
        )

    def leaders(self) -> list[Replica]:
        return [replica for replica in self.replicas if replica.elector.is_leader]


@pytest.fixture
def election(local_cluster: LocalCluster, namespace: str) -> Iterator[Election]:
    made = Election(local_cluster, namespace, f"leader-{uuid.uuid4().hex[:8]}")
    yield made
    for replica in made.replicas:
        replica.stop.set()
    for replica in made.replicas:
        replica.halt()
        replica.api.close()
        assert not replica.errors, f"{replica.identity}: {replica.errors!r}"


class OverlapWatch:
    """Samples every replica's is_leader in the background; records any moment two lead at once."""

    def __init__(self, election: Election) -> None:
        self._election = election
        self.overlaps: list[list[str]] = []
        self.samples = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> OverlapWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join(5)

    def _sample(self) -> None:
        while not self._done.wait(0.002):
            leaders = self._election.leaders()
            self.samples += 1
            if len(leaders) > 1:
                self.overlaps.append([leader.identity for leader in leaders])


def first_leader(election: Election, within: float) -> Replica:
    return wait_for(lambda: next(iter(election.leaders()), None), within, "a leader")


# --- the LeaseClient against the real API ----------------------------------------------------


def test_lease_client_reads_creates_and_replaces_with_optimistic_concurrency(
    local_cluster: LocalCluster, namespace: str
) -> None:
    lease_client = lease_client_for(local_cluster)
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "lease-client", "namespace": namespace},
        # Zero microseconds: the client's pydantic models would send `...:05+00:00`, a 400 (see below).
        "spec": {
            "holderIdentity": "me",
            "leaseDurationSeconds": 3,
            "acquireTime": "2030-01-02T03:04:05.000000Z",
            "renewTime": "2030-01-02T03:04:05.000000Z",
            "leaseTransitions": 0,
        },
    }
    try:
        assert lease_client.get("lease-client", namespace) is None
        created = lease_client.create(body)
        assert created["spec"] == body["spec"]
        with pytest.raises(LeaseConflict):
            lease_client.create(body)
        renewed = lease_client.replace({**created, "spec": {**created["spec"], "holderIdentity": ""}})
        assert lease_client.get("lease-client", namespace) == renewed
        with pytest.raises(LeaseConflict):  # the resourceVersion read before the last write
            lease_client.replace(created)
    finally:
        lease_client.close()

    typed = client.CoordinationV1Api(local_cluster.api_client)
    with pytest.raises(ApiException) as rejected:
        typed.create_namespaced_lease(
            namespace, body=client.V1Lease.model_validate({**body, "metadata": {"name": "typed"}})
        )
    assert rejected.value.status == 400  # why LeaseClient sends raw JSON


@pytest.mark.version_independent("no apiserver answers: the endpoint is a TLS server of the test's that never does")
def test_a_frozen_apiserver_costs_one_timeout_not_several(local_cluster: LocalCluster) -> None:
    hung = HungApiserver(local_cluster.directory / "pki")
    lease_client = lease_client_for(local_cluster, hung.url)
    try:
        began = time.monotonic()
        with pytest.raises(Exception):  # noqa: B017 - urllib3's read timeout, whatever its wrapper
            lease_client.get("anything", "default")
        # urllib3 would retry a timed-out GET three times; the LeaseClient turns that off.
        assert time.monotonic() - began < RETRY_PERIOD + SLACK
    finally:
        lease_client.close()
        hung.close()


# --- the election -----------------------------------------------------------------------------


@ELECTOR_ONLY
def test_exactly_one_of_two_replicas_leads(election: Election) -> None:
    a, b = election.replica("replica-a"), election.replica("replica-b")
    with OverlapWatch(election) as watch:
        leader = first_leader(election, within=2)
        began = time.monotonic()
        while time.monotonic() - began < 4:
            assert election.leaders() == [leader]
            time.sleep(0.01)
    assert watch.overlaps == []
    assert watch.samples > 100
    lease = election.lease()
    assert lease["spec"]["holderIdentity"] == leader.identity
    assert lease["spec"]["leaseTransitions"] == 0
    assert a.elector.leader_identity == b.elector.leader_identity == leader.identity
    assert len(leader.started) == 1
    assert leader.stopped == []


@ELECTOR_ONLY
def test_a_released_lease_is_taken_over_within_one_retry_period(election: Election) -> None:
    a = election.replica("replica-a")
    wait_for(lambda: a.elector.is_leader, 2, "replica-a to lead")
    b = election.replica("replica-b")
    wait_for(lambda: b.elector.leader_identity == a.identity, 2, "replica-b to see replica-a lead")

    stopped_at = time.monotonic()
    a.halt()
    wait_for(lambda: b.started, 3, "replica-b to take over")

    assert b.started[0] - stopped_at <= CAMPAIGN_PERIOD_MAX + SLACK + 0.7  # ~1.5 s
    assert a.stopped and not a.elector.is_leader
    spec = election.lease()["spec"]
    assert spec["holderIdentity"] == b.identity
    assert spec["leaseDurationSeconds"] == LEASE_DURATION
    assert spec["leaseTransitions"] == 1


@ELECTOR_ONLY
def test_a_crashed_leader_is_replaced_after_the_lease_duration(election: Election) -> None:
    a = election.replica("replica-a")
    wait_for(lambda: a.elector.is_leader, 2, "replica-a to lead")
    b = election.replica("replica-b")
    wait_for(lambda: b.elector.leader_identity == a.identity, 2, "replica-b to see replica-a lead")

    a.api.cut_off = True  # from now on nothing replica-a sends arrives, not even the release
    crashed_at = time.monotonic()
    a.halt()
    wait_for(lambda: b.started, LEASE_DURATION + 2 * CAMPAIGN_PERIOD_MAX + 2, "replica-b to take over")

    took_over = b.started[0]
    # Not before the lease ran out: lease_duration after replica-a's last renewal (which was at most
    # a retry period before the crash on an idle machine; measured from the renewal, load cannot flake it).
    assert took_over - a.api.write_sent_at >= LEASE_DURATION
    assert took_over - crashed_at <= LEASE_DURATION + 2 * CAMPAIGN_PERIOD_MAX + SLACK
    spec = election.lease()["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == (b.identity, 1)


@pytest.fixture(params=["refused", "frozen"])
def unreachable(request: pytest.FixtureRequest, local_cluster: LocalCluster) -> Iterator[LeaseClient]:
    """A LeaseClient whose apiserver refuses connections, or accepts and never answers."""
    endpoint = RefusingEndpoint() if request.param == "refused" else HungApiserver(local_cluster.directory / "pki")
    lease_client = lease_client_for(local_cluster, endpoint.url)
    yield lease_client
    lease_client.close()
    endpoint.close()


@ELECTOR_ONLY
def test_a_leader_cut_off_steps_down_within_the_renew_deadline_and_campaigns_again(
    election: Election, unreachable: LeaseClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="taintkeeper.leader")
    a = election.replica("replica-a", cut_off_api=unreachable)
    wait_for(lambda: a.elector.is_leader, 2, "replica-a to lead")
    wait_for(lambda: time.monotonic() - a.started[0] > 1, 3, "a few renewals")

    a.api.cut_off = True
    cut_at = time.monotonic()
    wait_for(lambda: a.stopped, RENEW_DEADLINE + RETRY_PERIOD + 2, "replica-a to step down")

    assert a.stopped[0] - cut_at <= RENEW_DEADLINE + RETRY_PERIOD
    # Not before the deadline: renew_deadline after the start of the last successful renewal.
    assert a.stopped[0] - a.api.renewal_read_at >= RENEW_DEADLINE - 0.1
    assert not a.elector.is_leader
    assert any(record.getMessage().startswith("lost leadership") for record in caplog.records)

    # It keeps campaigning; once it reaches the apiserver again, its own unchanged Lease is renewed.
    # (One campaign period, plus a call that may still hang on the frozen endpoint, plus ample slack.)
    a.api.cut_off = False
    wait_for(lambda: len(a.started) == 2, 3, "replica-a to lead again")
    spec = election.lease()["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == (a.identity, 0)


@ELECTOR_ONLY
def test_a_cut_off_leader_stops_before_the_stand_by_starts(election: Election, unreachable: LeaseClient) -> None:
    with OverlapWatch(election) as watch:
        a = election.replica("replica-a", cut_off_api=unreachable)
        wait_for(lambda: a.elector.is_leader, 2, "replica-a to lead")
        b = election.replica("replica-b")
        wait_for(lambda: b.elector.leader_identity == a.identity, 2, "replica-b to see replica-a lead")

        a.api.cut_off = True
        wait_for(lambda: b.started, LEASE_DURATION + 2 * CAMPAIGN_PERIOD_MAX + 2, "replica-b to take over")
        # renew_deadline < lease_duration: the old leader stopped acting a second before the new one started.
        assert b.started[0] - a.stopped[0] >= LEASE_DURATION - RENEW_DEADLINE - RETRY_PERIOD

        # Back in touch, replica-a finds replica-b's live lease and stays a stand-by.
        a.api.cut_off = False
        wait_for(lambda: a.elector.leader_identity == b.identity, 3, "replica-a to see replica-b lead")
        began = time.monotonic()
        while time.monotonic() - began < 1:
            assert election.leaders() == [b]
            time.sleep(0.01)
    assert watch.overlaps == []
    assert len(a.started) == 1
    assert election.lease()["spec"]["holderIdentity"] == b.identity


# --- what the controller publishes on its Lease ---------------------------------------------------


@dataclass(frozen=True)
class LeaseWrite:
    holder: str
    acquired: float | None
    renewed: float | None
    last_pass: str | None  # the taintkeeper.io/last-monitor-pass annotation, as written


def lease_writes(
    local_cluster: LocalCluster, namespace: str, name: str, since: str, stop: threading.Event
) -> list[LeaseWrite]:
    """Every write of the Lease after resourceVersion `since`, in order, collected on a thread until `stop`."""
    writes: list[LeaseWrite] = []
    coordination = client.CoordinationV1Api(local_cluster.api_client)

    def collect() -> None:
        version = since
        while not stop.is_set():
            stream = watch.Watch().stream(
                coordination.list_namespaced_lease,
                namespace,
                field_selector=f"metadata.name={name}",
                resource_version=version,
                timeout_seconds=1,
            )
            for event in stream:
                lease = event["raw_object"]
                version = lease["metadata"]["resourceVersion"]
                spec = lease.get("spec") or {}
                annotations = lease["metadata"].get("annotations") or {}
                writes.append(
                    LeaseWrite(
                        spec.get("holderIdentity") or "",
                        parse_time(spec.get("acquireTime")),
                        parse_time(spec.get("renewTime")),
                        annotations.get(LAST_MONITOR_PASS_ANNOTATION),
                    )
                )

    threading.Thread(target=collect, name="lease-writes", daemon=True).start()
    return writes


@pytest.mark.version_independent(
    "what the controller's elector writes into the Lease; its requests are LeaseClient's, which "
    "test_lease_client_reads_creates_and_replaces_with_optimistic_concurrency keeps on 1.20"
)
def test_a_leading_controller_publishes_its_last_monitor_pass_on_its_lease(
    local_cluster: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    """A controller process takes over a Lease a previous leader released with its own last pass on it. Its
    acquire write (made as a stand-by, before its monitor has passed) removes that; once its monitor has
    passed, its renewals carry its own pass, made in its term."""
    name = f"leader-{uuid.uuid4().hex[:8]}"
    coordination = client.CoordinationV1Api(local_cluster.api_client)
    released = format_micro_time(time.time() - 60)
    stale = format_micro_time(time.time() - 70)
    created = raw(
        coordination.create_namespaced_lease,
        namespace,
        body={
            "metadata": {"name": name, "annotations": {LAST_MONITOR_PASS_ANNOTATION: stale}},
            "spec": {"holderIdentity": "", "leaseDurationSeconds": 1, "acquireTime": released, "renewTime": released},
        },
    )
    stop = threading.Event()
    writes = lease_writes(local_cluster, namespace, name, created["metadata"]["resourceVersion"], stop)
    controller = ControllerProcess(
        local_cluster.kubeconfig,
        tmp_path / "controller.log",
        "--leader-elect=true",
        f"--leader-elect-resource-name={name}",
        f"--leader-elect-resource-namespace={namespace}",
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=1s",
        "--node-monitor-period=1s",
        "--controllers=nodelifecycle",
        "--backfill-default-tolerations=false",
        "--secure-port=0",
    )
    try:
        controller.start()
        # The monitor passes once it leads and its caches have synced; the next renewal (1 s) carries it.
        wait_for(lambda: any(w.last_pass not in (None, stale) for w in writes), 10, "a renewal with the last pass")
        controller.terminate()
        wait_for(lambda: writes[-1].holder == "", 5, "the release write seen")
    finally:
        controller.kill()
        stop.set()
    holder = writes[0].holder
    assert holder.startswith(socket.gethostname() + "_"), writes[0]  # the controller's acquire write
    assert writes[0].last_pass is None, writes[0]  # the previous leader's pass is not carried on
    *leading, release = writes  # stopped, the controller released the Lease (leaving the annotation)
    assert release.holder == "" and {w.holder for w in leading} == {holder}, writes
    published = [w for w in leading if w.last_pass is not None]
    assert published, writes
    for write in published:
        last_pass = parse_time(write.last_pass)
        assert last_pass is not None and write.acquired is not None and write.renewed is not None, write
        assert write.acquired <= last_pass <= write.renewed, write  # a pass of this term, before this write
        assert write.last_pass == format_micro_time(last_pass)  # a MicroTime, like renewTime
    print(f"Lease writes: {writes}")
