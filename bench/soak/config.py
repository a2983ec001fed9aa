"""What the checker must know about the run: whose writes are the controller's, its Lease, the
workload, the webhook, and how much slack each invariant allows."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

TAINTKEEPER_CONTROLLER_USER = "system:serviceaccount:taintkeeper-system:taintkeeper-controller"
BUILTIN_CONTROLLER_USER = "system:serviceaccount:kube-system:node-controller"  # 1.29+: the taint eviction too
# PodGC: on 1.26+ it force-deletes the terminating pods of a node that carries the out-of-service taint.
BUILTIN_POD_GC_USER = "system:serviceaccount:kube-system:pod-garbage-collector"
# Promises only taintkeeper makes (its opt-in budget annotation, its force deletion's rule, marking the
# pods of a node whose kubelet reported it not Ready, leaving a Ready node's stale failure taint alone):
# judged beside, not counted, when the built-ins are.
TAINTKEEPER_ONLY = frozenset({"I8", "I9", "I11", "I12"})
# The soak's own client: its workload's churn and the faults it injects (hack/lib/control-plane.sh's ADMIN_TOKEN_USER).
SOAK_DRIVER_USER = "taintkeeper-admin"
# kube-controller-manager's controllers that remove pods for reasons of their own (a scale-down, an owner
# gone, a pod of a deleted node or a terminating one on a fenced node), not a node's failure.
POD_REMOVING_CONTROLLERS = frozenset(
    f"system:serviceaccount:kube-system:{name}"
    for name in (
        "replicaset-controller",
        "statefulset-controller",
        "generic-garbage-collector",
        "pod-garbage-collector",
    )
)
# What registers taintkeeper's admission with kube-apiserver (manifests/base/mutatingwebhookconfiguration.yaml,
# manifests/admission-policy/policy.yaml; a unit test keeps these in step): (resource, name).
WEBHOOK_REGISTRATION = (("mutatingwebhookconfigurations", "taintkeeper"),)
POLICY_REGISTRATION = (
    ("mutatingadmissionpolicies", "taintkeeper-default-tolerations"),
    ("mutatingadmissionpolicybindings", "taintkeeper-default-tolerations"),
)
# taintkeeper's own ServiceAccounts (its certificates' rotation writes the webhook's caBundle).
TAINTKEEPER_ACCOUNTS = "system:serviceaccount:taintkeeper-system:"
KUBELET_PREFIX = "system:node:"
SCHEDULER_USER = "system:kube-scheduler"
TAINTKEEPER_LEASE = ("taintkeeper-system", "taintkeeper-controller")
TAINTKEEPER_WEBHOOK = ("taintkeeper-system", "taintkeeper-webhook-")
TAINTKEEPER_CONTROLLER_PODS = ("taintkeeper-system", "taintkeeper-controller-")
# bench/soak/workload.py's NAMESPACES (not imported: the checker loads no Kubernetes client).
DEFAULT_WORKLOAD_NAMESPACES = ("chaos-workload", "chaos-annotated", "chaos-budgeted")
# Namespaces annotated taintkeeper.io/eviction=respect-disruption-budget: their pods leave a node tainted
# by anything but a node failure only through an Eviction their budget allows (I8), and wait while it
# refuses (not I2). The workload's budgeted namespace, and taintkeeper's own (manifests/base/namespace.yaml;
# the webhook's and controller's PodDisruptionBudgets keep one replica of each). The audit policy records
# namespaces at Metadata level, so the checker cannot read the annotation: a unit test keeps this in step.
DEFAULT_BUDGETED_NAMESPACES = ("chaos-budgeted", "taintkeeper-system")
# Each budgeted namespace's taintkeeper.io/disruption-budget-timeout in seconds (None: the controller's
# --disruption-budget-timeout default, 0, waits as long as it takes): bench/soak/workload.py annotates the
# workload's, a unit test keeps the two in step.
DEFAULT_BUDGET_TIMEOUTS: dict[str, float | None] = {"chaos-budgeted": 120.0, "taintkeeper-system": None}

# `taintkeeper-controller/<version> (<POD_NAME>)`, or `(<POD_NAME>; term <acquireTime>)` for a write of a unit of
# work acting for a term (kube/acting_term.py): the greedy `.*` makes the groups the last parentheses.
_CONTROLLER_AGENT = re.compile(r"^taintkeeper-controller/[^\s(]+.*\(([^();]*)(?:; term ([^()]*))?\)")


@dataclass(frozen=True)
class Slack:
    """Seconds each invariant forgives: clocks, watch delays and the controller's own pace."""

    early: float = 1.0  # I1: a deletion this much before the deadline is still on time
    late: float = 5.0  # I2: a deletion this much after the deadline (or the recovery) is still on time
    backfill: float = 10.0  # I6: the controller adds missing default tolerations within this
    node_grace: float = 50.0  # I5: a node counts as healthy this long after its kubelet's last fault
    lease_duration: float = 15.0  # I3: two replicas' writes closer than this are a handover race; I10
    # I2: a leader acts only while its last renewal is younger than this (the write fence): past it,
    # until the next Lease write, no replica leads.
    renew_deadline: float = 10.0
    # I2: a leader renews every retry period; one that missed a renewal (two periods without a write) is
    # gone (killed, paused, cut off) from then on, though the Lease still names it.
    retry_period: float = 2.0
    # I7: a container the soak itself killed (or paused into a liveness kill) may wait in the kubelet's
    # restart back-off, which grows to 5 minutes: CrashLoopBackOff that soon after is no crash loop.
    restart_backoff: float = 300.0
    # I6, I10: taintkeeper's pods (the controller's and the webhook's) tolerate their node's failure this long
    # before they are evicted and replaced (tolerationSeconds in manifests/base/; a unit test keeps them in step).
    pod_toleration: float = 300.0
    # I10: a replica that can lead takes the Lease within the lease duration and a retry period; this
    # much more for its start and clocks (bench/soak/leadership.py).
    handover: float = 5.0
    # I2: the controller asks again for an Eviction its budget refused this often (controller/tainteviction/manager.py).
    budget_retry: float = 5.0
    # I6: kube-proxy routes to a webhook pod this long after its EndpointSlice was written.
    webhook_ready: float = 2.0
    # I6: with no fault to account for it, the webhook may fail open (or have no pod to call) this long
    # before a pod admitted without the defaults is a violation, backfilled or not: a readiness blip.
    webhook_outage: float = 30.0


