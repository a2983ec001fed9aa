"""The webhook's gunicorn worker: gevent, with every client's time bounded.

Any pod can open connections to the webhook's Service. With threads (gunicorn's gthread), a
connection that completes TCP but never its TLS handshake, or never its request, holds a thread:
as many of them as there are threads stop the webhook answering, and the apiserver waits out
`timeoutSeconds` on every pod it creates. Here each connection is a greenlet, so a silent one
keeps nothing else waiting, and each is bounded:

- `--request-timeout` (TAINTKEEPER_REQUEST_TIMEOUT): from accepting a connection, its TLS handshake
  and first request (headers and body) must arrive and be answered within this many seconds; every
  later request on the connection, from its first byte. Slower connections are closed.
- `--keepalive-timeout` (TAINTKEEPER_KEEPALIVE_TIMEOUT): how long a connection may idle between two
  requests. While the worker stops, idle connections are closed within STOP_LINGER seconds.
- `--max-connections` (TAINTKEEPER_MAX_CONNECTIONS, gunicorn's worker_connections, 500): a worker
  with this many connections open stops accepting until one closes, so connections held open cannot
  take a worker's memory past the Deployment's limit (bench/REPORT.md, "Webhook serving setup").
  A connection accepted into the last free slot closes the oldest one still short of its TLS
  handshake, so connections that never start one cannot fill the worker: the apiserver's and the
  kubelet's probes, which finish theirs at once, keep being accepted while they arrive.

The TLS context is built for every accepted connection (as gunicorn's other workers do, and
gunicorn's own gevent worker does not), so a renewed certificate file is served to new connections
without a restart. Only HTTP/1.1 is spoken (gunicorn's default; the apiserver needs nothing else).

This worker replaces gunicorn's `GeventWorker.run` and `handle` and relies on gunicorn's internals
(the methods it calls, the parser's read-ahead buffer, the response written through `sendall`), so it
is the `--fast-paths` switch's (webhook/fast_paths.py): gunicorn_conf.py chooses it only with the
switch on, once `gunicorn_mismatch` has found each of those internals in the shape used here, and
stops the start with one line otherwise. With the switch off, gunicorn's own gevent worker serves.
What gunicorn redoes for every request but depends only on the worker's settings or on the second
is made once by the fast paths of webhook/fast_paths.py.
"""

from __future__ import annotations

import contextlib
import errno
import inspect
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
from gunicorn.config import Config
from gunicorn.glogging import Logger
from gunicorn.http import wsgi
from gunicorn.workers.base import Worker
from gunicorn.workers.base_async import AsyncWorker
from gunicorn.workers.ggevent import GeventWorker

from webhook.fast_paths import FastPaths, code_names, forget_environ
from webhook.settings import ServingSettings, WebhookSettings

STOP_LINGER = 2.0  # seconds an idle connection stays open once the worker stops (a request may be on its way)
COALESCE_BYTES = 64 * 1024  # a response is sent in one go up to this size, in pieces of it beyond


class _Coalesced:
    """The client socket as gunicorn's Response sees it: what it sends is held until the response is
    complete (or COALESCE_BYTES have gathered), then written in one go. gunicorn sends a response's
    head and body separately: two TLS records and two system calls where one does. `send` (a 100
    Continue), and anything else reaching the socket itself (`sendfile`, `shutdown`), sends what is
    held first."""

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
        self.flush()
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
        # greenlets of connections accepted but not yet through their TLS handshake, oldest first
        self._unshaken: dict[gevent.Greenlet, None] = {}
        self._pools: dict[int, Pool] = {}

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
            pool = Pool(self.worker_connections)
            self._pools[id(listener)] = pool
            server = StreamServer(listener, handle=partial(self.handle, listener), spawn=pool)
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
        current = gevent.getcurrent()
        try:
            deadline = Timeout.start_new(self.request_timeout)  # the TLS handshake and the first request
            if self.cfg.is_ssl:
                self._make_room(self._pools.get(id(listener)))
                self._unshaken[current] = None
                tls_client: ssl.SSLSocket = gunicorn_sock.ssl_wrap_socket(client, self.cfg)  # a fresh context:
                client = tls_client  # renewed certificates are served at once; the wrapped socket is what to close
                tls_client.do_handshake()
                self._unshaken.pop(current, None)
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
            self._unshaken.pop(current, None)
            if deadline is not None:
                deadline.close()
            util.close(client)

    def _make_room(self, pool: Pool | None) -> None:
        """In the last free slot: close the oldest connection still short of its TLS handshake."""
        if pool is None or pool.free_count() > 0:
            return
        for oldest in self._unshaken:
            del self._unshaken[oldest]
            oldest.kill(block=False)  # GreenletExit in its handshake: its `finally` closes the socket
            self.log.debug("closed the oldest connection without a TLS handshake to make room")
            return

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
        if _read_ahead(parser) or (isinstance(client, ssl.SSLSocket) and client.pending()):
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


def _read_ahead(parser: Any) -> bytes:
    """What gunicorn's parser has read from the socket beyond the requests it has handed out: the start of
    a pipelined request, if any."""
    return bytes(parser.unreader.buf.getvalue())


