"""hack/kind_node.py: the kind node image's layers cached by what they are made of, never half-written."""

from __future__ import annotations

from pathlib import Path

import pytest

from hack import kind_node
from hack.docker_archive import file_digest
from hack.kind_node import Cache


class Builds:
    def __init__(self, content: bytes = b"layer", fail: bool = False) -> None:
        self.content, self.fail, self.count = content, fail, 0

    def __call__(self, out: Path) -> None:
        self.count += 1
        out.write_bytes(self.content[:2])
        if self.fail:
            raise RuntimeError("mmdebstrap failed")
        out.write_bytes(self.content)


def test_a_layer_is_built_once_and_then_found(tmp_path: Path) -> None:
    cache, build = Cache(tmp_path), Builds()
    first = cache.layer("node-root", "k1", build)
    again = cache.layer("node-root", "k1", build)
    assert build.count == 1
    assert first == again == (tmp_path / "node-root-k1.tar", file_digest(tmp_path / "node-root-k1.tar"))


def test_another_key_builds_another_layer(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    first = cache.layer("files", "k1", Builds(b"one"))
    second = cache.layer("files", "k2", Builds(b"two"))
    assert first[0] != second[0] and first[1] != second[1]


def test_a_build_failing_midway_leaves_no_entry_and_the_next_run_builds_again(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    with pytest.raises(RuntimeError, match="mmdebstrap failed"):
        cache.layer("node-root", "k1", Builds(fail=True))
    assert list(tmp_path.iterdir()) == []
    retry = Builds(b"complete")
    path, _ = cache.layer("node-root", "k1", retry)
    assert retry.count == 1 and path.read_bytes() == b"complete"


def test_a_layer_without_its_digest_beside_it_is_built_again(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    cache.layer("preload", "k1", Builds(b"old"))
    (tmp_path / "preload-k1.tar.diffid").unlink()  # killed between the rename and the digest's write
    rebuilt = Builds(b"new")
    path, diff_id = cache.layer("preload", "k1", rebuilt)
    assert rebuilt.count == 1 and diff_id == file_digest(path)


def test_pruning_keeps_the_layers_this_build_used_and_removes_the_rest(tmp_path: Path) -> None:
    Cache(tmp_path).layer("preload", "old", Builds(b"old"))
    cache = Cache(tmp_path)
    kept, _ = cache.layer("preload", "new", Builds(b"new"))
    cache.prune()
    assert sorted(path.name for path in tmp_path.iterdir()) == [kept.name, f"{kept.name}.diffid"]


def test_binaries_not_built_yet_are_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(SystemExit) as exit_info:
        kind_node.parse_args(
            [
                *("--kubernetes-bin", str(missing), "--etcd", str(missing / "etcd"), "--coredns", str(missing)),
                *("--crictl", str(missing), "--kind-files", str(tmp_path), "--cache", str(tmp_path / "cache")),
            ]
        )
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("usage:") is False and "not built yet:" in error and "kubeadm" in error
    assert not (tmp_path / "cache").exists()
