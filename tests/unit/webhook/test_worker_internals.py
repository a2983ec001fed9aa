"""The webhook's worker (webhook/worker.py) and gunicorn's internals: with the fast-paths switch on, each one it
relies on is checked once, at start, and a gunicorn that differs stops the start with one line; with the switch
off, gunicorn's own gevent worker serves and nothing is checked.

Each mismatch test changes one internal the way a new gunicorn release might, before the check runs.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import gunicorn
import pytest
from gunicorn import http, util
from gunicorn.http import parser as gunicorn_parser
from gunicorn.http.unreader import SocketUnreader
from gunicorn.workers.base import Worker
from gunicorn.workers.base_async import AsyncWorker
from gunicorn.workers.ggevent import GeventWorker

from tests.unit.webhook.starting import run_python
from webhook import worker
from webhook.worker import gunicorn_mismatch


class _ReadAheadElsewhere(SocketUnreader):
    """gunicorn's socket unreader, keeping what it reads ahead in `held` rather than in `buf`; `buf` is left
    empty, or (`without_buf`) gone."""

    without_buf = False

    def __init__(self, sock: Any, max_chunk: int = 8192) -> None:
        super().__init__(sock, max_chunk)
        self.held = b""
        if self.without_buf:
            del self.buf

    def chunk(self, size_hint: int | None = None) -> bytes:
        if self.held:
            data, self.held = self.held, b""
            return data
        return bytes(super().chunk(size_hint))

    def unread(self, data: bytes) -> None:
        self.held = data + self.held

    def read(self, size: int | None = None, read_ahead: int | None = None) -> bytes:
        data = self.chunk()
        while size is not None and len(data) < size and (more := self.chunk()):
            data += more
        if size is None or size < 0 or len(data) <= size:
            return data
        self.unread(data[size:])
        return data[:size]


class _ReadAheadGone(_ReadAheadElsewhere):
    without_buf = True


def _defining_classes(cls: type, name: str) -> list[type]:
    return [klass for klass in cls.__mro__ if name in vars(klass)]


def _without_handle_request(monkeypatch: pytest.MonkeyPatch) -> None:
    for klass in _defining_classes(GeventWorker, "handle_request"):
        monkeypatch.delattr(klass, "handle_request")


def _handle_error_without_addr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Worker, "handle_error", lambda self, req, client, exc: None)


def _without_get_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(http, "get_parser")


def _init_process_without_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Worker, "init_process", lambda self: self.load_wsgi())


def _async_worker_without_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    def __init__(self: AsyncWorker, *args: Any, **kwargs: Any) -> None:
        Worker.__init__(self, *args, **kwargs)

    monkeypatch.setattr(AsyncWorker, "__init__", __init__)


def _read_ahead_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gunicorn_parser, "SocketUnreader", _ReadAheadElsewhere)


def _read_ahead_without_buf(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gunicorn_parser, "SocketUnreader", _ReadAheadGone)


def _responses_written_with_send(monkeypatch: pytest.MonkeyPatch) -> None:
    def write(sock: Any, data: bytes, chunked: bool = False) -> None:
        sock.send(data)

    monkeypatch.setattr(util, "write", write)


MISMATCHES = [
    ("GeventWorker.handle_request gone", _without_handle_request, "gunicorn's GeventWorker has no handle_request"),
    (
        "handle_error taking other arguments",
        _handle_error_without_addr,
        "gunicorn's GeventWorker.handle_error cannot be called with (self, req, client, addr, exc)",
    ),
    ("get_parser gone", _without_get_parser, "gunicorn.http has no get_parser"),
    ("the worker's run not called", _init_process_without_run, "gunicorn's Worker.init_process no longer calls run"),
    (
        "worker_connections not set",
        _async_worker_without_connections,
        "gunicorn's AsyncWorker.__init__ no longer sets worker_connections",
    ),
    (
        "read-ahead kept elsewhere",
        _read_ahead_elsewhere,
        "a gunicorn parser keeps what it read ahead elsewhere than in its unreader.buf",
    ),
    (
        "no unreader.buf",
        _read_ahead_without_buf,
        "check_read_ahead failed: AttributeError: '_ReadAheadGone' object has no attribute 'buf'",
    ),
    (
        "responses written with send",
        _responses_written_with_send,
        "check_response_writes failed: AttributeError: '_SendallOnly' object has no attribute 'send'",
    ),
]


def test_the_installed_gunicorn_has_every_internal_the_worker_relies_on() -> None:
    """The gunicorn pyproject.toml allows is the one the worker was written for."""
    assert gunicorn_mismatch() is None


@pytest.mark.parametrize(("change", "why"), [m[1:] for m in MISMATCHES], ids=[m[0] for m in MISMATCHES])
def test_a_changed_internal_is_named_by_the_check(monkeypatch: pytest.MonkeyPatch, change: Any, why: str) -> None:
    change(monkeypatch)
    assert gunicorn_mismatch() == why


# -- at start ------------------------------------------------------------------------------------------------------

START_WITHOUT_GET_PARSER = """
import gunicorn.http

del gunicorn.http.get_parser
import webhook.gunicorn_conf as conf

print(conf.worker_class)
"""


def _start(tmp_path: Path, switch: str) -> subprocess.CompletedProcess[str]:
    """The gunicorn config loaded (as `python -m webhook` and gunicorn load it, in the master) with a gunicorn that
    has no `http.get_parser`."""
    return run_python(START_WITHOUT_GET_PARSER, tmp_path, {"TAINTKEEPER_FAST_PATHS": switch})


def test_with_the_switch_on_a_changed_gunicorn_stops_the_start_in_one_line(tmp_path: Path) -> None:
    result = _start(tmp_path, "true")
    assert result.returncode == 2, result.stdout
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"webhook: error: the webhook's worker does not fit gunicorn {gunicorn.__version__}: gunicorn.http has no "
        "get_parser (--fast-paths=false serves with gunicorn's own gevent worker, without --request-timeout)"
    ]


def test_with_the_switch_off_gunicorns_own_worker_serves_unchecked(tmp_path: Path) -> None:
    result = _start(tmp_path, "false")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "gevent"


# -- the response written in one go ----------------------------------------------------------------------------


class _Client:
    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes]] = []

    def sendall(self, data: bytes) -> None:
        self.calls.append(("sendall", data))

    def send(self, data: bytes) -> int:
        self.calls.append(("send", data))
        return len(data)

    def sendfile(self, data: bytes) -> None:
        self.calls.append(("sendfile", data))


@pytest.mark.parametrize(
    ("then", "calls"),
    [
        ("flush", [("sendall", b"head body")]),
        ("send", [("sendall", b"head body"), ("send", b"100")]),
        ("sendfile", [("sendall", b"head body"), ("sendfile", b"file")]),
    ],
    ids=["the whole response in one write", "a send after what is held", "the socket's own calls after it"],
)
def test_what_gunicorn_writes_reaches_the_client_in_order(then: str, calls: list[tuple[str, bytes]]) -> None:
    client = _Client()
    coalesced: Any = worker._Coalesced(client)  # type: ignore[arg-type]
    coalesced.sendall(b"head ")
    coalesced.sendall(b"body")
    assert client.calls == []
    if then == "flush":
        coalesced.flush()
    else:
        getattr(coalesced, then)({"send": b"100", "sendfile": b"file"}[then])
    assert client.calls == calls
