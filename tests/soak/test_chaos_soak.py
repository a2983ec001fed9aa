"""The short chaos soaks of `make test` and CI: bench/chaos.py with a fixed seed, for 5 minutes with the
webhook (the main kustomization), and for 2 minutes with the admission policy instead
(`--admission policy`, manifests/admission-policy: kube-apiserver adds the tolerations; no webhook).

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
