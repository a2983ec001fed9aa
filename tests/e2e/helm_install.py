"""taintkeeper installed with `helm` instead of kustomize, with the end-to-end suite's settings as values.

VALUES are what overlay/settings does for the kustomization: the controller's short node-monitor periods
(a stopped kubelet is noticed in ~20 s) and taintkeeper's pods kept off the node the tests stop, allowed on
a control plane and on nodes still carrying the registration's not-ready:NoSchedule (only taintkeeper's
controller lifts it there). The chart and the image are pushed to the cluster's registry and installed from
there, the image by its digest, as users receive them. The local provider installs this way with
TAINTKEEPER_E2E_INSTALL=helm, and tests/helm_release/ always does.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from hack import cluster_registry, image, versions
from hack.deploy import build_image, cluster_nodes, kubectl, publish_image
from hack.registry import PushedImage
from tests.chart.helm import CHART
from tests.e2e.cluster import SYSTEM_NAMESPACE, VICTIM_LABEL

RELEASE = "taintkeeper"
CURRENT_VERSION = versions.project_version()  # the chart's appVersion too (tests/unit/hack/test_release.py)
# The next build: the same code under another package version, so the audit log's User-Agents tell the two apart.
NEXT_VERSION = f"{CURRENT_VERSION}+next"
CURRENT_TAG, NEXT_TAG = CURRENT_VERSION, NEXT_VERSION.replace("+", "_")  # an image tag has no '+'

RELEASE_NAMESPACE = SYSTEM_NAMESPACE  # the chart installs into the release's namespace, made by --create-namespace
# What docs/operating.md ("Installing with Helm") and the notes have an operator give a namespace Helm made:
# what manifests/base/namespace.yaml gives taintkeeper-system.
NAMESPACE_LABELS = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
    "taintkeeper.io/skip": "true",
    "app.kubernetes.io/part-of": "taintkeeper",
}
NAMESPACE_ANNOTATIONS = {"taintkeeper.io/eviction": "respect-disruption-budget"}

PLACEMENT: dict[str, Any] = {
    "tolerations": [
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"},
    ],
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": VICTIM_LABEL, "operator": "DoesNotExist"}]}]
        }
    },
}


def values(tag: str | None = None) -> dict[str, Any]:
    """The suite's values; the image's tag `tag`, or the chart's default: its appVersion, the version
    hack/image.py tags the image it builds with (tests/unit/hack/test_release.py keeps the two equal)."""
    return {
        "image": {"repository": "taintkeeper", **({"tag": tag} if tag else {}), "pullPolicy": "IfNotPresent"},
        "controller": {
            "flags": {"log-format": "json", "node-monitor-period": "2s", "node-monitor-grace-period": "20s"},
            **PLACEMENT,
        },
        "webhook": PLACEMENT,
    }


def next_build() -> image.BuiltImage:
    """The image of the next build (built if stale), tagged as Helm tags an OCI chart whose version has a '+'."""
    return image.ensure_image(f"{versions.IMAGE_NAME}:{NEXT_TAG}", version=NEXT_VERSION)


def write_values(directory: Path) -> Path:
    path = directory / "e2e-values.yaml"
    path.write_text(yaml.safe_dump(values(), sort_keys=False))
    return path


def helm_command(helm: Path, kubeconfig: Path, *args: str) -> list[str]:
    return [str(helm), *args, "--kubeconfig", str(kubeconfig), "--namespace", RELEASE_NAMESPACE]


def label_namespace(kubeconfig: Path) -> None:
    """Give the release's namespace, made by --create-namespace, taintkeeper's labels and annotation, with the
    commands the notes print."""
    run = [kubectl(), "--kubeconfig", str(kubeconfig)]
    for verb, pairs in (("label", NAMESPACE_LABELS), ("annotate", NAMESPACE_ANNOTATIONS)):
        subprocess.run(
            [*run, verb, "--overwrite", "namespace", RELEASE_NAMESPACE, *(f"{k}={v}" for k, v in pairs.items())],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )


def from_registry(directory: Path, helm: Path, pushed: PushedImage) -> list[str]:
    """What `helm install` takes to install the chart as users receive it: from DIR's registry (pushed there
    now), with the image pushed there pinned by its digest."""
    chart = cluster_registry.publish_chart(directory, helm, CHART)
    ca_file = cluster_registry.registry_directory(directory) / "certs" / "ca.crt"
    return [
        *(chart.reference, "--version", chart.version, "--ca-file", str(ca_file)),
        *("--set", f"image.repository={pushed.repository}", "--set", f"image.digest={pushed.digest}"),
    ]


def install(directory: Path, helm: Path) -> PushedImage:
    """Push the image and the chart to DIR's registry, then `helm upgrade --install --create-namespace --wait`
    the chart from there (a rerun on a kept cluster upgrades in place) and label its namespace as the notes say;
    the image as pushed."""
    cluster_nodes(directory)  # a running cluster, or one line saying there is none
    pushed = publish_image(directory, build_image())
    command = helm_command(
        helm,
        directory / "kubeconfig",
        "upgrade",
        "--install",
        "--create-namespace",
        RELEASE,
        *from_registry(directory, helm, pushed),
        "-f",
        str(write_values(directory)),
        "--wait",
        "--timeout",
        "10m",
    )
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    if result.returncode != 0:
        raise AssertionError(f"helm upgrade --install failed ({result.returncode}): {result.stderr[-3000:]}")
    label_namespace(directory / "kubeconfig")
    return pushed
