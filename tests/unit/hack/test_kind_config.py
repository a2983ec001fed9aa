"""hack/lib/kind.sh `write_kind_config`: hack/kind-config.yaml plus what this host needs, as one YAML document kind
reads. Every kind cluster's nodes read a hosts.toml per registry from /etc/containerd/certs.d (the cluster's
registry, hack/cluster_registry.py, writes them); on a host whose containers lack CAP_SYS_RESOURCE, the same
containerdConfigPatches list also restricts OOM score adjustments (two patches under one key, not two keys)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from hack import cluster_registry

HACK = Path(__file__).resolve().parents[3] / "hack"


def written(directory: Path, image: str, capabilities_missing: bool) -> dict:
    # runc_capfilter.py says what the host lacks; a stand-in on PATH answers as such a host would.
    fake = directory / "bin"
    fake.mkdir()
    answer = "CAP_SYS_RESOURCE" if capabilities_missing else ""
    (fake / "python3").write_text(f"#!/bin/sh\necho '{answer}'\n")
    (fake / "python3").chmod(0o755)
    script = f'. "{HACK}/lib/common.sh"; HERE="{HACK}"; . "{HACK}/lib/kind.sh"; write_kind_config "$1" "$2"'
    result = subprocess.run(
        ["bash", "-c", script, "bash", str(directory), image],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": f"{fake}:/usr/bin:/bin"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(directory / "kind-config.yaml")
    return yaml.safe_load((directory / "kind-config.yaml").read_text())


@pytest.mark.parametrize("capabilities_missing", [False, True], ids=["all capabilities", "no CAP_SYS_RESOURCE"])
def test_the_nodes_read_the_registrys_hosts_and_the_config_stays_one_document(
    tmp_path: Path, capabilities_missing: bool
) -> None:
    config = written(tmp_path, "kindest/node:v1.37.0", capabilities_missing)
    patches = config["containerdConfigPatches"]
    assert any(
        f'config_path = "{cluster_registry.KIND_HOSTS_DIR}"' in patch
        and '[plugins."io.containerd.grpc.v1.cri".registry]' in patch
        for patch in patches
    ), patches
    assert any("restrict_oom_score_adj = true" in patch for patch in patches) == capabilities_missing
    assert [node["role"] for node in config["nodes"]] == ["control-plane", "worker", "worker", "worker"]
