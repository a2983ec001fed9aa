"""The write fence: a leader writes only while its last lease renewal is younger than the renew deadline.

The leader elector steps down once no renewal has succeeded for `renew_deadline`, but only when its
thread next runs. A replica that was paused (SIGSTOP, a long collection, a frozen VM) wakes with
workers that go on writing from a stale view until then, while a stand-by may already lead. So the
API edges ask the fence right before each write that acts on a decision, and the event recorders
before each event they post (kube/events.py); the elector tells it of
every successful acquire or renewal (when the attempt started: the lease counts from a write that
could have been seen from then on) and closes it when it steps down or releases the Lease.

It also keeps the term (kube/acting_term.py): a write of a unit of work that started in a term that has
since ended is refused, even when this replica leads again by then, since what that unit decided was
decided on another term's view (a monitor pass that hung in a call while the Lease was lost and won back).

The check reads one attribute and the monotonic clock: no lock (one writer, the elector's thread;
a float is replaced whole). It narrows the window, it does not close it: a pause between the check
and the request still lets that one request through. So the controller's ApiClient asks once more at
the moment each request of a unit of work is sent (`sending`, under a lock `close` takes too) and counts
it until its answer came; before it releases the Lease, the elector waits for those answers (`drain`).
A released Lease is taken by a stand-by at once: a write still on its way would land after the release,
in no one's term or the next (seen in a soak: a pod deleted 13 ms after its leader released the Lease,
decided before, sent after).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator

from kube.acting_term import acting_term

log = logging.getLogger("taintkeeper.fence")

# A waking replica may refuse hundreds of writes at once: one warning per this many seconds, with a count.
LOG_INTERVAL = 5.0


class WriteFenced(Exception):
    """A write the fence refused: not an API failure. Retry it later like one; never count it as done."""


class WriteFence:
    """Open while this replica's last lease renewal is younger than `renew_deadline` (monotonic seconds).

    `on_refused(action)` is called for every refused write (the metric); `action` is a short, fixed
    name for what was refused (a metric label), `target` what it was refused on (for the log).
    """

    def __init__(
        self,
        renew_deadline: float,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        on_refused: Callable[[str], object] = lambda _action: None,
        check_terms: bool = True,
    ) -> None:
        self.renew_deadline = renew_deadline
        self._check_terms = check_terms  # False only as the soak judge's sabotage (--unsafe-drop-term-checks)
        self._monotonic = monotonic
        self._on_refused = on_refused
        self._always_open = False
        self._renewed_at: float | None = None  # None: not leading (never acquired, stepped down, released)
        self._term: str | None = None  # the term held (kube/acting_term.py), while leading
        self._log_lock = threading.Lock()  # refusals only: the open path takes no lock
        self._last_log: float | None = None
        self._unlogged = 0  # refusals since the last warning
        self._sending = threading.Condition()  # `close` and each request's admission, so none passes after
        self._in_flight = 0  # requests admitted by `sending` and not yet answered

    @classmethod
    def without_lease(cls) -> WriteFence:
        """`--leader-elect=false`: there is no lease to outlive, every write may go."""
        fence = cls(float("inf"))
        fence._always_open = True
        return fence

    def renewed(self, attempt_started: float, term: str | None = None) -> None:
        """The elector acquired or renewed the Lease, as `term`, in an attempt that started at `attempt_started`."""
        self._term = term  # before the renewal opens the fence: an open fence always names its term
        self._renewed_at = attempt_started
        self._last_log = None  # a refusal after this one starts a new episode: it is logged at once

    def close(self) -> None:
        """The elector stepped down or is about to release the Lease: refuse every write until it leads again.
        Once this returns, `sending` admits no request; those admitted before may still be awaiting answers."""
        with self._sending:
            self._renewed_at = None
            self._term = None

    @contextlib.contextmanager
    def sending(self, what: str) -> Iterator[None]:
        """A request of a unit of work about to be sent (`what`: its method and path): admitted only while the
        fence is open, checked again now under the lock `close` takes, and counted until its answer came (the
        `with` block's end). Refused: counted and logged as the action "request", and WriteFenced raised."""
        with self._sending:
            if not self.is_open():
                self._refuse("request", what)
                raise WriteFenced(f"not sent ({what}): {self._why(self._monotonic())}")
            self._in_flight += 1
        try:
            yield
        finally:
            with self._sending:
                self._in_flight -= 1
                if not self._in_flight:
                    self._sending.notify_all()

    def drain(self, timeout: float) -> bool:
        """After `close`: wait until every admitted request has its answer; False if some still had none after
        `timeout` seconds."""
        with self._sending:
            return self._sending.wait_for(lambda: not self._in_flight, timeout)

    @property
    def term(self) -> str | None:
        """The term this replica holds; None while it does not lead (or leads without a Lease). A unit of work
        starting now acts for it (`acting_for(fence.term)`)."""
        return self._term if self._renewed_at is not None else None

    def is_open(self) -> bool:
        """True if a write of the current unit of work may go now: the last renewal is recent enough and the
        unit's term, if it has one, is still held. A refusal is neither counted nor logged (the caller does its own)."""
        if self._always_open:
            return True
        renewed_at, held = self._renewed_at, self._term
        if renewed_at is None or self._monotonic() - renewed_at >= self.renew_deadline:
            return False
        acting = acting_term()
        return acting is None or acting == held or not self._check_terms

    def permits(self, action: str, target: str) -> bool:
        """True if a write may go now; else counts and logs the refusal and returns False."""
        if self.is_open():
            return True
        self._refuse(action, target)
        return False

    def require(self, action: str, target: str) -> None:
        """`permits`, for edges whose failures are exceptions: raises WriteFenced when refused."""
        if not self.permits(action, target):
            raise WriteFenced(f"not written ({action} of {target}): {self._why(self._monotonic())}")

    def _why(self, now: float) -> str:
        renewed_at = self._renewed_at
        if renewed_at is None:
            return "this replica does not hold the lease"
        acting = acting_term()
        if acting is not None and acting != self._term and now - renewed_at < self.renew_deadline:
            return f"decided in the term acquired at {acting}, which has ended (this replica's term began {self._term})"
        return (
            f"its last lease renewal was {now - renewed_at:.1f}s ago, not within the renew deadline "
            f"({self.renew_deadline:g}s)"
        )

    def _refuse(self, action: str, target: str) -> None:
        """Count a refused write; log it, at most one warning per LOG_INTERVAL."""
        self._on_refused(action)
        now = self._monotonic()
        with self._log_lock:
            if self._last_log is not None and now - self._last_log < LOG_INTERVAL:
                self._unlogged += 1
                return
            also = f" ({self._unlogged} more writes refused since the last such warning)" if self._unlogged else ""
            self._last_log, self._unlogged = now, 0
        log.warning("write fence: not writing %s of %s: %s%s", action, target, self._why(now), also)
