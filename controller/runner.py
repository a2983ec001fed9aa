"""Assemble the controller and run it until SIGTERM/SIGINT.

Informers (nodes, pods, node Leases) feed the components on every replica, so a stand-by has warm
caches; leader election decides which replica acts. Leadership is sought only after the caches
have synced, so no decision is taken on a half-filled cache. The components:
- the node lifecycle monitor (`nodelifecycle`): health, Unknown conditions, taints;
- the taint eviction manager (`taint-eviction-controller`): deletes pods on NoExecute taints;
- the toleration backfill (`--backfill-default-tolerations`, with a namespace informer): appends the
  default not-ready/unreachable tolerations to pods admitted without them (a webhook outage).
"""

from __future__ import annotations

import functools
import gc
import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from kubernetes import client

from controller import metrics
from controller.backfill import COMPONENT as BACKFILL_COMPONENT
from controller.backfill import BackfillController
from controller.eviction_manager import TaintEvictionManager
from controller.health import serve_health
from controller.kube.backfill_api import KubeBackfillApi
from controller.kube.client import make_api_client
from controller.kube.events import EventRecorder
from controller.kube.eviction_api import KubeEvictionActions
from controller.kube.informer import Informer
from controller.kube.leader import LeaderElectionConfig, LeaderElector, LeaseClient, default_identity
from controller.kube.node_api import DryRunNodeLifecycleApi, KubeNodeLifecycleApi
from controller.node_lifecycle import NO_SCHEDULE_WORKERS, POD_WORKERS, NodeLifecycleMonitor
from controller.objects import (
    LeaseView,
    NamespaceView,
    NodeView,
    PodView,
    lease_view,
    namespace_view,
    node_view,
    pod_view,
)
from controller.options import NODE_LIFECYCLE, TAINT_EVICTION, ControllerOptions

log = logging.getLogger("taintkeeper.controller")

NODE_LEASE_NAMESPACE = "kube-node-lease"
# Upstream event sources: the node lifecycle controller records as "node-controller".
NODE_CONTROLLER_COMPONENT = "node-controller"


def fan_out(old: Any, new: Any, *handlers: Callable[[Any, Any], None] | None) -> None:
    """Give one informer event to each component; one failing must not keep it from the others."""
    for handler in handlers:
        if handler is None:
            continue
        try:
            handler(old, new)
        except Exception:
            log.exception("event handler %s failed", getattr(handler, "__qualname__", handler))


def api_connections(options: ControllerOptions) -> int:
    """The threads that may call the API at once: the connection pool is sized to them."""
    informers = 3 + (1 if options.backfill.enabled else 0)  # each keeps a watch open
    recorders = len(options.controllers)
    leader_election = 1
    count = informers + recorders + leader_election
    if TAINT_EVICTION in options.controllers:
        count += options.taint_eviction_workers + 1  # + the timer thread
    if NODE_LIFECYCLE in options.controllers:
        count += NO_SCHEDULE_WORKERS + POD_WORKERS + 1  # + the monitor loop
    if options.backfill.enabled:
        count += 1
    return count


