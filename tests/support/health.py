"""/healthz as the controller serves it, over the components a test gives, and waiting on a worker thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from urllib.error import HTTPError
from urllib.request import urlopen

from controller.component import Component
from controller.health import health_endpoints
from controller.runner import liveness
from controller.serving import serve


def healthz(components: Sequence[Component]) -> tuple[int, str]:
    """The status and body of one GET /healthz, whose liveness is the runner's over `components`."""
    server = serve("127.0.0.1", 0, health_endpoints(lambda: (True, "ok"), lambda: liveness(components)))
    try:
        with urlopen(f"http://127.0.0.1:{server.server_address[1]}/healthz", timeout=5) as response:
            return response.status, response.read().decode()
    except HTTPError as error:
        return error.code, error.read().decode()
    finally:
        server.shutdown()


def wait_until(condition: Callable[[], object], what: str, timeout: float = 5.0) -> None:
    """Poll `condition` (real time) until it holds; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        pause.wait(0.01)