# --- gunicorn's internals this worker relies on, checked once at start ----------------------------------------

_PEER = ("127.0.0.1", 1)  # a client address for the checks' requests


class _Received:
    """A client socket that has received `data` and then closed; `unread` is what no recv has taken yet."""

    def __init__(self, data: bytes) -> None:
        self.unread = data

    def recv(self, size: int) -> bytes:
        data, self.unread = self.unread[:size], self.unread[size:]
        return data


class _SendallOnly:
    """A client socket that can only `sendall`: anything else gunicorn asks of it is an AttributeError."""

    __slots__ = ("sent",)

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.sent.append(data)


# (where, owner, name, the arguments the worker passes): each must accept them, `self` included for a method
_CALLED: tuple[tuple[str, Any, str, tuple[str, ...]], ...] = (
    ("gunicorn's GeventWorker", GeventWorker, "handle_request", ("self", "listener_name", "req", "sock", "addr")),
    ("gunicorn's GeventWorker", GeventWorker, "handle_error", ("self", "req", "client", "addr", "exc")),
    ("gunicorn's GeventWorker", GeventWorker, "patch", ("self",)),
    ("gunicorn's GeventWorker", GeventWorker, "notify", ("self",)),
    ("gunicorn.sock", gunicorn_sock, "ssl_wrap_socket", ("sock", "conf")),
    ("gunicorn.util", util, "close", ("sock",)),
    ("gunicorn.http", http, "get_parser", ("cfg", "source", "source_addr")),
)
# (gunicorn's method, what it calls on the worker that this worker overrides)
_CALLED_BACK = (("init_process", "run"), ("init_signals", "handle_usr1"))
# (the class whose __init__ sets them, the worker's attributes read here)
_SET: tuple[tuple[type, tuple[str, ...]], ...] = (
    (Worker, ("sockets", "alive", "cfg", "log", "pid", "ppid")),
    (AsyncWorker, ("worker_connections",)),
)


def _check_calls() -> str | None:
    for where, owner, name, arguments in _CALLED:
        function = getattr(owner, name, None)
        if not callable(function):
            return f"{where} has no {name}"
        try:
            inspect.signature(function).bind(*arguments)
        except TypeError:
            return f"{where}.{name} cannot be called with ({', '.join(arguments)})"
    for caller, name in _CALLED_BACK:
        if name not in code_names(getattr(Worker, caller, None)):
            return f"gunicorn's Worker.{caller} no longer calls {name}"
    return None


def _check_attributes() -> str | None:
    for cls, names in _SET:
        missing = sorted(set(names) - set(code_names(vars(cls).get("__init__"))))
        if missing:
            return f"gunicorn's {cls.__name__}.__init__ no longer sets {', '.join(missing)}"
    if "graceful_timeout" not in Config().settings or not isinstance(vars(Config).get("is_ssl"), property):
        return "gunicorn's Config has no graceful_timeout setting or is_ssl property"
    if not callable(getattr(Logger, "reopen_files", None)):
        return "gunicorn's Logger has no reopen_files"
    no_more_data = getattr(http.errors, "NoMoreData", None)
    if not (isinstance(no_more_data, type) and issubclass(no_more_data, Exception)):
        return "gunicorn.http.errors has no NoMoreData exception"
    return None


def _check_read_ahead() -> str | None:
    """Once a request has been read, what the client pipelined behind it is in `_read_ahead` or still in
    the socket: the worker waits on the socket only when `_read_ahead` is empty."""
    first = b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
    second = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    client = _Received(first + second)
    parser = http.get_parser(Config(), client, _PEER)
    next(parser).body.read()
    if _read_ahead(parser) + client.unread != second:
        return "a gunicorn parser keeps what it read ahead elsewhere than in its unreader.buf"
    return None


def _check_response_writes() -> str | None:
    """gunicorn's Response writes a whole response through `sock.sendall` alone (what `_Coalesced` holds)."""
    cfg = Config()
    request = next(http.get_parser(cfg, _Received(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"), _PEER))
    sock = _SendallOnly()
    response, _ = wsgi.create(request, sock, _PEER, ("127.0.0.1", 8443), cfg)
    response.start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    response.write(b"ok")
    response.close()
    written = b"".join(sock.sent)
    if not (written.startswith(b"HTTP/1.1 200 OK\r\n") and written.endswith(b"\r\n\r\nok")):
        return f"gunicorn's Response wrote {written[:60]!r}... for a 200 with body b'ok'"
    return None


_CHECKS = (_check_calls, _check_attributes, _check_read_ahead, _check_response_writes)


def gunicorn_mismatch() -> str | None:
    """None when this gunicorn has every internal WebhookWorker relies on, in the shape it uses; else the
    first one that differs, in a phrase. gunicorn_conf.py asks once, in the master, before choosing this
    worker, so a mismatch stops the start instead of failing requests."""
    for check in _CHECKS:
        try:
            wrong = check()
        except Exception as error:  # a check that cannot even look has found an internal changed
            wrong = f"{check.__name__.lstrip('_')} failed: {type(error).__name__}: {error}"
        if wrong is not None:
            return wrong
    return None
