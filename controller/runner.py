"""Assemble the controller and run it until SIGTERM/SIGINT.

Shared informers (controller/informers.py: nodes, pods, node Leases, namespaces) feed the
components on every replica, so a stand-by has warm caches; leader election decides which replica
acts. Leadership is sought once every cache but the pods' has synced (the pods' LIST is the one that
takes long), and each component activates once its own caches have synced (controller/activation.py),
so no decision is taken on a half-filled cache and the node lifecycle monitor need not wait for the
pods. Each controller is a Component (controller/component.py) the runner drives the same way, in
this order:
- the node lifecycle monitor (`nodelifecycle`): health, Unknown conditions, taints;
- the taint eviction manager (`taint-eviction-controller`): deletes pods on NoExecute taints;
- the toleration backfill (`toleration-backfill`, with `--backfill-default-tolerations`): appends the
  default not-ready/unreachable tolerations to pods admitted without them (a webhook outage);
- the out-of-service handling (`out-of-service`): force deletes the pods and deletes the volume
  attachments of a node tainted `node.kubernetes.io/out-of-service` and not Ready (KEP-2268), and
  with `--auto-fence-after` taints a confirmed-dead node so.
Their API edges and event recorders share one write fence (kube/fence.py) with the leader elector:
a replica whose last lease renewal is older than the renew deadline writes nothing, not even an event.
"""

from __future__ import annotations

import gc
import logging
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import HTTPServer
from types import FrameType
from typing import TYPE_CHECKING, Any

from controller import metrics
from controller.activation import StagedActivation
from controller.backfill.api import KubeBackfillApi
from controller.backfill.controller import BackfillController
from controller.backfill.decision import COMPONENT as BACKFILL_COMPONENT
from controller.clock import RealClock
from controller.component import Component
from controller.health import Answer, health_endpoints
from controller.informers import SharedInformers
from controller.nodelifecycle.api import DryRunNodeLifecycleApi, DryRunPods, KubeNodeLifecycleApi
from controller.nodelifecycle.lease_annotation import last_pass_annotations
from controller.nodelifecycle.monitor import NO_SCHEDULE_WORKERS, POD_WORKERS, NodeLifecycleMonitor
from controller.options import (
    NODE_LIFECYCLE,
    OUT_OF_SERVICE,
    TAINT_EVICTION,
    ControllerOptions,
)
from controller.outofservice.api import KubeOutOfServiceApi
from controller.outofservice.controller import OutOfServiceController
from controller.outofservice.decision import COMPONENT as OUT_OF_SERVICE_COMPONENT
from controller.serving import secure_certificate, serve
from controller.tainteviction.api import KubeEvictionActions
from controller.tainteviction.manager import TaintEvictionManager
from kube.client import TermStampingApiClient, make_api_client
from kube.delegated_auth import DelegatedAuth
from kube.events import EventRecorder
from kube.fence import WriteFence
from kube.identity import CONTROLLER
from kube.leader import LeaderElectionConfig, LeaderElector, LeaseClient, default_identity
from kube.reviews import ApiReviews

if TYPE_CHECKING:
    from kubernetes import client

    from kube.informer import Informer

log = logging.getLogger("taintkeeper.controller")

# Upstream event sources: the node lifecycle controller records as "node-controller".
NODE_CONTROLLER_COMPONENT = "node-controller"


