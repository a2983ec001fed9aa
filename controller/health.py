"""What the controller's port answers: `/healthz` and `/livez`, `/readyz`, `/metrics`.

Ready means the informer caches have synced (a stand-by replica is ready too: it can take over).
Healthy (live) means no loop is stuck (`live()`), so the kubelet restarts a process that stopped
working. Who may ask is the server's business (controller/serving.py).
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

TEXT = "text/plain; charset=utf-8"
Answer = tuple[int, bytes, str]  # status, body, content type


def health_endpoints(
    ready: Callable[[], tuple[bool, str]],
    live: Callable[[], tuple[bool, str]] = lambda: (True, "ok"),
) -> Callable[[str], Answer]:
    """The answer to a GET of a path; `ready()` and `live()` return (ok?, a one-line reason)."""

    def answer(path: str) -> Answer:
        if path in ("/healthz", "/livez"):
            is_live, reason = live()
            return 200 if is_live else 500, reason.encode(), TEXT
        if path == "/readyz":
            is_ready, reason = ready()
            return 200 if is_ready else 503, reason.encode(), TEXT
        if path == "/metrics":
            return 200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST
        return 404, b"not found", TEXT

    return answer
