"""The soak's workload: a steady churn of pods over the nodes, of every kind the controller treats
differently, plus a Deployment and a StatefulSet whose pods are replaced when evicted, and a
Deployment whose PodDisruptionBudget its pods respect (their namespace is annotated
taintkeeper.io/eviction=respect-disruption-budget: a hand-made NoExecute taint moves them only as
fast as the budget allows, and taintkeeper.io/disruption-budget-timeout=120s: one still refused that
long after its deadline is deleted).

The kinds (the pod's name starts with the kind):
- `default`: no tolerations: the webhook (or the built-in plugin) gives it 300 s;
- `tol0`, `tol5`, `tol20`, `tol60`: tolerate not-ready, unreachable and the soak's own NoExecute
  taint (CHAOS_TAINT) for that many seconds;
- `forever`: tolerates every taint, forever;
- `annotated`: no tolerations, in a namespace whose annotations give 30 s;
- `optout`: labelled taintkeeper.io/skip=true: no defaults, so any NoExecute taint evicts it at once.

Every call is best effort: while the apiserver is down the workload just tries again next tick.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from kube.policy import budgets_path, served_policy_version
from kube.request import request_json

log = logging.getLogger("chaos.workload")

NAMESPACE = "chaos-workload"
ANNOTATED_NAMESPACE = "chaos-annotated"
BUDGETED_NAMESPACE = "chaos-budgeted"
NAMESPACES = (NAMESPACE, ANNOTATED_NAMESPACE, BUDGETED_NAMESPACE)
ANNOTATED_SECONDS = 30
BUDGET_TIMEOUT_SECONDS = 120  # a budgeted pod still refused this long after its deadline is deleted
CHAOS_TAINT = "chaos.taintkeeper.io/drain"  # the NoExecute taint the soak adds and removes by hand
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"  # the fence an operator puts on a powered-off node
SKIP_LABEL = "taintkeeper.io/skip"
IMAGE = "taintkeeper.local/pause:3.2"  # imported into every node by hack/local-cluster.sh
KINDS = ("default", "tol0", "tol5", "tol20", "tol60", "forever", "annotated", "optout")
DEPLOYMENT = "chaos-web"
STATEFULSET = "chaos-db"
BUDGETED = "chaos-api"  # in BUDGETED_NAMESPACE, with a PodDisruptionBudget of minAvailable REPLICAS - 1
REPLICAS = 3
NAMESPACE_ANNOTATIONS = {
    ANNOTATED_NAMESPACE: {
        "taintkeeper.io/not-ready-toleration-seconds": str(ANNOTATED_SECONDS),
        "taintkeeper.io/unreachable-toleration-seconds": str(ANNOTATED_SECONDS),
    },
    BUDGETED_NAMESPACE: {
        "taintkeeper.io/eviction": "respect-disruption-budget",
        "taintkeeper.io/disruption-budget-timeout": f"{BUDGET_TIMEOUT_SECONDS}s",
    },
}
CALL_TIMEOUT = (3, 10)


def _timed(seconds: int) -> list[dict[str, Any]]:
    return [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}
        for key in (NOT_READY, UNREACHABLE, CHAOS_TAINT)
    ]


def pod_body(kind: str, name: str) -> dict[str, Any]:
    """The pod of one kind: a pause container, gone 1 s after a graceful delete."""
    labels = {"app.kubernetes.io/part-of": "chaos", "chaos.taintkeeper.io/kind": kind}
    tolerations: list[dict[str, Any]] = []
    if kind.startswith("tol"):
        tolerations = _timed(int(kind[3:]))
    elif kind == "forever":
        tolerations = [{"operator": "Exists"}]
    elif kind == "optout":
        labels[SKIP_LABEL] = "true"
    spec: dict[str, Any] = {
        "containers": [{"name": "pause", "image": IMAGE, "imagePullPolicy": "Never"}],
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
    }
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}


def _template(kind: str, selector: dict[str, str]) -> dict[str, Any]:
    pod = pod_body(kind, "")
    return {"metadata": {"labels": {**pod["metadata"]["labels"], **selector}}, "spec": pod["spec"]}


def namespace_of(kind: str) -> str:
    return ANNOTATED_NAMESPACE if kind == "annotated" else NAMESPACE


@dataclass
class Workload:
    """Keeps about `population` bare pods alive, each for a random lifetime, and the two owned sets."""

    api_client: client.ApiClient
    rng: random.Random
    population: int = 48
    lifetime: tuple[float, float] = (60.0, 240.0)
    created: int = 0
    _expiry: dict[tuple[str, str], float] = field(default_factory=dict)  # (namespace, name) -> delete at
    _clock: Callable[[], float] = time.monotonic

    def install(self) -> None:
        """The namespaces, the Deployment and the StatefulSet (with its headless Service)."""
        for name in NAMESPACES:
            self._create(
                "/api/v1/namespaces", {"metadata": {"name": name, "annotations": NAMESPACE_ANNOTATIONS.get(name, {})}}
            )
        selector = {"app.kubernetes.io/name": DEPLOYMENT}
        template = _template("default", selector)
        self._create(
            f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
            {
                "metadata": {"name": DEPLOYMENT},
                "spec": {"replicas": REPLICAS, "selector": {"matchLabels": selector}, "template": template},
            },
        )
        db = {"app.kubernetes.io/name": STATEFULSET}
        self._create(
            f"/api/v1/namespaces/{NAMESPACE}/services",
            {"metadata": {"name": STATEFULSET}, "spec": {"clusterIP": "None", "selector": db}},
        )
        template = _template("tol20", db)
        self._create(
            f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets",
            {
                "metadata": {"name": STATEFULSET},
                "spec": {
                    "replicas": REPLICAS,
                    "serviceName": STATEFULSET,
                    "podManagementPolicy": "Parallel",
                    "selector": {"matchLabels": db},
                    "template": template,
                },
            },
        )
        api = {"app.kubernetes.io/name": BUDGETED}
        self._create(
            f"/apis/apps/v1/namespaces/{BUDGETED_NAMESPACE}/deployments",
            {
                "metadata": {"name": BUDGETED},
                "spec": {"replicas": REPLICAS, "selector": {"matchLabels": api}, "template": _template("tol5", api)},
            },
        )
        # policy/v1 from 1.21 on, policy/v1beta1 on 1.20: the version the server serves
        policy = served_policy_version(self.api_client, CALL_TIMEOUT)
        self._create(
            budgets_path(policy).format(namespace=BUDGETED_NAMESPACE),
            {"metadata": {"name": BUDGETED}, "spec": {"minAvailable": REPLICAS - 1, "selector": {"matchLabels": api}}},
        )

    def _create(self, path: str, body: dict[str, Any]) -> None:
        try:
            request_json(self.api_client, "POST", path, body=body, timeout=CALL_TIMEOUT)
        except ApiException as error:
            if error.status != 409:
                raise

    def run(self, stop: threading.Event, tick: float = 1.0) -> None:
        while not stop.is_set():
            try:
                self.step()
            except Exception as error:  # the apiserver may be down: try again next tick
                log.debug("workload step failed: %s", error)
            stop.wait(tick)

    def step(self) -> None:
        """Delete the pods whose lifetime is over, forget the ones gone, create one if short."""
        now = self._clock()
        for key, expiry in list(self._expiry.items()):
            if expiry <= now:
                self._delete(*key)
        live = self._live_bare_pods()
        for key in list(self._expiry):
            if key not in live:
                del self._expiry[key]
        for key in live - self._expiry.keys():  # left by an earlier run or a failed call: give it a lifetime
            self._expiry[key] = now + self.rng.uniform(*self.lifetime)
        if len(live) < self.population:
            self._create_pod(now)

    def _live_bare_pods(self) -> set[tuple[str, str]]:
        live: set[tuple[str, str]] = set()
        for namespace in NAMESPACES:
            pods = request_json(
                self.api_client,
                "GET",
                f"/api/v1/namespaces/{namespace}/pods",
                query=[("labelSelector", "app.kubernetes.io/part-of=chaos")],
                timeout=CALL_TIMEOUT,
            )
            live |= {
                (namespace, pod["metadata"]["name"])
                for pod in pods["items"]
                if not pod["metadata"].get("ownerReferences") and not pod["metadata"].get("deletionTimestamp")
            }
        return live

    def _create_pod(self, now: float) -> None:
        kind = self.rng.choice(KINDS)
        self.created += 1
        name = f"{kind}-{self.created}-{self.rng.randrange(16**6):06x}"
        namespace = namespace_of(kind)
        request_json(
            self.api_client,
            "POST",
            f"/api/v1/namespaces/{namespace}/pods",
            body=pod_body(kind, name),
            timeout=CALL_TIMEOUT,
        )
        self._expiry[(namespace, name)] = now + self.rng.uniform(*self.lifetime)

    def _delete(self, namespace: str, name: str) -> None:
        try:
            request_json(self.api_client, "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", timeout=CALL_TIMEOUT)
        except ApiException as error:
            if error.status != 404:
                raise
        self._expiry.pop((namespace, name), None)