def node_lifecycle(
    api: client.ApiClient,
    fence: WriteFence,
    informers: SharedInformers,
    recorder: EventRecorder,
    options: ControllerOptions,
) -> NodeLifecycleMonitor:
    nodes, leases, pods = informers.nodes, informers.leases, informers.pods
    clock = RealClock()  # the component's one clock: its passes, heartbeats and the times it writes
    if options.dry_run:  # the monitor reads its nodes and pods as its logged writes would have left them
        dry_run_pods = DryRunPods(pods)
        dry_run_api = DryRunNodeLifecycleApi(KubeNodeLifecycleApi(api, fence, clock), nodes, dry_run_pods)
        return NodeLifecycleMonitor(
            dry_run_api,
            leases,
            dry_run_pods,
            dry_run_api,
            recorder,
            options.monitor,
            clock=clock,
            pods_synced=lambda: pods.has_synced,
            term=lambda: fence.term,
            check_terms=not options.drop_term_checks,
        )
    # Taint writes start from the informer's cached node: one PATCH per node, not a GET and a PATCH.
    return NodeLifecycleMonitor(
        nodes,
        leases,
        pods,
        KubeNodeLifecycleApi(api, fence, clock, cache=nodes),
        recorder,
        options.monitor,
        clock=clock,
        pods_synced=lambda: pods.has_synced,
        term=lambda: fence.term,
        check_terms=not options.drop_term_checks,
    )


def taint_eviction(
    api: client.ApiClient,
    fence: WriteFence,
    informers: SharedInformers,
    recorder: EventRecorder,
    options: ControllerOptions,
) -> TaintEvictionManager:
    clock = RealClock()  # the component's one clock: deadlines, heartbeats and the times it writes
    return TaintEvictionManager(
        informers.pods,
        KubeEvictionActions(api, fence, clock),
        recorder,
        clock=clock,
        dry_run=options.dry_run,
        workers=options.taint_eviction_workers,
        namespaces=informers.namespaces,
        budgets=options.budgets,
        comparison_operators=options.eviction_rule.comparison_operators,
        defer_to_out_of_service=options.eviction_rule.defer_to_out_of_service,
        term=lambda: fence.term,
    )


def toleration_backfill(
    api: client.ApiClient,
    fence: WriteFence,
    informers: SharedInformers,
    recorder: EventRecorder,
    options: ControllerOptions,
) -> BackfillController:
    return BackfillController(
        informers.pods,
        informers.namespaces,
        KubeBackfillApi(api, fence),
        recorder,
        options.backfill,
        dry_run=options.dry_run,
        term=lambda: fence.term,
    )


def out_of_service(
    api: client.ApiClient,
    fence: WriteFence,
    informers: SharedInformers,
    recorder: EventRecorder,
    options: ControllerOptions,
) -> OutOfServiceController:
    # The node Leases only for --auto-fence-after: when each kubelet was last heard.
    leases = informers.leases if options.auto_fence_after is not None else None
    return OutOfServiceController(
        informers.nodes,
        informers.pods,
        informers.volume_attachments,
        KubeOutOfServiceApi(api, fence),
        recorder,
        auto_fence_after=options.auto_fence_after,
        leases=leases,
        dry_run=options.dry_run,
        term=lambda: fence.term,
    )


def api_connections(options: ControllerOptions) -> int:
    """How many threads may call the API at once: the client's connection pool keeps one connection
    for each (make_api_client). The threads, as `assemble` and `run` make them:
    - an informer per resource the running controllers read, each with a LIST or a WATCH open:
      nodes and pods always, node Leases with the node lifecycle or --auto-fence-after, namespaces with the
      backfill or the taint eviction (the disruption-budget annotations), VolumeAttachments with the
      out-of-service handling;
    - an event recorder per running controller;
    - the leader elector (on the main thread), with --leader-elect;
    - the node lifecycle's monitor loop (Unknown conditions, NoExecute taints), its NoSchedule
      tainting workers and its pod marking workers;
    - the taint eviction's deletion workers (its timer thread only queues keys);
    - the backfill's one worker;
    - the out-of-service handling's one worker.
    """
    node_lifecycle = NODE_LIFECYCLE in options.controllers
    taint_eviction = TAINT_EVICTION in options.controllers
    backfill = options.backfill.enabled
    out_of_service = OUT_OF_SERVICE in options.controllers
    auto_fence = out_of_service and options.auto_fence_after is not None
    informers = 2 + int(node_lifecycle or auto_fence) + int(backfill or taint_eviction) + int(out_of_service)
    recorders = int(node_lifecycle) + int(taint_eviction) + int(backfill) + int(out_of_service)
    count = informers + recorders + int(options.leader_elect)
    if node_lifecycle:
        count += 1 + NO_SCHEDULE_WORKERS + POD_WORKERS
    if taint_eviction:
        count += options.taint_eviction_workers
    if backfill:
        count += 1
    if out_of_service:
        count += 1
    return count


