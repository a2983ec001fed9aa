"""manifests/monitoring/: the PrometheusRule, the same rules as a plain rules file, and promtool's unit
tests of every alert, each firing and not firing (`promtool test rules`, from Debian's prometheus
package, which the `test_tools` fixture installs)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.exported_metrics import exported_series, series_named

ROOT = Path(__file__).resolve().parents[3]
MONITORING = ROOT / "manifests" / "monitoring"
PROMETHEUS_RULE = MONITORING / "prometheusrule.yaml"
RULES_FILE = MONITORING / "prometheus" / "taintkeeper-rules.yaml"
PROMTOOL = Path("/usr/bin/promtool")


def prometheus_rule() -> dict[str, Any]:
    (document,) = [d for d in yaml.safe_load_all(PROMETHEUS_RULE.read_text()) if d is not None]
    return document


def alert_rules() -> dict[str, dict[str, Any]]:
    rules = [rule for group in prometheus_rule()["spec"]["groups"] for rule in group["rules"]]
    return {rule["alert"]: rule for rule in rules}


@dataclass(frozen=True)
class Case:
    """Series from time 0 (one value a minute; promtool's expanding notation), and what the alert does
    at each evaluation time: the label sets it fires with (besides the rule's own), none when quiet."""

    alert: str
    behaviour: str
    series: dict[str, str]
    at: tuple[str, ...]
    firing: tuple[dict[str, str], ...] = ()


LEADER = {'taintkeeper_leader{instance="c-0"}': "1x20"}
FIRING = [
    Case(
        "TaintkeeperZonePartialDisruption",
        "the leader reports a zone partially disrupted",
        {
            **LEADER,
            'taintkeeper_zone_state{instance="c-0",zone="r::a",state="PartialDisruption"}': "1x20",
            'taintkeeper_zone_state{instance="c-0",zone="r::b",state="PartialDisruption"}': "0x20",
        },
        ("5m",),
        ({"zone": "r::a"},),
    ),
    Case(
        "TaintkeeperZoneFullDisruption",
        "the leader reports a zone fully disrupted",
        {**LEADER, 'taintkeeper_zone_state{instance="c-0",zone="r::a",state="FullDisruption"}': "1x20"},
        ("5m",),
        ({"zone": "r::a"},),
    ),
    Case(
        "TaintkeeperMasterDisruptionMode",
        "the leader is in master disruption mode",
        {**LEADER, 'taintkeeper_master_disruption_mode{instance="c-0"}': "1x20"},
        ("5m",),
        ({},),
    ),
    Case(
        "TaintkeeperEvictionsRetried",
        "pod deletions fail for 10 minutes",
        {'taintkeeper_pod_deletion_failures_total{instance="c-0"}': "0+2x20"},
        ("15m",),
        ({},),
    ),
    Case(
        "TaintkeeperEvictionsLate",
        "pods are deleted 60-120 s after their deadline",
        {
            'taint_eviction_controller_pod_deletion_duration_seconds_bucket{instance="c-0",le="60"}': "0x20",
            'taint_eviction_controller_pod_deletion_duration_seconds_bucket{instance="c-0",le="120"}': "0+1x20",
            'taint_eviction_controller_pod_deletion_duration_seconds_bucket{instance="c-0",le="+Inf"}': "0+1x20",
        },
        ("15m",),
        ({},),
    ),
    Case(
        "TaintkeeperMonitorPassesFailing",
        "every monitor pass fails for 10 minutes",
        {'taintkeeper_monitor_pass_failures_total{instance="c-0"}': "0+12x20"},
        ("15m",),
        ({},),
    ),
    Case(
        "TaintkeeperNodeHealthChecksFailing",
        "a node's health check fails in every pass for 10 minutes",
        {'taintkeeper_node_monitor_errors_total{instance="c-0"}': "0+12x20"},
        ("15m",),
        ({},),
    ),
    Case(
        "TaintkeeperMonitorStalled",
        "the leader's last pass was at 5m",
        {**LEADER, 'taintkeeper_last_monitor_pass_timestamp_seconds{instance="c-0"}': "0+60x5 300x15"},
        ("10m",),
        ({},),
    ),
    Case(
        "TaintkeeperControllerNoLeader",
        "the leader stops at 6m and no stand-by takes over",
        {'taintkeeper_leader{instance="c-0"}': "1x5 0x15", 'taintkeeper_leader{instance="c-1"}': "0x20"},
        ("10m",),
        ({},),
    ),
    Case(
        "TaintkeeperControllerNoLeader",
        "no controller is scraped at all",
        {'taintkeeper_webhook_admission_reviews_total{instance="w-0",outcome="patched"}': "0+1x20"},
        ("5m",),
        ({},),
    ),
    Case(
        "TaintkeeperControllerSeveralLeaders",
        "two replicas act at once",
        {'taintkeeper_leader{instance="c-0"}': "1x20", 'taintkeeper_leader{instance="c-1"}': "1x20"},
        ("5m",),
        ({},),
    ),
    Case(
        "TaintkeeperWebhookBadRequests",
        "the webhook refuses requests for 10 minutes",
        {'taintkeeper_webhook_admission_reviews_total{instance="w-0",outcome="bad_request"}': "0+5x20"},
        ("15m",),
        ({},),
    ),
    Case(
        "TaintkeeperWebhookSlow",
        "reviews take 250-500 ms",
        {
            'taintkeeper_webhook_admission_duration_seconds_bucket{instance="w-0",le="0.25"}': "0x20",
            'taintkeeper_webhook_admission_duration_seconds_bucket{instance="w-0",le="0.5"}': "0+100x20",
            'taintkeeper_webhook_admission_duration_seconds_bucket{instance="w-0",le="+Inf"}': "0+100x20",
        },
        ("15m",),
        ({},),
    ),
    Case(
        "TaintkeeperWebhookFailingOpen",
        "kube-apiserver admits pods without calling the webhook",
        {
            'apiserver_admission_webhook_fail_open_count{name="default-tolerations.taintkeeper.io",type="admit"}': (
                "0+3x20"
            )
        },
        ("15m",),
        ({"name": "default-tolerations.taintkeeper.io"},),
    ),
]
QUIET = [
    Case(
        "TaintkeeperZonePartialDisruption",
        "normal zones, and a stand-by's stale state",
        {
            **LEADER,
            'taintkeeper_zone_state{instance="c-0",zone="r::a",state="PartialDisruption"}': "0x20",
            'taintkeeper_zone_state{instance="c-0",zone="r::a",state="Normal"}': "1x20",
            'taintkeeper_leader{instance="c-1"}': "0x20",
            'taintkeeper_zone_state{instance="c-1",zone="r::a",state="PartialDisruption"}': "1x20",
        },
        ("5m", "15m"),
    ),
    Case(
        "TaintkeeperZoneFullDisruption",
        "a partially disrupted zone, and a stand-by's stale state",
        {
            **LEADER,
            'taintkeeper_zone_state{instance="c-0",zone="r::a",state="FullDisruption"}': "0x20",
            'taintkeeper_zone_state{instance="c-0",zone="r::a",state="PartialDisruption"}': "1x20",
            'taintkeeper_leader{instance="c-1"}': "0x20",
            'taintkeeper_zone_state{instance="c-1",zone="r::a",state="FullDisruption"}': "1x20",
        },
        ("5m", "15m"),
    ),
    Case(
        "TaintkeeperMasterDisruptionMode",
        "only a stand-by's stale value says so",
        {
            **LEADER,
            'taintkeeper_master_disruption_mode{instance="c-0"}': "0x20",
            'taintkeeper_leader{instance="c-1"}': "0x20",
            'taintkeeper_master_disruption_mode{instance="c-1"}': "1x20",
        },
        ("5m", "15m"),
    ),
    Case(
        "TaintkeeperEvictionsRetried",
        "one deletion failed once",
        {'taintkeeper_pod_deletion_failures_total{instance="c-0"}': "0 1x20"},
        ("6m", "11m", "15m"),
    ),
    Case(
        "TaintkeeperEvictionsLate",
        "pods are deleted within 60 s of their deadline, then none at all",
        {
            'taint_eviction_controller_pod_deletion_duration_seconds_bucket{instance="c-0",le="60"}': "0+1x10 10x10",
            'taint_eviction_controller_pod_deletion_duration_seconds_bucket{instance="c-0",le="120"}': "0+1x10 10x10",
            'taint_eviction_controller_pod_deletion_duration_seconds_bucket{instance="c-0",le="+Inf"}': "0+1x10 10x10",
        },
        ("8m", "15m", "20m"),
    ),
    Case(
        "TaintkeeperMonitorPassesFailing",
        "one pass failed once",
        {'taintkeeper_monitor_pass_failures_total{instance="c-0"}': "0 1x20"},
        ("6m", "11m", "15m"),
    ),
    Case(
        "TaintkeeperNodeHealthChecksFailing",
        "one node's check failed once",
        {'taintkeeper_node_monitor_errors_total{instance="c-0"}': "0 1x20"},
        ("6m", "11m", "15m"),
    ),
    Case(
        "TaintkeeperMonitorStalled",
        "the leader passes every minute; a stand-by's last pass is old",
        {
            **LEADER,
            'taintkeeper_last_monitor_pass_timestamp_seconds{instance="c-0"}': "0+60x20",
            'taintkeeper_leader{instance="c-1"}': "0x20",
            'taintkeeper_last_monitor_pass_timestamp_seconds{instance="c-1"}': "0+60x5 300x15",
        },
        ("10m", "20m"),
    ),
    Case(
        "TaintkeeperMonitorStalled",
        "the leader runs no node lifecycle monitor (--controllers=toleration-backfill)",
        {**LEADER, 'taintkeeper_last_monitor_pass_timestamp_seconds{instance="c-0"}': "0x20"},
        ("10m", "20m"),
    ),
    Case(
        "TaintkeeperControllerNoLeader",
        "the Lease passes from one replica to the other",
        {'taintkeeper_leader{instance="c-0"}': "1x5 0x15", 'taintkeeper_leader{instance="c-1"}': "0x5 1x15"},
        ("5m", "10m", "20m"),
    ),
    Case(
        "TaintkeeperControllerSeveralLeaders",
        "one leader, and an overlap of one scrape at a handover",
        {'taintkeeper_leader{instance="c-0"}': "1x5 0x15", 'taintkeeper_leader{instance="c-1"}': "0x4 1x16"},
        ("5m", "7m", "10m"),
    ),
    Case(
        "TaintkeeperWebhookBadRequests",
        "every review is answered",
        {
            'taintkeeper_webhook_admission_reviews_total{instance="w-0",outcome="patched"}': "0+100x20",
            'taintkeeper_webhook_admission_reviews_total{instance="w-0",outcome="bad_request"}': "0x20",
        },
        ("15m",),
    ),
    Case(
        "TaintkeeperWebhookSlow",
        "reviews take under a millisecond",
        {
            'taintkeeper_webhook_admission_duration_seconds_bucket{instance="w-0",le="0.001"}': "0+100x20",
            'taintkeeper_webhook_admission_duration_seconds_bucket{instance="w-0",le="0.25"}': "0+100x20",
            'taintkeeper_webhook_admission_duration_seconds_bucket{instance="w-0",le="0.5"}': "0+100x20",
            'taintkeeper_webhook_admission_duration_seconds_bucket{instance="w-0",le="+Inf"}': "0+100x20",
        },
        ("15m",),
    ),
    Case(
        "TaintkeeperWebhookFailingOpen",
        "another webhook fails open",
        {'apiserver_admission_webhook_fail_open_count{name="other.example.com",type="admit"}': "0+3x20"},
        ("15m",),
    ),
]

_LABEL_TEMPLATE = re.compile(r"\{\{\s*\$labels\.(\w+)\s*\}\}")


def rendered(annotations: dict[str, str], labels: dict[str, str]) -> dict[str, str]:
    """The annotations as Prometheus renders them; they use no template but `{{ $labels.NAME }}`."""
    result = {key: _LABEL_TEMPLATE.sub(lambda match: labels[match.group(1)], text) for key, text in annotations.items()}
    assert not any("{{" in text for text in result.values()), f"untested template in {result}"
    return result


def promtool_tests(rules_file: str) -> dict[str, Any]:
    rules = alert_rules()
    groups = []
    for case in FIRING + QUIET:
        rule = rules[case.alert]
        expected = [
            {
                "exp_labels": {**rule.get("labels", {}), **labels},
                "exp_annotations": rendered(rule.get("annotations", {}), labels),
            }
            for labels in case.firing
        ]
        groups.append(
            {
                "interval": "1m",
                "input_series": [{"series": series, "values": values} for series, values in case.series.items()],
                "alert_rule_test": [
                    {"eval_time": at, "alertname": case.alert, "exp_alerts": expected} for at in case.at
                ],
            }
        )
    return {"rule_files": [rules_file], "evaluation_interval": "1m", "tests": groups}


# -- the manifest ------------------------------------------------------------------------------------------


def test_the_prometheus_rule_is_a_well_formed_prometheus_operator_resource():
    rule = prometheus_rule()
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert (rule["metadata"]["name"], rule["metadata"]["namespace"]) == ("taintkeeper", "taintkeeper-system")
    assert set(rule["spec"]) == {"groups"}
    for group in rule["spec"]["groups"]:
        assert set(group) == {"name", "rules"} and group["rules"]


def test_the_plain_rules_file_is_the_prometheus_rules_spec():
    assert yaml.safe_load(RULES_FILE.read_text()) == prometheus_rule()["spec"], (
        f"{RULES_FILE.relative_to(ROOT)} and the spec of {PROMETHEUS_RULE.relative_to(ROOT)} differ: "
        "change both alike (the spec is the rules file indented by two spaces)"
    )


def test_the_monitoring_manifests_are_not_installed_by_kustomize():
    # They need the Prometheus operator's CRD; docs/operating.md (Alerts) says `kubectl apply -f manifests/monitoring/`.
    # (The Grafana dashboard's own kustomization, inside manifests/monitoring/, is applied on its own.)
    for kustomization in (ROOT / "manifests").rglob("kustomization.yaml"):
        if MONITORING not in kustomization.parents:
            assert "monitoring" not in kustomization.read_text(), kustomization


def test_every_alert_has_a_severity_a_summary_a_description_and_a_for():
    for name, rule in alert_rules().items():
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        assert set(rule["annotations"]) == {"summary", "description"}, name
        assert re.fullmatch(r"\d+m", rule["for"]), name


def test_every_alert_is_tested_firing_and_not_firing():
    names = set(alert_rules())
    assert {case.alert for case in FIRING} == names
    assert {case.alert for case in QUIET} == names
    assert all(case.firing for case in FIRING) and not any(case.firing for case in QUIET)


def test_the_rules_use_only_metrics_taintkeeper_exports():
    used = {name for rule in alert_rules().values() for name in series_named(rule["expr"])}
    assert used - exported_series() == set(), "metrics the rules use that controller/ or webhook/ do not export"


# -- promtool --------------------------------------------------------------------------------------------


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PROMTOOL), *args], capture_output=True, text=True, timeout=120)


def test_promtool_unit_tests_of_every_alert_pass(test_tools: None, tmp_path: Path):
    if not PROMTOOL.is_file():
        pytest.fail(
            f"{PROMTOOL} is missing after `hack/local-cluster.sh deps` (Debian package prometheus): "
            "the alert rules cannot be tested",
            pytrace=False,
        )
    # The rules promtool tests are the PrometheusRule's own spec, written out as a rules file.
    rules = tmp_path / "taintkeeper-rules.yaml"
    rules.write_text(yaml.safe_dump(prometheus_rule()["spec"], sort_keys=False))
    tests = tmp_path / "taintkeeper-rules.test.yaml"
    tests.write_text(yaml.safe_dump(promtool_tests(rules.name), sort_keys=False))
    checked = run_promtool("check", "rules", str(rules), str(RULES_FILE))
    assert checked.returncode == 0, f"promtool check rules:\n{checked.stdout}\n{checked.stderr}"
    tested = run_promtool("test", "rules", str(tests))
    assert tested.returncode == 0, f"promtool test rules {tests}:\n{tested.stdout}\n{tested.stderr}"
