"""manifests/monitoring/prometheus/taintkeeper-scrape.yaml: the jobs a Prometheus without the operator
scrapes the replicas with, kept to the manifests' ports and checked by promtool. They are run against the
deployed replicas in tests/e2e/test_dashboard.py."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.unit.manifests.test_alert_rules import PROMTOOL

ROOT = Path(__file__).resolve().parents[3]
JOBS = ROOT / "manifests" / "monitoring" / "prometheus" / "taintkeeper-scrape.yaml"
BINDING = ROOT / "manifests" / "monitoring" / "metrics-reader-binding.yaml"
DEPLOYMENTS = {"controller": ROOT / "manifests/base/controller.yaml", "webhook": ROOT / "manifests/base/webhook.yaml"}


def jobs() -> dict[str, dict]:
    return {job["job_name"]: job for job in yaml.safe_load(JOBS.read_text())}


def container_port_names(component: str) -> set[str]:
    (deployment,) = [
        d for d in yaml.safe_load_all(DEPLOYMENTS[component].read_text()) if d and d["kind"] == "Deployment"
    ]
    return {p["name"] for c in deployment["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}


@pytest.mark.parametrize("component", sorted(DEPLOYMENTS))
def test_each_job_keeps_exactly_its_components_https_port_with_a_token(component: str):
    job = jobs()[f"taintkeeper-{component}"]
    assert job["scheme"] == "https"
    assert job["authorization"] == {"credentials_file": "/var/run/secrets/kubernetes.io/serviceaccount/token"}
    (keep,) = [rule for rule in job["relabel_configs"] if rule["action"] == "keep"]
    name, wanted, port = keep["regex"].split(";")
    assert (name, wanted) == ("taintkeeper", component)
    assert port in container_port_names(component)
    assert not re.fullmatch(
        keep["regex"], f"taintkeeper;{'webhook' if component == 'controller' else 'controller'};https"
    )


def test_the_binding_gives_a_prometheus_the_metrics_reader_role():
    binding = yaml.safe_load(BINDING.read_text())
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "taintkeeper-metrics-reader",
    }
    (role,) = [
        d
        for d in yaml.safe_load_all((ROOT / "manifests/base/controller-rbac.yaml").read_text())
        if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] == "taintkeeper-metrics-reader"
    ]
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


def test_promtool_accepts_the_jobs(test_tools: None, tmp_path: Path):
    if not PROMTOOL.is_file():
        pytest.fail(
            f"{PROMTOOL} is missing after `hack/local-cluster.sh deps` (Debian package prometheus)", pytrace=False
        )
    token = tmp_path / "token"
    token.write_text("t")
    config = tmp_path / "prometheus.yml"
    scrape = yaml.safe_load(JOBS.read_text())
    for job in scrape:
        job["authorization"]["credentials_file"] = str(token)  # promtool checks the file exists
        # Debian's Prometheus is built without Kubernetes discovery: the rest of each job is checked
        del job["kubernetes_sd_configs"]
        job["static_configs"] = [{"targets": ["192.0.2.1:10257"]}]
    config.write_text(yaml.safe_dump({"scrape_configs": scrape}))
    checked = subprocess.run(
        [str(PROMTOOL), "check", "config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, f"{checked.stdout}\n{checked.stderr}"
