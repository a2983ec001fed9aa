"""What the webhook's worker keeps per worker instead of redoing per request answers as gunicorn's own code.

webhook/worker.py settles gunicorn's settings once, decides a peer's trust once per IP, makes the
constant part of the WSGI environ once and formats the Date header once per second.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
from gunicorn.config import Config
from gunicorn.http import wsgi
from gunicorn.http.parser import RequestParser

from webhook import worker

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


class _Sock:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.sent.append(data)


def _comparable(environ: dict[str, Any]) -> dict[str, object]:
    """The environ without what is made per request by identity (body stream, socket, callbacks)."""
    kept = {k: v for k, v in environ.items() if k not in ("wsgi.input", "gunicorn.socket", "wsgi.early_hints")}
    kept["wsgi.errors"] = (type(environ["wsgi.errors"]), environ["wsgi.errors"].streams)
    return kept


def test_settled_settings_answer_as_gunicorns() -> None:
    cfg = _config(workers=3, keepalive=75, forwarded_allow_ips="10.0.0.1")
    settled = worker._SettledConfig(cfg)
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
    monkeypatch: pytest.MonkeyPatch, name: str, settings: dict[str, object]
) -> None:
    cfg = _config(**settings)
    _, theirs = wsgi.create(_request(cfg, REQUESTS[name]), _Sock(), CLIENT, LISTENER, cfg)
    settled = worker._SettledConfig(cfg)
    monkeypatch.setattr(wsgi, "base_environ", worker._base_environ)
    environs = [
        wsgi.create(_request(settled, REQUESTS[name], worker._RequestParser), _Sock(), CLIENT, LISTENER, settled)[1]
        for _ in range(2)
    ]  # the constant part made, then reused
    assert _comparable(environs[0]) == _comparable(environs[1]) == _comparable(theirs)
    environs[0]["wsgi.errors"] = None  # an application changing its environ changes no later request's
    assert environs[1]["wsgi.errors"] is not None and settled.environ_base["wsgi.errors"] is not None


def test_reopening_the_log_files_remakes_the_environs_error_stream() -> None:
    settled = worker._SettledConfig(_config())
    worker._base_environ(settled)
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
def test_whether_a_peer_may_set_forwarding_headers_is_gunicorns(allowed: str, peer: str, trusted: bool) -> None:
    cfg = _config(forwarded_allow_ips=allowed)
    settled = worker._SettledConfig(cfg)
    raw = REQUESTS["a forwarded scheme"]
    for _ in range(2):  # decided, then remembered
        ours = _request(settled, raw, worker._RequestParser, (peer, 1))
        theirs = _request(cfg, raw, client=(peer, 1))
        assert ours._peer_is_trusted_proxy() is theirs._peer_is_trusted_proxy() is trusted
        assert (ours.scheme, ours.headers) == (theirs.scheme, theirs.headers)
    assert settled.trusted_peers == {peer: trusted}


def test_the_date_header_is_gunicorns_and_changes_with_the_second(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1_790_000_000.9]
    monkeypatch.setattr(time, "time", lambda: now[0])
    first = worker._http_date()
    assert first == worker._gunicorn_http_date(1_790_000_000)
    now[0] += 0.05
    assert worker._http_date() == first
    now[0] += 0.2
    assert worker._http_date() == worker._gunicorn_http_date(1_790_000_001) != first
    assert worker._http_date(1_000_000_000) == worker._gunicorn_http_date(1_000_000_000)
