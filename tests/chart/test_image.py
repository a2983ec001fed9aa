"""Every container the chart makes runs taintkeeper's one image: by tag (the chart's appVersion unless
`image.tag` is given) or, with `image.digest`, by digest, as a release pulled from a registry is pinned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.chart.helm import APP_VERSION, render

DIGEST = "sha256:" + "0123456789abcdef" * 4

# What renders a container of taintkeeper's: the two Deployments, the certificate Job and its CronJob, the
# uninstall hook, the `helm test` pod.
WORKLOADS = ("Deployment", "Job", "CronJob", "Pod")


def images(docs: list[dict[str, Any]]) -> dict[str, str]:
    """Each workload (KIND/NAME) -> its containers' images, one distinct image each."""
    found: dict[str, str] = {}
    for doc in docs:
        if doc["kind"] not in WORKLOADS:
            continue
        spec = doc["spec"]
        pod = (
            spec
            if doc["kind"] == "Pod"
            else (spec["jobTemplate"]["spec"] if doc["kind"] == "CronJob" else spec)["template"]["spec"]
        )
        (image,) = {c["image"] for c in [*pod.get("initContainers", []), *pod["containers"]]}
        found[f"{doc['kind']}/{doc['metadata']['name']}"] = image
    return found


CASES = [
    ("by default: the chart's appVersion as the tag", (), f"taintkeeper:{APP_VERSION}"),
    (
        "a repository and tag given",
        ("--set", "image.repository=registry.example.com/tk", "--set", "image.tag=1.2.3"),
        "registry.example.com/tk:1.2.3",
    ),
    (
        "a digest given: pulled by digest, the tag left out",
        ("--set", "image.repository=127.0.0.1:5000/taintkeeper", "--set", f"image.digest={DIGEST}"),
        f"127.0.0.1:5000/taintkeeper@{DIGEST}",
    ),
    (
        "a digest and a tag given: the digest alone decides",
        ("--set", "image.tag=9.9.9", "--set", f"image.digest={DIGEST}"),
        f"taintkeeper@{DIGEST}",
    ),
]


@pytest.mark.parametrize(("args", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_container_runs_the_one_image(helm: Path, args: tuple[str, ...], expected: str):
    rendered = images(render(helm, *args, "--set", "controller.replicas=2"))
    assert {"Deployment/taintkeeper-controller", "Deployment/taintkeeper-webhook"} <= rendered.keys(), rendered
    assert any(kind.startswith("Job/") for kind in rendered) and any(k.startswith("Pod/") for k in rendered)
    assert set(rendered.values()) == {expected}, rendered
