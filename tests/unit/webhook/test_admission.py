"""webhook.admission: the AdmissionReview decision, without HTTP."""

import base64
import copy
import json

import jsonpatch
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.defaults import DefaultSeconds, missing_default_tolerations
from webhook import admission, codec
from webhook.admission import PATCHED, SKIPPED, UNCHANGED, MalformedReview, NamespaceDefaults, review_pod

NR = "node.kubernetes.io/not-ready"
UR = "node.kubernetes.io/unreachable"


def default(key, seconds=300):
    return {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}


def review(
    spec=None,
    operation="CREATE",
    resource="pods",
    group="",
    sub_resource=None,
    api_version="admission.k8s.io/v1",
    pod=None,
):
    request = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": group, "version": "v1", "resource": resource},
        "namespace": "team-a",
        "name": "web-0",
        "operation": operation,
        "object": pod
        if pod is not None
        else {
            "metadata": {"name": "web-0", "namespace": "team-a"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **(spec or {})},
        },
    }
    if sub_resource:
        request["subResource"] = sub_resource
    return {"apiVersion": api_version, "kind": "AdmissionReview", "request": request}


def patched_spec(body):
    """Apply the verdict's patch to the reviewed pod and return the resulting spec."""
    verdict = review_pod(body, 300, 300)
    response = verdict.response["response"]
    pod = copy.deepcopy(body["request"]["object"])
    if "patch" not in response:
        return verdict, pod["spec"]
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    return verdict, jsonpatch.apply_patch(pod, patch)["spec"]


UNRELATED = {"key": "foo", "operator": "Equal", "value": "bar", "effect": "NoSchedule", "tolerationSeconds": 700}
MUTATION_CASES = [
    ("a pod with no tolerations field gets both defaults", {}, [default(NR), default(UR)]),
    ("tolerations: null is replaced by the defaults", {"tolerations": None}, [default(NR), default(UR)]),
    ("an empty list gets both defaults", {"tolerations": []}, [default(NR), default(UR)]),
    ("an unrelated toleration stays first", {"tolerations": [UNRELATED]}, [UNRELATED, default(NR), default(UR)]),
    (
        "an existing not-ready toleration keeps its 700 s",
        {"tolerations": [default(NR, 700)]},
        [default(NR, 700), default(UR)],
    ),
    (
        "an existing unreachable toleration keeps its 700 s",
        {"tolerations": [default(UR, 700)]},
        [default(UR, 700), default(NR)],
    ),
    (
        "both present means no change",
        {"tolerations": [default(NR, 700), default(UR, 700)]},
        [default(NR, 700), default(UR, 700)],
    ),
    (
        "an empty-effect unreachable toleration counts",
        {"tolerations": [{"key": UR, "operator": "Exists"}]},
        [{"key": UR, "operator": "Exists"}, default(NR)],
    ),
    ("the Exists wildcard means no change", {"tolerations": [{"operator": "Exists"}]}, [{"operator": "Exists"}]),
]


@pytest.mark.parametrize(("spec", "tolerations"), [c[1:] for c in MUTATION_CASES], ids=[c[0] for c in MUTATION_CASES])
def test_pod_tolerations_after_admission(spec, tolerations):
    verdict, result = patched_spec(review(spec))
    assert result["tolerations"] == tolerations
    assert result["containers"] == [{"name": "c", "image": "busybox"}]
    assert verdict.outcome == (UNCHANGED if tolerations == spec.get("tolerations") else PATCHED)


