"""List+watch of one resource into an indexed store of slim views: the only code that lists or watches.

Why not the client's Watch/SharedInformer: they build the client's model objects (gigabytes at
150,000 pods), set no client-side read timeout (a silently dead connection hangs them forever),
and keep no index ("pods on node X" would be a scan). This reads the API's JSON straight off the
socket, turns each object into a view with `transform` and drops the dict.

Protocol (as client-go's reflector): LIST, then WATCH from the list's resourceVersion. The first
LIST is served from the apiserver's watch cache (resourceVersion=0); LIST responses are read item by
item off the stream (kube/list_stream.py), in pages where the server pages. A dropped or timed-out
stream resumes from the last resourceVersion seen; only 410 (Expired/Gone) forces a fresh LIST, read
consistently from etcd, which is reconciled against the store (kube/store.py) so handlers see exact
differences. One informer per resource serves every component: each adds its handler.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import gc
import json
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any, Generic

from kubernetes.client.exceptions import ApiException

from kube.client import CONNECT_TIMEOUT, LIST_REQUEST_TIMEOUT
from kube.errors import GONE, describe_error, is_gone
from kube.list_stream import read_list
from kube.protobuf import ACCEPT_PROTOBUF, is_protobuf, read_protobuf_list
from kube.store import ADDED, DELETED, MODIFIED, Change, Store, V
from kube.watch_body import batched_body

log = logging.getLogger("taintkeeper.informer")

BOOKMARK = "BOOKMARK"
ERROR = "ERROR"

# A stream that ends this fast without any event is treated as a failure, so a proxy that closes
# watches at once cannot turn the loop into a busy loop.
MIN_HEALTHY_STREAM_SECONDS = 1.0
LIST_CHUNK_BYTES = 1 << 20


_collector_lock = threading.Lock()
_collector_pauses = 0
_collector_was_enabled = False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Keep the cyclic garbage collector out of a LIST: the many dicts a page of JSON becomes would set
    off collection after collection, costing more CPU than the parsing itself, and a LIST builds
    nothing cyclic for it to find. Counted, so informers listing at the same time share one pause."""
    global _collector_pauses, _collector_was_enabled
    with _collector_lock:
        if _collector_pauses == 0:
            _collector_was_enabled = gc.isenabled()
            gc.disable()
        _collector_pauses += 1
    try:
        yield
    finally:
        with _collector_lock:
            _collector_pauses -= 1
            if _collector_pauses == 0 and _collector_was_enabled:
                gc.enable()


class ResourceExpired(Exception):
    """The resourceVersion to resume from is too old (HTTP 410 or a watch ERROR event with 410)."""


class WatchError(Exception):
    """An ERROR event other than 410 on the watch stream."""


# The longest wait between two failed LIST or WATCH attempts. client-go waits up to 30 s, so its informers
# may come back that long after an apiserver outage ends, and every eviction due during the outage with
# them. Attempts against a stopped apiserver are refused at once and cost nothing; 4 s keeps a controller
# within 5 s of the apiserver's return.
BACKOFF_MAX = 4.0


class Backoff:
    """Capped exponential delays: initial, 2x, 4x, ... up to `maximum`; `reset` after a success."""

    def __init__(self, initial: float = 0.2, maximum: float = 30.0, factor: float = 2.0) -> None:
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self._next = initial

    def next(self) -> float:
        delay = min(self._next, self.maximum)
        self._next = min(self._next * self.factor, self.maximum)
        return delay

    def reset(self) -> None:
        self._next = self.initial