def run(options: ControllerOptions) -> int:
    stop = threading.Event()
    api = make_api_client(options.kubeconfig, connections=api_connections(options))
    core = client.CoreV1Api(api)
    manager: TaintEvictionManager | None = None
    monitor: NodeLifecycleMonitor | None = None
    backfill: BackfillController | None = None

    def on_pod(old: PodView | None, new: PodView | None) -> None:
        fan_out(old, new, manager and manager.on_pod_change, backfill and backfill.on_pod_change,
                monitor and monitor.on_pod_change)

    def on_namespace(old: NamespaceView | None, new: NamespaceView | None) -> None:
        fan_out(old, new, backfill and backfill.on_namespace_change)

    def on_node(old: NodeView | None, new: NodeView | None) -> None:
        fan_out(old, new, manager and manager.on_node_change, monitor and monitor.on_node_change)

    pods: Informer[PodView] = Informer("pods", core.list_pod_for_all_namespaces, pod_view, on_pod,
                                       index_by=lambda pod: pod.node_name)
    nodes: Informer[NodeView] = Informer("nodes", core.list_node, node_view, on_node)
    informers: list[Informer] = [nodes, pods]
    recorders: list[EventRecorder] = []
    if TAINT_EVICTION in options.controllers:
        recorder = EventRecorder(api, TAINT_EVICTION)
        recorders.append(recorder)
        manager = TaintEvictionManager(pods, KubeEvictionActions(api), recorder, dry_run=options.dry_run)
    if NODE_LIFECYCLE in options.controllers:
        leases: Informer[LeaseView] = Informer(
            "leases", functools.partial(client.CoordinationV1Api(api).list_namespaced_lease, NODE_LEASE_NAMESPACE),
            lease_view, lambda old, new: None)
        informers.append(leases)
        recorder = EventRecorder(api, NODE_CONTROLLER_COMPONENT)
        recorders.append(recorder)
        if options.dry_run:  # the monitor reads its nodes as its logged writes would have left them
            dry_run_api = DryRunNodeLifecycleApi(KubeNodeLifecycleApi(api), nodes)
            monitor = NodeLifecycleMonitor(dry_run_api, leases, pods, dry_run_api, recorder, options.monitor)
        else:
            monitor = NodeLifecycleMonitor(nodes, leases, pods, KubeNodeLifecycleApi(api, cache=nodes), recorder,
                                            options.monitor)
    if options.backfill.enabled:
        namespaces: Informer[NamespaceView] = Informer("namespaces", core.list_namespace, namespace_view,
                                                       on_namespace)
        informers.append(namespaces)
        recorder = EventRecorder(api, BACKFILL_COMPONENT)
        recorders.append(recorder)
        backfill = BackfillController(pods, namespaces, KubeBackfillApi(api), recorder, options.backfill,
                                      dry_run=options.dry_run)
    components = [c for c in (monitor, manager, backfill) if c is not None]

    def activate() -> None:
        for component in components:
            component.activate()
        metrics.IS_LEADER.set(1)  # whichever controllers run: the alerts key on it

    def deactivate() -> None:
        metrics.IS_LEADER.set(0)
        for component in components:
            component.deactivate()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s; shutting down", signal.Signals(signum).name)
        # Stop acting before the lease is released, so a stand-by never acts alongside us.
        deactivate()
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def readiness() -> tuple[bool, str]:
        unsynced = [i.name for i in informers if not i.has_synced]
        return (not unsynced, f"waiting for caches: {', '.join(unsynced)}" if unsynced else "ok")

    def liveness() -> tuple[bool, str]:
        stuck = monitor.stuck() if monitor is not None else None
        return (stuck is None, stuck or "ok")

    health = serve_health(options.bind_address, options.port, readiness, liveness) if options.port else None
    for recorder in recorders:
        recorder.start(stop)
    for informer in informers:
        informer.start()
    if manager is not None:
        manager.start(stop, options.taint_eviction_workers)
    if monitor is not None:
        monitor.start(stop)
    if backfill is not None:
        backfill.start(stop)
    if options.dry_run:
        log.info("dry run: decisions are logged and recorded as events; no pod is deleted or patched")

    try:
        for informer in informers:
            while not informer.wait_for_sync(1.0):
                if stop.is_set():
                    return 0
        # The synced caches live as long as the process: keep them out of every full collection
        # (at 5,000 nodes a gen-2 pass over them stalled a monitor pass by up to ~250 ms).
        gc.freeze()
        log.info("caches synced", extra={"nodes": len(nodes), "pods": len(pods),
                                         "controllers": ",".join(sorted(options.controllers))})
        if not options.leader_elect:
            activate()
            stop.wait()
        else:
            config = LeaderElectionConfig(
                lease_name=options.leader_elect_resource_name,
                lease_namespace=options.leader_elect_resource_namespace,
                identity=default_identity(),
                lease_duration=options.leader_elect_lease_duration,
                renew_deadline=options.leader_elect_renew_deadline,
                retry_period=options.leader_elect_retry_period,
            )
            elector = LeaderElector(config, LeaseClient(api, retry_period=config.retry_period), activate,
                                    deactivate)
            elector.run(stop)  # returns once `stop` is set, after releasing the lease if held
        return 0
    finally:
        stop.set()
        deactivate()
        if manager is not None:
            manager.queue.shut_down()
        if monitor is not None:
            monitor.no_schedule_queue.shut_down()
            monitor.pod_queue.shut_down()
        if backfill is not None:
            backfill.queue.shut_down()
        for informer in informers:
            informer.stop()
        if health is not None:
            health.shutdown()
        api.close()
        log.info("stopped")
