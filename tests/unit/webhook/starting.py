"""The webhook's start in a fresh process, for the tests of what its gunicorn config does when loaded: importing it
monkey-patches the process (with gevent) and runs checks that are made once per process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def run_python(code: str, metrics_directory: Path, settings: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`code` run by this Python in a new process at the repository's root, with no TAINTKEEPER_* variable but
    `settings`, and PROMETHEUS_MULTIPROC_DIR `metrics_directory`: its exit code, stdout and stderr."""
    environment = {
        **{name: value for name, value in os.environ.items() if not name.startswith("TAINTKEEPER_")},
        **settings,
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_directory),
    }
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, env=environment
    )