def test_response_echoes_version_kind_and_uid_and_allows():
    verdict = review_pod(review(), 300, 300)
    assert verdict.response["apiVersion"] == "admission.k8s.io/v1"
    assert verdict.response["kind"] == "AdmissionReview"
    assert verdict.response["response"]["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert verdict.response["response"]["allowed"] is True
    assert verdict.added == [NR, UR]
    assert (verdict.namespace, verdict.pod, verdict.operation) == ("team-a", "web-0", "CREATE")


def test_v1beta1_is_answered_in_v1beta1():
    verdict = review_pod(review(api_version="admission.k8s.io/v1beta1"), 300, 300)
    assert verdict.response["apiVersion"] == "admission.k8s.io/v1beta1"
    assert verdict.outcome == PATCHED


def test_an_unchanged_pod_gets_no_patch_fields():
    response = review_pod(review({"tolerations": [{"operator": "Exists"}]}), 300, 300).response["response"]
    assert "patch" not in response and "patchType" not in response


def test_configured_seconds_are_used_for_each_key():
    verdict = review_pod(review(), 60, 5)
    patch = json.loads(base64.b64decode(verdict.response["response"]["patch"]))
    assert patch == [{"op": "add", "path": "/spec/tolerations", "value": [default(NR, 60), default(UR, 5)]}]


def test_generate_name_pods_are_named_by_their_prefix():
    pod = {"metadata": {"generateName": "job-"}, "spec": {"containers": []}}
    body = review(pod=pod)
    body["request"]["name"] = ""
    assert review_pod(body, 300, 300).pod == "job-*"


SKIP_CASES = [
    ("DELETE is allowed unchanged", {"operation": "DELETE"}),
    ("CONNECT is allowed unchanged", {"operation": "CONNECT"}),
    ("a subresource is allowed unchanged", {"sub_resource": "status"}),
    ("pods/binding is allowed unchanged", {"sub_resource": "binding"}),
    ("another resource is allowed unchanged", {"resource": "deployments", "group": "apps"}),
    ("a pods resource in another group is allowed unchanged", {"group": "example.com"}),
]


@pytest.mark.parametrize("overrides", [c[1] for c in SKIP_CASES], ids=[c[0] for c in SKIP_CASES])
def test_skipped_requests(overrides):
    verdict = review_pod(review(**overrides), 300, 300)
    assert verdict.outcome == SKIPPED
    assert verdict.response["response"] == {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True}


def _without(path):
    body = review()
    target = body
    for part in path[:-1]:
        target = target[part]
    del target[path[-1]]
    return body


def _with(path, value):
    body = review()
    target = body
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return body


MALFORMED_CASES = [
    ("a JSON list is not a review", [], "the body must be a JSON object"),
    ("an unknown apiVersion", _with(["apiVersion"], "admission.k8s.io/v2"), "apiVersion must be one of"),
    ("another kind", _with(["kind"], "Pod"), "kind must be AdmissionReview"),
    ("no request", _without(["request"]), "request must be a JSON object"),
    ("a request that is a string", _with(["request"], "x"), "request must be a JSON object"),
    ("no uid", _without(["request", "uid"]), "request.uid must be a non-empty string"),
    ("an empty uid", _with(["request", "uid"], ""), "request.uid must be a non-empty string"),
    ("a numeric uid", _with(["request", "uid"], 7), "request.uid must be a non-empty string"),
    ("an object that is not an object", _with(["request", "object"], "pod"), "request.object must be a JSON object"),
    ("a missing object", _without(["request", "object"]), "request.object must be a JSON object"),
    ("a spec that is a list", _with(["request", "object", "spec"], []), "request.object.spec must be a JSON object"),
    (
        "tolerations that are a map",
        _with(["request", "object", "spec", "tolerations"], {"a": 1}),
        "tolerations must be a list of objects",
    ),
    (
        "a toleration that is a string",
        _with(["request", "object", "spec", "tolerations"], ["x"]),
        "tolerations must be a list of objects",
    ),
]


@pytest.mark.parametrize(("body", "message"), [c[1:] for c in MALFORMED_CASES], ids=[c[0] for c in MALFORMED_CASES])
def test_malformed_reviews_are_refused_with_a_reason(body, message):
    with pytest.raises(MalformedReview, match=message):
        review_pod(body, 300, 300)


toleration_st = st.fixed_dictionaries(
    {},
    optional={
        "key": st.sampled_from(["", NR, UR, "other"]),
        "operator": st.sampled_from(["Exists", "Equal"]),
        "value": st.text(max_size=4),
        "effect": st.sampled_from(["", "NoExecute", "NoSchedule"]),
        "tolerationSeconds": st.integers(0, 1000),
    },
)


@given(st.one_of(st.none(), st.lists(toleration_st, max_size=5)))
def test_the_patch_only_appends_and_leaves_existing_tolerations_untouched(tolerations):
    spec = {} if tolerations is None else {"tolerations": tolerations}
    _, result = patched_spec(review(spec))
    existing = tolerations or []
    assert result["tolerations"][: len(existing)] == existing
    assert all(
        t["effect"] == "NoExecute" and t["tolerationSeconds"] == 300 for t in result["tolerations"][len(existing) :]
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


@given(
    st.fixed_dictionaries(
        {
            "apiVersion": st.sampled_from(["admission.k8s.io/v1", "x"]),
            "kind": st.sampled_from(["AdmissionReview", "x"]),
            "request": st.one_of(
                json_values,
                st.fixed_dictionaries(
                    {
                        "uid": st.one_of(st.text(max_size=3), json_values),
                        "operation": st.sampled_from(["CREATE", "UPDATE", "DELETE"]),
                        "resource": st.one_of(json_values, st.just({"group": "", "resource": "pods"})),
                        "object": st.one_of(
                            json_values,
                            st.fixed_dictionaries(
                                {"spec": st.one_of(json_values, st.fixed_dictionaries({"tolerations": json_values}))}
                            ),
                        ),
                    }
                ),
            ),
        }
    )
)
def test_any_json_gets_either_an_answer_or_a_malformed_review_error(body):
    try:
        verdict = review_pod(body, 300, 300)
    except MalformedReview:
        return
    assert verdict.response["response"]["allowed"] is True


# -- per-namespace defaults and opting out ---------------------------------------------------------

CLUSTER_NR, CLUSTER_UR = 301, 302
WARNING = "namespace annotation taintkeeper.io/not-ready-toleration-seconds='soon' is not a whole number"


def labelled(labels):
    return {"metadata": {"name": "web-0", "labels": labels}, "spec": {"containers": []}}


def known(not_ready=CLUSTER_NR, unreachable=CLUSTER_UR, warnings=(), skipped=False):
    facts = NamespaceDefaults(DefaultSeconds(not_ready, unreachable), tuple(warnings), skipped)
    return lambda namespace: facts


def unknown(namespace):
    return None


NAMESPACE_CASES = [
    (
        "the namespace's not-ready seconds replace the cluster's",
        known(not_ready=30),
        None,
        None,
        PATCHED,
        [default(NR, 30), default(UR, CLUSTER_UR)],
        [],
    ),
    (
        "the namespace's unreachable seconds replace the cluster's",
        known(unreachable=45),
        None,
        None,
        PATCHED,
        [default(NR, CLUSTER_NR), default(UR, 45)],
        [],
    ),
    (
        "both of the namespace's seconds replace the cluster's",
        known(30, 45),
        None,
        None,
        PATCHED,
        [default(NR, 30), default(UR, 45)],
        [],
    ),
    (
        "zero seconds from the namespace are kept",
        known(0, 0),
        None,
        None,
        PATCHED,
        [default(NR, 0), default(UR, 0)],
        [],
    ),
    (
        "nothing known about the namespace (cache off, not synced, unseen): the cluster defaults, no warning",
        unknown,
        None,
        None,
        PATCHED,
        [default(NR, CLUSTER_NR), default(UR, CLUSTER_UR)],
        [],
    ),
    (
        "an ignored annotation's warning comes with the patch",
        known(warnings=[WARNING]),
        None,
        None,
        PATCHED,
        [default(NR, CLUSTER_NR), default(UR, CLUSTER_UR)],
        [WARNING],
    ),
    (
        "no warning when the namespace's defaults were not needed",
        known(warnings=[WARNING]),
        [default(NR, 7), default(UR, 7)],
        None,
        UNCHANGED,
        [default(NR, 7), default(UR, 7)],
        [],
    ),
    ("a namespace labelled skip=true is skipped", known(30, 45, skipped=True), None, None, SKIPPED, None, []),
    ("a pod labelled skip=true is skipped", known(30, 45), None, {"taintkeeper.io/skip": "true"}, SKIPPED, None, []),
    (
        "a pod labelled skip=true is skipped when nothing is known of its namespace",
        unknown,
        None,
        {"taintkeeper.io/skip": "true"},
        SKIPPED,
        None,
        [],
    ),
    (
        "a pod labelled skip=false is mutated",
        unknown,
        None,
        {"taintkeeper.io/skip": "false"},
        PATCHED,
        [default(NR, CLUSTER_NR), default(UR, CLUSTER_UR)],
        [],
    ),
    (
        "the skip label value is exact: True is not true",
        unknown,
        None,
        {"taintkeeper.io/skip": "True"},
        PATCHED,
        [default(NR, CLUSTER_NR), default(UR, CLUSTER_UR)],
        [],
    ),
    (
        "labels that are not a map are no skip label",
        unknown,
        None,
        ["taintkeeper.io/skip"],
        PATCHED,
        [default(NR, CLUSTER_NR), default(UR, CLUSTER_UR)],
        [],
    ),
]


@pytest.mark.parametrize(
    ("lookup", "tolerations", "labels", "outcome", "expected", "warnings"),
    [c[1:] for c in NAMESPACE_CASES],
    ids=[c[0] for c in NAMESPACE_CASES],
)
def test_namespace_defaults_and_skip_labels(lookup, tolerations, labels, outcome, expected, warnings):
    pod = labelled(labels)
    if tolerations is not None:
        pod["spec"]["tolerations"] = tolerations
    verdict = review_pod(review(pod=pod), CLUSTER_NR, CLUSTER_UR, namespace_defaults=lookup)
    response = verdict.response["response"]
    assert verdict.outcome == outcome
    assert verdict.warnings == warnings
    assert response.get("warnings", []) == warnings
    if outcome == SKIPPED:
        assert response == {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True}
        assert "skip=true" in verdict.reason
        return
    result = pod
    if "patch" in response:
        result = jsonpatch.apply_patch(pod, json.loads(base64.b64decode(response["patch"])))
    assert result["spec"]["tolerations"] == expected


def test_the_namespace_is_looked_up_by_the_review_namespace_and_only_for_pod_reviews():
    asked = []

    def lookup(namespace):
        asked.append(namespace)

    review_pod(review(), namespace_defaults=lookup)
    review_pod(review(operation="DELETE"), namespace_defaults=lookup)
    review_pod(review(sub_resource="status"), namespace_defaults=lookup)
    assert asked == ["team-a"]


def test_without_a_lookup_the_cluster_seconds_are_used():
    verdict = review_pod(review(), 60, 5)
    assert verdict.outcome == PATCHED and verdict.warnings == []
    assert "warnings" not in verdict.response["response"]


# -- remembered patches ---------------------------------------------------------------------------------------


def fresh_patch(spec, not_ready_seconds, unreachable_seconds):
    """The patch built and encoded anew, as review_pod did before patches were remembered."""
    added = missing_default_tolerations(spec.get("tolerations") or [], not_ready_seconds, unreachable_seconds)
    if not added:
        return None, []
    patch = admission._patch_for(spec, added, [])
    return base64.b64encode(codec.dumps(patch)).decode(), [t["key"] for t in added]


ABSENT = object()
REMEMBERED_CASES = [
    ("no tolerations field", ABSENT, 300, 300),
    ("tolerations: null", None, 300, 300),
    ("an empty list", [], 300, 300),
    ("one unrelated toleration", [UNRELATED], 300, 300),
    ("three unrelated tolerations", [UNRELATED] * 3, 60, 5),
    ("not-ready present", [default(NR, 700)], 300, 300),
    ("unreachable present", [UNRELATED, default(UR, 700)], 30, 45),
    ("both present", [default(NR), default(UR)], 300, 300),
    ("the wildcard", [{"operator": "Exists"}], 300, 300),
    ("other seconds", ABSENT, 0, 2**63 - 1),
    ("seconds true, not 1", ABSENT, True, 1),
    ("seconds 1, not true", ABSENT, 1, True),
    ("seconds 1.0, not 1", [UNRELATED], 1.0, 1),
    ("seconds 1, not 1.0", [UNRELATED], 1, 1),
]


@pytest.mark.parametrize(
    ("tolerations", "not_ready_seconds", "unreachable_seconds"),
    [c[1:] for c in REMEMBERED_CASES],
    ids=[c[0] for c in REMEMBERED_CASES],
)
def test_a_remembered_patch_is_the_one_built_afresh(tolerations, not_ready_seconds, unreachable_seconds):
    spec = {"containers": []} if tolerations is ABSENT else {"containers": [], "tolerations": tolerations}
    expected_patch, expected_added = fresh_patch(spec, not_ready_seconds, unreachable_seconds)
    for operation in ("CREATE", "UPDATE"):
        for _ in range(2):  # the first builds (and may remember) it, the second may find it
            verdict = review_pod(review(spec=spec, operation=operation), not_ready_seconds, unreachable_seconds)
            assert verdict.response["response"].get("patch") == expected_patch
            assert verdict.added == expected_added
            assert verdict.outcome == (PATCHED if expected_patch else UNCHANGED)


def test_patches_remembered_for_one_seconds_are_not_given_for_equal_seconds_of_another_type():
    for not_ready_seconds, unreachable_seconds in [(1, 1), (True, True), (1.0, 1.0), (1, 1)]:
        spec = {"containers": []}
        verdict = review_pod(review(spec=spec), not_ready_seconds, unreachable_seconds)
        assert verdict.response["response"]["patch"] == fresh_patch(spec, not_ready_seconds, unreachable_seconds)[0]


@given(
    st.one_of(st.none(), st.lists(toleration_st, max_size=5)),
    st.sampled_from([0, 5, 300, 301]),
    st.sampled_from([0, 5, 300, 301]),
    st.booleans(),
)
def test_any_remembered_patch_is_the_one_built_afresh(tolerations, not_ready_seconds, unreachable_seconds, null):
    spec = {"containers": []}
    if tolerations is not None or null:
        spec["tolerations"] = tolerations
    verdict = review_pod(review(spec=spec), not_ready_seconds, unreachable_seconds)
    assert (verdict.response["response"].get("patch"), verdict.added) == fresh_patch(
        spec, not_ready_seconds, unreachable_seconds
    )


def test_the_remembered_patches_are_bounded():
    for seconds in range(3 * admission.ADDITIONS_KEPT):
        review_pod(review(), seconds, seconds)
        review_pod(review({"tolerations": [UNRELATED]}), seconds, seconds)
        assert len(admission._additions) <= admission.ADDITIONS_KEPT


def test_verdicts_with_a_remembered_patch_share_no_list():
    first, second = review_pod(review()), review_pod(review())
    assert first.added == second.added and first.added is not second.added
    first.added.append("changed")
    assert review_pod(review()).added == [NR, UR]
