"""The two contracts every thread of a component follows: workers on a work queue, and loops.

Workers, as upstream's controllers have them (sample-controller's processNextWorkItem and syncHandler).

A component's `sync(key)` works one key of its work queue off and says how that ended:
- `Done(outcome)`: finished; the key's failure count (its backoff) is forgotten;
- `Retry(why)`: failed; the key comes back after its backoff, which doubles per failure, and `why` is logged;
- `After(delay, outcome)`: finished for now, to be looked at again in `delay` seconds (the backoff is forgotten).
`process_next` alone forgets, retries or delays a component's keys; an exception escaping a sync is a
bug, which must not kill the worker: it is logged and the key retried with backoff.

Loops, for work that is periodic or timed rather than keyed (the node lifecycle monitor's passes, the
eviction timers): a component's `step()` does what is due now and returns how many seconds of its clock
until it next has work; `run_loop` waits that long, or until the component's `Wakeup` says new work has
come, and steps again. An exception escaping a step is a bug, logged and counted like a sync's, and the
loop goes on, without a stamp: a loop whose every step fails is stuck.

Both stamp a `Heartbeat` on the component's one clock (its monotonic reading): a worker after every
finished sync and every idle wait, a loop after every step that returned and the wait after it (and a
long step after each object it works through). A thread that has done neither for longer than its
heartbeat's bound is stuck: that is the one stuck rule, which the component's `stuck()` reports to
/healthz (controller/component.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeAlias, assert_never

from controller.clock import Clock
from controller.sync_result import After, Done, Retry, SyncResult
from controller.workqueue import ShutDown, WorkQueue
from kube.acting_term import acting_for
from kube.client import WORKER_REQUEST_TIMEOUT

IDLE_WAIT = 1.0  # seconds a worker waits for a key before it stamps its heartbeat and looks at `stop`
REQUEST_SECONDS = float(sum(WORKER_REQUEST_TIMEOUT))  # the longest one worker request may take: connect + read
# What a busy process adds to a worker's own waits (scheduling, the GIL, a garbage collection).
HEARTBEAT_SLACK = 10.0


Sync: TypeAlias = Callable[[str], SyncResult]
# The leadership term a unit of work starting now acts for (the write fence's `term`); None: no term.
TermSource: TypeAlias = Callable[[], "str | None"]


def no_term() -> str | None:
    return None


def heartbeat_bound(requests: int, waiting: float = 0.0) -> float:
    """The heartbeat bound of workers whose sync makes at most `requests` API requests and waits at most
    `waiting` seconds besides: every request may take its whole connect and read timeouts, the key may
    have come at the end of an idle wait, and a busy process adds its slack."""
    return requests * REQUEST_SECONDS + waiting + IDLE_WAIT + HEARTBEAT_SLACK


class Heartbeat:
    """When each of a component's workers last finished a sync or an idle wait, on the component's clock.

    A worker stamps with `beat` (run_worker does, and a sync that works through many objects may, after
    each); one that returns because the component stops calls `leave`. A worker thread that dies keeps
    its last stamp, so it looks stuck too.
    """

    def __init__(self, clock: Clock, bound: float, component: str, *, thread_kind: str = "worker") -> None:
        self._clock = clock
        self.bound = bound
        self._component = component
        # How the message names the thread and what it finishes: a worker's sync, or a loop's step.
        self._thread_kind = thread_kind
        self._work = "a sync" if thread_kind == "worker" else "a step"
        self._lock = threading.Lock()
        self._stamps: dict[int, tuple[str, float]] = {}  # thread id -> (its name, its last stamp)

    def beat(self) -> None:
        """The calling worker finished a sync, an idle wait, or a step of a long sync."""
        name = threading.current_thread().name
        with self._lock:
            self._stamps[threading.get_ident()] = (name, self._clock.monotonic())

    def leave(self) -> None:
        """The calling worker returns (the component stops): it is no longer expected to beat."""
        with self._lock:
            self._stamps.pop(threading.get_ident(), None)

    def stuck(self) -> str | None:
        """Why a worker looks stuck (the one silent longest), or None."""
        with self._lock:
            stamps = list(self._stamps.values())
        if not stamps:
            return None
        name, last = min(stamps, key=lambda stamp: stamp[1])
        silent = self._clock.monotonic() - last
        if silent <= self.bound:
            return None
        return (
            f"{self._component}: {self._thread_kind} {name} has neither finished {self._work} nor waited idle "
            f"in {silent:.0f}s "
            f"(limit {self.bound:.0f}s)"
        )


def process_next(
    queue: WorkQueue,
    sync: Sync,
    *,
    what: str,
    log: logging.Logger,
    timeout: float | None,
    on_crash: Callable[[], None] | None = None,
    term: TermSource = no_term,
) -> bool:
    """Take the next key (waiting at most `timeout`), sync it and act on the result; False if no key came.

    Raises ShutDown once the queue is shut down and drained. `what` names the work in the lines written
    to the component's `log`; `on_crash` is called when a sync raises (a component's failure metric).
    The sync is a unit of work of the leadership term current when it starts (`term`; kube/acting_term.py).
    """
    key = queue.get(timeout)
    if key is None:
        return False
    try:
        with acting_for(term()):
            result = sync(key)
    except Exception:
        log.exception("%s of %s failed unexpectedly", what, key)
        if on_crash is not None:
            on_crash()
        queue.add_rate_limited(key)
    else:
        _act_on(queue, key, result, what, log)
    finally:
        queue.done(key)
    return True


def _act_on(queue: WorkQueue, key: str, result: SyncResult, what: str, log: logging.Logger) -> None:
    match result:
        case Done():
            queue.forget(key)
        case Retry(why=why):
            delay = queue.add_rate_limited(key)
            log.warning("%s of %s will be retried in %.2fs: %s", what, key, delay, why)
        case After(delay=delay):
            queue.forget(key)
            queue.add_after(key, delay)
        case _:
            assert_never(result)


def run_worker(
    queue: WorkQueue,
    sync: Sync,
    stop: threading.Event,
    *,
    what: str,
    log: logging.Logger,
    heartbeat: Heartbeat,
    on_crash: Callable[[], None] | None = None,
    term: TermSource = no_term,
) -> None:
    """The worker loop of every component: `process_next` until `stop` is set or the queue is shut down,
    stamping `heartbeat` after each sync and each idle wait."""
    heartbeat.beat()
    while not stop.is_set():
        try:
            process_next(queue, sync, what=what, log=log, timeout=IDLE_WAIT, on_crash=on_crash, term=term)
        except ShutDown:
            break
        heartbeat.beat()
    heartbeat.leave()


def start_workers(
    name: str,
    count: int,
    queue: WorkQueue,
    sync: Sync,
    stop: threading.Event,
    *,
    what: str,
    log: logging.Logger,
    heartbeat: Heartbeat,
    on_crash: Callable[[], None] | None = None,
    term: TermSource = no_term,
) -> list[threading.Thread]:
    """Start `count` daemon threads running `run_worker` on one queue, named NAME (one) or NAME-0, NAME-1..."""
    threads = [
        threading.Thread(
            target=run_worker,
            args=(queue, sync, stop),
            kwargs={"what": what, "log": log, "heartbeat": heartbeat, "on_crash": on_crash, "term": term},
            name=name if count == 1 else f"{name}-{i}",
            daemon=True,
        )
        for i in range(count)
    ]
    for thread in threads:
        thread.start()
    return threads


class Wakeup:
    """New work for a loop: `notify` ends the loop's current wait, or its next one if it is not waiting,
    so work that comes while a step runs is not left for a whole wait."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._condition = threading.Condition()
        self._pending = False

    def notify(self) -> None:
        with self._condition:
            self._pending = True
            self._condition.notify_all()

    def wait(self, timeout: float) -> None:
        """Wait at most `timeout` seconds of the clock, unless notified since the last wait."""
        with self._condition:
            if not self._pending:
                self._clock.wait(self._condition, timeout)
            self._pending = False


