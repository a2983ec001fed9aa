"""The out-of-service handling's Prometheus metrics: upstream PodGC's names (subsystem pod_gc_collector,
reason `out-of-service`, as 1.26+ counts the same force deletions) where upstream has the metric,
taintkeeper_* for what it adds."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

# Upstream's: every force delete sent, and every one that failed, by namespace and reason.
OUT_OF_SERVICE_REASON = "out-of-service"
FORCE_DELETE_PODS = Counter(
    "pod_gc_collector_force_delete_pods_total",
    "Number of pods that are being forcefully deleted since the controller started (reason out-of-service: "
    "on a node tainted node.kubernetes.io/out-of-service and not ready).",
    ["namespace", "reason"],
)
FORCE_DELETE_POD_ERRORS = Counter(
    "pod_gc_collector_force_delete_pod_errors_total",
    "Number of errors encountered when forcefully deleting the pods since the controller started.",
    ["namespace", "reason"],
)

# --- what taintkeeper adds ---------------------------------------------------------------------------------
PODS_DELETED = Counter(
    "taintkeeper_out_of_service_pods_deleted_total",
    "Pods force deleted (grace period 0) because their node is out of service and not ready (not counting pods "
    "someone else deleted first).",
)
VOLUME_ATTACHMENTS_DELETED = Counter(
    "taintkeeper_out_of_service_volume_attachments_deleted_total",
    "VolumeAttachments deleted (their volumes detached) because their node is out of service and not ready.",
)
FAILURES = Counter(
    "taintkeeper_out_of_service_failures_total",
    "Failed force deletions of pods or deletions of VolumeAttachments on out-of-service nodes (each is retried).",
)
NODES = Gauge(
    "taintkeeper_out_of_service_nodes",
    "Nodes carrying the node.kubernetes.io/out-of-service taint, by whether they are Ready (ready: the taint "
    "should be removed).",
    ["ready"],
)
AUTO_FENCED = Counter(
    "taintkeeper_auto_fenced_nodes_total",
    "Nodes the controller gave the out-of-service taint by itself (--auto-fence-after, with a fencing confirmation).",
)
