"""Builders of hand-made audit logs for the soak checker's tests: a little cluster's requests as
kube-apiserver 1.20 writes them to its audit log (audit.k8s.io/v1 Event JSON lines).

Requests are scheduled on an `AuditScript` at seconds after T0, in any order; `lines()` plays them in
time order against a model of the nodes and pods, so each response carries the object's whole state
and a fresh resourceVersion, as the apiserver's would.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bench.soak.audit import AuditRecord, parse_lines

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z
NAMESPACE = "chaos-workload"
SYSTEM = "taintkeeper-system"
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
CHAOS_TAINT = "chaos.taintkeeper.io/drain"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
BUDGETED = "chaos-budgeted"  # the namespace whose pods respect their disruption budget
REPLICA_A = "taintkeeper-controller-6f7b9c-k2x4q"
REPLICA_B = "taintkeeper-controller-6f7b9c-p8m3z"
WEBHOOK_POD = "taintkeeper-webhook-5c4d8-7tq2n"
TOOK = 0.004  # seconds from a request's arrival to its response

Json = dict[str, Any]


def stamp(seconds: float) -> str:
    """Seconds after T0 -> a MicroTime, as the audit log's timestamps are."""
    return datetime.fromtimestamp(T0 + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def whole_stamp(seconds: float) -> str:
    """Seconds after T0 -> a Time (whole seconds), as a taint's timeAdded is."""
    return datetime.fromtimestamp(T0 + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Actor:
    username: str
    user_agent: str
    groups: tuple[str, ...] = ("system:authenticated",)


def controller(replica: str = REPLICA_A, term: float | None = None) -> Actor:
    """The controller's replica; with `term` (seconds after T0), writing for the term it acquired then
    (kube/acting_term.py: the Lease's acquireTime in its user agent)."""
    return Actor(
        "system:serviceaccount:taintkeeper-system:taintkeeper-controller",
        f"taintkeeper-controller/0.1.0 ({replica}{'' if term is None else f'; term {stamp(term)}'})",
        ("system:serviceaccounts", "system:serviceaccounts:taintkeeper-system", "system:authenticated"),
    )


def kubelet(node: str) -> Actor:
    return Actor(
        f"system:node:{node}",
        "kubelet/v1.20.2 (linux/amd64) kubernetes/faecb19",
        ("system:nodes", "system:authenticated"),
    )


SCHEDULER = Actor("system:kube-scheduler", "kube-scheduler/v1.20.2 (linux/amd64) kubernetes/faecb19/scheduler")
DRIVER = Actor("taintkeeper-admin", "OpenAPI-Generator/35.0.0/python", ("system:masters", "system:authenticated"))
ENDPOINTSLICE_CONTROLLER = Actor(
    "system:serviceaccount:kube-system:endpointslice-controller",
    "kube-controller-manager/v1.20.2 (linux/amd64) kubernetes/faecb19/system:"
    "serviceaccount:kube-system:endpointslice-controller",
)
NODE_CONTROLLER = Actor(
    "system:serviceaccount:kube-system:node-controller",
    "kube-controller-manager/v1.20.2 (linux/amd64) kubernetes/faecb19/system:serviceaccount:"
    "kube-system:node-controller",
)


def toleration(key: str | None, seconds: int | None = None, *, effect: str | None = "NoExecute") -> Json:
    built: Json = {"operator": "Exists"}
    if key:
        built["key"] = key
    if effect:
        built["effect"] = effect
    if seconds is not None:
        built["tolerationSeconds"] = seconds
    return built


def timed(seconds: int) -> list[Json]:
    """The workload's `tolN` pods: not-ready and unreachable for N seconds."""
    return [toleration(NOT_READY, seconds), toleration(UNREACHABLE, seconds)]


DEFAULTS = timed(300)  # what the webhook adds
FOREVER = [toleration(None, effect=None)]


def event(
    *,
    verb: str,
    actor: Actor,
    resource: str,
    name: str,
    received: float,
    namespace: str = "",
    subresource: str = "",
    api_group: str = "",
    code: int = 200,
    message: str = "",
    request: Json | None = None,
    response: Json | None = None,
    took: float | None = None,
) -> Json:
    """One ResponseComplete Event, shaped as kube-apiserver 1.20 writes it; `took`: seconds from the
    request's arrival to its answer (TOOK by default)."""
    group_path = f"/apis/{api_group}/v1" if api_group else "/api/v1"
    path = "/".join(
        part
        for part in (group_path, f"namespaces/{namespace}" if namespace else "", resource, name, subresource)
        if part
    )
    ref: Json = {"resource": resource, "name": name, "apiVersion": "v1"}
    if namespace:
        ref["namespace"] = namespace
    if subresource:
        ref["subresource"] = subresource
    if api_group:
        ref["apiGroup"] = api_group
    status: Json = {"metadata": {}, "code": code}
    if code >= 400:
        status.update(status="Failure", message=message, reason="NotFound" if code == 404 else "InternalError")
    built: Json = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "RequestResponse",
        "auditID": str(uuid.uuid4()),
        "stage": "ResponseComplete",
        "requestURI": path,
        "verb": verb,
        "user": {"username": actor.username, "groups": list(actor.groups)},
        "sourceIPs": ["127.0.0.1"],
        "userAgent": actor.user_agent,
        "objectRef": ref,
        "responseStatus": status,
        "requestReceivedTimestamp": stamp(received),
        "stageTimestamp": stamp(received + (TOOK if took is None else took)),
        "annotations": {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""},
    }
    if request is not None:
        built["requestObject"] = request
    if response is not None:
        built["responseObject"] = response
    return built


Step = Callable[[], list[Json]]


class AuditScript:
    """A cluster's requests, scheduled at seconds after T0 and rendered in time order."""

    def __init__(self) -> None:
        self._steps: list[tuple[float, int, Step]] = []
        self._order = itertools.count()
        self._versions = itertools.count(1000)
        self._uids = itertools.count(1)
        self._silent: list[tuple[float, float]] = []
        self.nodes: dict[str, Json] = {}
        self.pods: dict[tuple[str, str], Json] = {}

    def at(self, seconds: float, step: Step) -> None:
        self._steps.append((seconds, next(self._order), step))

    def silence(self, start: float, end: float) -> None:
        """No request reaches the apiserver from `start` to `end` (it is stopped)."""
        self._silent.append((start, end))

    def _version(self, obj: Json) -> Json:
        obj["metadata"]["resourceVersion"] = str(next(self._versions))
        return json.loads(json.dumps(obj))

    # --- nodes ---

    def node_up(self, seconds: float, name: str, zone: str = "zone-a") -> None:
        def step() -> list[Json]:
            self.nodes[name] = {
                "kind": "Node",
                "apiVersion": "v1",
                "metadata": {
                    "name": name,
                    "uid": f"node-{name}",
                    "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone},
                },
                "spec": {},
                "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]},
            }
            return [
                event(
                    verb="create",
                    actor=kubelet(name),
                    resource="nodes",
                    name=name,
                    received=seconds,
                    code=201,
                    request={"kind": "Node", "metadata": {"name": name}},
                    response=self._version(self.nodes[name]),
                )
            ]

        self.at(seconds, step)

    def _node_write(
        self, seconds: float, name: str, actor: Actor, change: Callable[[Json], Json], subresource: str = ""
    ) -> None:
        def step() -> list[Json]:
            node = self.nodes[name]
            before = json.dumps(node, sort_keys=True)
            patch = change(node)
            # A write that changes nothing is not stored: the apiserver answers the same resourceVersion.
            response = self._version(node) if json.dumps(node, sort_keys=True) != before else json.loads(before)
            return [
                event(
                    verb="patch",
                    actor=actor,
                    resource="nodes",
                    name=name,
                    subresource=subresource,
                    received=seconds,
                    request=patch,
                    response=response,
                )
            ]

        self.at(seconds, step)

    def set_ready(self, seconds: float, name: str, status: str, actor: Actor) -> None:
        def change(node: Json) -> Json:
            node["status"]["conditions"] = [{"type": "Ready", "status": status, "reason": "Scripted"}]
            return {"status": {"conditions": node["status"]["conditions"]}}

        self._node_write(seconds, name, actor, change, "status")

    def add_taint(
        self, seconds: float, name: str, key: str, actor: Actor, *, added: float | None = None, value: str | None = None
    ) -> None:
        taint: Json = {"key": key, "effect": "NoExecute", "timeAdded": whole_stamp(seconds if added is None else added)}
        if value is not None:
            taint["value"] = value

        def change(node: Json) -> Json:
            taints = node["spec"].setdefault("taints", [])
            if not any(t["key"] == key and t["effect"] == "NoExecute" for t in taints):
                taints.append(taint)
            return {"spec": {"taints": taints}}

        self._node_write(seconds, name, actor, change)

    def remove_taint(self, seconds: float, name: str, key: str, actor: Actor) -> None:
        def change(node: Json) -> Json:
            node["spec"]["taints"] = [t for t in node["spec"].get("taints", []) if t["key"] != key]
            return {"spec": {"taints": node["spec"]["taints"]}}

        self._node_write(seconds, name, actor, change)

    def swap_taint(self, seconds: float, name: str, old: str, new: str, actor: Actor) -> None:
        """One write replacing the `old` NoExecute taint by `new` (added now)."""

        def change(node: Json) -> Json:
            kept = [t for t in node["spec"].get("taints", []) if t["key"] != old]
            node["spec"]["taints"] = [*kept, {"key": new, "effect": "NoExecute", "timeAdded": whole_stamp(seconds)}]
            return {"spec": {"taints": node["spec"]["taints"]}}

        self._node_write(seconds, name, actor, change)

    def _lease_write(self, seconds: float, actor: Actor, namespace: str, name: str, spec: Json) -> None:
        def step() -> list[Json]:
            lease = {
                "kind": "Lease",
                "apiVersion": "coordination.k8s.io/v1",
                "metadata": {"name": name, "namespace": namespace, "resourceVersion": str(next(self._versions))},
                "spec": spec,
            }
            return [
                event(
                    verb="update",
                    actor=actor,
                    resource="leases",
                    api_group="coordination.k8s.io",
                    namespace=namespace,
                    name=name,
                    received=seconds,
                    request={"kind": "Lease", "spec": spec},
                    response=lease,
                )
            ]

        self.at(seconds, step)

    def heartbeats(self, name: str, start: float, end: float, every: float = 10.0) -> None:
        """The kubelet renewing its node Lease in kube-node-lease."""
        for beat in itertools.takewhile(lambda t: t <= end, itertools.count(start, every)):
            self._lease_write(
                beat,
                kubelet(name),
                "kube-node-lease",
                name,
                {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": stamp(beat)},
            )

    # --- the controller's Lease ---

    def lead(self, replica: str, start: float, end: float, every: float = 2.0) -> None:
        """`replica` acquires the controller Lease at `start` (its acquireTime: the term) and renews it until `end`."""
        holder = f"{replica}_{uuid.uuid5(uuid.NAMESPACE_DNS, replica).hex}"
        for renewal in itertools.takewhile(lambda t: t <= end, itertools.count(start, every)):
            self._lease_write(
                renewal,
                controller(replica),
                SYSTEM,
                "taintkeeper-controller",
                {
                    "holderIdentity": holder,
                    "leaseDurationSeconds": 15,
                    "acquireTime": stamp(start),
                    "renewTime": stamp(renewal),
                },
            )

    def release(self, seconds: float, replica: str) -> None:
        """`replica` gives the Lease up on its way out (an empty holder, 1 s), as a stopping leader does."""
        self._lease_write(
            seconds,
            controller(replica),
            SYSTEM,
            "taintkeeper-controller",
            {"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": stamp(seconds)},
        )

    # --- pods ---

    def create_pod(
        self,
        seconds: float,
        name: str,
        tolerations: Sequence[Json] | None = DEFAULTS,
        *,
        namespace: str = NAMESPACE,
        labels: dict[str, str] | None = None,
        actor: Actor = DRIVER,
        code: int = 201,
        message: str = "",
        failed_open: str | None = None,
        took: float | None = None,
    ) -> str:
        """A pod as admitted (its tolerations after admission); returns its uid. `took`: seconds the
        apiserver took to answer."""
        uid = f"{next(self._uids):08d}-1111-4222-8333-444455556666"

        def step() -> list[Json]:
            spec: Json = {"containers": [{"name": "pause", "image": "taintkeeper.local/pause:3.2"}]}
            if tolerations is not None:
                spec["tolerations"] = list(tolerations)
            request = {
                "kind": "Pod",
                "apiVersion": "v1",
                "metadata": {"name": name, "labels": labels or {}},
                "spec": spec,
            }
            if code >= 400:
                return [
                    event(
                        verb="create",
                        actor=actor,
                        resource="pods",
                        namespace=namespace,
                        name="",
                        received=seconds,
                        code=code,
                        message=message,
                        request=request,
                    )
                ]
            pod = {
                "kind": "Pod",
                "apiVersion": "v1",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "uid": uid,
                    "labels": labels or {},
                    "creationTimestamp": whole_stamp(seconds),
                },
                "spec": spec,
                "status": {"phase": "Pending"},
            }
            self.pods[(namespace, name)] = pod
            created = event(
                verb="create",
                actor=actor,
                resource="pods",
                namespace=namespace,
                name="",
                received=seconds,
                code=201,
                request=request,
                response=self._version(pod),
                took=took,
            )
            if failed_open:  # kube-apiserver 1.37's word that the webhook call failed and was ignored
                created["annotations"]["failed-open.mutation.webhook.admission.k8s.io/round_0_index_0"] = failed_open
            return [created]

        self.at(seconds, step)
        return uid

    def bind(
        self, seconds: float, name: str, node: str, *, namespace: str = NAMESPACE, took: float | None = None
    ) -> None:
        def step() -> list[Json]:
            pod = self.pods[(namespace, name)]
            pod["spec"]["nodeName"] = node
            pod["metadata"]["resourceVersion"] = str(next(self._versions))
            binding = {
                "kind": "Binding",
                "apiVersion": "v1",
                "metadata": {"name": name, "namespace": namespace, "uid": pod["metadata"]["uid"]},
                "target": {"kind": "Node", "name": node},
            }
            return [
                event(
                    verb="create",
                    actor=SCHEDULER,
                    resource="pods",
                    subresource="binding",
                    namespace=namespace,
                    name=name,
                    received=seconds,
                    code=201,
                    request=binding,
                    response={"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
                    took=took,
                )
            ]

        self.at(seconds, step)

    def pod_status(
        self,
        seconds: float,
        name: str,
        *,
        namespace: str = NAMESPACE,
        ready: bool = True,
        waiting: str | None = None,
        restarts: int = 0,
        actor: Actor | None = None,
    ) -> None:
        """The kubelet's status of the pod (or `actor`'s): Running and Ready, or a container waiting."""

        def step() -> list[Json]:
            pod = self.pods[(namespace, name)]
            state: Json = {"waiting": {"reason": waiting}} if waiting else {"running": {"startedAt": stamp(seconds)}}
            pod["status"] = {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True" if ready and not waiting else "False"}],
                "containerStatuses": [
                    {
                        "name": pod["spec"]["containers"][0]["name"],
                        "state": state,
                        "restartCount": restarts,
                        "ready": ready and not waiting,
                    }
                ],
            }
            return [
                event(
                    verb="patch",
                    actor=actor or kubelet(pod["spec"].get("nodeName", "")),
                    resource="pods",
                    subresource="status",
                    namespace=namespace,
                    name=name,
                    received=seconds,
                    request={"status": pod["status"]},
                    response=self._version(pod),
                )
            ]

        self.at(seconds, step)

    def publish_endpoints(self, seconds: float, service: str = "taintkeeper-webhook", namespace: str = SYSTEM) -> None:
        """The endpoint slice controller writes the Service's EndpointSlice (recorded at Metadata level)."""
        self.at(
            seconds,
            lambda: [
                event(
                    verb="update",
                    actor=ENDPOINTSLICE_CONTROLLER,
                    resource="endpointslices",
                    api_group="discovery.k8s.io",
                    namespace=namespace,
                    name=f"{service}-x7k2p",
                    received=seconds,
                )
            ],
        )

    def post_event(self, seconds: float, pod: str, reason: str, actor: Actor, *, namespace: str = NAMESPACE) -> None:
        """An Event about the pod (recorded at Request level: the request object, no response)."""
        event_name = f"{pod}.{next(self._uids):016x}"
        body = {
            "kind": "Event",
            "apiVersion": "v1",
            "metadata": {"name": event_name, "namespace": namespace},
            "involvedObject": {"kind": "Pod", "namespace": namespace, "name": pod},
            "reason": reason,
            "type": "Normal",
            "message": reason,
        }
        self.at(
            seconds,
            lambda: [
                event(
                    verb="create",
                    actor=actor,
                    resource="events",
                    namespace=namespace,
                    name="",
                    received=seconds,
                    code=201,
                    request=body,
                )
            ],
        )

    def patch_tolerations(
        self, seconds: float, name: str, tolerations: Sequence[Json], actor: Actor, *, namespace: str = NAMESPACE
    ) -> None:
        def step() -> list[Json]:
            pod = self.pods[(namespace, name)]
            pod["spec"]["tolerations"] = [*pod["spec"].get("tolerations", []), *tolerations]
            return [
                event(
                    verb="patch",
                    actor=actor,
                    resource="pods",
                    namespace=namespace,
                    name=name,
                    received=seconds,
                    request={"spec": {"tolerations": pod["spec"]["tolerations"]}},
                    response=self._version(pod),
                )
            ]

        self.at(seconds, step)

    def delete_pod(
        self,
        seconds: float,
        name: str,
        actor: Actor,
        *,
        namespace: str = NAMESPACE,
        precondition: bool = True,
        evict: bool = False,
        final: bool = False,
        refused: bool = False,
    ) -> None:
        """A graceful DELETE (or an Eviction); `final`: grace period 0 (the kubelet's last one, or a force
        deletion), after which the pod is gone; `refused`: an Eviction its disruption budget refuses (429).
        A pod that is gone answers 404."""

        def step() -> list[Json]:
            pod = self.pods.get((namespace, name))
            options: Json = {"kind": "DeleteOptions", "apiVersion": "v1"}
            if final:
                options["gracePeriodSeconds"] = 0
            if precondition and pod is not None:
                options["preconditions"] = {"uid": pod["metadata"]["uid"]}
            request: Json = options
            if evict:
                request = {
                    "kind": "Eviction",
                    "apiVersion": "policy/v1beta1",
                    "metadata": {"name": name, "namespace": namespace},
                    "deleteOptions": options,
                }
            common: Json = {
                "verb": "create" if evict else "delete",
                "actor": actor,
                "resource": "pods",
                "subresource": "eviction" if evict else "",
                "namespace": namespace,
                "name": name,
                "received": seconds,
                "request": request,
            }
            if pod is None:
                return [event(**common, code=404, message=f'pods "{name}" not found')]
            if refused:
                return [
                    event(
                        **common, code=429, message="Cannot evict pod as it would violate the pod's disruption budget."
                    )
                ]
            pod["metadata"].setdefault("deletionTimestamp", whole_stamp(seconds + 1))
            if final:
                del self.pods[(namespace, name)]
            if evict:
                self._version(pod)
                return [
                    event(
                        **common,
                        code=201,
                        response={
                            "kind": "Status",
                            "apiVersion": "v1",
                            "metadata": {},
                            "status": "Success",
                            "code": 201,
                        },
                    )
                ]
            return [event(**common, code=200, response=self._version(pod))]

        self.at(seconds, step)

    def register(self, seconds: float, resource: str, name: str, verb: str, actor: Actor, *, code: int = 200) -> None:
        """A write of a cluster-scoped admissionregistration object (recorded at Metadata level: no bodies)."""
        self.at(
            seconds,
            lambda: [
                event(
                    verb=verb,
                    actor=actor,
                    resource=resource,
                    api_group="admissionregistration.k8s.io",
                    name=name,
                    received=seconds,
                    code=code,
                )
            ],
        )

    def delete_collection(
        self, seconds: float, names: Sequence[str], actor: Actor, *, namespace: str = NAMESPACE
    ) -> None:
        """One DELETE of the namespace's pods (a deletecollection), removing `names`: the apiserver answers
        with the list of the pods it removed, each marked for deletion."""

        def step() -> list[Json]:
            removed = []
            for name in names:
                pod = self.pods[(namespace, name)]
                pod["metadata"].setdefault("deletionTimestamp", whole_stamp(seconds + 1))
                removed.append(self._version(pod))
            return [
                event(
                    verb="deletecollection",
                    actor=actor,
                    resource="pods",
                    namespace=namespace,
                    name="",
                    received=seconds,
                    code=200,
                    request={"kind": "DeleteOptions", "apiVersion": "v1"},
                    response={"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": removed},
                )
            ]

        self.at(seconds, step)

    # --- out ---

    def events(self) -> list[Json]:
        played = [
            json_event
            for seconds, _, step in sorted(self._steps, key=lambda s: (s[0], s[1]))
            if not any(start <= seconds < end for start, end in self._silent)
            for json_event in step()
        ]
        return played

    def lines(self) -> list[str]:
        return [json.dumps(built) for built in self.events()]

    def records(self) -> list[AuditRecord]:
        return parse_lines(self.lines()).records
