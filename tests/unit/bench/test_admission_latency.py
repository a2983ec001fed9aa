"""bench/admission_latency.py's pieces that need no cluster: the echo webhook's answer, the echo
objects made from taintkeeper's manifests, the report and its verdicts, bad arguments."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from bench import admission_latency
from bench.admission_latency import CONFIGURATIONS, ECHO, Measured, check_mutations, echo_objects, pod_body, render
from bench.create_load import Outcome
from bench.echo_webhook import create_app, echo
from shared.defaults import DEFAULT_TOLERATION_SECONDS
from webhook.admission import review_pod

ROOT = Path(__file__).resolve().parents[3]
BASE = ROOT / "manifests" / "base"


def review(pod: dict[str, Any], uid: str = "3f1c") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "bench",
            "operation": "CREATE",
            "object": pod,
        },
    }


def patched(response: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    patch = json.loads(base64.b64decode(response["patch"]))
    return jsonpatch.apply_patch(pod, patch)


def manifest(path: str, kind: str) -> dict[str, Any]:
    return next(doc for doc in yaml.safe_load_all((BASE / path).read_text()) if doc and doc["kind"] == kind)


def test_the_echo_answers_the_reviews_uid_with_the_same_tolerations_taintkeeper_adds():
    pod = pod_body(7)
    answer = json.loads(echo(json.dumps(review(pod, "a-uid")).encode()))
    assert answer["response"]["uid"] == "a-uid" and answer["response"]["allowed"] is True
    verdict = review_pod(review(pod), DEFAULT_TOLERATION_SECONDS, DEFAULT_TOLERATION_SECONDS)
    assert patched(answer["response"], pod) == patched(verdict.response["response"], pod)


def test_the_echo_app_serves_mutate_and_its_probes():
    app = create_app().test_client()
    answer = app.post("/mutate", data=json.dumps(review(pod_body(1), "u-2")))
    assert answer.status_code == 200 and answer.get_json()["response"]["uid"] == "u-2"
    assert app.get("/readyz").status_code == 200 and app.get("/healthz").status_code == 200


def test_the_echo_is_served_as_taintkeepers_webhook_is_only_its_names_app_and_namespaces_differ():
    deployment = manifest("webhook.yaml", "Deployment")
    service = manifest("webhook.yaml", "Service")
    configuration = manifest("mutatingwebhookconfiguration.yaml", "MutatingWebhookConfiguration")
    secret, config_map, echo_deployment, echo_service, echo_configuration = echo_objects(
        deployment, service, configuration, "Q0E=", {"tls.crt": b"crt", "tls.key": b"key"}
    )
    assert echo_deployment["metadata"]["name"] == ECHO and echo_deployment["spec"]["replicas"] == 2
    original, served = deployment["spec"]["template"]["spec"], echo_deployment["spec"]["template"]["spec"]
    mine, theirs = served["containers"][0], original["containers"][0]
    for same in ("image", "resources", "readinessProbe", "livenessProbe", "securityContext", "ports"):
        assert mine[same] == theirs[same], same
    assert served["securityContext"] == original["securityContext"]
    assert mine["command"][-1] == "echo_webhook:create_app()" and "python:webhook.gunicorn_conf" in mine["command"]
    env = {item["name"]: item.get("value") for item in mine["env"]}
    assert env["TAINTKEEPER_WORKERS"] == "2" and env["PYTHONPATH"] == "/echo"
    labels = echo_deployment["spec"]["selector"]["matchLabels"]
    assert echo_deployment["spec"]["template"]["metadata"]["labels"] == labels == echo_service["spec"]["selector"]
    assert deployment["spec"]["selector"]["matchLabels"] != labels  # never selects taintkeeper's pods
    (hook,) = echo_configuration["webhooks"]
    assert hook["clientConfig"]["service"]["name"] == ECHO and hook["clientConfig"]["caBundle"] == "Q0E="
    assert hook["namespaceSelector"] == {"matchLabels": {admission_latency.ECHO_LABEL: "true"}}
    assert hook["timeoutSeconds"] == configuration["webhooks"][0]["timeoutSeconds"]
    assert base64.b64decode(secret["data"]["tls.key"]) == b"key"
    assert "def create_app" in config_map["data"]["echo_webhook.py"]
    assert deployment["metadata"]["name"] == "taintkeeper-webhook"  # taintkeeper's objects are left as they were


def outcome(p50_ms: float, spread_ms: float, count: int = 100, mutated: bool = True) -> Outcome:
    latencies = [(p50_ms + spread_ms * (i - count // 2) / count) / 1e3 for i in range(count)]
    return Outcome(latencies=latencies, mutated=count if mutated else 0)


def measured(share_ms: float, policy_over_plugin_ms: float = 0.0) -> Measured:
    result = Measured()
    for rate in (20.0,):
        configurations = (
            ("a", 6.0),
            ("b", 6.1),
            ("c", 8.0 + share_ms),
            ("d", 8.0),
            ("e", 6.1 + policy_over_plugin_ms),
            ("f", 6.05),
        )
        for name, p50 in configurations:
            result.outcomes[(rate, name)] = outcome(p50, 1.0, mutated=name != "a")
            result.round_p50[(rate, name)] = [p50 / 1e3]
    return result


@pytest.mark.parametrize(
    ("share_ms", "verdict"),
    [
        (0.1, "<= 0.3 ms: met"),
        (0.5, "<= 0.3 ms: not met"),
    ],
)
def test_taintkeepers_share_over_the_echo_is_judged_against_the_goal(share_ms: float, verdict: str):
    table = render(measured(share_ms), [20.0], 60.0, 3)
    assert verdict in table
    assert f"+{share_ms:.2f} / +{share_ms:.2f} ms" in table
    for name, words in CONFIGURATIONS.items():
        assert f"| 20/s | {name}. {words} | 100 |" in table


def test_a_configuration_that_did_not_mutate_as_it_says_is_reported():
    good = measured(0.1)
    assert check_mutations(good) == []
    good.outcomes[(20.0, "c")] = outcome(8.0, 1.0, mutated=False)
    assert check_mutations(good) == ["20/s c: 0 of 100 pods carried the default tolerations, expected 100"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rates", "20,x"], "not a comma-separated list of rates"),
        (["--rates", "0"], "rates must be positive"),
        (["--seconds", "-1"], "must be positive"),
        (["--rounds", "0"], "invalid choice"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_info:
        admission_latency.parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("policy_over_plugin_ms", "verdict"),
    [(0.05, "<= 0.1 ms: met"), (0.3, "<= 0.1 ms: not met")],
)
def test_the_policy_over_the_builtin_plugin_is_judged_against_the_goal(policy_over_plugin_ms: float, verdict: str):
    table = render(measured(0.1, policy_over_plugin_ms), [20.0], 60.0, 3)
    [row] = [line for line in table.splitlines() if line.startswith("| 20/s | ") and "0.1 ms" in line]
    assert row.startswith(f"| 20/s | {policy_over_plugin_ms:+.2f} / ") and verdict in row


def test_the_policy_cost_is_split_into_any_policys_and_taintkeepers_cel():
    table = render(measured(0.1, 0.3), [20.0], 60.0, 3)
    [row] = [line for line in table.splitlines() if line.startswith("| 20/s | +0.05 / ")]
    assert row.endswith("| +0.35 / +0.35 ms |")  # e - f: 6.40 - 6.05


def test_the_constant_policy_gives_what_taintkeepers_gives_a_bare_pod():
    from bench.admission_latency import policy_objects

    constant = next(
        o for o in policy_objects() if o["kind"] == "MutatingAdmissionPolicy" and "constant" in o["metadata"]["name"]
    )
    expression = constant["spec"]["mutations"][0]["jsonPatch"]["expression"]
    assert expression.count("Object.spec.tolerations{") == 2 and "tolerationSeconds: 300" in expression
    assert "paramKind" not in constant["spec"] and "variables" not in constant["spec"]
