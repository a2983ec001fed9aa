"""The admission policy (manifests/admission-policy/policy.yaml) against the webhook, through one real
kube-apiserver (1.36+): every pod is created (dry run, admission in full) twice, in two namespaces alike
but for which of the two admits their pods, and the admitted pods must be equal field by field: the
webhook's acceptance table first, then thousands of random pods in random namespaces.

The shipped policy is applied as it is; only its binding is narrowed to this module's namespaces (a
label saying which admits them) and pointed at a parameter of this module's. The webhook runs as in
the other integration tests, registered with the shipped selectors and the same narrowing.
"""

from __future__ import annotations

import copy
import json
import os
import random
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from hack.servers import WebhookServer, make_certs
from shared.defaults import (
    MAX_TOLERATION_SECONDS,
    NOT_READY_SECONDS_ANNOTATION,
    SKIP_LABEL,
    UNREACHABLE_SECONDS_ANNOTATION,
)
from tests.integration.kube import LocalCluster, raw, wait_for
from tests.integration.test_webhook_e2e import CASES, pod
from tests.support.kubernetes_version import server_minor
from webhook.registration import mutating_webhook_configuration

POLICY_FILE = Path(__file__).resolve().parents[2] / "manifests" / "admission-policy" / "policy.yaml"
POLICY_FROM = 36  # MutatingAdmissionPolicy admissionregistration.k8s.io/v1: served and on by default
NR = "node.kubernetes.io/not-ready"
UR = "node.kubernetes.io/unreachable"
NOT_READY_SECONDS = 301  # the cluster defaults of both (the webhook's flags, the policy's parameter)
UNREACHABLE_SECONDS = 302
MODE = f"taintkeeper-admitted-by-{uuid.uuid4().hex[:6]}"  # namespace label: "webhook" or "policy"
SYSTEM_NAMESPACE = "taintkeeper-system"
FUZZ_PODS = int(os.environ.get("TAINTKEEPER_FUZZ_PODS", "3000"))
FUZZ_SEED = int(os.environ.get("TAINTKEEPER_FUZZ_SEED", "4848"))


def policy_documents() -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(POLICY_FILE.read_text()) if doc}


def narrowed(selector: dict[str, Any], mode: str) -> dict[str, Any]:
    expressions = [*selector.get("matchExpressions", []), {"key": MODE, "operator": "In", "values": [mode]}]
    return {**selector, "matchExpressions": expressions}


