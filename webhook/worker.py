"""The webhook's gunicorn worker: gevent, with every client's time bounded.

Any pod can open connections to the webhook's Service. With threads (gunicorn's gthread), a
connection that completes TCP but never its TLS handshake, or never its request, holds a thread:
16 of them stopped the webhook answering, and the apiserver waited out `timeoutSeconds` on every
pod it created. Here each connection is a greenlet, so a silent one costs a few kilobytes and
nothing else is kept waiting, and each is bounded:

- `--request-timeout` (TAINTKEEPER_REQUEST_TIMEOUT): from accepting a connection, its TLS handshake
  and first request (headers and body) must arrive and be answered within this many seconds; every
  later request on the connection, from its first byte. Slower connections are closed.
- `--keepalive-timeout` (TAINTKEEPER_KEEPALIVE_TIMEOUT): how long a connection may idle between two
  requests. While the worker stops, idle connections are closed within STOP_LINGER seconds.
- `--max-connections` (TAINTKEEPER_MAX_CONNECTIONS, gunicorn's worker_connections, 500): a worker
  with this many connections open stops accepting until one closes. A TLS connection held open
  costs a worker about 50 KB (measured with 1,000 per worker), so 2 x 500 stay well within the
  Deployment's 256 MiB beside the workers' own ~50 MB each.

The TLS context is built for every accepted connection (as gunicorn's other workers do, and
gunicorn's own gevent worker does not), so a renewed certificate file is served to new connections
without a restart. Only HTTP/1.1 is spoken (gunicorn's default; the apiserver needs nothing else).

What gunicorn redoes for every request but depends only on the worker's settings (the settings
themselves, a peer's trust, the constant part of the WSGI environ) or on the second (the Date
header) is made once by the fast paths that rely on gunicorn's internals (webhook/fast_paths.py,
behind `--fast-paths`).
"""

from __future__ import annotations

import contextlib
import errno
import socket
import ssl
import sys
import time
import warnings
from functools import partial
from typing import Any

import gevent
from gevent import Timeout
from gevent.monkey import MonkeyPatchWarning
from gevent.pool import Pool
from gevent.server import StreamServer
from gevent.socket import wait_read
from gunicorn import http, util
from gunicorn import sock as gunicorn_sock
from gunicorn.workers.ggevent import GeventWorker

from webhook.fast_paths import FastPaths, forget_environ
from webhook.settings import ServingSettings, WebhookSettings

STOP_LINGER = 2.0  # seconds an idle connection stays open once the worker stops (a request may be on its way)
COALESCE_BYTES = 64 * 1024  # a response is sent in one go up to this size, in pieces of it beyond


