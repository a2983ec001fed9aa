"""`wait_for`: poll a condition until it holds, the one polling loop of hack/, bench/ and tests/.

    from hack.wait import wait_for
    pod = wait_for(lambda: read_pod(name), 60, f"pod {name}", interval=0.5, ignore=ApiException)

Each suite fixes its own cadence with `functools.partial` (tests/integration/kube.py: every 0.1 s,
any exception "not yet"; hack/deploy.py: every 1 s, the client's ApiException "not yet"). The
product (webhook/, controller/, certs/, kube/, shared/) does not import it: it waits on its own
clocks and conditions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_SHOWN = 300  # characters of the last value shown in the message


class WaitTimeout(TimeoutError):
    """`wait_for` gave up: the message names what it waited for, for how long, and what the condition last
    returned or raised (the last exception is also chained as `__cause__`)."""

    def __init__(self, what: str, timeout: float, last: object) -> None:
        super().__init__(f"timed out after {timeout:g}s waiting for {what} (last: {_describe(last)})")
        self.what, self.timeout, self.last = what, timeout, last


def _describe(last: object) -> str:
    """One line: an exception as its type and first line (an ApiException as its status and reason), a
    value as its repr, shortened."""
    if isinstance(last, BaseException):
        status, reason = getattr(last, "status", None), getattr(last, "reason", None)
        if status is not None and reason is not None:
            return f"{type(last).__name__} {status} {reason}"
        lines = str(last).strip().splitlines()
        return f"{type(last).__name__}: {lines[0]}" if lines else type(last).__name__
    shown = repr(last)
    return shown if len(shown) <= _SHOWN else f"{shown[:_SHOWN]}..."


def wait_for(
    condition: Callable[[], T | None],
    timeout: float,
    what: str,
    *,
    interval: float = 1.0,
    ignore: type[Exception] | tuple[type[Exception], ...] = (),
) -> T:
    """Call `condition` every `interval` s until it returns something truthy, and return that.

    An exception of a type in `ignore` counts as "not yet" (the apiserver briefly unavailable, the object
    not there yet); any other propagates at once. The condition is called at least once, and once more at
    the deadline; then WaitTimeout (a TimeoutError) names `what`, `timeout` and the last value or error.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = condition()
            if value:
                return value
            last = value
        except ignore as error:
            last = error
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WaitTimeout(what, timeout, last) from (last if isinstance(last, BaseException) else None)
        time.sleep(min(interval, remaining))
