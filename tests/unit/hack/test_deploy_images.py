"""hack/deploy.py deploys the image it built, under its tag (the version): side-loaded into each node's
containerd or pushed to the cluster's registry. A pod that asks for another tag would run other code or wait in
ErrImagePull, so the deploy stops first, naming what was asked for; the registry's kustomization pins the
pushed image by digest in every pod template."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from hack import deploy, image
from hack.registry import PushedImage

ROOT = Path(__file__).resolve().parents[3]
BUILT = "docker.io/library/taintkeeper:1.2.3"  # as `ctr images import` names the archive


def deployment(*images: str) -> dict[str, Any]:
    containers = [{"name": f"c{index}", "image": name} for index, name in enumerate(images)]
    return {"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": {"containers": containers}}}}


def cronjob(image_name: str) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "c", "image": image_name}]}}
    return {"kind": "CronJob", "metadata": {"name": "j"}, "spec": {"jobTemplate": {"spec": {"template": template}}}}


class Case(NamedTuple):
    name: str
    objects: list[dict[str, Any]]
    refused: str | None  # what the DeployError names, None: deployed


CASES = [
    Case(
        "the built tag, as the manifests name it", [deployment("taintkeeper:1.2.3"), cronjob("taintkeeper:1.2.3")], None
    ),
    Case("the built tag, named in full", [deployment("docker.io/library/taintkeeper:1.2.3")], None),
    Case("another image beside it is not taintkeeper's", [deployment("taintkeeper:1.2.3", "busybox:1.36")], None),
    Case("another tag", [deployment("taintkeeper:dev")], "taintkeeper:dev"),
    Case("another tag in a CronJob only", [deployment("taintkeeper:1.2.3"), cronjob("taintkeeper:1.2.2")], "1.2.2"),
    Case("no tag: latest", [deployment("taintkeeper")], "taintkeeper"),
    Case("from a registry", [deployment("registry.example.com/taintkeeper:1.2.3")], "registry.example.com"),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_pods_must_ask_for_the_image_built(case: Case):
    if case.refused is None:
        deploy.check_images(case.objects, BUILT)
        return
    with pytest.raises(deploy.DeployError, match="the image built is") as raised:
        deploy.check_images(case.objects, BUILT)
    assert case.refused in str(raised.value)


@pytest.mark.parametrize(
    "overlay",
    [
        "manifests",
        "manifests/kube-1.20",
        "manifests/admission-policy",
        "tests/e2e/overlay/local",
        "tests/e2e/overlay/local-1.20",
        "tests/e2e/overlay/kind",
        "hack/demo-overlay",
        "hack/demo-overlay/kube-1.20",
    ],
)
def test_every_overlay_asks_for_the_image_the_builder_names(overlay: str):
    """What hack/image.py builds by default (the version's tag) is what each overlay deployed here installs."""
    deploy.check_images(deploy.render(ROOT / overlay), f"docker.io/library/{image.DEFAULT_TAG}")


PUSHED = PushedImage(
    "127.0.0.1:5000/taintkeeper@sha256:" + "a" * 64, "127.0.0.1:5000/taintkeeper:1.2.3", "sha256:" + "a" * 64
)


@pytest.mark.parametrize(
    "overlay", ["manifests", "manifests/kube-1.20", "manifests/admission-policy", "tests/e2e/overlay/kind"]
)
def test_the_registry_kustomization_pins_every_taintkeeper_container_to_the_pushed_digest(overlay: str, tmp_path: Path):
    pinned = deploy.render(deploy.pinned_overlay(tmp_path, ROOT / overlay, PUSHED))
    plain = deploy.render(ROOT / overlay)
    asked = [
        container["image"]
        for obj in pinned
        for template in deploy.pod_templates(obj)
        for container in template["spec"]["containers"]
    ]
    assert asked and set(asked) == {PUSHED.reference}
    # Nothing else changed: the pinned render is the plain one with the built tag's reference replaced.
    assert yaml.safe_dump(pinned).replace(PUSHED.reference, image.DEFAULT_TAG) == yaml.safe_dump(plain)