class _Coalesced:
    """The client socket as gunicorn's Response sees it: what it sends is held until the response is
    complete (or COALESCE_BYTES have gathered), then written in one go. gunicorn sends a response's
    head and body separately: two TLS records and two system calls where one does, and the second
    write was as costly as the first. `send` (a 100 Continue) still goes out at once."""

    __slots__ = ("_pending", "_size", "_sock")

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._pending: list[bytes] = []
        self._size = 0

    def sendall(self, data: bytes) -> None:
        self._pending.append(data)
        self._size += len(data)
        if self._size >= COALESCE_BYTES:
            self.flush()

    def send(self, data: bytes) -> int:
        self.flush()
        return self._sock.send(data)

    def flush(self) -> None:
        if self._pending:
            data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
            self._pending.clear()
            self._size = 0
            self._sock.sendall(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class WebhookWorker(GeventWorker):
    """gunicorn's gevent worker with TLS handshakes, requests and idle connections under deadlines."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fast_paths = FastPaths(WebhookSettings.from_env().fast_paths)
        self.cfg = self.fast_paths.settled(self.cfg)  # type: ignore[has-type]  # gunicorn is untyped
        self.fast_paths.install_in_gunicorn()
        serving = ServingSettings.from_env()
        self.request_timeout = float(serving.request_timeout)
        self.keepalive_timeout = float(serving.keepalive_timeout)
        self.stopping_since: float | None = None

    def patch(self) -> None:
        """gunicorn's patching in the worker, which adds forking, signals and subprocesses to what the master
        patched (settings.patch_for_gevent); gevent warns about a second, different patch_all."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MonkeyPatchWarning)
            super().patch()

    def handle_usr1(self, sig: int, frame: Any) -> None:
        """Reopen the log files, off the signal handler as gunicorn's gevent worker does, then remake the
        environ whose `wsgi.errors` writes to them."""
        gevent.spawn(self._reopen_log_files)

    def _reopen_log_files(self) -> None:
        self.log.reopen_files()
        forget_environ(self.cfg)

    def run(self) -> None:
        """GeventWorker.run, but TLS is left to `handle`, where its handshake has a deadline."""
        servers = []
        for listener in self.sockets:
            listener.setblocking(1)
            server = StreamServer(listener, handle=partial(self.handle, listener), spawn=Pool(self.worker_connections))
            server.start()
            servers.append(server)

        while self.alive:
            self.notify()
            gevent.sleep(1.0)

        self.stopping_since = time.monotonic()
        for server in servers:
            server.close()  # stop accepting; the connections open are served on
        deadline = time.monotonic() + self.cfg.graceful_timeout
        while time.monotonic() < deadline and any(s.pool.free_count() != s.pool.size for s in servers):
            self.notify()
            gevent.sleep(0.1)
        for server in servers:
            if server.pool.free_count() != server.pool.size:
                self.log.warning("Worker graceful timeout (pid:%s)", self.pid)
            server.stop(timeout=1)

    def handle(self, listener: socket.socket, client: socket.socket, addr: Any) -> None:
        """Serve one connection: HTTP/1.1 requests with keep-alive, each under `request_timeout`."""
        client.setblocking(True)
        req = None
        deadline: Timeout | None = None
        try:
            deadline = Timeout.start_new(self.request_timeout)  # the TLS handshake and the first request
            if self.cfg.is_ssl:
                tls_client: ssl.SSLSocket = gunicorn_sock.ssl_wrap_socket(client, self.cfg)  # a fresh context:
                client = tls_client  # renewed certificates are served at once; the wrapped socket is what to close
                tls_client.do_handshake()
            parser = self.fast_paths.request_parser(self.cfg, client, addr)
            listener_name = listener.getsockname()
            while True:
                req = next(parser)
                if not req:
                    break
                self.handle_request(listener_name, req, client, addr)  # raises StopIteration to close
                deadline.cancel()
                if not self._wait_for_request(client, parser):
                    break
                deadline.start()  # the same timer, restarted: one per connection
        except Timeout as timeout:
            if timeout is not deadline:
                raise
            self.log.debug(
                "closed a connection from %s: its handshake or request took over %gs", addr, self.request_timeout
            )
        except (http.errors.NoMoreData, StopIteration) as error:
            self.log.debug("closing connection: %s", error or type(error).__name__)
        except ssl.SSLError as error:
            if error.args[0] in (ssl.SSL_ERROR_EOF, ssl.SSL_ERROR_ZERO_RETURN) or isinstance(error, ssl.SSLEOFError):
                self.log.debug("ssl connection closed")
            else:
                self.log.debug("TLS error from %s: %s", addr, error)
        except OSError as error:
            if error.errno not in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.ETIMEDOUT, None):
                self.log.exception("Socket error processing request.")
        except Exception as error:
            self._answer_error(req, client, addr, error)
        finally:
            if deadline is not None:
                deadline.close()
            util.close(client)

    def handle_request(self, listener_name: Any, req: Any, sock: socket.socket, addr: Any) -> bool:
        """gunicorn's, writing each response in one go (`_Coalesced`)."""
        out = _Coalesced(sock)
        try:
            return super().handle_request(listener_name, req, out, addr)
        finally:
            with contextlib.suppress(OSError):  # the client is gone, or gunicorn closed a broken response
                out.flush()

    def _answer_error(self, req: Any, client: socket.socket, addr: Any, error: Exception) -> None:
        """gunicorn's error answer (400 for a malformed request, 500 else), itself bounded in time."""
        try:
            with Timeout(self.request_timeout, False):
                self.handle_error(req, client, addr, error)
        except Exception:  # the client is gone; nothing to answer
            self.log.debug("could not answer %s: %s", addr, sys.exc_info()[1])

    def _wait_for_request(self, client: socket.socket, parser: Any) -> bool:
        """Whether the next request starts within `keepalive_timeout` (less once the worker stops)."""
        if parser.unreader.buf.getvalue() or (isinstance(client, ssl.SSLSocket) and client.pending()):
            return True  # already read from the socket: a pipelined request
        idle_until = time.monotonic() + self.keepalive_timeout
        while True:
            if self.stopping_since is not None:
                idle_until = min(idle_until, self.stopping_since + STOP_LINGER)
            remaining = idle_until - time.monotonic()
            if remaining <= 0:
                return False
            try:
                wait_read(client.fileno(), timeout=min(remaining, 1.0))
                return True
            except TimeoutError:  # gevent raises socket.timeout, an alias of TimeoutError
                continue
