"""The short chaos soaks of `make test` and CI: bench/chaos.py with a fixed seed, for 5 minutes with the
webhook (the main kustomization), and for 2 minutes with the admission policy instead
(`--admission policy`, manifests/admission-policy: kube-apiserver adds the tolerations; no webhook); and
two 90-second soaks sabotaged 20 s in (`--sabotage`: the controller, or the webhook, scaled to 0 by
no fault), which the judge must fail with the invariant named, within the soak's length plus 2 minutes.

Taintkeeper is deployed from its image into the complete local cluster with the audit log on,
faults land on it (overlapping), and the checker judges the run from the audit log and the fault
log alone: any violation of an invariant fails the test, with the checker's table as the reason.
`make chaos` is the long version (60 minutes by default).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench import chaos
from bench.soak.sabotage import SABOTAGES

pytestmark = pytest.mark.soak

SEED = 26
DURATION = "5m"


POLICY_DURATION = "2m"
POLICY_FROM = 36


@pytest.mark.timeout(1800)
@pytest.mark.parametrize(
    ("admission", "duration"), [("webhook", DURATION), ("policy", POLICY_DURATION)], ids=["webhook", "admission policy"]
)
def test_a_short_soak_violates_no_invariant(
    tmp_path_factory: pytest.TempPathFactory, taintkeeper_image: object, admission: str, duration: str
):
    kubernetes = os.environ.get("TAINTKEEPER_KUBERNETES") or "1.37"
    if admission == "policy" and int(kubernetes.split(".")[1]) < POLICY_FROM:
        pytest.skip(
            f"MutatingAdmissionPolicy v1 is served from Kubernetes 1.{POLICY_FROM} on; this run is {kubernetes}"
        )
    directory: Path = tmp_path_factory.mktemp("soak")
    args = chaos.parse_args(
        [
            "--admission",
            admission,
            "--duration",
            duration,
            "--seed",
            str(SEED),
            "--faults-per-minute",
            "6",
            "--settle",
            "60s",
            "--dir",
            str(directory),
        ]
    )
    result = chaos.run(args)
    assert result.exit_code == 0, f"the soak found violations:\n{result.table}"


SABOTAGE_DURATION = 90.0
# The webhook's absence is excused while a fault accounts for it (a node fault on a webhook pod's node for
# minutes, a webhook pod deleted): the sabotage's soak draws none of those, so its absence is the sabotage's.
WEBHOOK_EXCUSING_FAULTS = (
    "kubelet-kill",
    "kubelet-pause",
    "power-off",
    "manual-taint",
    "runtime-then-kubelet",
    "webhook-delete",
)


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("sabotage", sorted(SABOTAGES))
def test_a_sabotaged_short_soak_fails_with_its_invariant_named(
    tmp_path_factory: pytest.TempPathFactory, taintkeeper_image: object, sabotage: str
):
    _, invariant = SABOTAGES[sabotage]
    without = WEBHOOK_EXCUSING_FAULTS if sabotage == "webhook-stopped" else ()
    args = chaos.parse_args(
        [
            "--sabotage",
            sabotage,
            "--sabotage-after",
            "20s",
            "--duration",
            f"{SABOTAGE_DURATION:g}s",
            "--seed",
            str(SEED),
            "--faults-per-minute",
            "3",
            "--settle",
            "30s",
            "--dir",
            str(tmp_path_factory.mktemp("sabotage")),
            *(argument for kind in without for argument in ("--without", kind)),
        ]
    )
    result = chaos.run(args)
    assert result.exit_code == 1, f"the judge passed a sabotaged soak:\n{result.table}"
    named = {line.split()[0] for line in result.table.splitlines() if line.startswith("I")}
    assert invariant in named, result.table
    assert result.verdict_after <= SABOTAGE_DURATION + 120.0
