"""--replace-builtin-defaults: on managed clusters the built-in DefaultTolerationSeconds plugin runs
before every webhook, so the webhook gives the plugin's exact tolerations taintkeeper's seconds."""

import base64
import copy
import json
import logging

import jsonpatch
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.defaults import DefaultSeconds, builtin_default_replacements, is_builtin_default
from webhook.admission import PATCHED, REPLACED, SKIPPED, UNCHANGED, NamespaceDefaults, review_pod
from webhook.app import create_app
from webhook.settings import WebhookSettings

from .test_app import METRICS_OPEN

NR = "node.kubernetes.io/not-ready"
UR = "node.kubernetes.io/unreachable"
CLUSTER_NR, CLUSTER_UR = 60, 30
UID = "705ab4f5-6393-11e8-b7cc-42010a800002"


def builtin(key, seconds=300):
    """What the built-in plugin adds (and a pod author may have written too)."""
    return {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}


def review(tolerations, operation="CREATE", labels=None):
    pod = {"metadata": {"name": "web-0", "labels": labels or {}}, "spec": {"containers": []}}
    if tolerations is not None:
        pod["spec"]["tolerations"] = tolerations
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": UID,
            "operation": operation,
            "namespace": "team-a",
            "name": "web-0",
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "object": pod,
        },
    }


def namespace(not_ready, unreachable, warnings=()):
    facts = NamespaceDefaults(DefaultSeconds(not_ready, unreachable), tuple(warnings))
    return lambda _namespace: facts


def no_namespace(_namespace):
    return None


def decide(tolerations, operation="CREATE", lookup=no_namespace, builtin_seconds=300, labels=None):
    """The verdict and the tolerations after its patch (if any) is applied to the pod."""
    body = review(copy.deepcopy(tolerations), operation, labels)
    verdict = review_pod(
        body, CLUSTER_NR, CLUSTER_UR, namespace_defaults=lookup, replace_builtin_seconds=builtin_seconds
    )
    pod = body["request"]["object"]
    response = verdict.response["response"]
    if "patch" in response:
        pod = jsonpatch.apply_patch(pod, json.loads(base64.b64decode(response["patch"])))
    return verdict, pod["spec"].get("tolerations")


