"""Hostile callers of a TLS port, each returning what it got and how long it took: the rows of the
hostile-input tables (tests/integration/test_secure_serving.py), the same for every port the product opens.
"""

from __future__ import annotations

import contextlib
import re
import socket
import ssl
import time
from dataclasses import dataclass
from pathlib import Path

CLOSED = "closed"


@dataclass(frozen=True)
class Outcome:
    answer: str  # an HTTP status ("401") or CLOSED
    seconds: float


def _context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # the certificate names no test address
    return context


def _status(reply: bytes) -> str:
    if reply.startswith(b"HTTP/"):
        return reply.split(b" ", 2)[1].decode()
    found = re.search(rb"Error code: (\d+)", reply)  # http.server's page for a request with no version
    return found.group(1).decode() if found else CLOSED


def _read_all(sock: socket.socket) -> bytes:
    """What the server sends until it closes, or until one whole HTTP answer has come (its headers and as
    many body bytes as its Content-Length says): the time taken is the time to the answer, not to a close."""
    received = b""
    with contextlib.suppress(OSError):  # reset, timed out, TLS torn down: what came is what counts
        while chunk := sock.recv(65536):
            received += chunk
            if _whole_answer(received):
                break
    return received


def _whole_answer(received: bytes) -> bool:
    head, separator, body = received.partition(b"\r\n\r\n")
    if not separator or not head.startswith(b"HTTP/"):
        return False
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    return length is not None and len(body) >= int(length.group(1))


def tls_request(port: int, raw: bytes, *, host: str = "127.0.0.1", timeout: float = 30) -> Outcome:
    """`raw` sent over TLS; the answer's status, or CLOSED when none came."""
    started = time.monotonic()
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as plain,
            _context().wrap_socket(plain, server_hostname="localhost") as tls,
        ):
            with contextlib.suppress(OSError):  # refused mid-send: the answer may already be there
                tls.sendall(raw)
            reply = _read_all(tls)
    except (OSError, ssl.SSLError):
        reply = b""
    return Outcome(_status(reply), time.monotonic() - started)


def get(path: str, token: str | None = None, extra: bytes = b"") -> bytes:
    header = f"Authorization: Bearer {token}\r\n".encode() if token else b""
    return f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n".encode() + header + extra + b"\r\n"


def plain_http(port: int, *, host: str = "127.0.0.1", timeout: float = 30) -> Outcome:
    """A plain-HTTP request to the TLS port: never an HTTP answer."""
    started = time.monotonic()
    with socket.create_connection((host, port), timeout=timeout) as plain:
        plain.sendall(get("/metrics"))
        reply = _read_all(plain)
    return Outcome(CLOSED if b"HTTP/" not in reply else _status(reply), time.monotonic() - started)


def silent_handshake(port: int, *, host: str = "127.0.0.1", timeout: float = 60) -> Outcome:
    """A TCP connection that never starts its TLS handshake: how long until the server closes it."""
    started = time.monotonic()
    with socket.create_connection((host, port), timeout=timeout) as plain:
        reply = _read_all(plain)
    return Outcome(CLOSED if not reply else _status(reply), time.monotonic() - started)


def idle_connections(port: int, count: int, *, host: str = "127.0.0.1") -> list[socket.socket]:
    """`count` TCP connections opened and left idle (no handshake): the caller closes them."""
    opened = []
    for _ in range(count):
        try:
            opened.append(socket.create_connection((host, port), timeout=10))
        except OSError:
            break
    return opened


def process_tree(pid: int) -> list[int]:
    """The process and its descendants (gunicorn's master and its workers)."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that ended since the listing
            for child in (task / "children").read_text().split():
                found += process_tree(int(child))
    return found


def rss_kib(pid: int) -> int:
    """The resident memory of the process and its descendants, from /proc."""
    total = 0
    for each in process_tree(pid):
        with contextlib.suppress(FileNotFoundError):  # a child that ended since the listing
            for line in Path(f"/proc/{each}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total
