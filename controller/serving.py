"""The controller's ports: `--secure-port` (TLS, every caller checked by the apiserver, as
kube-controller-manager's port 10257 is) and, for a developer's machine only, the plain `--port`.

A thread per connection, each with deadlines, so no caller can hold the server: the TLS handshake
is made on the connection's own thread (never in the accepting loop) within HANDSHAKE_TIMEOUT, each
read waits at most REQUEST_TIMEOUT, and a connection open CONNECTION_DEADLINE is cut whatever it is
doing (a caller trickling its headers a byte at a time); at most MAX_CONNECTIONS are open at once
(past that a new connection is closed at once); one request per connection (HTTP/1.0), GET and HEAD
only, no body read. Header limits are http.server's: 100 headers of at most 64 KiB each (431).
The certificate files are read again when they change, so a renewed certificate is served to new
connections without a restart; without files, a self-signed certificate is made at start, as
kube-controller-manager makes one, and made again 30 days before it ends.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from controller.health import TEXT, Answer
from kube.delegated_auth import DelegatedAuth
from plumbing.certificates import make_ca, make_serving_cert

log = logging.getLogger("taintkeeper.serving")

HANDSHAKE_TIMEOUT = 5.0
REQUEST_TIMEOUT = 10.0
CONNECTION_DEADLINE = 15.0
MAX_CONNECTIONS = 2048
SELF_SIGNED_VALIDITY = timedelta(days=365)
RENEW_BEFORE = timedelta(days=30)


class CertificateFiles:
    """A TLS server context from a certificate and key file, made again when either file changes."""

    def __init__(self, cert_file: str, key_file: str) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self._lock = threading.Lock()
        self._stamp: tuple[Any, ...] = ()
        self._context = self._load()  # a bad file at start ends the start

    def _files_stamp(self) -> tuple[Any, ...]:
        stats = [os.stat(path) for path in (self.cert_file, self.key_file)]
        return tuple((s.st_ino, s.st_mtime_ns, s.st_size) for s in stats)

    def _load(self) -> ssl.SSLContext:
        stamp = self._files_stamp()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        self._stamp = stamp
        return context

    def context(self) -> ssl.SSLContext:
        """The context for a new connection: the files as they are now, or the last good ones."""
        with self._lock:
            try:
                if self._files_stamp() != self._stamp:
                    self._context = self._load()
                    log.info("serving certificate reloaded from %s", self.cert_file)
            except (OSError, ssl.SSLError) as error:  # mid-rotation (one file written, not the other)
                log.warning("keeping the serving certificate loaded before: %s", error)
            return self._context


def self_signed_files(directory: Path, now: datetime) -> tuple[str, str]:
    """A CA and a certificate it signs for this host's name, localhost and the loopback addresses,
    written to `directory`: what kube-controller-manager serves when given no certificate."""
    host = socket.gethostname()
    ca_key, ca_cert = make_ca(f"{host}-ca@{int(now.timestamp())}", SELF_SIGNED_VALIDITY, now)
    names = [n for n in dict.fromkeys([host.lower(), "localhost"]) if n]
    key, cert = make_serving_cert(ca_key, ca_cert, names, ["127.0.0.1", "::1"], SELF_SIGNED_VALIDITY, now)
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    encoding = serialization.Encoding.PEM
    cert_path.write_bytes(cert.public_bytes(encoding) + ca_cert.public_bytes(encoding))
    key_path.write_bytes(key.private_bytes(encoding, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    key_path.chmod(0o600)
    return str(cert_path), str(key_path)


class _Connection:
    """An open connection's socket as it is now (the raw one, then the TLS one), for the reaper."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.deadline = sock, deadline


