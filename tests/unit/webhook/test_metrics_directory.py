"""The workers' metrics directory (PROMETHEUS_MULTIPROC_DIR, webhook/gunicorn_conf.py): a directory the
server made for itself is gone once it exits; one the operator named is kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from hack.servers import WebhookServer, make_certs

PREFIX = "taintkeeper-webhook-metrics-"


@pytest.fixture
def certs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)  # the server inherits this environment
    make_certs(tmp_path)
    return tmp_path


def test_a_directory_the_server_made_is_removed_when_it_exits(certs: Path):
    scratch = certs / "tmpdir"
    scratch.mkdir()
    with WebhookServer(certs, certs / "webhook.log", workers=2, env={"TMPDIR": str(scratch)}):
        made = [path.name for path in scratch.iterdir()]
        assert len(made) == 1 and made[0].startswith(PREFIX)
    assert list(scratch.iterdir()) == []


def test_a_directory_the_operator_named_is_kept(certs: Path):
    named = certs / "metrics"
    named.mkdir()
    with WebhookServer(certs, certs / "webhook.log", workers=2, env={"PROMETHEUS_MULTIPROC_DIR": str(named)}):
        pass
    assert named.is_dir()
