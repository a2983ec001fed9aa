"""The toleration backfill against a real kube-apiserver.

No webhook is registered and the local apiserver runs without DefaultTolerationSeconds, so pods
are created without the default tolerations: exactly the state a webhook outage (failurePolicy
Ignore) leaves behind. The controller must append what each pod misses, and nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from controller.backfill.decision import event_message
from hack.servers import ControllerProcess
from tests.integration.kube import LocalCluster, raw, wait_for

NR = "node.kubernetes.io/not-ready"
UR = "node.kubernetes.io/unreachable"
NR_ANNOTATION = "taintkeeper.io/not-ready-toleration-seconds"
UR_ANNOTATION = "taintkeeper.io/unreachable-toleration-seconds"
CLUSTER_SECONDS = ("--default-not-ready-toleration-seconds=120", "--default-unreachable-toleration-seconds=180")
GPU = {"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def default(key: str, seconds: int) -> dict:
    return {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}


class World:
    def __init__(self, cluster: LocalCluster, namespace: str, tmp_path: Path) -> None:
        self.cluster = cluster
        self.core = client.CoreV1Api(cluster.api_client)
        self.namespace = namespace
        self.tmp_path = tmp_path
        self.namespaces = [namespace]
        self.controllers: list[ControllerProcess] = []
        # Other seconds (and one invalid value), an excluded namespace, and one that opts out.
        self.annotated = self.add_namespace("slow", annotations={NR_ANNOTATION: "60", UR_ANNOTATION: "soon"})
        self.excluded = self.add_namespace("excluded")
        self.opted_out = self.add_namespace("optout", labels={"taintkeeper.io/skip": "true"})

    def add_namespace(self, suffix: str, labels: dict | None = None, annotations: dict | None = None) -> str:
        name = f"{self.namespace}-{suffix}"
        self.core.create_namespace(
            body=client.V1Namespace.model_validate(
                {"metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}}}
            )
        )
        self.namespaces.append(name)
        return name

    def pod(
        self, name: str, namespace: str | None = None, tolerations: list | None = None, labels: dict | None = None
    ) -> None:
        spec: dict = {"containers": [{"name": "c", "image": "busybox"}]}
        if tolerations is not None:
            spec["tolerations"] = tolerations
        body = {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}
        created = raw(self.core.create_namespaced_pod, namespace or self.namespace, body=body)
        assert not created["spec"].get("tolerations") or tolerations, "the apiserver added tolerations itself"

    def tolerations(self, name: str, namespace: str | None = None) -> list[dict]:
        return raw(self.core.read_namespaced_pod, name, namespace or self.namespace)["spec"].get("tolerations") or []

    def events(self, name: str, namespace: str | None = None) -> list[dict]:
        listed = raw(
            self.core.list_namespaced_event, namespace or self.namespace, field_selector=f"involvedObject.name={name}"
        )
        return listed["items"]

    def controller(self, *args: str) -> ControllerProcess:
        log = self.tmp_path / f"controller-{len(self.controllers)}.log"
        process = ControllerProcess(
            self.cluster.kubeconfig,
            log,
            "--leader-elect=false",
            "--controllers=*",
            f"--backfill-excluded-namespaces={self.excluded}",
            *CLUSTER_SECONDS,
            *args,
        )
        self.controllers.append(process)
        return process.start()

    def close(self) -> None:
        for process in self.controllers:
            process.kill()
        for namespace in self.namespaces[1:]:  # the `namespace` fixture cleans its own
            self.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)


@pytest.fixture
def world(local_cluster: LocalCluster, namespace: str, tmp_path: Path) -> Iterator[World]:
    scenario = World(local_cluster, namespace, tmp_path)
    yield scenario
    scenario.close()


def create_outage_pods(world: World) -> None:
    world.pod("bare")
    world.pod("has-not-ready", tolerations=[GPU, default(NR, 30)])
    world.pod("has-both", tolerations=[default(UR, 6), GPU, default(NR, 5)])
    world.pod("tolerates-all", tolerations=[{"operator": "Exists"}])
    world.pod("skipped", labels={"taintkeeper.io/skip": "true"})
    world.pod("annotated", namespace=world.annotated)
    world.pod("excluded", namespace=world.excluded)
    world.pod("opted-out", namespace=world.opted_out)


UNCHANGED = {
    "has-both": [default(UR, 6), GPU, default(NR, 5)],
    "tolerates-all": [{"operator": "Exists"}],
    "skipped": [],
}


def test_pods_admitted_without_the_webhook_get_exactly_the_missing_defaults(world: World):
    create_outage_pods(world)
    controller = world.controller()

    expected_bare = [default(NR, 120), default(UR, 180)]
    wait_for(lambda: world.tolerations("bare") == expected_bare, 20, "bare pod backfilled")
    wait_for(
        lambda: world.tolerations("has-not-ready") == [GPU, default(NR, 30), default(UR, 180)],
        20,
        "the missing unreachable toleration appended after the existing ones",
    )
    # The namespace's valid annotation wins; its invalid one falls back to the cluster value.
    wait_for(
        lambda: world.tolerations("annotated", world.annotated) == [default(NR, 60), default(UR, 180)],
        20,
        "pod in the annotated namespace backfilled",
    )

    # A pod created while the controller runs is handled from its watch event.
    world.pod("late")
    wait_for(lambda: world.tolerations("late") == expected_bare, 20, "pod created later backfilled")

    event = wait_for(
        lambda: [e for e in world.events("bare") if e["reason"] == "DefaultTolerationsAdded"], 10, "the backfill event"
    )[0]
    assert event["type"] == "Normal"
    assert event["source"]["component"] == "taintkeeper-backfill"
    assert event["message"] == event_message(expected_bare)
    assert event["involvedObject"]["kind"] == "Pod"
    warning = wait_for(
        lambda: [e for e in world.events("annotated", world.annotated) if e["type"] == "Warning"],
        10,
        "the invalid-annotation warning",
    )[0]
    assert warning["reason"] == "InvalidTolerationSecondsAnnotation"
    assert "soon" in warning["message"]
    assert controller.metric("taintkeeper_backfilled_pods_total") >= 4

    time.sleep(2)  # give a wrong write to the others time to show
    for name, tolerations in UNCHANGED.items():
        assert world.tolerations(name) == tolerations, name
        assert not [e for e in world.events(name) if e["reason"] == "DefaultTolerationsAdded"], name
    assert world.tolerations("excluded", world.excluded) == []
    assert world.tolerations("opted-out", world.opted_out) == []
    assert world.tolerations("bare") == expected_bare  # written once, never appended twice
    assert controller.metric("taintkeeper_backfill_failures_total") == 0
    assert "Traceback" not in controller.log_text()


def test_backfill_off_changes_nothing(world: World):
    create_outage_pods(world)
    controller = world.controller("--backfill-default-tolerations=false")
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        assert world.tolerations("bare") == []
        assert world.tolerations("has-not-ready") == [GPU, default(NR, 30)]
        assert world.tolerations("annotated", world.annotated) == []
        time.sleep(0.3)
    assert not [e for e in world.events("bare") if e["reason"] == "DefaultTolerationsAdded"]
    assert controller.metric("taintkeeper_backfilled_pods_total") == 0


def test_the_backfill_rate_bounds_the_writes(world: World):
    count, rate = 12, 4.0
    for i in range(count):
        world.pod(f"p{i}")
    world.controller(f"--backfill-rate={rate:g}")
    started = time.monotonic()  # the controller is ready: it acts from now on
    wait_for(lambda: all(world.tolerations(f"p{i}") for i in range(count)), 30, "every pod backfilled")
    assert time.monotonic() - started >= (count - 1) / rate - 0.5
