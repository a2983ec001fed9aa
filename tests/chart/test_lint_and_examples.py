"""`helm lint --strict` passes, and every example values file (charts/taintkeeper/examples/) lints, renders
objects valid for Kubernetes, and gives the controller and the webhook arguments their own parsers accept."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest

from tests.chart.helm import CHART, EXAMPLES, render, run_helm
from tests.chart.programs import controller_options, webhook_settings

KUBERNETES_VERSION = "1.33"  # the newest schemas kubernetes-validate ships (as tests/unit/manifests/)
CUSTOM_GROUPS = ("cert-manager.io/", "monitoring.coreos.com/")  # custom resources: no built-in schema


def lint(helm: Path, *args: str) -> str:
    result = run_helm(helm, "lint", "--strict", str(CHART), *args)
    assert result.returncode == 0, f"helm lint --strict {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_lint_passes_with_the_default_values(helm: Path):
    assert "1 chart(s) linted, 0 chart(s) failed" in lint(helm)


def test_there_are_examples_to_check():
    assert len(EXAMPLES) >= 2, f"no example values files in {CHART / 'examples'}"


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_each_example_lints_and_renders_what_kubernetes_and_the_programs_accept(helm: Path, example: Path):
    lint(helm, "-f", str(example))
    docs = render(helm, "-f", str(example))
    for doc in docs:
        if not doc["apiVersion"].startswith(CUSTOM_GROUPS):
            assert kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True) == KUBERNETES_VERSION
    controller_options(docs)
    webhook_settings(docs)


def test_the_tuned_example_reaches_the_controller_and_the_webhook(helm: Path):
    docs = render(helm, "-f", str(CHART / "examples" / "tuned-grace-periods.yaml"))
    options = controller_options(docs)
    assert (options.monitor.node_monitor_period, options.monitor.node_monitor_grace_period) == (2.0, 20.0)
    assert options.monitor.node_eviction_rate == 0.5
    settings, _ = webhook_settings(docs)
    assert (settings.not_ready_seconds, settings.unreachable_seconds) == (60, 60)


def test_the_managed_cluster_example_replaces_the_builtin_defaults(helm: Path):
    docs = render(helm, "-f", str(CHART / "examples" / "replace-builtin-defaults.yaml"))
    settings, _ = webhook_settings(docs)
    assert settings.replace_builtin_defaults is True
    assert controller_options(docs).dry_run is True
