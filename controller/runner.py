"""Assemble the controller and run it until SIGTERM/SIGINT.

Informers (nodes, pods) feed the taint eviction manager on every replica, so a stand-by has warm
caches; leader election decides which replica acts. Leadership is sought only after the caches
have synced, so no decision is taken on a half-filled cache.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

from kubernetes import client

from controller.eviction_manager import TaintEvictionManager
from controller.health import serve_health
from controller.kube.client import make_api_client
from controller.kube.events import EventRecorder
from controller.kube.eviction_api import KubeEvictionActions
from controller.kube.informer import Informer
from controller.kube.leader import LeaderElectionConfig, LeaderElector, LeaseClient, default_identity
from controller.objects import NodeView, PodView, node_view, pod_view
from controller.options import ControllerOptions

log = logging.getLogger("taintkeeper.controller")

TAINT_EVICTION_COMPONENT = "taint-eviction-controller"
CACHE_SYNC_TIMEOUT = 300


def run(options: ControllerOptions) -> int:
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s; shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    api = make_api_client(options.kubeconfig)
    core = client.CoreV1Api(api)
    events = EventRecorder(api, TAINT_EVICTION_COMPONENT)
    manager: TaintEvictionManager

    pods: Informer[PodView] = Informer("pods", core.list_pod_for_all_namespaces, pod_view,
                                       lambda old, new: manager.on_pod_change(old, new),
                                       index_by=lambda pod: pod.node_name)
    nodes: Informer[NodeView] = Informer("nodes", core.list_node, node_view,
                                         lambda old, new: manager.on_node_change(old, new))
    manager = TaintEvictionManager(pods, KubeEvictionActions(api), events, dry_run=options.dry_run)

    def readiness() -> tuple[bool, str]:
        unsynced = [i.name for i in (nodes, pods) if not i.has_synced]
        return (not unsynced, f"waiting for caches: {', '.join(unsynced)}" if unsynced else "ok")

    health = serve_health(options.bind_address, options.port, readiness) if options.port else None
    events.start(stop)
    nodes.start()
    pods.start()
    manager.start(stop, options.taint_eviction_workers)
    if options.dry_run:
        log.info("dry run: decisions are logged and recorded as events; nothing is deleted")

    try:
        for informer in (nodes, pods):
            while not informer.wait_for_sync(1.0):
                if stop.is_set():
                    return 0
        log.info("caches synced", extra={"nodes": len(nodes), "pods": len(pods)})
        if not options.leader_elect:
            manager.activate()
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
            elector = LeaderElector(config, LeaseClient(api, retry_period=config.retry_period), manager.activate,
                                    manager.deactivate)
            elector.run(stop)  # returns once `stop` is set, after releasing the lease if held
        return 0
    finally:
        stop.set()
        manager.deactivate()
        manager.queue.shut_down()
        for informer in (pods, nodes):
            informer.stop()
        if health is not None:
            health.shutdown()
        api.close()
        log.info("stopped")
