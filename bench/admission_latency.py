"""What a user waits for: a pod creation through kube-apiserver, with and without taintkeeper's webhook
in the path, beside the built-in plugin it replaces.

On the complete local cluster (real nodes; taintkeeper deployed from its image and manifests; no audit
log), pods are created at a fixed rate (bench/create_load.py: the same client and pod bodies
throughout; the pods name a scheduler that does not exist, so none is ever scheduled) under four
configurations, in alternated rounds:

    a  no mutation: a namespace neither webhook selects (the floor)
    b  the built-in DefaultTolerationSeconds plugin: kube-apiserver restarted with it on, same namespace
    c  taintkeeper's webhook, deployed behind its Service (the built-in plugin off)
    d  a minimal webhook that echoes the uid with a constant patch (bench/echo_webhook.py), deployed the
       same way: its image, gunicorn's gevent workers, TLS, a Service, 2 replicas
    e  taintkeeper's admission policy (manifests/admission-policy/policy.yaml, 1.36+): kube-apiserver
       applies it in process; a copy whose namespaceSelector picks this benchmark's namespace (the
       webhook skips it), its CEL and parameter as shipped
    f  a constant-patch admission policy: the same two tolerations as a fixed JSONPatch, no variables,
       no parameter (the echo of policies: what any MutatingAdmissionPolicy costs)

d - a is kube-apiserver's own cost of calling a webhook; c - d is taintkeeper's share (goal: at most
0.3 ms at p50 and p99, at each rate); e - b is the policy against the built-in plugin (goal: at most
0.1 ms at p50); f - a is what any mutating policy costs, e - f taintkeeper's CEL. Also: the webhook
pods' CPU per admitted pod and their memory (working set), from their cgroups on this host
(bench/pod_cgroup.py), and kube-apiserver's CPU per admitted pod in each configuration (from /proc:
the process is on this host).

    .venv/bin/python bench/admission_latency.py [--rates 20,100] [--seconds 60] [--rounds 3]
        [--dir DIR] [--keep]

`--seconds` is each configuration's measured time per rate, split over the rounds; each run is preceded
by an unmeasured second at the same rate (connections, caches). The cluster is brought down at the end
unless --keep.
"""

from __future__ import annotations

import argparse
import base64
import copy
import functools
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402
from kubernetes import config  # noqa: E402
from kubernetes.client import ApiClient, ApiException  # noqa: E402

from bench.create_load import Endpoint, Outcome, create_at_rate  # noqa: E402
from bench.pod_cgroup import pod_cgroup  # noqa: E402
from bench.soak.cluster import ClusterError, LocalCluster  # noqa: E402
from hack.deploy import cluster_kubernetes  # noqa: E402
from hack.wait import wait_for  # noqa: E402
from kube.request import request_json  # noqa: E402

DEFAULT_DIR = Path(tempfile.gettempdir()) / "taintkeeper-admission-latency"
NODES = 2
SYSTEM = "taintkeeper-system"
WEBHOOK = "taintkeeper-webhook"
ECHO = "taintkeeper-bench-echo"
ECHO_LABEL = "taintkeeper.io/bench-echo"
POLICY_LABEL = "taintkeeper.io/bench-policy"
BENCH_POLICY = "taintkeeper-bench-policy"
CONSTANT_POLICY_LABEL = "taintkeeper.io/bench-constant-policy"
CONSTANT_POLICY = "taintkeeper-bench-constant-policy"
POLICY_FILE = ROOT / "manifests" / "admission-policy" / "policy.yaml"
SKIP_LABEL = "taintkeeper.io/skip"
NAMESPACES = {  # configuration -> (namespace, its labels)
    "a": ("bench-admission-floor", {SKIP_LABEL: "true"}),
    "b": ("bench-admission-floor", {SKIP_LABEL: "true"}),
    "c": ("bench-admission-taintkeeper", {}),
    "d": ("bench-admission-echo", {SKIP_LABEL: "true", ECHO_LABEL: "true"}),
    "e": ("bench-admission-policy", {SKIP_LABEL: "true", POLICY_LABEL: "true"}),
    "f": ("bench-admission-constant-policy", {SKIP_LABEL: "true", CONSTANT_POLICY_LABEL: "true"}),
}
CONFIGURATIONS = {
    "a": "no mutation (floor)",
    "b": "built-in DefaultTolerationSeconds",
    "c": "taintkeeper webhook (Service)",
    "d": "echo webhook (Service)",
    "e": "taintkeeper admission policy (in process)",
    "f": "constant-patch admission policy (in process)",
}
DEFAULT_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
TIMEOUT = (5, 60)


