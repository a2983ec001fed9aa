"""A bad value stops `helm template` (and so `helm install` and `upgrade`) with a message that names it.

values.schema.json refuses what one field can show to be wrong; `helm lint` runs the schema too. What
needs two fields compared, the chart's templates refuse with `fail` (templates/checks.yaml): `helm lint`
only reports those as INFO (it renders with whatever values it has), so only `helm template` is checked
for them. Next to the refusals, the values just on the right side of each line are accepted, so no check
refuses more than it should.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, NamedTuple

import pytest

from tests.chart.helm import CHART, run_helm, template, values_file


class Refusal(NamedTuple):
    name: str
    values: dict[str, Any]
    by: Literal["schema", "template"]
    message: str  # what helm's error must say
    args: tuple[str, ...] = ()  # beside the values: what Helm is told the cluster serves


def controller(flags: dict[str, Any]) -> dict[str, Any]:
    """Values with these controller flags beside the default ones."""
    return {"controller": {"flags": {"log-format": "json", **flags}}}


def webhook(flags: dict[str, Any]) -> dict[str, Any]:
    return {"webhook": {"flags": {"workers": 2, "log-format": "json", **flags}}}


REFUSALS = [
    Refusal(
        "a negative toleration in the controller",
        controller({"default-not-ready-toleration-seconds": -1}),
        "schema",
        "at '/controller/flags/default-not-ready-toleration-seconds': minimum: got -1, want 0",
    ),
    Refusal(
        "a negative toleration in the webhook",
        webhook({"default-unreachable-toleration-seconds": -30}),
        "schema",
        "at '/webhook/flags/default-unreachable-toleration-seconds': minimum: got -30, want 0",
    ),
    Refusal(
        "a toleration with an operator Kubernetes does not have",
        {"webhook": {"tolerations": [{"key": "dedicated", "operator": "Maybe", "effect": "NoSchedule"}]}},
        "schema",
        "at '/webhook/tolerations/0/operator'",
    ),
    Refusal(
        "an unknown controller flag (a misspelling)",
        controller({"node-monitor-grace": "40s"}),
        "schema",
        "at '/controller/flags': additional properties 'node-monitor-grace' not allowed",
    ),
    Refusal(
        "an unknown webhook flag",
        webhook({"default-toleration-seconds": 60}),
        "schema",
        "at '/webhook/flags': additional properties 'default-toleration-seconds' not allowed",
    ),
    Refusal(
        "a flag the chart sets itself",
        controller({"port": 9090}),
        "schema",
        "at '/controller/flags': additional properties 'port' not allowed",
    ),
    Refusal("an unknown top-level value", {"replicas": 3}, "schema", "additional properties 'replicas' not allowed"),
    Refusal(
        "a duration without its unit",
        controller({"node-monitor-period": 5}),
        "schema",
        "at '/controller/flags/node-monitor-period': got number, want string",
    ),
    Refusal(
        "a duration that is no Go duration",
        controller({"node-monitor-grace-period": "40 seconds"}),
        "schema",
        "at '/controller/flags/node-monitor-grace-period': '40 seconds' does not match pattern",
    ),
    Refusal(
        "a zone threshold over 1",
        controller({"unhealthy-zone-threshold": 1.5}),
        "schema",
        "at '/controller/flags/unhealthy-zone-threshold': maximum: got 1.5, want 1",
    ),
    Refusal("no replicas", {"webhook": {"replicas": 0}}, "schema", "at '/webhook/replicas': minimum: got 0, want 1"),
    Refusal(
        "an unknown worker class",
        webhook({"worker-class": "sync"}),
        "schema",
        "at '/webhook/flags/worker-class': value must be one of 'gevent', 'gthread'",
    ),
    Refusal(
        "an unknown certificates mode",
        {"certificates": {"mode": "vault"}},
        "schema",
        "at '/certificates/mode': value must be one of 'selfManaged', 'certManager'",
    ),
    Refusal(
        "a grace period shorter than the monitor period",
        controller({"node-monitor-period": "1m", "node-monitor-grace-period": "59s"}),
        "template",
        "controller.flags.node-monitor-grace-period (59s) must be at least controller.flags.node-monitor-period (1m)",
    ),
    Refusal(
        "a grace period shorter than the default monitor period (5s)",
        controller({"node-monitor-grace-period": "4900ms"}),
        "template",
        "controller.flags.node-monitor-grace-period (4900ms) must be at least controller.flags.node-monitor-period "
        "(5s)",
    ),
    Refusal(
        "the webhook and the backfill giving different seconds",
        webhook({"default-not-ready-toleration-seconds": 60}),
        "template",
        "controller.flags.default-not-ready-toleration-seconds (300) and webhook.flags."
        "default-not-ready-toleration-seconds (60) must be equal",
    ),
    Refusal(
        "an admission mode the chart does not have",
        {"admission": {"mode": "both"}},
        "schema",
        "at '/admission/mode'",
    ),
    Refusal(
        "the policy where the cluster does not serve it",
        {"admission": {"mode": "policy"}},
        "template",
        "admission.mode=policy needs MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, Kubernetes 1.36+)",
    ),
    Refusal(
        "the webhook's replacing of the built-in seconds without the webhook",
        {"admission": {"mode": "policy"}, **webhook({"replace-builtin-defaults": True})},
        "template",
        "webhook.flags.replace-builtin-defaults is the webhook's alone",
        ("--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"),
    ),
    Refusal(
        "an image tag with semver's build metadata: an image tag has no '+'",
        {"image": {"tag": "1.2.3+build.5"}},
        "schema",
        "at '/image/tag'",
    ),
    Refusal(
        "an image tag that is a whole reference",
        {"image": {"tag": "taintkeeper:1.2.3"}},
        "schema",
        "at '/image/tag'",
    ),
    Refusal(
        "an image digest without its algorithm",
        {"image": {"digest": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}},
        "schema",
        "at '/image/digest'",
    ),
    Refusal(
        "an image digest one hex digit short",
        {"image": {"digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde"}},
        "schema",
        "at '/image/digest'",
    ),
    Refusal(
        "an image digest in upper case: digests are lower-case hex",
        {"image": {"digest": "sha256:0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF"}},
        "schema",
        "at '/image/digest'",
    ),
    Refusal(
        "a NetworkPolicy without the apiserver's address",
        {"networkPolicy": {"enabled": True}},
        "template",
        "networkPolicy.enabled needs networkPolicy.apiserver",
    ),
]


@pytest.mark.parametrize("refusal", REFUSALS, ids=[r.name for r in REFUSALS])
def test_a_bad_value_is_refused_with_a_message_naming_it(helm: Path, tmp_path: Path, refusal: Refusal):
    values = values_file(tmp_path, refusal.values)
    rendered = template(helm, "-f", str(values), *refusal.args)
    assert rendered.returncode != 0, f"helm template accepted {refusal.values}"
    assert refusal.message in rendered.stderr
    if refusal.by == "schema":
        linted = run_helm(helm, "lint", str(CHART), "-f", str(values))
        assert linted.returncode != 0, f"helm lint accepted {refusal.values}"
        assert refusal.message in linted.stdout + linted.stderr


def test_an_unknown_flag_is_refused_by_the_templates_too_when_the_schema_is_skipped(helm: Path, tmp_path: Path):
    values = values_file(tmp_path, controller({"node-monitor-grace": "40s"}))
    rendered = template(helm, "--skip-schema-validation", "-f", str(values))
    assert rendered.returncode != 0
    assert "controller.flags.node-monitor-grace: unknown flag (known: log-format, log-level," in rendered.stderr


ACCEPTED = {
    "a grace period equal to the monitor period": controller(
        {"node-monitor-period": "40s", "node-monitor-grace-period": "40s"}
    ),
    "a grace period in other units, just longer": controller(
        {"node-monitor-period": "59500ms", "node-monitor-grace-period": "1m"}
    ),
    "tolerations of 0 seconds set alike": {
        **controller({"default-not-ready-toleration-seconds": 0}),
        **webhook({"default-not-ready-toleration-seconds": 0}),
    },
    "a zone threshold of exactly 1": controller({"unhealthy-zone-threshold": 1}),
    "an image tag of a pre-release, 128 characters long": {"image": {"tag": "1.2.3-rc." + "1" * 119}},
    "an image digest": {"image": {"digest": "sha256:" + "0123456789abcdef" * 4}},
    "a NetworkPolicy with the apiserver's address": {
        "networkPolicy": {"enabled": True, "apiserver": [{"ipBlock": {"cidr": "10.0.0.0/24"}}]}
    },
}


@pytest.mark.parametrize("values", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_values_at_the_edge_of_a_check_are_accepted(helm: Path, tmp_path: Path, values: dict[str, Any]):
    rendered = template(helm, "-f", str(values_file(tmp_path, values)))
    assert rendered.returncode == 0, rendered.stderr
