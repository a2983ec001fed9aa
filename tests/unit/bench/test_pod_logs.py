"""bench/soak/pod_logs.py: the soak's copies of taintkeeper's pods' logs outlive the originals."""

from __future__ import annotations

from pathlib import Path

from bench.soak.pod_logs import copy_new


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_grown_log_is_copied_again_and_a_removed_one_is_kept(tmp_path: Path) -> None:
    nodes, dest = tmp_path / "nodes", tmp_path / "copies"
    ours = write(nodes / "node-1/host/var/log/pods/taintkeeper-system_web-1_uid/webhook/0.log", "a\n")
    write(nodes / "node-2/host/var/log/pods/chaos-workload_p_uid/pause/0.log", "not ours\n")
    copy = dest / "taintkeeper-system_web-1_uid/webhook/0.log"
    assert copy_new(nodes, "taintkeeper-system", dest) == 1 and copy.read_text() == "a\n"
    assert copy_new(nodes, "taintkeeper-system", dest) == 0  # unchanged: not copied again
    ours.write_text("a\nb\n")
    assert copy_new(nodes, "taintkeeper-system", dest) == 1 and copy.read_text() == "a\nb\n"
    ours.unlink()  # the pod is gone: the kubelet removed its logs
    assert copy_new(nodes, "taintkeeper-system", dest) == 0 and copy.read_text() == "a\nb\n"
    assert not (dest / "chaos-workload_p_uid").exists()