@dataclass(frozen=True)
class SoakConfig:
    controller_users: frozenset[str]
    workload_namespaces: frozenset[str]
    budgeted_namespaces: frozenset[str] = frozenset(DEFAULT_BUDGETED_NAMESPACES)
    budget_timeouts: Mapping[str, float | None] = field(default_factory=lambda: dict(DEFAULT_BUDGET_TIMEOUTS))
    lease: tuple[str, str] | None = TAINTKEEPER_LEASE  # None: one replica without election (I4 n/a)
    webhook: tuple[str, str] | None = TAINTKEEPER_WEBHOOK  # (namespace, pod-name prefix); None: in the apiserver
    # With no webhook, what adds the tolerations in kube-apiserver: the built-in plugin, or taintkeeper's
    # admission policy (manifests/admission-policy). Either is in process: no fault excuses a bare pod.
    in_process_admission: str = "built-in DefaultTolerationSeconds"
    # I6: the objects that register the admission: changed or deleted by anyone but taintkeeper, a violation.
    admission_registration: tuple[tuple[str, str], ...] = WEBHOOK_REGISTRATION
    controller_pods: tuple[str, str] = TAINTKEEPER_CONTROLLER_PODS  # (namespace, pod-name prefix) for I7, I10
    # I10: the controller's replicas are those pods (False: kube-controller-manager's processes, not judged).
    replicas_are_pods: bool = True
    slack: Slack = Slack()
    # The built-ins: judged by what upstream promises (TAINTKEEPER_ONLY beside; I3 only across actors).
    upstream: bool = False
    # Who else may write what the controller writes (I4 reports anyone not named): the soak's driver.
    driver_users: frozenset[str] = frozenset({SOAK_DRIVER_USER})
    # The soak's window: violations outside it (the cluster's setup, the check itself) do not count.
    since: float | None = None
    until: float | None = None

    def is_controller(self, username: str) -> bool:
        return username in self.controller_users

    def may_remove_pods(self, username: str) -> bool:
        """The controller, the soak's driver, a kubelet (its pods' last deletion) and the control plane's
        pod-removing controllers: anyone else removing a pod is a second actor (I4; I3 beside the controller)."""
        return (
            self.is_controller(username)
            or username in self.driver_users
            or username.startswith(KUBELET_PREFIX)
            or username in POD_REMOVING_CONTROLLERS
        )

    def may_write_pod_status(self, username: str) -> bool:
        """The controller (its NotReady marks), kubelets, the scheduler, and the pod-removing controllers (a
        DisruptionTarget condition on a pod they remove)."""
        return (
            self.is_controller(username)
            or username.startswith(KUBELET_PREFIX)
            or username == SCHEDULER_USER
            or username in POD_REMOVING_CONTROLLERS
        )

    def may_taint_nodes(self, username: str) -> bool:
        """The controller, and the soak's driver (its manual taints)."""
        return self.is_controller(username) or username in self.driver_users

    @property
    def not_applicable(self) -> frozenset[str]:
        """The invariants reported beside the verdict: without a Lease, I4 and I10; for the built-ins,
        taintkeeper's own promises."""
        return frozenset({*(TAINTKEEPER_ONLY if self.upstream else ()), *(("I4", "I10") if self.lease is None else ())})


