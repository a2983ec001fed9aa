"""What the webhook's worker keeps per worker instead of redoing per request answers as gunicorn's own code.

With the fast paths (webhook/fast_paths.py) the worker settles gunicorn's settings once, decides a peer's
trust once per IP, makes the constant part of the WSGI environ once and formats the Date header once per
second; without them it runs gunicorn's own code. Both ways answer as gunicorn does.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
from gunicorn import util
from gunicorn.config import Config
from gunicorn.http import wsgi
from gunicorn.http.parser import RequestParser

from webhook import fast_paths as fast_paths_module
from webhook import worker
from webhook.fast_paths import FastPaths

BODY = b'{"kind":"AdmissionReview"}'
CLIENT = ("10.0.0.7", 51234)
LISTENER = ("0.0.0.0", 8443)

REQUESTS = {
    "the apiserver's review": (
        b"POST /mutate?timeout=10s HTTP/1.1\r\n"
        b"Host: taintkeeper-webhook.taintkeeper-system.svc:443\r\n"
        b"Content-Type: application/json\r\nAccept: application/json, */*\r\n"
        b"Content-Length: %d\r\n\r\n" % len(BODY)
    )
    + BODY,
    "repeated headers and an encoded path": (
        b"POST /mu%%74ate HTTP/1.1\r\nHost: x\r\nAccept: a\r\nAccept: b\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY)
    )
    + BODY,
    "HTTP/1.0 without a body": b"GET /healthz HTTP/1.0\r\n\r\n",
    "a forwarded scheme": b"GET /readyz HTTP/1.1\r\nHost: x\r\nX-Forwarded-Proto: https\r\n\r\n",
}


def _config(**settings: object) -> Config:
    cfg = Config()
    for name, value in settings.items():
        cfg.set(name, value)
    return cfg


def _request(cfg: object, raw: bytes, parser_class: type = RequestParser, client: object = CLIENT) -> Any:
    return next(parser_class(cfg, [raw], client))


def _worker_request(paths: FastPaths, cfg: object, raw: bytes, client: object = CLIENT) -> Any:
    """A request parsed as the worker parses it, with `paths`."""
    return next(paths.request_parser(cfg, [raw], client))


class _Sock:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.sent.append(data)


@pytest.fixture
def gunicorns_own(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """gunicorn's `util.http_date` and `wsgi.base_environ`, put back in its modules after the test."""
    monkeypatch.setattr(util, "http_date", util.http_date)
    monkeypatch.setattr(wsgi, "base_environ", wsgi.base_environ)
    return util.http_date, wsgi.base_environ


def _comparable(environ: dict[str, Any]) -> dict[str, object]:
    """The environ without what is made per request by identity (body stream, socket, callbacks)."""
    kept = {k: v for k, v in environ.items() if k not in ("wsgi.input", "gunicorn.socket", "wsgi.early_hints")}
    kept["wsgi.errors"] = (type(environ["wsgi.errors"]), environ["wsgi.errors"].streams)
    return kept


def test_settled_settings_answer_as_gunicorns() -> None:
    cfg = _config(workers=3, keepalive=75, forwarded_allow_ips="10.0.0.1")
    settled = FastPaths(True).settled(cfg)
    assert isinstance(settled, fast_paths_module._SettledConfig)
    for name in (
        "workers",
        "keepalive",
        "is_ssl",
        "forwarded_allow_ips",
        "limit_request_fields",
        "protocol",
        "secure_scheme_headers",
        "forwarder_headers",
        "pre_request",
        "post_request",
    ):
        assert getattr(settled, name) == getattr(cfg, name)
        assert getattr(settled, name) == getattr(cfg, name)  # the second answer, from the settled copy
    with pytest.raises(AttributeError):
        _ = settled.no_such_setting


