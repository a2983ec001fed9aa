"""hack/lib/nodes.sh `node_ns_holding`: a node's processes enter its mount namespace only once the holder has
made the bind mounts and runs under its own name. Before, the wait took any process whose command line named
the cluster's directory, which the holder's setsid, unshare and mounting bash do from their first instant:
under load a kubelet entered the host's mount namespace and wrote the host's /var/lib/kubelet."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.health import wait_until

HACK = Path(__file__).resolve().parents[3] / "hack"


def sourced(call: str, *args: str) -> bool:
    script = f'. "{HACK}/lib/common.sh"; . "{HACK}/lib/host.sh"; . "{HACK}/lib/nodes.sh"; {call}'
    return subprocess.run(["bash", "-c", script, "bash", *args], check=False).returncode == 0


def holding(node_dir: Path) -> bool:
    return sourced('node_ns_holding "$1"', str(node_dir))


def test_the_namespace_is_not_ready_while_its_holder_still_makes_the_mounts(tmp_path: Path) -> None:
    node_dir = tmp_path / "nodes" / "node-1"
    node_dir.mkdir(parents=True)
    release = tmp_path / "mounts-made"
    # A stand-in for the holder: its command line names the node's directory at once (as the mounting bash's
    # does), and it runs under the holder's name only once "the mounts" are made.
    holder = subprocess.Popen(
        [
            "bash",
            "-c",
            f"while [ ! -e '{release}' ]; do sleep 0.05; done; exec -a 'taintkeeper-node-ns {node_dir}' sleep 30",
        ]
    )
    try:
        (node_dir / "ns.pid").write_text(str(holder.pid))
        assert not holding(node_dir)  # named in the command line, but not holding yet
        assert sourced('pid_alive "$1/ns.pid" "$2"', str(node_dir), str(tmp_path))  # the old wait took it
        release.touch()
        wait_until(lambda: holding(node_dir), "the holder to run under its name")
    finally:
        holder.kill()
        holder.wait()
    assert not holding(node_dir)  # gone