class _Reaper:
    """Cuts every connection still open at its deadline: one thread for all of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[_Connection] = set()
        threading.Thread(target=self._run, name="serving-reaper", daemon=True).start()

    def watch(self, sock: socket.socket) -> _Connection:
        connection = _Connection(sock, time.monotonic() + CONNECTION_DEADLINE)
        with self._lock:
            self._open.add(connection)
        return connection

    def forget(self, connection: _Connection) -> None:
        with self._lock:
            self._open.discard(connection)

    def _run(self) -> None:
        while True:
            time.sleep(0.5)
            now = time.monotonic()
            with self._lock:
                late = [c for c in self._open if c.deadline <= now]
            for connection in late:
                with contextlib.suppress(OSError):  # closed already
                    connection.sock.shutdown(socket.SHUT_RDWR)  # its thread's next read or write fails


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], tls: CertificateFiles | None
    ) -> None:
        self.tls = tls
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.reaper = _Reaper()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)  # full: this one is closed, the open ones go on
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        connection = self.reaper.watch(request)
        try:
            if self.tls is not None:
                request = self._handshake(request)
                if request is None:
                    return
                connection.sock = request
            super().process_request_thread(request, client_address)
        finally:
            self.reaper.forget(connection)
            self.slots.release()

    def _handshake(self, raw: socket.socket) -> ssl.SSLSocket | None:
        assert self.tls is not None
        raw.settimeout(HANDSHAKE_TIMEOUT)
        try:
            wrapped = self.tls.context().wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
            wrapped.do_handshake()
            return wrapped
        except (OSError, ValueError):  # timed out, not TLS, reset: nothing to answer
            self.shutdown_request(raw)
            return None


def _handler(answer: Callable[[str], Answer], auth: DelegatedAuth | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = REQUEST_TIMEOUT  # applies to the request line and headers

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            refusal = auth.check(path, self.command, self.headers.get("Authorization")) if auth else None
            if refusal is not None:
                self._reply(refusal.status, refusal.message.encode(), TEXT)
                return
            self._reply(*answer(path))

        def do_HEAD(self) -> None:
            self.do_GET()

        def _refuse_method(self) -> None:
            self._reply(405, f"{self.command} is not served: GET only".encode(), TEXT)

        do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _refuse_method

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # probes every few seconds: stay quiet
            pass

    return Handler


def serve(
    address: str,
    port: int,
    answer: Callable[[str], Answer],
    *,
    tls: CertificateFiles | None = None,
    auth: DelegatedAuth | None = None,
) -> ThreadingHTTPServer:
    """Start a server on a daemon thread: TLS and `auth` for the secure port, neither for the plain one."""
    server = _Server((address, port), _handler(answer, auth), tls)
    threading.Thread(target=server.serve_forever, name=f"serving-{port}", daemon=True).start()
    return server


class SelfSigned(CertificateFiles):
    """A self-signed certificate in a private temporary directory, made again RENEW_BEFORE its end (the
    next connection after that gets the new one); the directory is removed when the process exits."""

    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._clock = clock
        self._directory = Path(tempfile.mkdtemp(prefix="taintkeeper-serving-"))
        atexit.register(shutil.rmtree, self._directory, ignore_errors=True)  # its private key is this process's
        cert_file, key_file = self_signed_files(self._directory, clock())
        log.info("no --tls-cert-file: serving a self-signed certificate (%s)", cert_file)
        super().__init__(cert_file, key_file)

    def _load(self) -> ssl.SSLContext:
        self.not_after = x509.load_pem_x509_certificate(Path(self.cert_file).read_bytes()).not_valid_after_utc
        return super()._load()

    def context(self) -> ssl.SSLContext:
        if self._clock() >= self.not_after - RENEW_BEFORE:
            with self._lock:
                self_signed_files(self._directory, self._clock())
            log.info("self-signed serving certificate renewed")
        return super().context()


def secure_certificate(cert_file: str, key_file: str) -> CertificateFiles:
    """The given files, or a self-signed certificate made now and renewed before it ends."""
    return CertificateFiles(cert_file, key_file) if cert_file else SelfSigned()