class Admitters:
    """Namespaces in pairs, one admitted by the webhook and one by the policy, and pods through both."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.core = client.CoreV1Api(cluster.api_client)

    def namespace(self, mode: str, annotations: dict[str, str] | None, labels: dict[str, str] | None) -> str:
        name = f"t-{mode[0]}-{uuid.uuid4().hex[:10]}"
        metadata: dict[str, Any] = {"name": name, "labels": {"taintkeeper-test": name, MODE: mode, **(labels or {})}}
        if annotations is not None:
            metadata["annotations"] = annotations
        raw(self.core.create_namespace, body={"metadata": metadata})
        return name

    def pair(self, annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> tuple[str, str]:
        return self.namespace("webhook", annotations, labels), self.namespace("policy", annotations, labels)

    def admitted(self, namespace: str, manifest: dict[str, Any]) -> tuple[int, Any]:
        """(201, the pod as admitted, less its namespace) or (the error status, its message)."""
        try:
            created = raw(self.core.create_namespaced_pod, namespace, body=copy.deepcopy(manifest), dry_run="All")
        except ApiException as error:
            return error.status, json.loads(error.body or "{}").get("message")
        metadata = created["metadata"]
        return 201, {
            "spec": created["spec"],
            "labels": metadata.get("labels"),
            "annotations": metadata.get("annotations"),
        }

    def both(self, pair: tuple[str, str], manifest: dict[str, Any]) -> tuple[tuple[int, Any], tuple[int, Any]]:
        return self.admitted(pair[0], manifest), self.admitted(pair[1], manifest)

    def wait_until_alike(self, pair: tuple[str, str]) -> None:
        """The apiserver picks a configuration up, and the webhook's cache a namespace, asynchronously;
        the policy reads the namespace as it is. A difference that stays is a failure (the timeout)."""
        probe = pod(f"probe-{uuid.uuid4().hex[:6]}", None)

        def alike() -> bool:
            by_webhook, by_policy = self.both(pair, probe)
            return by_webhook == by_policy

        wait_for(alike, timeout=30, what=f"{pair} admitted alike")


@pytest.fixture(scope="module")
def admitters(local_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Admitters]:
    minor = server_minor(local_cluster.api_client)
    if minor < POLICY_FROM:
        pytest.skip(
            f"MutatingAdmissionPolicy v1 is served from Kubernetes 1.{POLICY_FROM} on; this server is 1.{minor}"
        )
    directory = tmp_path_factory.mktemp("admission-policy")
    ca_bundle = make_certs(directory / "certs")
    server = WebhookServer(
        directory / "certs",
        directory / "webhook.log",
        kubeconfig=local_cluster.kubeconfig,
        extra_args=(
            "--default-not-ready-toleration-seconds",
            str(NOT_READY_SECONDS),
            "--default-unreachable-toleration-seconds",
            str(UNREACHABLE_SECONDS),
        ),
    )
    webhook_name = f"taintkeeper-compared-{uuid.uuid4().hex[:6]}"
    registration = mutating_webhook_configuration(
        ca_bundle,
        url=server.url,
        name=webhook_name,
        failure_policy="Fail",  # a broken webhook shows as refused pods, never as a silent difference
        namespace_selector={
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [SYSTEM_NAMESPACE]},
                {"key": MODE, "operator": "In", "values": ["webhook"]},
            ]
        },
    )
    documents = policy_documents()
    policy = documents["MutatingAdmissionPolicy"]
    binding = copy.deepcopy(documents["MutatingAdmissionPolicyBinding"])
    binding["metadata"]["name"] = f"taintkeeper-compared-{uuid.uuid4().hex[:6]}"
    parameters = Admitters(local_cluster).namespace("parameters", None, None)
    binding["spec"]["paramRef"]["namespace"] = parameters
    binding["spec"]["matchResources"] = {"namespaceSelector": narrowed({}, "policy")}
    parameter = copy.deepcopy(documents["ConfigMap"])
    parameter["metadata"]["namespace"] = parameters
    parameter["data"] = {
        "default-not-ready-toleration-seconds": str(NOT_READY_SECONDS),
        "default-unreachable-toleration-seconds": str(UNREACHABLE_SECONDS),
    }
    api = client.AdmissionregistrationV1Api(local_cluster.api_client)
    core = client.CoreV1Api(local_cluster.api_client)
    with server:
        raw(core.create_namespaced_config_map, parameters, body=parameter)
        raw(api.create_mutating_webhook_configuration, body=registration)
        raw(api.create_mutating_admission_policy, body=policy)
        raw(api.create_mutating_admission_policy_binding, body=binding)
        try:
            yield Admitters(local_cluster)
        finally:
            api.delete_mutating_admission_policy_binding(binding["metadata"]["name"])
            api.delete_mutating_admission_policy(policy["metadata"]["name"])
            api.delete_mutating_webhook_configuration(webhook_name)


def default(key: str, seconds: int) -> dict[str, Any]:
    return {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}


def tolerations_of(admitted: tuple[int, Any]) -> list[dict[str, Any]] | None:
    status, body = admitted
    assert status == 201, body
    return body["spec"].get("tolerations")


# -- the webhook's acceptance table, through both ----------------------------------------------------


@pytest.mark.parametrize(("tolerations", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_webhooks_table_admits_alike_through_the_policy(admitters: Admitters, tolerations, expected):
    pair = admitters.pair()
    admitters.wait_until_alike(pair)
    by_webhook, by_policy = admitters.both(pair, pod("p", tolerations))
    assert tolerations_of(by_webhook) == expected  # neither side is vacuous
    assert by_policy == by_webhook


NAMESPACE_ROWS = [
    ("a namespace annotated 30 and 45 gives its pods 30 and 45", {NR: "30", UR: "45"}, None, None, {NR: 30, UR: 45}),
    ("an invalid annotation gives the default", {NR: "soon", UR: "45"}, None, None, {NR: 301, UR: 45}),
    ("spaces around the digits are allowed", {UR: " 45 "}, None, None, {NR: 301, UR: 45}),
    ("a long zero-padded number is a number", {NR: "0" * 70 + "300"}, None, None, {NR: 300, UR: 302}),
    (
        "the largest number a patch carries exactly is kept",
        {NR: str(MAX_TOLERATION_SECONDS)},
        None,
        None,
        {NR: MAX_TOLERATION_SECONDS, UR: 302},
    ),
    ("one beyond it gives the default", {NR: str(MAX_TOLERATION_SECONDS + 1)}, None, None, {NR: 301, UR: 302}),
    ("the largest int64 gives the default", {UR: str(2**63 - 1)}, None, None, {NR: 301, UR: 302}),
    ("a pod labelled skip=true is left alone", None, None, {SKIP_LABEL: "true"}, None),
    ("a namespace labelled skip=true is left alone", None, {SKIP_LABEL: "true"}, None, None),
    ("skip=false is no opt-out", None, {SKIP_LABEL: "false"}, {SKIP_LABEL: "false"}, {NR: 301, UR: 302}),
]
ANNOTATION = {NR: NOT_READY_SECONDS_ANNOTATION, UR: UNREACHABLE_SECONDS_ANNOTATION}


@pytest.mark.parametrize(
    ("annotations", "namespace_labels", "pod_labels", "expected"),
    [r[1:] for r in NAMESPACE_ROWS],
    ids=[r[0] for r in NAMESPACE_ROWS],
)
def test_per_namespace_seconds_and_opting_out_alike(
    admitters: Admitters, annotations, namespace_labels, pod_labels, expected
):
    written = None if annotations is None else {ANNOTATION[key]: value for key, value in annotations.items()}
    pair = admitters.pair(written, namespace_labels)
    admitters.wait_until_alike(pair)
    manifest = pod("p", None)
    if pod_labels:
        manifest["metadata"]["labels"] = pod_labels
    by_webhook, by_policy = admitters.both(pair, manifest)
    tolerations = tolerations_of(by_webhook)
    assert (None if tolerations is None else {t["key"]: t["tolerationSeconds"] for t in tolerations}) == expected
    assert by_policy == by_webhook


def test_a_changed_annotation_is_picked_up_alike(admitters: Admitters):
    pair = admitters.pair({NOT_READY_SECONDS_ANNOTATION: "30"})
    admitters.wait_until_alike(pair)
    for namespace in pair:
        admitters.core.patch_namespace(
            namespace, body={"metadata": {"annotations": {NOT_READY_SECONDS_ANNOTATION: "60"}}}
        )
    admitters.wait_until_alike(pair)
    by_webhook, by_policy = admitters.both(pair, pod("p", None))
    assert tolerations_of(by_webhook) == [default(NR, 60), default(UR, UNREACHABLE_SECONDS)]
    assert by_policy == by_webhook


def test_a_pod_admitted_bare_gets_the_defaults_at_its_next_update_alike(admitters: Admitters):
    """Both mutate UPDATE too: tolerations may only be added to a pod, and a pod admitted while neither
    applied (here: its namespace not yet selected) gets them when it is next written."""
    updated = []
    for mode in ("webhook", "policy"):
        namespace = admitters.namespace("bare", None, None)
        raw(admitters.core.create_namespaced_pod, namespace, body=pod("u", None))
        admitters.core.patch_namespace(namespace, body={"metadata": {"labels": {MODE: mode}}})

        def mutated(ns: str = namespace) -> list[dict[str, Any]] | None:
            touched = {"metadata": {"labels": {"touched": "yes"}}}
            tolerations: list[dict[str, Any]] | None = raw(
                admitters.core.patch_namespaced_pod, "u", ns, body=touched, dry_run="All"
            )["spec"].get("tolerations")
            return tolerations

        wait_for(
            mutated,
            timeout=30,
            what=f"the {mode} to mutate the update",
        )
        patched = raw(
            admitters.core.patch_namespaced_pod, "u", namespace, body={"metadata": {"labels": {"touched": "yes"}}}
        )
        updated.append(patched["spec"]["tolerations"])
        admitters.core.delete_namespaced_pod("u", namespace, grace_period_seconds=0)
    assert updated[0] == updated[1] == [default(NR, NOT_READY_SECONDS), default(UR, UNREACHABLE_SECONDS)]


# -- random pods in random namespaces -------------------------------------------------------------------

ANNOTATION_VALUES = [
    "0", "30", " 45 ", "\t60\n", "007", "0" * 70 + "300", str(MAX_TOLERATION_SECONDS), str(MAX_TOLERATION_SECONDS + 1),
    str(2**63 - 1), str(2**64), "-5", "1.5", "1e3", "+5", "soon", "", " ", "\x1c45", "\u00a045", "\uff14\uff15",
    "²", "45s",
]  # fmt: skip
KEYS = [NR, UR, "", "example.com/other", "node.kubernetes.io/not-ready-x"]
EFFECTS = ["NoExecute", "NoSchedule", "PreferNoSchedule", None]


def random_annotations(rng: random.Random) -> dict[str, str] | None:
    annotations: dict[str, str] = {}
    for name in (NOT_READY_SECONDS_ANNOTATION, UNREACHABLE_SECONDS_ANNOTATION):
        roll = rng.random()
        if roll < 0.4:
            annotations[name] = rng.choice(ANNOTATION_VALUES)
        elif roll < 0.6:
            annotations[name] = str(rng.randrange(0, 10 ** rng.randrange(1, 17)))
    if rng.random() < 0.2:
        annotations["example.com/unrelated"] = "1"
    return annotations or None


def random_toleration(rng: random.Random) -> dict[str, Any]:
    """A toleration the API accepts: an empty key only with Exists, no value with Exists, seconds only
    with NoExecute."""
    key = rng.choice(KEYS)
    toleration: dict[str, Any] = {}
    if key or rng.random() < 0.5:
        toleration["key"] = key
    operator = "Exists" if not key else rng.choice(["Exists", "Equal", None])
    if operator is not None:
        toleration["operator"] = operator
    if operator != "Exists" and rng.random() < 0.7:
        toleration["value"] = rng.choice(["", "x"])
    effect = rng.choice(EFFECTS)
    if effect is not None:
        toleration["effect"] = effect
    if effect == "NoExecute" and rng.random() < 0.7:
        toleration["tolerationSeconds"] = rng.choice([0, 1, 300, 3600, -5, rng.randrange(0, 10**9)])
    return toleration


def random_pod(rng: random.Random, index: int) -> dict[str, Any]:
    manifest = pod(f"f-{index}", None)
    roll = rng.random()
    if roll < 0.15:
        manifest["spec"]["tolerations"] = None
    elif roll < 0.25:
        manifest["spec"]["tolerations"] = []
    elif roll < 0.85:
        manifest["spec"]["tolerations"] = [random_toleration(rng) for _ in range(rng.randrange(1, 5))]
    labels = rng.choice([None, None, {SKIP_LABEL: "true"}, {SKIP_LABEL: "false"}, {"app": "x"}])
    if labels:
        manifest["metadata"]["labels"] = labels
    return manifest


def test_random_pods_in_random_namespaces_are_admitted_alike(admitters: Admitters):
    rng = random.Random(FUZZ_SEED)
    namespaces = []
    for _ in range(40):
        labels = rng.choice([None, None, None, {SKIP_LABEL: "true"}, {SKIP_LABEL: "no"}])
        annotations = random_annotations(rng)
        namespaces.append((admitters.pair(annotations, labels), annotations, labels))
    for pair, _, _ in namespaces:
        admitters.wait_until_alike(pair)
    cases = [(rng.choice(namespaces), random_pod(rng, i)) for i in range(FUZZ_PODS)]

    def compare(case: tuple[tuple[tuple[str, str], Any, Any], dict[str, Any]]) -> tuple[bool, tuple[Any, ...]]:
        """(whether both admitted it alike, what to show if not); a pod either refuses counts as compared."""
        (pair, annotations, labels), manifest = case
        by_webhook, by_policy = admitters.both(pair, manifest)
        return by_webhook == by_policy, (annotations, labels, manifest, by_webhook, by_policy)

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(compare, cases))
    differences = [shown for alike, shown in outcomes if not alike]
    added = [
        len(tolerations_of(by_webhook) or []) - len(manifest["spec"].get("tolerations") or [])
        for alike, (_, _, manifest, by_webhook, _) in outcomes
        if alike and by_webhook[0] == 201
    ]
    print(
        f"{len(cases)} pods (seed {FUZZ_SEED}): {sum(1 for n in added if n)} given tolerations, "
        f"{sum(1 for n in added if not n)} left alone, {len(cases) - len(added)} refused or different"
    )
    assert not differences, (
        f"{len(differences)} of {len(cases)} pods admitted differently (seed {FUZZ_SEED}); the first:\n"
        + "\n".join(repr(d) for d in differences[:5])
    )
    # Not a comparison of two no-ops, nor of pods the API refuses: most are admitted, many of them changed.
    assert len(added) > len(cases) * 0.9 and sum(1 for n in added if n) > len(cases) * 0.3


# -- a parameter missing or malformed ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("broken_data", "why"),
    [
        (None, "the parameter is deleted: parameterNotFoundAction Deny hands it to the failure policy"),
        ({"default-not-ready-toleration-seconds": "soon"}, "the parameter is malformed (written past its guard)"),
    ],
    ids=["missing", "malformed"],
)
def test_a_parameter_it_cannot_read_leaves_pods_unchanged_never_refused(
    admitters: Admitters, local_cluster: LocalCluster, broken_data: dict[str, str] | None, why: str
):
    """failurePolicy Ignore, as the webhook's: pod creation never waits on taintkeeper's configuration;
    the controller's backfill gives such pods their tolerations (tests/integration/test_backfill.py)."""
    api = client.AdmissionregistrationV1Api(local_cluster.api_client)
    mode = f"broken-{uuid.uuid4().hex[:6]}"
    parameters = admitters.namespace("parameters", None, None)
    good = {"default-not-ready-toleration-seconds": "30", "default-unreachable-toleration-seconds": "45"}
    body = {"metadata": {"name": "taintkeeper-defaults"}, "data": good}
    raw(admitters.core.create_namespaced_config_map, parameters, body=body)
    binding = copy.deepcopy(policy_documents()["MutatingAdmissionPolicyBinding"])
    binding["metadata"]["name"] = f"taintkeeper-{mode}"
    binding["spec"]["paramRef"]["namespace"] = parameters
    binding["spec"]["matchResources"] = {"namespaceSelector": narrowed({}, mode)}
    raw(api.create_mutating_admission_policy_binding, body=binding)
    try:
        namespace = admitters.namespace(mode, None, None)
        seen: list[tuple[int, Any]] = []

        def tolerations() -> list[dict[str, Any]] | None:
            seen.append(admitters.admitted(namespace, pod("p", None)))
            return tolerations_of(seen[-1])

        wait_for(tolerations, 30, "the binding to apply its parameter")  # it is in force
        if broken_data is None:
            admitters.core.delete_namespaced_config_map("taintkeeper-defaults", parameters)
        else:
            broken = {**body, "data": broken_data}
            raw(admitters.core.replace_namespaced_config_map, "taintkeeper-defaults", parameters, body=broken)
        wait_for(lambda: tolerations() is None, 30, f"pods admitted unchanged: {why}")
        assert all(status == 201 for status, _ in seen), seen  # never refused, before, during or after
    finally:
        api.delete_mutating_admission_policy_binding(binding["metadata"]["name"])


