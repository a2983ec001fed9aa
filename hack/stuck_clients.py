"""Stuck clients against a TLS server on loopback: connections that never finish, and reviews timed beside them.

Used by tests/unit/webhook/test_worker.py and bench/stuck_client_reviews.py. A stuck connection is one
of four kinds, each of which held a gunicorn gthread thread until its client gave up:

- `tcp`: TCP connected, no TLS ClientHello ever sent;
- `tls`: TLS handshake completed, no request ever sent;
- `headers`: TLS, then a request whose headers never end;
- `body`: TLS, then complete headers announcing a body that never comes.

(`refused`: a TLS connection whose handshake the server never completed, when measuring one that starves.)

Everything here is bounded in time and talks only to the address it is given.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass

KINDS = ("tcp", "tls", "headers", "body")


@dataclass
class StuckConnection:
    kind: str
    sock: socket.socket
    opened: float  # time.monotonic() when TCP connected
    closed_after: float | None = None  # seconds from `opened` until the server closed it, once seen


def _partial_request(kind: str, host: str, body_bytes: int) -> bytes:
    head = f"POST /mutate HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    if kind == "headers":
        return head.encode() + b"Content-Le"
    return (head + f"Content-Length: {body_bytes}\r\n\r\n").encode() + b'{"apiVersion": '


def open_stuck(host: str, port: int, context: ssl.SSLContext, kind: str, timeout: float = 10.0) -> StuckConnection:
    """One stuck connection of `kind`; raises if the server does not even let it get that far in `timeout`.

    The socket is left non-blocking, for `server_closed`.
    """
    raw = socket.create_connection((host, port), timeout=timeout)
    opened = time.monotonic()
    sock: socket.socket = raw
    if kind != "tcp":
        try:
            sock = context.wrap_socket(raw, server_hostname=host)  # handshakes here, within `timeout`
            if kind in ("headers", "body"):
                sock.sendall(_partial_request(kind, host, 1270))
        except BaseException:
            raw.close()
            raise
    sock.setblocking(False)
    return StuckConnection(kind, sock, opened)


@contextlib.contextmanager
def stuck_connections(
    host: str, port: int, context: ssl.SSLContext, per_kind: dict[str, int], timeout: float = 10.0, strict: bool = True
) -> Iterator[list[StuckConnection]]:
    """Open `per_kind[kind]` connections of each kind (TLS kinds first); all are closed on exit.

    strict: a TLS handshake the server does not complete within `timeout` raises. Else (to measure
    a server that starves) that connection stays open as kind `refused`, and so, without another try,
    do the TLS connections still to be opened: they are stuck in their handshake all the same.
    """
    opened: list[StuckConnection] = []
    refusing = False
    try:
        for kind in ("tls", "headers", "body", "tcp"):
            for _ in range(per_kind.get(kind, 0)):
                if refusing and kind != "tcp":
                    opened.append(open_stuck(host, port, context, "tcp", timeout))
                    opened[-1].kind = "refused"
                    continue
                try:
                    opened.append(open_stuck(host, port, context, kind, timeout))
                except (TimeoutError, ssl.SSLError, ConnectionError):
                    if strict:
                        raise
                    refusing = True
                    opened.append(open_stuck(host, port, context, "tcp", timeout))
                    opened[-1].kind = "refused"
        yield opened
    finally:
        for connection in opened:
            with contextlib.suppress(OSError):
                connection.sock.close()


def server_closed(connection: StuckConnection) -> bool:
    """Whether the server has closed `connection` (EOF or reset); never blocks. Reads and drops anything
    the server sent first (an error answer, TLS session tickets)."""
    if connection.closed_after is not None:
        return True
    try:
        while connection.sock.recv(4096):
            pass
    except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return False  # open, nothing (more) to read
    except OSError:
        pass  # reset by the server
    connection.closed_after = time.monotonic() - connection.opened
    return True


def wait_until_closed(connections: list[StuckConnection], limit: float) -> list[StuckConnection]:
    """Wait (polling every 50 ms, up to `limit` s) until the server has closed every connection; the open ones."""
    deadline = time.monotonic() + limit
    while True:
        still_open = [c for c in connections if not server_closed(c)]
        if not still_open or time.monotonic() >= deadline:
            return still_open
        select.select([c.sock for c in still_open], [], [], 0.05)


def post_review(host: str, port: int, context: ssl.SSLContext, body: bytes, timeout: float) -> tuple[float, int, bytes]:
    """One review on a fresh TLS connection: (seconds from connect to the whole answer, HTTP status, body)."""
    started = time.perf_counter()
    with (
        socket.create_connection((host, port), timeout=timeout) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        tls.sendall(
            b"POST /mutate HTTP/1.1\r\nHost: " + host.encode() + b"\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body
        )
        chunks = []
        while chunk := tls.recv(65536):
            chunks.append(chunk)
    elapsed = time.perf_counter() - started
    head, _, payload = b"".join(chunks).partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
    return elapsed, status, payload


@dataclass(frozen=True)
class Latencies:
    count: int
    median_ms: float
    p99_ms: float
    max_ms: float

    @classmethod
    def of(cls, seconds: list[float]) -> Latencies:
        ordered = sorted(seconds)
        p99 = ordered[min(len(ordered) - 1, max(0, round(0.99 * len(ordered)) - 1))]
        return cls(len(ordered), statistics.median(ordered) * 1e3, p99 * 1e3, ordered[-1] * 1e3)