def wait_for_caches(informers: list[Informer[Any]], stop: threading.Event) -> bool:
    """Wait until every informer has synced; False if `stop` was set first."""
    for informer in informers:
        while not informer.wait_for_sync(1.0):
            if stop.is_set():
                return False
    return True


def leader_election_config(options: ControllerOptions) -> LeaderElectionConfig:
    return LeaderElectionConfig(
        lease_name=options.leader_elect_resource_name,
        lease_namespace=options.leader_elect_resource_namespace,
        identity=default_identity(),
        lease_duration=options.leader_elect_lease_duration,
        renew_deadline=options.leader_elect_renew_deadline,
        retry_period=options.leader_elect_retry_period,
    )


def lease_annotations(components: Sequence[Component]) -> Callable[[], dict[str, str | None]]:
    """What the leader publishes on its Lease at each renewal: the node lifecycle monitor's last pass
    (controller/nodelifecycle/lease_annotation.py), while this replica leads and the monitor has completed
    a pass. Otherwise the annotation is removed: a new holder does not carry on its predecessor's."""
    monitor = next((c for c in components if isinstance(c, NodeLifecycleMonitor)), None)
    return lambda: last_pass_annotations(None if monitor is None else monitor.last_pass)


def write_fence(options: ControllerOptions) -> WriteFence:
    """Open while the last lease renewal is younger than --leader-elect-renew-deadline; without
    leader election, always open. Each refused write is counted by what it was."""
    if not options.leader_elect:
        return WriteFence.without_lease()
    return WriteFence(
        options.leader_elect_renew_deadline,
        on_refused=lambda action: metrics.FENCED_WRITES.labels(action).inc(),
        check_terms=not options.drop_term_checks,
    )


def controller_api_client(options: ControllerOptions) -> client.ApiClient:
    """The one ApiClient of the controller (the leader elector copies it), named in its User-Agent."""
    return make_api_client(
        options.kubeconfig, component=CONTROLLER, connections=api_connections(options), stamp_terms=True
    )


@dataclass(frozen=True)
class Assembly:
    """The controller's parts, built and wired but not started."""

    informers: SharedInformers
    recorders: list[EventRecorder]
    components: list[Component]  # in the order they activate

    def start(self, stop: threading.Event) -> None:
        """The event recorders, the informers, then the components' threads."""
        for recorder in self.recorders:
            recorder.start(stop)
        for informer in self.informers.all():
            informer.start()
        for component in self.components:
            component.start(stop)


def assemble(api: client.ApiClient, options: ControllerOptions, fence: WriteFence) -> Assembly:
    """The shared informers, an event recorder per running controller and the controllers (their
    writes and events behind `fence`), each registered with the informers it watches. Nothing is started and
    no request is made."""
    informers = SharedInformers(api)
    _ = informers.nodes, informers.pods  # whichever controllers run: the sync log counts them
    recorders: list[EventRecorder] = []
    components: list[Component] = []
    # (whether it runs, its event source, how it is made), in the order they activate
    for enabled, source, build in (
        (NODE_LIFECYCLE in options.controllers, NODE_CONTROLLER_COMPONENT, node_lifecycle),
        (TAINT_EVICTION in options.controllers, TAINT_EVICTION, taint_eviction),
        (options.backfill.enabled, BACKFILL_COMPONENT, toleration_backfill),
        (OUT_OF_SERVICE in options.controllers, OUT_OF_SERVICE_COMPONENT, out_of_service),
    ):
        if enabled:
            recorder = EventRecorder(
                api, source, fence, on_dropped=lambda reason: metrics.EVENTS_DROPPED.labels(reason).inc()
            )
            recorders.append(recorder)
            components.append(build(api, fence, informers, recorder, options))
    for component in components:
        component.register(informers)
    return Assembly(informers, recorders, components)


