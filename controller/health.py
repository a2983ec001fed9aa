"""`/healthz`, `/readyz` and `/metrics` over plain HTTP for probes and Prometheus.

Ready means the informer caches have synced (a stand-by replica is ready too: it can take over).
Healthy means no loop is stuck (`live()`), so the kubelet restarts a process that stopped working.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest


def serve_health(
    address: str,
    port: int,
    ready: Callable[[], tuple[bool, str]],
    live: Callable[[], tuple[bool, str]] = lambda: (True, "ok"),
) -> ThreadingHTTPServer:
    """Start the server on a daemon thread; `ready()` and `live()` return (ok?, a one-line reason)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                is_live, reason = live()
                self._reply(200 if is_live else 500, reason.encode(), "text/plain")
            elif path == "/readyz":
                is_ready, reason = ready()
                self._reply(200 if is_ready else 503, reason.encode(), "text/plain")
            elif path == "/metrics":
                self._reply(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)
            else:
                self._reply(404, b"not found", "text/plain")

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # probes every few seconds: stay quiet
            pass

    server = ThreadingHTTPServer((address, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
    return server