def iter_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Split a byte stream into lines, whatever the chunk boundaries; blank lines are skipped.

    A trailing line without a newline is yielded too: if the stream was cut mid-event, parsing it
    fails, which is reported like any other broken stream.
    """
    pending = bytearray()
    for chunk in chunks:
        scan_from = len(pending)  # earlier bytes hold no newline: do not rescan a large event
        pending += chunk
        start = 0
        while (newline := pending.find(b"\n", scan_from)) >= 0:
            line = bytes(pending[start:newline])
            if line.strip():
                yield line
            start = scan_from = newline + 1
        if start:
            del pending[:start]
    if bytes(pending).strip():
        yield bytes(pending)


class Informer(Generic[V]):
    """Keeps a Store of views of one resource in sync with the API on a daemon thread.

    `list_call` is a generated list method, e.g. `CoreV1Api(api).list_pod_for_all_namespaces`,
    `list_node`, or `functools.partial(core.list_namespaced_pod, "ns")`. Each handler
    `(old, new)` (given here or with `add_handler` before `start`) runs on the informer's thread,
    outside the store lock, in event order; an exception in one is logged and keeps the change
    from no other handler.

    With `protobuf_item` (one protobuf-encoded list item -> the JSON-shaped dict `transform` reads),
    LISTs ask for protobuf, which the apiserver encodes several times faster than JSON; an answer in
    JSON (a resource without protobuf) is read as JSON. Watches stay JSON, read off the socket in
    blocks (kube/watch_body.py); with `batch_seconds`, events may wait that long to be read with the
    ones after them, one wake-up for all.
    """

    def __init__(
        self,
        name: str,
        list_call: Callable[..., Any],
        transform: Callable[[dict[str, Any]], V],
        *handlers: Callable[[V | None, V | None], None],
        index_by: Callable[[V], Hashable] | None = None,
        watch_timeout_seconds: int = 60,
        read_timeout: float = 75,
        page_size: int = 500,
        backoff_max: float = BACKOFF_MAX,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] | None = None,
        protobuf_item: Callable[[bytes], dict[str, Any]] | None = None,
        batch_seconds: float = 0.0,
    ) -> None:
        # The read timeout is how a dead connection is noticed; it must outlast the server's own
        # watch timeout unless the caller deliberately wants faster detection of an idle stream.
        self.name = name
        self.store: Store[V] = Store(index_by)
        self._list_call = list_call
        self._transform = transform
        self._protobuf_item = protobuf_item
        self.batch_seconds = batch_seconds  # watch events may wait this long to be read with the next ones
        self._handlers: list[Callable[[V | None, V | None], None]] = list(handlers)
        self.watch_timeout_seconds = int(watch_timeout_seconds)
        self.read_timeout = read_timeout
        self.page_size = page_size
        self._clock = clock
        self._stopping = threading.Event()
        self._sleep = sleep if sleep is not None else self._stopping.wait  # stop() cuts a backoff short
        self._backoff = Backoff(0.2, backoff_max)
        self._synced = threading.Event()
        self._resource_version: str | None = None
        self._response: Any = None  # the response being read, so stop() can unblock it
        self._response_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        # Counters for tests and debugging; written only by the informer's thread.
        self.list_count = 0  # completed LISTs (the first one included)
        self.watch_count = 0  # WATCH requests the server answered
        self.expired_count = 0  # 410s that forced a re-list
        self.error_count = 0  # failures that were retried with backoff
        self.last_error: str | None = None

    # -- reading the store --------------------------------------------------------------------

    def get(self, key: str) -> V | None:
        return self.store.get(key)

    def list(self) -> builtins.list[V]:
        return self.store.list()

    def keys(self) -> builtins.list[str]:
        return self.store.keys()

    def __len__(self) -> int:
        return len(self.store)

    def by_index(self, value: Hashable) -> builtins.list[V]:
        return self.store.by_index(value)

    @property
    def has_synced(self) -> bool:
        """True once the first LIST is in the store and its handlers have run."""
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    @property
    def last_resource_version(self) -> str | None:
        return self._resource_version

    # -- lifecycle ------------------------------------------------------------------------------

    def add_handler(self, handler: Callable[[V | None, V | None], None]) -> None:
        """Have `handler(old, new)` called on every change; only before `start`, so it sees the first LIST."""
        if self._thread is not None:
            raise RuntimeError(f"informer {self.name} is running: add handlers before start()")
        self._handlers.append(handler)

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"informer {self.name} was already started")
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread promptly: a read blocked on the socket is interrupted, not waited out."""
        self._stopping.set()
        with self._response_lock:
            response = self._response
        if response is not None:
            _interrupt(response)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- the loop ---------------------------------------------------------------------------------

    def _run(self) -> None:
        must_list = True
        while not self._stopping.is_set():
            try:
                if must_list:
                    self._list()
                    must_list = False
                    self._backoff.reset()
                    continue
                started = self._clock()
                events = self._watch()
                if events == 0 and self._clock() - started < MIN_HEALTHY_STREAM_SECONDS:
                    self._sleep(self._backoff.next())
            except ResourceExpired as expired:
                if self._stopping.is_set():
                    break
                self.expired_count += 1
                log.info(
                    "%s: resourceVersion %s expired (%s); re-listing",
                    self.name,
                    self._resource_version,
                    describe_error(expired),
                )
                if must_list:  # even the LIST (a stale continue token) expired: do not spin
                    self._sleep(self._backoff.next())
                must_list = True
            except Exception as error:  # never let the thread die: every failure is retried
                if self._stopping.is_set():
                    break
                self.error_count += 1
                self.last_error = describe_error(error)
                delay = self._backoff.next()
                log.warning(
                    "%s: %s failed (%s); retrying in %.1fs%s",
                    self.name,
                    "list" if must_list else "watch",
                    self.last_error,
                    delay,
                    "" if must_list else f" from resourceVersion {self._resource_version}",
                )
                self._sleep(delay)
        log.debug("%s: stopped", self.name)

    def _list(self) -> None:
        with collector_paused():
            self._list_and_dispatch()

    def _list_and_dispatch(self) -> None:
        started = self._clock()
        views: list[V] = []
        continue_token: str | None = None
        pages = 0
        resource_version: str | None = None
        # The first LIST is served from the apiserver's watch cache, as client-go's reflector asks
        # for it: etcd is not read (30,000 pods: 4.2 s in one response, against 6.6 s in 60 pages
        # of 500). It may lag behind etcd; the WATCH from its resourceVersion brings the store up
        # to date. A re-list (after a 410) reads etcd: the store must not go back in time.
        from_cache = not self._synced.is_set()

        def keep(item: dict[str, Any]) -> None:
            view = self._view(item)
            if view is not None:
                views.append(view)

        while True:
            kwargs: dict[str, Any] = {
                "limit": self.page_size,
                "_preload_content": False,
                "_request_timeout": LIST_REQUEST_TIMEOUT,
            }
            if continue_token:
                kwargs["_continue"] = continue_token
            elif from_cache:
                kwargs["resource_version"] = "0"
            metadata = self._read_page(keep, **kwargs)
            pages += 1
            resource_version = metadata.get("resourceVersion") or resource_version
            continue_token = metadata.get("continue")
            if not continue_token:
                break
            if self._stopping.is_set():
                return
        changes = self.store.replace(views)
        first = not self._synced.is_set()
        self._resource_version = resource_version
        self.list_count += 1
        elapsed = self._clock() - started
        if first:
            log.info(
                "%s: listed %d objects in %d page(s) at resourceVersion %s (%.2fs)",
                self.name,
                len(views),
                pages,
                resource_version,
                elapsed,
            )
        else:
            added = sum(1 for old, _ in changes if old is None)
            removed = sum(1 for _, new in changes if new is None)
            log.info(
                "%s: re-listed %d objects at resourceVersion %s (%.2fs): %d added, %d changed, %d removed",
                self.name,
                len(views),
                resource_version,
                elapsed,
                added,
                len(changes) - added - removed,
                removed,
            )
        views.clear()  # the store holds them now
        self._dispatch(changes)
        self._synced.set()

    def _read_page(self, on_item: Callable[[dict[str, Any]], None], **kwargs: Any) -> dict[str, Any]:
        """One LIST response, each item handed to `on_item` as it is read; returns the list metadata.
        The client's models are never built, and the raw body never held whole (list_stream, protobuf)."""
        if self._protobuf_item is not None:
            kwargs["_headers"] = {"Accept": ACCEPT_PROTOBUF}
        response = self._call(**kwargs)
        self._set_response(response)
        try:
            chunks = response.stream(LIST_CHUNK_BYTES, decode_content=True)
            if self._protobuf_item is not None and is_protobuf(response.headers.get("Content-Type")):
                return read_protobuf_list(chunks, functools.partial(self._decode_item, on_item))
            return read_list(chunks, on_item)
        finally:
            self._set_response(None)
            response.release_conn()

    def _decode_item(self, on_item: Callable[[dict[str, Any]], None], data: bytes) -> None:
        assert self._protobuf_item is not None
        try:
            item = self._protobuf_item(data)
        except Exception:  # like a malformed JSON object: skipped, not a re-list loop
            log.exception("%s: cannot decode a protobuf list item (%d bytes); skipped", self.name, len(data))
            return
        on_item(item)

    def _watch(self) -> int:
        """One WATCH request, read until the stream ends; returns the number of events handled."""
        response = self._call(
            watch=True,
            resource_version=self._resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=self.watch_timeout_seconds,
            _preload_content=False,
            _request_timeout=(CONNECT_TIMEOUT, self.read_timeout),
        )
        self.watch_count += 1
        events = 0
        if not self._set_response(response):
            response.close()
            return events
        try:
            chunks = batched_body(response, self.batch_seconds, self._sleep)
            if chunks is None:  # amt=None: hand over each chunk as it arrives instead of waiting for a full buffer
                chunks = response.stream(amt=None, decode_content=True)
            for line in iter_lines(chunks):
                if self._stopping.is_set():
                    break
                self._handle_event(json.loads(line))
                events += 1
                self._backoff.reset()
        finally:
            self._set_response(None)
            response.close()  # a watch connection is not reused: it may be half-read or broken
        return events

    def _call(self, **kwargs: Any) -> Any:
        try:
            return self._list_call(**kwargs)
        except ApiException as error:
            if is_gone(error):
                raise ResourceExpired(f"HTTP 410 {error.reason}") from error
            raise

    def _set_response(self, response: Any) -> bool:
        """Publish the response stop() should interrupt; False if stopping already began."""
        with self._response_lock:
            if response is not None and self._stopping.is_set():
                return False
            self._response = response
            return True

    def _handle_event(self, event: dict[str, Any]) -> None:
        event_type = event.get("type")
        obj = event.get("object") or {}
        if event_type == ERROR:
            code, reason = obj.get("code"), obj.get("reason")
            if code == GONE or reason in ("Expired", "Gone"):
                raise ResourceExpired(f"watch ERROR {code} {reason}: {obj.get('message')}")
            raise WatchError(f"watch ERROR {code} {reason}: {obj.get('message')}")
        metadata = obj.get("metadata")
        resource_version = metadata.get("resourceVersion") if isinstance(metadata, dict) else None
        if event_type == BOOKMARK:
            if resource_version:
                self._resource_version = resource_version
            return
        if event_type not in (ADDED, MODIFIED, DELETED):
            log.warning("%s: ignoring watch event of unknown type %r", self.name, event_type)
            return
        view = self._view(obj)
        if view is not None:
            change = self.store.apply(event_type, view)
            if change is not None:
                self._dispatch((change,))
        if resource_version:
            self._resource_version = resource_version

    def _view(self, item: dict[str, Any]) -> V | None:
        try:
            return self._transform(item)
        except Exception:  # one malformed object must not stall the informer in a re-list loop
            metadata = item.get("metadata") if isinstance(item, dict) else None
            name = metadata.get("name") if isinstance(metadata, dict) else None
            namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
            log.exception("%s: cannot transform %s/%s; skipped", self.name, namespace, name)
            return None

    def _dispatch(self, changes: Iterable[Change[V]]) -> None:
        for old, new in changes:
            for handler in self._handlers:
                try:
                    handler(old, new)
                except Exception:
                    changed = new if new is not None else old
                    log.exception(
                        "%s: handler failed for %s (%s)",
                        self.name,
                        changed.key if changed else "?",
                        getattr(handler, "__qualname__", handler),
                    )


def _interrupt(response: Any) -> None:
    """Unblock a thread reading `response` from another thread. close() could wait on the SSL
    object's lock held by the blocked read; shutting down the socket makes the read return."""
    try:
        response.shutdown()  # urllib3 >= 2.3: shutdown(SHUT_RD) on the socket
    except Exception:
        try:
            response.close()
        except Exception as error:
            log.debug("could not interrupt a response: %s", error)