def liveness(components: Sequence[Component]) -> tuple[bool, str]:
    """/healthz: alive unless a component is stuck (each says why; controller/component.py `stuck`)."""
    reasons = [reason for reason in (component.stuck() for component in components) if reason is not None]
    return (not reasons, "; ".join(reasons) or "ok")


def serve_ports(options: ControllerOptions, api: client.ApiClient, answer: Callable[[str], Answer]) -> list[HTTPServer]:
    """--secure-port (TLS, callers checked by the apiserver) and --port (plain, to anyone), each unless 0."""
    servers: list[HTTPServer] = []
    secure = options.secure_serving
    if secure.port:
        tls = secure_certificate(secure.cert_file, secure.key_file)
        auth = DelegatedAuth(ApiReviews(lambda: api), secure.auth)
        servers.append(serve(options.bind_address, secure.port, answer, tls=tls, auth=auth))
    if options.port:
        log.warning(
            "--port=%d serves /metrics and the health paths over plain HTTP to anyone who reaches it", options.port
        )
        servers.append(serve(options.bind_address, options.port, answer))
    return servers


def run(options: ControllerOptions) -> int:
    stop = threading.Event()
    if options.drop_term_checks:
        log.warning(
            "--unsafe-drop-term-checks: writes decided in an ended term go out (a sabotage for the soak's judge)"
        )
    api = controller_api_client(options)
    fence = write_fence(options)
    # Each write of a unit of work passes the fence as it is sent, and is awaited before a release (kube/fence.py).
    if isinstance(api, TermStampingApiClient):
        api.fence = fence
    assembly = assemble(api, options, fence)
    informers, components = assembly.informers, assembly.components
    nodes, pods = informers.nodes, informers.pods
    informer_list = informers.all()

    staged = StagedActivation([(component, component.caches(informers)) for component in components], stop)

    def activate() -> None:
        staged.activate()
        metrics.IS_LEADER.set(1)  # whichever controllers run: the alerts key on it

    def deactivate() -> None:
        metrics.IS_LEADER.set(0)
        staged.deactivate()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s; shutting down", signal.Signals(signum).name)
        # Stop acting before the lease is released, so a stand-by never acts alongside us.
        deactivate()
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def readiness() -> tuple[bool, str]:
        unsynced = [i.name for i in informer_list if not i.has_synced]
        return (not unsynced, f"waiting for caches: {', '.join(unsynced)}" if unsynced else "ok")

    servers = serve_ports(options, api, health_endpoints(readiness, lambda: liveness(components)))
    assembly.start(stop)
    if options.dry_run:
        log.info("dry run: decisions are logged and recorded as events; no pod is deleted or patched")

    def when_all_synced() -> None:
        if not wait_for_caches(informer_list, stop):
            return
        # The synced caches live as long as the process: keep them out of every full collection, whose
        # pass over them would stall a monitor pass while it runs.
        gc.freeze()
        log.info(
            "caches synced",
            extra={"nodes": len(nodes), "pods": len(pods), "controllers": ",".join(sorted(options.controllers))},
        )

    try:
        threading.Thread(target=when_all_synced, name="caches-synced", daemon=True).start()
        first = [informer for informer in informer_list if informer is not pods]
        if not wait_for_caches(first, stop):
            return 0
        log.info("every cache but the pods' has synced; seeking leadership", extra={"nodes": len(nodes)})
        if not options.leader_elect:
            activate()
            stop.wait()
        else:
            config = leader_election_config(options)
            elector = LeaderElector(
                config,
                LeaseClient(api, retry_period=config.retry_period),
                activate,
                deactivate,
                fence=fence,
                annotations=lease_annotations(components),
            )
            elector.run(stop)  # returns once `stop` is set, after releasing the lease if held
        return 0
    finally:
        stop.set()
        deactivate()
        for component in components:
            component.stop()
        for informer in informer_list:
            informer.stop()
        for server in servers:
            server.shutdown()
        api.close()
        log.info("stopped")
