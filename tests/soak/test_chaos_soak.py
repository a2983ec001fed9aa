"""The short chaos soak of `make test` and CI: bench/chaos.py for 5 minutes with a fixed seed.

Taintkeeper is deployed from its image into the complete local cluster with the audit log on,
faults land on it (overlapping), and the checker judges the run from the audit log and the fault
log alone: any violation of an invariant fails the test, with the checker's table as the reason.
`make chaos` is the long version (60 minutes by default).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import chaos

pytestmark = pytest.mark.soak

SEED = 26
DURATION = "5m"


@pytest.mark.timeout(1800)
def test_a_short_soak_violates_no_invariant(tmp_path_factory: pytest.TempPathFactory, taintkeeper_image: object):
    directory: Path = tmp_path_factory.mktemp("soak")
    args = chaos.parse_args(
        [
            "--duration",
            DURATION,
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
