"""NOTES.txt, shown after `helm install` and `upgrade`, says what to do next for the values given.

`helm template` leaves NOTES.txt out and `helm install --dry-run` needs a cluster, so the notes' text is a
define (templates/_notes.tpl) that NOTES.txt includes: the test renders it from a copy of the chart with one
more template, a ConfigMap holding that text.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.chart.helm import APP_VERSION, CHART, render

NOTES_TEMPLATE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: notes
data:
  notes: {{ include "taintkeeper.notes" . | toJson }}
"""


@pytest.fixture(scope="module")
def chart_with_notes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chart = tmp_path_factory.mktemp("chart") / "taintkeeper"
    shutil.copytree(CHART, chart)
    assert (chart / "templates" / "NOTES.txt").read_text().strip().endswith('{{ include "taintkeeper.notes" . }}')
    (chart / "templates" / "zz-notes.yaml").write_text(NOTES_TEMPLATE)
    return chart


class Notes(NamedTuple):
    name: str
    sets: tuple[str, ...]
    says: tuple[str, ...]
    not_said: tuple[str, ...] = ()
    args: tuple[str, ...] = ()  # beside the values: the release's namespace


NOTES = [
    Notes(
        "by default: wait for the certificate Job, check the webhook, status and dashboard, switch off the built-ins",
        (),
        (
            "rollout status deployment/taintkeeper-webhook deployment/taintkeeper-controller",
            "kubectl -n taintkeeper-system logs job/taintkeeper-certs-sync-1",
            "kubectl get mutatingwebhookconfiguration taintkeeper",
            "(300 s not-ready, 300 s unreachable",
            "kubectl taintkeeper status --lease-namespace taintkeeper-system",
            "kubectl taintkeeper explain node NODE",
            "`pip install .` in taintkeeper's repository puts the kubectl plugin on the PATH",
            "--set grafanaDashboard.enabled=true",
            "manifests/monitoring/grafana/taintkeeper.json",
            "--clusterrole=taintkeeper-viewer --user=USER",
            "kubectl -n taintkeeper-system create rolebinding taintkeeper-viewer:USER --role=taintkeeper-viewer",
            "Switch off what taintkeeper replaces",
        ),
        ("cert-manager", "NetworkPolicy", "--replace-builtin-defaults"),
    ),
    Notes(
        # `helm template` reads no namespace, as `helm install --create-namespace` renders before making it.
        "in a namespace without the Pod Security labels: how to label it",
        (),
        (
            "The namespace taintkeeper-system does not enforce the restricted Pod Security Standard",
            "(Helm made it, with --create-namespace,",
            "kubectl label namespace taintkeeper-system pod-security.kubernetes.io/enforce=restricted",
            "kubectl annotate namespace taintkeeper-system taintkeeper.io/eviction=respect-disruption-budget",
        ),
    ),
    Notes(
        "the version and the image: the chart's appVersion is the image's tag by default",
        (),
        (f"taintkeeper {APP_VERSION} (taintkeeper:{APP_VERSION}) is installed",),
        (":dev",),
    ),
    Notes(
        "the version and the image: a tag given is the image's",
        ("image.repository=registry.example.com/taintkeeper", "image.tag=1.2.3-rc.1"),
        (f"taintkeeper {APP_VERSION} (registry.example.com/taintkeeper:1.2.3-rc.1) is installed",),
    ),
    Notes(
        "the version and the image: a digest given is what the pods run, the tag left out",
        ("image.repository=127.0.0.1:5000/taintkeeper", "image.tag=1.2.3", "image.digest=sha256:" + "ab" * 32),
        (f"taintkeeper {APP_VERSION} (127.0.0.1:5000/taintkeeper@sha256:{'ab' * 32}) is installed",),
        (":1.2.3",),
    ),
    Notes(
        "in the namespace the chart makes: nothing to label",
        ("namespace.create=true",),
        ("kubectl taintkeeper status",),
        ("Pod Security", "kubectl label namespace"),
    ),
    Notes(
        "in another namespace: every command names it",
        (),
        (
            "is installed in the namespace team-a.",
            "kubectl -n team-a rollout status",
            "kubectl -n team-a logs job/taintkeeper-certs-sync-1",
            "kubectl taintkeeper status --lease-namespace team-a",
            "kubectl -n team-a create rolebinding taintkeeper-viewer:USER",
            "kubectl label namespace team-a pod-security.kubernetes.io/enforce=restricted",
        ),
        ("taintkeeper-system",),
        ("--namespace", "team-a"),
    ),
    Notes(
        "without the operator roles: no word of binding them",
        ("operatorRoles.create=false",),
        ("kubectl taintkeeper status",),
        ("taintkeeper-viewer", "taintkeeper-fencer"),
    ),
    Notes(
        "with the dashboard: where Grafana shows it",
        ("grafanaDashboard.enabled=true",),
        (
            "the ConfigMap taintkeeper-system/taintkeeper-grafana-dashboard",
            'the dashboard "taintkeeper" (GRAFANA_URL/d/taintkeeper)',
        ),
        ("--set grafanaDashboard.enabled=true",),
    ),
    Notes(
        "with cert-manager: wait for the Certificate",
        ("certificates.mode=certManager",),
        ("kubectl -n taintkeeper-system get certificate taintkeeper-webhook-tls",),
        ("certs-sync",),
    ),
    Notes(
        "with other seconds: those, 0 included",
        (
            "webhook.flags.default-not-ready-toleration-seconds=0",
            "controller.flags.default-not-ready-toleration-seconds=0",
        ),
        ("(0 s not-ready, 300 s unreachable",),
    ),
    Notes(
        "replacing the built-in defaults: the managed-cluster advice",
        ("webhook.flags.replace-builtin-defaults=true",),
        ("(--replace-builtin-defaults)", '"Managed clusters"'),
        ("Switch off what taintkeeper replaces",),
    ),
    Notes(
        "with the NetworkPolicy: check that reviews keep coming",
        ("networkPolicy.enabled=true", "networkPolicy.apiserver[0].ipBlock.cidr=10.0.0.0/24"),
        ("taintkeeper_webhook_admission_reviews_total keeps rising",),
    ),
]


@pytest.mark.parametrize("notes", NOTES, ids=[n.name for n in NOTES])
def test_the_notes_say_what_to_do_next(helm: Path, chart_with_notes: Path, notes: Notes):
    sets = [arg for value in notes.sets for arg in ("--set", value)]
    (configmap,) = render(helm, "--show-only", "templates/zz-notes.yaml", *sets, *notes.args, chart=chart_with_notes)
    text = configmap["data"]["notes"]
    for expected in notes.says:
        assert expected in text
    for unexpected in notes.not_said:
        assert unexpected not in text