@pytest.mark.parametrize("name", REQUESTS)
@pytest.mark.parametrize(
    "settings",
    [{}, {"workers": 2}, {"forwarded_allow_ips": "*"}],
    ids=["defaults", "two workers", "every peer trusted"],
)
def test_a_requests_environ_is_the_one_gunicorn_makes(
    gunicorns_own: tuple[Any, Any], name: str, settings: dict[str, object], fast_paths: bool
) -> None:
    cfg = _config(**settings)
    _, theirs = wsgi.create(_request(cfg, REQUESTS[name]), _Sock(), CLIENT, LISTENER, cfg)
    paths = FastPaths(fast_paths)
    settled = paths.settled(cfg)
    paths.install_in_gunicorn()
    assert hasattr(wsgi.base_environ, "__wrapped__") is fast_paths
    environs = [
        wsgi.create(_worker_request(paths, settled, REQUESTS[name]), _Sock(), CLIENT, LISTENER, settled)[1]
        for _ in range(2)
    ]  # the constant part made, then reused
    assert _comparable(environs[0]) == _comparable(environs[1]) == _comparable(theirs)
    environs[0]["wsgi.errors"] = None  # an application changing its environ changes no later request's
    assert environs[1]["wsgi.errors"] is not None
    if fast_paths:
        assert settled.environ_base["wsgi.errors"] is not None


def test_reopening_the_log_files_remakes_the_environs_error_stream() -> None:
    settled = FastPaths(True).settled(_config())
    fast_paths_module.base_environ_once_per_worker(wsgi.base_environ)(settled)
    assert settled.environ_base
    reopened: list[bool] = []
    webhook_worker = worker.WebhookWorker.__new__(worker.WebhookWorker)
    webhook_worker.cfg = settled
    webhook_worker.log = SimpleNamespace(reopen_files=lambda: reopened.append(True))
    webhook_worker._reopen_log_files()
    assert reopened == [True] and settled.environ_base == {}


@pytest.mark.parametrize(
    "allowed, peer, trusted",
    [
        ("127.0.0.1", "127.0.0.1", True),
        ("127.0.0.1", "10.0.0.7", False),
        ("10.0.0.0/8", "10.0.0.7", True),
        ("*", "192.0.2.1", True),
        ("", "127.0.0.1", False),
    ],
)
def test_whether_a_peer_may_set_forwarding_headers_is_gunicorns(
    allowed: str, peer: str, trusted: bool, fast_paths: bool
) -> None:
    cfg = _config(forwarded_allow_ips=allowed)
    paths = FastPaths(fast_paths)
    settled = paths.settled(cfg)
    raw = REQUESTS["a forwarded scheme"]
    for _ in range(2):  # decided, then remembered
        ours = _worker_request(paths, settled, raw, (peer, 1))
        theirs = _request(cfg, raw, client=(peer, 1))
        assert ours._peer_is_trusted_proxy() is theirs._peer_is_trusted_proxy() is trusted
        assert (ours.scheme, ours.headers) == (theirs.scheme, theirs.headers)
    assert (type(ours) is fast_paths_module._Request) is fast_paths
    if fast_paths:
        assert settled.trusted_peers == {peer: trusted}


def test_the_date_header_is_gunicorns_and_changes_with_the_second(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1_790_000_000.9]
    monkeypatch.setattr(time, "time", lambda: now[0])
    gunicorns = util.http_date
    http_date = fast_paths_module.http_date_once_per_second(gunicorns)
    first = http_date()
    assert first == gunicorns(1_790_000_000)
    now[0] += 0.05
    assert http_date() == first
    now[0] += 0.2
    assert http_date() == gunicorns(1_790_000_001) != first
    assert http_date(1_000_000_000) == gunicorns(1_000_000_000)


def test_the_worker_puts_the_fast_date_and_environ_in_gunicorn_only_with_the_switch_on(
    gunicorns_own: tuple[Any, Any], fast_paths: bool
) -> None:
    for _ in range(2):  # a second install wraps nothing twice
        FastPaths(fast_paths).install_in_gunicorn()
    if fast_paths:
        assert (util.http_date.__wrapped__, wsgi.base_environ.__wrapped__) == gunicorns_own
    else:
        assert (util.http_date, wsgi.base_environ) == gunicorns_own
