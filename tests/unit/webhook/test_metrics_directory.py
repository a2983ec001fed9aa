"""The workers' metrics directory (PROMETHEUS_MULTIPROC_DIR, webhook/gunicorn_conf.py): a directory the
server made for itself is gone once it exits; one the operator named is left in place."""

from __future__ import annotations

from pathlib import Path

import pytest

from hack.servers import WebhookServer, make_certs


def run_once(directory: Path, env: dict[str, str]) -> None:
    with WebhookServer(directory, directory / "webhook.log", workers=2, env=env):
        pass


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    make_certs(tmp_path)
    return tmp_path


def test_a_directory_the_server_made_is_removed_when_it_exits(certs: Path):
    scratch = certs / "tmpdir"
    scratch.mkdir()
    run_once(certs, {"TMPDIR": str(scratch)})
    assert list(scratch.iterdir()) == []


def test_a_directory_the_operator_named_is_left_in_place(certs: Path):
    named = certs / "metrics"
    named.mkdir()
    run_once(certs, {"PROMETHEUS_MULTIPROC_DIR": str(named)})
    assert named.is_dir()