def taintkeeper_config(workload_namespaces: tuple[str, ...] = DEFAULT_WORKLOAD_NAMESPACES) -> SoakConfig:
    return SoakConfig(
        controller_users=frozenset({TAINTKEEPER_CONTROLLER_USER}), workload_namespaces=frozenset(workload_namespaces)
    )


def builtin_config(workload_namespaces: tuple[str, ...] = DEFAULT_WORKLOAD_NAMESPACES) -> SoakConfig:
    """kube-controller-manager as the oracle: two processes, leader-elected as a real one runs (its Lease
    is not judged: its writes do not say which replica sent them, so I4 and I10 are n/a; a leader fault
    is excused to its end plus the hand-over bound, recovery.py), and the DefaultTolerationSeconds admission
    plugin instead of a webhook. Judged by upstream's own promises (`upstream`)."""
    return SoakConfig(
        controller_users=frozenset({BUILTIN_CONTROLLER_USER, BUILTIN_POD_GC_USER}),
        upstream=True,
        workload_namespaces=frozenset(workload_namespaces),
        lease=None,
        webhook=None,
        admission_registration=(),
        controller_pods=("kube-system", "kube-controller-manager-"),
        replicas_are_pods=False,
    )


def replica_of_agent(user_agent: str) -> str:
    """The pod a write came from: taintkeeper's user agent names it; any other agent is its own replica."""
    match = _CONTROLLER_AGENT.match(user_agent)
    return match.group(1) if match else user_agent


def term_of_agent(user_agent: str) -> str | None:
    """The Lease term (its acquireTime) a controller's write was made for, as its user agent names it; None for
    a request of no unit of work (the elector's), another agent's, or a controller older than the stamp."""
    match = _CONTROLLER_AGENT.match(user_agent)
    return match.group(2) if match else None


def replica_of_holder(holder_identity: str) -> str:
    """A Lease holder `<podname>_<uuid hex>` -> the pod name (hostname in the pod)."""
    name, separator, _ = holder_identity.rpartition("_")
    return name if separator else holder_identity


def soak_config(
    *,
    builtin: bool = False,
    policy: bool = False,
    since: float | None = None,
    until: float | None = None,
    workload_namespaces: tuple[str, ...] = DEFAULT_WORKLOAD_NAMESPACES,
) -> SoakConfig:
    """The configuration bench/chaos.py judges a run with: taintkeeper's (`policy`: installed with its
    admission policy instead of the webhook), or the oracle's."""
    config = builtin_config(workload_namespaces) if builtin else taintkeeper_config(workload_namespaces)
    if policy:
        config = replace(
            config,
            webhook=None,
            in_process_admission="taintkeeper's MutatingAdmissionPolicy",
            admission_registration=POLICY_REGISTRATION,
        )
    return replace(config, since=since, until=until)