UNRELATED = {"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
WARNING = "namespace annotation taintkeeper.io/not-ready-toleration-seconds='soon' is not a whole number"
CASES = [
    (
        "both built-in defaults get the cluster seconds",
        {},
        [builtin(NR), builtin(UR)],
        REPLACED,
        [builtin(NR, 60), builtin(UR, 30)],
        [NR, UR],
        [],
    ),
    (
        "both built-in defaults get the namespace's seconds",
        {"lookup": namespace(10, 20)},
        [builtin(NR), builtin(UR)],
        REPLACED,
        [builtin(NR, 10), builtin(UR, 20)],
        [NR, UR],
        [],
    ),
    (
        "a built-in default that already has our seconds is left alone",
        {"lookup": namespace(300, 20)},
        [builtin(NR), builtin(UR)],
        REPLACED,
        [builtin(NR), builtin(UR, 20)],
        [UR],
        [],
    ),
    (
        "when our seconds are the built-in's there is no patch",
        {"lookup": namespace(300, 300)},
        [builtin(NR), builtin(UR)],
        UNCHANGED,
        [builtin(NR), builtin(UR)],
        [],
        [],
    ),
    (
        "other seconds are the author's and stay",
        {},
        [builtin(NR, 299), builtin(UR, 301)],
        UNCHANGED,
        [builtin(NR, 299), builtin(UR, 301)],
        [],
        [],
    ),
    (
        "no seconds (forever) stays",
        {},
        [{**builtin(NR), "tolerationSeconds": None}, builtin(UR)],
        REPLACED,
        [{**builtin(NR), "tolerationSeconds": None}, builtin(UR, 30)],
        [UR],
        [],
    ),
    (
        "operator Equal is not the built-in's and stays",
        {},
        [{**builtin(NR), "operator": "Equal"}, builtin(UR)],
        REPLACED,
        [{**builtin(NR), "operator": "Equal"}, builtin(UR, 30)],
        [UR],
        [],
    ),
    (
        "an empty effect is not the built-in's and stays",
        {},
        [{"key": NR, "operator": "Exists", "tolerationSeconds": 300}, builtin(UR)],
        REPLACED,
        [{"key": NR, "operator": "Exists", "tolerationSeconds": 300}, builtin(UR, 30)],
        [UR],
        [],
    ),
    (
        "a value is not the built-in's and stays",
        {},
        [{**builtin(NR), "value": "x"}, builtin(UR)],
        REPLACED,
        [{**builtin(NR), "value": "x"}, builtin(UR, 30)],
        [UR],
        [],
    ),
    (
        "another key with 300 s stays and the defaults are added",
        {},
        [builtin("example.com/flaky")],
        PATCHED,
        [builtin("example.com/flaky"), builtin(NR, 60), builtin(UR, 30)],
        [],
        [],
    ),
    (
        "300.0 is not the integer the plugin writes and stays",
        {},
        [builtin(NR, 300.0), builtin(UR, 300.0)],
        UNCHANGED,
        [builtin(NR, 300.0), builtin(UR, 300.0)],
        [],
        [],
    ),
    (
        "--builtin-default-seconds names the plugin's seconds",
        {"builtin_seconds": 120},
        [builtin(NR, 120), builtin(UR)],
        REPLACED,
        [builtin(NR, 60), builtin(UR)],
        [NR],
        [],
    ),
    (
        "a missing default is still added beside a replacement",
        {},
        [builtin(NR)],
        REPLACED,
        [builtin(NR, 60), builtin(UR, 30)],
        [NR],
        [],
    ),
    (
        "order and other tolerations are kept",
        {},
        [UNRELATED, builtin(UR), builtin(NR)],
        REPLACED,
        [UNRELATED, builtin(UR, 30), builtin(NR, 60)],
        [UR, NR],
        [],
    ),
    (
        "on UPDATE existing tolerations are never changed",
        {"operation": "UPDATE"},
        [builtin(NR), builtin(UR)],
        UNCHANGED,
        [builtin(NR), builtin(UR)],
        [],
        [],
    ),
    (
        "off (the default), built-in defaults stay",
        {"builtin_seconds": None},
        [builtin(NR), builtin(UR)],
        UNCHANGED,
        [builtin(NR), builtin(UR)],
        [],
        [],
    ),
    (
        "a pod labelled skip=true is skipped",
        {"labels": {"taintkeeper.io/skip": "true"}},
        [builtin(NR), builtin(UR)],
        SKIPPED,
        [builtin(NR), builtin(UR)],
        [],
        [],
    ),
    (
        "an ignored annotation's warning comes with a replacement",
        {"lookup": namespace(CLUSTER_NR, 20, [WARNING])},
        [builtin(NR), builtin(UR)],
        REPLACED,
        [builtin(NR, 60), builtin(UR, 20)],
        [NR, UR],
        [WARNING],
    ),
]


@pytest.mark.parametrize(
    ("options", "tolerations", "outcome", "after", "replaced", "warnings"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_builtin_defaults_are_replaced(options, tolerations, outcome, after, replaced, warnings):
    verdict, result = decide(tolerations, **options)
    assert verdict.outcome == outcome
    assert result == after
    assert verdict.replaced == replaced
    assert verdict.warnings == warnings
    if outcome in (UNCHANGED, SKIPPED):
        assert verdict.response["response"] == {"uid": UID, "allowed": True}


def test_the_patch_tests_then_replaces_only_the_seconds():
    verdict = review_pod(
        review([UNRELATED, builtin(NR), builtin(UR)]), CLUSTER_NR, CLUSTER_UR, replace_builtin_seconds=300
    )
    patch = json.loads(base64.b64decode(verdict.response["response"]["patch"]))
    assert patch == [
        {"op": "test", "path": "/spec/tolerations/1/tolerationSeconds", "value": 300},
        {"op": "replace", "path": "/spec/tolerations/1/tolerationSeconds", "value": 60},
        {"op": "test", "path": "/spec/tolerations/2/tolerationSeconds", "value": 300},
        {"op": "replace", "path": "/spec/tolerations/2/tolerationSeconds", "value": 30},
    ]
    moved = {"spec": {"tolerations": [builtin(NR), UNRELATED, builtin(UR)]}}
    with pytest.raises(jsonpatch.JsonPatchTestFailed):  # applied to another list, it fails instead of harming it
        jsonpatch.apply_patch(moved, patch)


def test_a_replaced_pod_is_left_alone_when_the_webhook_is_invoked_again():
    _, once = decide([builtin(NR), builtin(UR)])
    verdict, twice = decide(once)
    assert verdict.outcome == UNCHANGED and twice == once


def test_only_exact_builtin_defaults_are_recognised():
    assert is_builtin_default(builtin(NR)) and is_builtin_default(builtin(UR))
    assert is_builtin_default(builtin(NR, 120), 120) and not is_builtin_default(builtin(NR), 120)
    assert not is_builtin_default(builtin(NR, True), 1)  # a JSON true is no number of seconds
    assert not is_builtin_default({"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
    assert builtin_default_replacements([], DefaultSeconds(1, 2)) == []


toleration_st = st.fixed_dictionaries(
    {},
    optional={
        "key": st.sampled_from(["", NR, UR, "other"]),
        "operator": st.sampled_from(["Exists", "Equal"]),
        "value": st.sampled_from(["", "x"]),
        "effect": st.sampled_from(["", "NoExecute", "NoSchedule"]),
        "tolerationSeconds": st.sampled_from([0, 299, 300, 301]),
    },
)


@given(st.lists(toleration_st, max_size=5))
def test_only_builtin_seconds_change_and_nothing_moves(tolerations):
    verdict, result = decide(tolerations)
    for before, after in zip(tolerations, result, strict=False):
        if before != after:
            assert is_builtin_default(before)
            assert after == {**before, "tolerationSeconds": CLUSTER_NR if before["key"] == NR else CLUSTER_UR}
    assert len(result) >= len(tolerations)
    assert verdict.outcome in (REPLACED, PATCHED, UNCHANGED)


# -- over HTTP: the outcome, the metrics and the log line ------------------------------------------------


def metric_value(client, name, labels):
    response = client.get("/metrics")
    assert response.status_code == 200, response.data
    for line in response.data.decode().splitlines():
        if line.startswith(f"{name}{labels} "):
            return float(line.split()[-1])
    return 0.0


def replacing_client(**settings):
    return create_app(
        WebhookSettings(
            not_ready_seconds=CLUSTER_NR,
            unreachable_seconds=CLUSTER_UR,
            replace_builtin_defaults=True,
            auth=METRICS_OPEN,
            **settings,
        )
    ).test_client()


def test_replaced_reviews_are_counted_under_their_own_outcome_and_logged(caplog, fast_paths):
    caplog.set_level(logging.INFO, logger="taintkeeper.webhook")
    client = replacing_client(fast_paths=fast_paths)
    reviews = ("taintkeeper_webhook_admission_reviews_total", '{outcome="replaced"}')
    replaced_nr = ("taintkeeper_webhook_tolerations_replaced_total", f'{{key="{NR}"}}')
    before, before_nr = metric_value(client, *reviews), metric_value(client, *replaced_nr)
    body = client.post("/mutate", json=review([builtin(NR)])).get_json()
    assert body["response"]["patchType"] == "JSONPatch"
    assert metric_value(client, *reviews) == before + 1
    assert metric_value(client, *replaced_nr) == before_nr + 1
    (record,) = [r for r in caplog.records if r.name == "taintkeeper.webhook"]
    assert record.getMessage() == (
        f"replaced the built-in default tolerationSeconds of {NR}; added default tolerations {UR}"
    )
    assert (record.uid, record.namespace, record.pod) == (UID, "team-a", "web-0")


def test_the_builtin_seconds_setting_reaches_the_review():
    client = replacing_client(builtin_default_seconds=120)
    body = client.post("/mutate", json=review([builtin(NR, 120), builtin(UR)])).get_json()
    patch = json.loads(base64.b64decode(body["response"]["patch"]))
    assert [op["path"] for op in patch] == ["/spec/tolerations/0/tolerationSeconds"] * 2


def test_without_the_setting_the_builtin_defaults_are_kept():
    client = create_app(WebhookSettings()).test_client()
    body = client.post("/mutate", json=review([builtin(NR), builtin(UR)])).get_json()
    assert body["response"] == {"uid": UID, "allowed": True}