Step: TypeAlias = Callable[[], float]


def run_loop(
    step: Step,
    stop: threading.Event,
    *,
    wakeup: Wakeup,
    what: str,
    log: logging.Logger,
    heartbeat: Heartbeat,
    on_crash: Callable[[], None] | None = None,
    after_crash: float = IDLE_WAIT,
    term: TermSource = no_term,
) -> None:
    """The loop of every component's periodic work: `step`, then wait the seconds it returned (at most
    IDLE_WAIT, so `stop` is seen; not at all for 0) or until `wakeup` is notified, until `stop` is set.
    `heartbeat` is stamped after each step that returns and the wait after it. A step that raises is
    logged as `what`, `on_crash` called, and the next step comes after `after_crash`, with no stamp.
    Each step is a unit of work of the leadership term current when it starts (`term`; kube/acting_term.py)."""
    heartbeat.beat()
    while not stop.is_set():
        try:
            with acting_for(term()):
                delay = step()
        except Exception:
            log.exception("%s failed unexpectedly", what)
            if on_crash is not None:
                on_crash()
            wakeup.wait(min(after_crash, IDLE_WAIT))
            continue
        heartbeat.beat()
        if delay > 0:
            wakeup.wait(min(delay, IDLE_WAIT))
            heartbeat.beat()
    heartbeat.leave()


def start_loop(
    name: str,
    step: Step,
    stop: threading.Event,
    *,
    wakeup: Wakeup,
    what: str,
    log: logging.Logger,
    heartbeat: Heartbeat,
    on_crash: Callable[[], None] | None = None,
    after_crash: float = IDLE_WAIT,
    term: TermSource = no_term,
) -> threading.Thread:
    """Start a daemon thread NAME running `run_loop`."""
    thread = threading.Thread(
        target=run_loop,
        args=(step, stop),
        kwargs={
            "wakeup": wakeup,
            "what": what,
            "log": log,
            "heartbeat": heartbeat,
            "on_crash": on_crash,
            "after_crash": after_crash,
            "term": term,
        },
        name=name,
        daemon=True,
    )
    thread.start()
    return thread