@pytest.fixture
def parameter_guard(admitters: Admitters, local_cluster: LocalCluster) -> Iterator[None]:
    """The shipped ValidatingAdmissionPolicy, over the shipped parameter's namespace."""
    documents = policy_documents()
    api = client.AdmissionregistrationV1Api(local_cluster.api_client)
    try:
        raw(admitters.core.create_namespace, body={"metadata": {"name": SYSTEM_NAMESPACE}})
    except ApiException as error:
        assert error.status == 409, error  # there already (test_manifests.py applies it)
    raw(api.create_validating_admission_policy, body=documents["ValidatingAdmissionPolicy"])
    raw(api.create_validating_admission_policy_binding, body=documents["ValidatingAdmissionPolicyBinding"])
    try:
        yield
    finally:
        api.delete_validating_admission_policy_binding(
            documents["ValidatingAdmissionPolicyBinding"]["metadata"]["name"]
        )
        api.delete_validating_admission_policy(documents["ValidatingAdmissionPolicy"]["metadata"]["name"])


GOOD = {"default-not-ready-toleration-seconds": "30", "default-unreachable-toleration-seconds": "9007199254740991"}
BAD_PARAMETERS = [
    ("a word", {**GOOD, "default-not-ready-toleration-seconds": "soon"}),
    ("a negative number", {**GOOD, "default-unreachable-toleration-seconds": "-1"}),
    ("more than a patch carries exactly", {**GOOD, "default-unreachable-toleration-seconds": "9007199254740992"}),
    ("spaces", {**GOOD, "default-not-ready-toleration-seconds": " 30"}),
    ("a key missing", {"default-not-ready-toleration-seconds": "30"}),
    ("no data", None),
]


@pytest.mark.parametrize("data", [b[1] for b in BAD_PARAMETERS], ids=[b[0] for b in BAD_PARAMETERS])
def test_a_malformed_parameter_is_refused_with_what_it_needs(admitters: Admitters, parameter_guard: None, data):
    body: dict[str, Any] = {"metadata": {"name": "taintkeeper-defaults"}}
    if data is not None:
        body["data"] = data

    def refused() -> str:
        try:
            raw(admitters.core.create_namespaced_config_map, SYSTEM_NAMESPACE, body=body, dry_run="All")
        except ApiException as error:
            return str(json.loads(error.body or "{}").get("message")) if error.status == 422 else ""
        return ""

    message = wait_for(refused, timeout=30, what="the guard to refuse the parameter")
    assert "whole number of seconds from 0 to 9007199254740991" in message, message
    created = raw(
        admitters.core.create_namespaced_config_map,
        SYSTEM_NAMESPACE,
        body={"metadata": {"name": "taintkeeper-defaults"}, "data": GOOD},
        dry_run="All",
    )
    assert created["data"] == GOOD