def pod_body(index: int) -> dict[str, Any]:
    """The same small pod for every configuration; no scheduler exists by its name, so it stays Pending."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"create-{index}"},
        "spec": {
            "schedulerName": "taintkeeper-bench-none",
            "automountServiceAccountToken": False,
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.2"}],
        },
    }


def has_defaults(pod: dict[str, Any]) -> bool:
    keys = {
        toleration.get("key")
        for toleration in (pod.get("spec") or {}).get("tolerations") or []
        if toleration.get("effect") == "NoExecute" and toleration.get("tolerationSeconds") == 300
    }
    return all(key in keys for key in DEFAULT_KEYS)


# --- the echo webhook, deployed like taintkeeper's -------------------------------------------------


def echo_objects(
    webhook_deployment: dict[str, Any],
    webhook_service: dict[str, Any],
    webhook_configuration: dict[str, Any],
    ca_bundle: str,
    tls: dict[str, bytes],
) -> list[dict[str, Any]]:
    """The echo webhook's Secret, ConfigMap, Deployment, Service and MutatingWebhookConfiguration, made
    from taintkeeper's own live objects so the two are served alike: only names, the app and the
    namespaces it selects differ."""
    labels = {"app.kubernetes.io/name": ECHO}

    def fresh(obj: dict[str, Any]) -> dict[str, Any]:
        made = copy.deepcopy(obj)
        made.pop("status", None)
        metadata = made["metadata"]
        made["metadata"] = {
            "name": ECHO,
            "labels": labels,
            **({"namespace": metadata["namespace"]} if "namespace" in metadata else {}),
        }
        return made

    deployment = fresh(webhook_deployment)
    spec = deployment["spec"]
    spec["selector"] = {"matchLabels": labels}
    template = spec["template"]
    template["metadata"] = {"labels": labels}
    pod = template["spec"]
    pod["automountServiceAccountToken"] = False
    for term in (
        (pod.get("affinity") or {})
        .get("podAntiAffinity", {})
        .get("preferredDuringSchedulingIgnoredDuringExecution", [])
    ):
        term["podAffinityTerm"]["labelSelector"] = {"matchLabels": labels}
    container = pod["containers"][0]
    container["command"] = [
        "python",
        "-m",
        "gunicorn",
        "-c",
        "python:webhook.gunicorn_conf",
        "echo_webhook:create_app()",
    ]
    container["args"] = []
    settings = {
        "TAINTKEEPER_BIND": "0.0.0.0:8443",
        "TAINTKEEPER_CERT_FILE": "/etc/taintkeeper/tls/tls.crt",
        "TAINTKEEPER_KEY_FILE": "/etc/taintkeeper/tls/tls.key",
        "TAINTKEEPER_WORKERS": "2",
        "TAINTKEEPER_NAMESPACE_CACHE": "false",
        "TAINTKEEPER_LOG_FORMAT": "json",
        "PYTHONPATH": "/echo",
    }
    container["env"] = [
        *(item for item in container.get("env", []) if item["name"] not in settings),
        *({"name": name, "value": value} for name, value in settings.items()),
    ]
    container["volumeMounts"] = [
        *container.get("volumeMounts", []),
        {"name": "echo", "mountPath": "/echo", "readOnly": True},
    ]
    for volume in pod["volumes"]:
        if "secret" in volume:
            volume["secret"]["secretName"] = ECHO
    pod["volumes"] = [*pod["volumes"], {"name": "echo", "configMap": {"name": ECHO}}]

    service = fresh(webhook_service)
    for key in ("clusterIP", "clusterIPs"):
        service["spec"].pop(key, None)
    service["spec"]["selector"] = labels

    configuration = fresh(webhook_configuration)
    (hook,) = configuration["webhooks"]
    hook["name"] = "echo.bench.taintkeeper.io"
    hook["clientConfig"] = {
        **hook["clientConfig"],
        "caBundle": ca_bundle,
        "service": {**hook["clientConfig"]["service"], "name": ECHO},
    }
    hook["namespaceSelector"] = {"matchLabels": {ECHO_LABEL: "true"}}
    hook.pop("objectSelector", None)

    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": ECHO, "namespace": SYSTEM, "labels": labels},
        "data": {name: base64.b64encode(value).decode() for name, value in tls.items()},
    }
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": ECHO, "namespace": SYSTEM, "labels": labels},
        "data": {"echo_webhook.py": (ROOT / "bench" / "echo_webhook.py").read_text()},
    }
    return [secret, config_map, deployment, service, configuration]


def policy_objects() -> list[dict[str, Any]]:
    """The shipped policy, binding and parameter, renamed, the policy selecting only POLICY_LABEL's namespace
    (the shipped one excludes namespaces labelled skip, which keeps the webhook out of this one)."""
    shipped = {doc["kind"]: doc for doc in yaml.safe_load_all(POLICY_FILE.read_text()) if doc}
    policy = copy.deepcopy(shipped["MutatingAdmissionPolicy"])
    policy["metadata"] = {"name": BENCH_POLICY}
    policy["spec"]["matchConstraints"]["namespaceSelector"] = {"matchLabels": {POLICY_LABEL: "true"}}
    parameter = copy.deepcopy(shipped["ConfigMap"])
    parameter["metadata"] = {"name": BENCH_POLICY, "namespace": SYSTEM}
    binding = copy.deepcopy(shipped["MutatingAdmissionPolicyBinding"])
    binding["metadata"] = {"name": BENCH_POLICY}
    binding["spec"]["policyName"] = BENCH_POLICY
    binding["spec"]["paramRef"] = {**binding["spec"]["paramRef"], "name": BENCH_POLICY, "namespace": SYSTEM}
    constant = {
        "apiVersion": policy["apiVersion"],
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": CONSTANT_POLICY},
        "spec": {
            "matchConstraints": {
                **policy["spec"]["matchConstraints"],
                "namespaceSelector": {"matchLabels": {CONSTANT_POLICY_LABEL: "true"}},
            },
            "failurePolicy": "Ignore",
            "reinvocationPolicy": "IfNeeded",
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": CONSTANT_PATCH}}],
        },
    }
    constant_binding = {
        "apiVersion": binding["apiVersion"],
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": CONSTANT_POLICY},
        "spec": {"policyName": CONSTANT_POLICY},
    }
    return [parameter, policy, binding, constant, constant_binding]


# The tolerations taintkeeper's policy gives a pod without any, as one fixed patch.
CONSTANT_PATCH = (
    '[JSONPatch{op: "add", path: "/spec/tolerations", value: []}, '
    + ", ".join(
        f'JSONPatch{{op: "add", path: "/spec/tolerations/-", value: Object.spec.tolerations{{key: "{key}", '
        'operator: "Exists", effect: "NoExecute", tolerationSeconds: 300}}'
        for key in DEFAULT_KEYS
    )
    + "]"
)


def _path(obj: dict[str, Any], name: str | None = None) -> str:
    group_version, kind = obj["apiVersion"], obj["kind"]
    base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    plural = {
        "Secret": "secrets",
        "ConfigMap": "configmaps",
        "Deployment": "deployments",
        "Service": "services",
        "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
        "MutatingAdmissionPolicy": "mutatingadmissionpolicies",
        "MutatingAdmissionPolicyBinding": "mutatingadmissionpolicybindings",
        "Namespace": "namespaces",
    }[kind]
    namespace = obj["metadata"].get("namespace")
    collection = f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"
    return f"{collection}/{name}" if name else collection


def apply(api: ApiClient, obj: dict[str, Any]) -> None:
    """Create the object, or replace it whole (a rerun on a kept cluster)."""
    try:
        request_json(api, "POST", _path(obj), body=obj, timeout=TIMEOUT)
    except ApiException as error:
        if error.status != 409:
            raise
        current = request_json(api, "GET", _path(obj, obj["metadata"]["name"]), timeout=TIMEOUT)
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}}
        if obj["kind"] == "Service":
            obj["spec"] = {**obj["spec"], "clusterIP": current["spec"]["clusterIP"]}
        request_json(api, "PUT", _path(obj, obj["metadata"]["name"]), body=obj, timeout=TIMEOUT)


def echo_tls(directory: Path) -> tuple[str, dict[str, bytes]]:
    """A CA and a serving certificate for the echo Service (the project's `python -m certs`)."""
    out = directory / "echo-certs"
    bundle = subprocess.run(
        [sys.executable, "-m", "certs", "--service", ECHO, "--namespace", SYSTEM, "--out-dir", str(out)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    return bundle.strip(), {"tls.crt": (out / "tls.crt").read_bytes(), "tls.key": (out / "tls.key").read_bytes()}


def available(api: ApiClient, name: str) -> bool:
    deployment = request_json(api, "GET", f"/apis/apps/v1/namespaces/{SYSTEM}/deployments/{name}", timeout=TIMEOUT)
    wanted = deployment["spec"]["replicas"]
    status = deployment.get("status") or {}
    return (
        status.get("observedGeneration", 0) >= deployment["metadata"]["generation"]
        and status.get("updatedReplicas") == wanted
        and status.get("availableReplicas") == wanted
        and status.get("replicas") == wanted
    )


def policy_served(api: ApiClient) -> bool:
    """Whether kube-apiserver serves MutatingAdmissionPolicy v1 (1.36+): configuration e needs it."""
    group = request_json(api, "GET", "/apis/admissionregistration.k8s.io/v1", timeout=TIMEOUT)
    return any(resource.get("name") == "mutatingadmissionpolicies" for resource in group.get("resources") or [])


def install(api: ApiClient, directory: Path) -> None:
    for namespace, labels in {name: labels for name, labels in NAMESPACES.values()}.items():
        apply(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}})
        # ServiceAccount admission refuses pods until the namespace's default ServiceAccount exists.
        wait_for(
            functools.partial(
                request_json, api, "GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default", timeout=TIMEOUT
            ),
            60,
            f"the default ServiceAccount of {namespace}",
            ignore=ApiException,
        )
    live = {
        kind: request_json(api, "GET", path, timeout=TIMEOUT)
        for kind, path in (
            ("deployment", f"/apis/apps/v1/namespaces/{SYSTEM}/deployments/{WEBHOOK}"),
            ("service", f"/api/v1/namespaces/{SYSTEM}/services/{WEBHOOK}"),
            ("configuration", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/taintkeeper"),
        )
    }
    ca_bundle, tls = echo_tls(directory)
    for obj in echo_objects(live["deployment"], live["service"], live["configuration"], ca_bundle, tls):
        apply(api, obj)
    if policy_served(api):
        for obj in policy_objects():
            apply(api, obj)
    for name in (WEBHOOK, ECHO):
        wait_for(
            functools.partial(available, api, name), 300, f"deployment {SYSTEM}/{name} Available", ignore=ApiException
        )


def uninstall(api: ApiClient) -> None:
    """Remove the echo webhook and the benchmark's namespaces (taintkeeper's own objects stay)."""
    paths = [
        f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{ECHO}",
        *(
            f"/apis/admissionregistration.k8s.io/v1/{kind}/{name}"
            for name in (BENCH_POLICY, CONSTANT_POLICY)
            for kind in ("mutatingadmissionpolicybindings", "mutatingadmissionpolicies")
        ),
        f"/api/v1/namespaces/{SYSTEM}/configmaps/{BENCH_POLICY}",
        f"/apis/apps/v1/namespaces/{SYSTEM}/deployments/{ECHO}",
        f"/api/v1/namespaces/{SYSTEM}/services/{ECHO}",
        f"/api/v1/namespaces/{SYSTEM}/secrets/{ECHO}",
        f"/api/v1/namespaces/{SYSTEM}/configmaps/{ECHO}",
        *(f"/api/v1/namespaces/{namespace}" for namespace in sorted({name for name, _ in NAMESPACES.values()})),
    ]
    for path in paths:
        try:
            request_json(api, "DELETE", path, timeout=TIMEOUT)
        except ApiException as error:
            if error.status != 404:
                raise


def delete_pods(api: ApiClient, namespace: str) -> None:
    """Remove the created pods (never scheduled, so they go at once) and wait until none is left."""
    request_json(api, "DELETE", f"/api/v1/namespaces/{namespace}/pods", timeout=(5, 300))
    wait_for(
        lambda: (
            not request_json(
                api, "GET", f"/api/v1/namespaces/{namespace}/pods", query=[("limit", "1")], timeout=TIMEOUT
            )["items"]
        ),
        120,
        f"the pods of {namespace} deleted",
        interval=0.5,
    )


def webhook_pods(api: ApiClient, name: str) -> list[str]:
    """The uids of a webhook Deployment's running pods."""
    selector = (
        "app.kubernetes.io/component=webhook,app.kubernetes.io/name=taintkeeper"
        if name == WEBHOOK
        else f"app.kubernetes.io/name={ECHO}"
    )
    pods = request_json(
        api, "GET", f"/api/v1/namespaces/{SYSTEM}/pods", query=[("labelSelector", selector)], timeout=TIMEOUT
    )["items"]
    return [pod["metadata"]["uid"] for pod in pods if (pod.get("status") or {}).get("phase") == "Running"]


# --- the measurement ---------------------------------------------------------------------------------


@dataclass
class Measured:
    outcomes: dict[tuple[float, str], Outcome] = field(default_factory=dict)  # (rate, configuration) ->
    round_p50: dict[tuple[float, str], list[float]] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)  # webhook -> CPU seconds over its configuration's runs
    admitted: dict[str, int] = field(default_factory=dict)  # webhook -> pods created while measured
    memory: dict[str, list[float]] = field(default_factory=dict)  # webhook -> working set MiB of each pod
    apiserver_cpu: dict[str, float] = field(default_factory=dict)  # configuration -> kube-apiserver CPU seconds
    created: dict[str, int] = field(default_factory=dict)  # configuration -> pods created while measured


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU of a process on this host (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_one(
    cluster: LocalCluster,
    api: ApiClient,
    endpoint: Endpoint,
    measured: Measured,
    rate: float,
    name: str,
    seconds: float,
    webhook: str | None,
) -> None:
    namespace = NAMESPACES[name][0]
    cgroups = [pod_cgroup(uid) for uid in webhook_pods(api, webhook)] if webhook else []
    create_at_rate(
        endpoint, namespace, lambda index: pod_body(1_000_000 + index), rate=rate, seconds=1.0, mutated=has_defaults
    )  # warm-up, unmeasured
    apiserver = int((cluster.directory / "apiserver.pid").read_text())
    before = sum(cgroup.cpu_seconds() for cgroup in cgroups)
    apiserver_before = process_cpu_seconds(apiserver)
    outcome = create_at_rate(endpoint, namespace, pod_body, rate=rate, seconds=seconds, mutated=has_defaults)
    measured.apiserver_cpu[name] = measured.apiserver_cpu.get(name, 0.0) + process_cpu_seconds(apiserver)
    measured.apiserver_cpu[name] -= apiserver_before
    measured.created[name] = measured.created.get(name, 0) + len(outcome.latencies)
    if webhook:
        measured.cpu[webhook] = measured.cpu.get(webhook, 0.0) + sum(c.cpu_seconds() for c in cgroups) - before
        measured.admitted[webhook] = measured.admitted.get(webhook, 0) + len(outcome.latencies)
        measured.memory[webhook] = [cgroup.working_set_mib() for cgroup in cgroups]
    measured.outcomes.setdefault((rate, name), Outcome()).merge(outcome)
    measured.round_p50.setdefault((rate, name), []).append(outcome.p50)
    delete_pods(api, namespace)
    print(
        f"admission_latency: {rate:g}/s {name}: {len(outcome.latencies)} created, p50 {outcome.p50 * 1e3:.2f} ms, "
        f"p99 {outcome.p99 * 1e3:.2f} ms, mutated {outcome.mutated}, failures {sum(outcome.failures.values())}",
        flush=True,
    )


def measure(
    cluster: LocalCluster, rates: Sequence[float], seconds: float, rounds: int, policy: bool = True
) -> Measured:
    """Every configuration at every rate; e and f (policies) only with `policy` (a server that serves them)."""
    measured = Measured()

    def api_factory() -> ApiClient:
        return config.new_client_from_config(config_file=str(cluster.kubeconfig))

    endpoint = Endpoint.from_kubeconfig(str(cluster.kubeconfig))
    webhook_of = {"c": WEBHOOK, "d": ECHO}
    rotation = ["a", "c", "d", "e", "f"] if policy else ["a", "c", "d"]
    share = seconds / rounds
    for rate in rates:
        for index in range(rounds):
            order = rotation[index % len(rotation) :] + rotation[: index % len(rotation)]
            api = api_factory()
            try:
                for name in order:
                    run_one(cluster, api, endpoint, measured, rate, name, share, webhook_of.get(name))
            finally:
                api.close()
            cluster.stop_apiserver()
            cluster.start_apiserver(default_toleration_seconds=True)
            api = api_factory()
            try:
                run_one(cluster, api, endpoint, measured, rate, "b", share, None)
            finally:
                api.close()
                cluster.stop_apiserver()
                cluster.start_apiserver()
    return measured


# --- the report --------------------------------------------------------------------------------------


def render(measured: Measured, rates: Sequence[float], seconds: float, rounds: int, kubernetes: str = "") -> str:
    ms = 1e3
    names = sorted({name for _, name in measured.outcomes})
    version = f" {kubernetes}" if kubernetes else ""
    lines = [
        f"Pod creations through kube-apiserver{version}, {seconds:g} s per configuration and rate in {rounds} "
        "alternated rounds (`.venv/bin/python bench/admission_latency.py`):",
        "",
        "| rate | configuration | created | p50 ms | p99 ms | max ms | mutated | failures |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for rate in rates:
        for name in names:
            outcome = measured.outcomes[(rate, name)]
            lines.append(
                f"| {rate:g}/s | {name}. {CONFIGURATIONS[name]} | {len(outcome.latencies)} | "
                f"{outcome.p50 * ms:.2f} | {outcome.p99 * ms:.2f} | {outcome.max * ms:.2f} | "
                f"{outcome.mutated} | {sum(outcome.failures.values())} |"
            )
    lines += [
        "",
        "| rate | plugin over floor (b - a) p50 / p99 | calling a webhook (d - a) p50 / p99 | "
        "taintkeeper's share (c - d) p50 / p99 | goal | median of the rounds' c - d p50 |",
        "|---:|---|---|---|---|---:|",
    ]
    for rate in rates:
        a, b, c, d = (measured.outcomes[(rate, name)] for name in "abcd")
        pairs = zip(measured.round_p50[(rate, "c")], measured.round_p50[(rate, "d")], strict=True)
        rounds_share = statistics.median(taintkeeper - echo for taintkeeper, echo in pairs)
        met = (c.p50 - d.p50) * ms <= 0.3 and (c.p99 - d.p99) * ms <= 0.3
        lines.append(
            f"| {rate:g}/s | {(b.p50 - a.p50) * ms:+.2f} / {(b.p99 - a.p99) * ms:+.2f} ms | "
            f"{(d.p50 - a.p50) * ms:+.2f} / {(d.p99 - a.p99) * ms:+.2f} ms | "
            f"{(c.p50 - d.p50) * ms:+.2f} / {(c.p99 - d.p99) * ms:+.2f} ms | <= 0.3 ms: "
            f"{'met' if met else 'not met'} | {rounds_share * ms:+.2f} ms |"
        )
    lines += [
        "",
        "| rate | the policy over the built-in plugin (e - b) p50 / p99 | goal (p50) | policy over floor (e - a) |",
        "|---:|---|---|---|",
    ]
    for rate in rates if "e" in names else []:
        a, b, e = (measured.outcomes[(rate, name)] for name in "abe")
        met = (e.p50 - b.p50) * ms <= 0.1
        lines.append(
            f"| {rate:g}/s | {(e.p50 - b.p50) * ms:+.2f} / {(e.p99 - b.p99) * ms:+.2f} ms | <= 0.1 ms: "
            f"{'met' if met else 'not met'} | {(e.p50 - a.p50) * ms:+.2f} / {(e.p99 - a.p99) * ms:+.2f} ms |"
        )
    if "f" in names:
        lines += [
            "",
            "| rate | any mutating policy (f - a) p50 / p99 | taintkeeper's CEL (e - f) p50 / p99 |",
            "|---:|---|---|",
        ]
        for rate in rates:
            a, e, f = (measured.outcomes[(rate, name)] for name in "aef")
            lines.append(
                f"| {rate:g}/s | {(f.p50 - a.p50) * ms:+.2f} / {(f.p99 - a.p99) * ms:+.2f} ms | "
                f"{(e.p50 - f.p50) * ms:+.2f} / {(e.p99 - f.p99) * ms:+.2f} ms |"
            )
    lines += ["", "| configuration | kube-apiserver CPU per admitted pod |", "|---|---:|"]
    for name in names:
        per_pod = measured.apiserver_cpu.get(name, 0.0) / max(measured.created.get(name, 0), 1)
        lines.append(f"| {name}. {CONFIGURATIONS[name]} | {per_pod * 1e3:.2f} ms |")
    lines += ["", "| webhook pods | CPU per admitted pod | working set per pod |", "|---|---:|---:|"]
    for webhook in (WEBHOOK, ECHO):
        per_pod = measured.cpu.get(webhook, 0.0) / max(measured.admitted.get(webhook, 0), 1)
        memory = " / ".join(f"{mib:.0f}" for mib in measured.memory.get(webhook, []))
        lines.append(f"| {webhook} | {per_pod * 1e3:.2f} ms | {memory} MiB |")
    failures = {
        f"{rate:g}/s {name}: {key}": count
        for (rate, name), outcome in measured.outcomes.items()
        for key, count in outcome.failures.items()
    }
    if failures:
        lines += ["", "Failures:", *(f"- {key} ({count})" for key, count in sorted(failures.items()))]
    return "\n".join(lines)


def check_mutations(measured: Measured) -> list[str]:
    """Each configuration did what it says: a left pods alone, the others gave every pod the defaults."""
    problems = []
    for (rate, name), outcome in sorted(measured.outcomes.items()):
        expected = 0 if name == "a" else len(outcome.latencies)
        if outcome.mutated != expected:
            problems.append(
                f"{rate:g}/s {name}: {outcome.mutated} of {len(outcome.latencies)} pods carried the "
                f"default tolerations, expected {expected}"
            )
    return problems


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="admission_latency", description=(__doc__ or "").splitlines()[0])

    def rates(value: str) -> list[float]:
        try:
            parsed = [float(part) for part in value.split(",") if part]
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"not a comma-separated list of rates: {value!r}") from error
        if not parsed or any(rate <= 0 for rate in parsed):
            raise argparse.ArgumentTypeError(f"rates must be positive: {value!r}")
        return parsed

    def positive(value: str) -> float:
        try:
            parsed = float(value)
        except ValueError as error:
            raise argparse.ArgumentTypeError(f"not a number: {value!r}") from error
        if parsed <= 0:
            raise argparse.ArgumentTypeError(f"must be positive: {value!r}")
        return parsed

    parser.add_argument("--rates", type=rates, default=[20.0, 100.0], help="creates per second (20,100)")
    parser.add_argument(
        "--seconds", type=positive, default=60.0, help="measured seconds per configuration and rate (60)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        choices=range(1, 31),
        metavar="N",
        help="alternated rounds the seconds are split over (3)",
    )
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="the cluster's directory")
    parser.add_argument("--keep", action="store_true", help="leave the cluster up at the end")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cluster = LocalCluster(args.dir.resolve())
    try:
        cluster.up(NODES, builtin=False, audit=False)
        cluster.deploy()
        api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
        try:
            install(api, cluster.directory)
        finally:
            api.close()
        api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
        try:
            policy = policy_served(api)
        finally:
            api.close()
        measured = measure(cluster, args.rates, args.seconds, args.rounds, policy)
        server_version = cluster_kubernetes(cluster.directory) or ""
    except (ClusterError, ApiException, subprocess.CalledProcessError, TimeoutError) as error:
        print(f"admission_latency: {str(error).splitlines()[0] if str(error) else error!r}", file=sys.stderr)
        return 2
    finally:
        if not args.keep:
            cluster.down()
    print(render(measured, args.rates, args.seconds, args.rounds, server_version))
    problems = check_mutations(measured)
    for problem in problems:
        print(f"admission_latency: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
