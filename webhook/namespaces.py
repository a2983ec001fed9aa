"""The webhook's watched namespace cache: per-namespace seconds and the namespace skip label.

Each gunicorn worker keeps its own list+watch of Namespaces (kube/informer.py's raw-JSON `Informer`)
as slim `ResolvedNamespace`s whose defaults are resolved once per change, so a review costs one dict
lookup. The watch is started in the worker, after fork (gunicorn's `post_worker_init` hook, and
again lazily by the first review if that hook did not run): a thread started before fork would
not exist in the workers.

Admission never waits for the cache and never calls the API: until the first LIST is in (or while
the API cannot be reached at start), `lookup` answers None and the cluster defaults apply. After
that, a lost connection leaves the last known namespaces in place while the informer retries.
Readiness does wait, up to READY_WAIT: a replica rolled in by an upgrade gets no admission traffic
before it knows the namespaces' own seconds, unless the API keeps it from learning them that long.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kube.client import in_cluster_available, make_api_client, make_in_cluster_client
from kube.identity import WEBHOOK
from kube.informer import Informer
from kube.raw_list import raw_list_call
from shared.defaults import (
    NOT_READY_SECONDS_ANNOTATION,
    SKIP_LABEL,
    UNREACHABLE_SECONDS_ANNOTATION,
    DefaultSeconds,
    namespace_seconds,
    skips,
)
from webhook.admission import NamespaceDefaults
from webhook.settings import KUBECONFIG, NAMESPACE_CACHE, WebhookSettings

log = logging.getLogger("taintkeeper.webhook.namespaces")

ANNOTATIONS = (NOT_READY_SECONDS_ANNOTATION, UNREACHABLE_SECONDS_ANNOTATION)
# tolerationSeconds is an int64: a larger number would make the patched pod invalid.
# An annotation value is shown in warnings (HTTP headers, logs) cut to this length.
MAX_SHOWN_CHARS = 64
# Seconds /readyz waits for the first LIST before saying ready anyway (the cluster defaults then apply):
# a webhook that cannot reach the API must still serve, as admission never depends on the cache.
READY_WAIT = 10.0


@dataclass(frozen=True, slots=True)
class ResolvedNamespace:
    """The slice of a Namespace the webhook reads, with its defaults already resolved."""

    name: str
    skip_label: str | None
    not_ready_annotation: str | None
    unreachable_annotation: str | None
    defaults: NamespaceDefaults

    @property
    def key(self) -> str:
        return self.name


def _shown(value: object) -> str:
    """An annotation value as parsed: long values (never a valid number) are cut, so a warning stays short."""
    text = value if isinstance(value, str) else str(value)
    if len(text) > MAX_SHOWN_CHARS and len(text.strip()) > MAX_SHOWN_CHARS:
        return text.strip()[: MAX_SHOWN_CHARS - 3] + "..."
    return text


def _optional_shown(value: object) -> str | None:
    return None if value is None else _shown(value)


def resolve(labels: dict[str, Any], annotations: dict[str, Any], cluster: DefaultSeconds) -> NamespaceDefaults:
    """A namespace's defaults from its labels and annotations (pure; `shared.defaults` does the parsing)."""
    ours = {key: annotations[key] for key in ANNOTATIONS if key in annotations}
    seconds, warnings = namespace_seconds(ours, cluster)  # parses the raw values; warnings show them shortened
    return NamespaceDefaults(seconds=seconds, warnings=tuple(warnings), skipped=skips(labels))


def namespace_view(namespace: dict[str, Any], cluster: DefaultSeconds) -> ResolvedNamespace:
    """The informer's transform: API JSON of a Namespace -> ResolvedNamespace."""
    metadata = namespace.get("metadata") or {}
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    return ResolvedNamespace(
        name=metadata.get("name") or "",
        skip_label=labels.get(SKIP_LABEL),
        not_ready_annotation=_optional_shown(annotations.get(NOT_READY_SECONDS_ANNOTATION)),
        unreachable_annotation=_optional_shown(annotations.get(UNREACHABLE_SECONDS_ANNOTATION)),
        defaults=resolve(labels, annotations, cluster),
    )


# -- reaching the API ------------------------------------------------------------------------------


def client_source(settings: WebhookSettings) -> tuple[Callable[[], Any] | None, str]:
    """(a factory of the ApiClient the cache uses, what it is) or (None, why there is no cache)."""
    if not settings.namespace_cache:
        return None, f"{NAMESPACE_CACHE.flag}=false"
    return api_client_source(settings)


def api_client_source(settings: WebhookSettings) -> tuple[Callable[[], Any] | None, str]:
    """(a factory of the webhook's ApiClient, what it is) or (None, why there is none): --kubeconfig, else
    the in-cluster config. The namespace cache and the check of /metrics callers each make one from it.

    Reads files only (the kubeconfig is loaded when the factory runs, in the worker); never connects.
    """
    if settings.kubeconfig:
        return (
            functools.partial(make_api_client, settings.kubeconfig, component=WEBHOOK),
            f"kubeconfig {settings.kubeconfig}",
        )
    if in_cluster_available():
        return functools.partial(make_in_cluster_client, component=WEBHOOK), "the in-cluster config"
    return None, f"no {KUBECONFIG.flag} given and not running in a cluster"


class NamespaceCache:
    """Per-namespace defaults for `review_pod(namespace_defaults=cache.lookup)`, kept by a watch.

    `connect` builds the list call (e.g. `CoreV1Api(api).list_namespace`); it runs in the process
    that serves, when the cache starts. None: no cache, `lookup` always answers None.
    """

    def __init__(
        self,
        cluster: DefaultSeconds,
        connect: Callable[[], Callable[..., Any]] | None,
        source: str = "",
        ready_wait: float = READY_WAIT,
        **informer_options: Any,
    ) -> None:
        self.cluster = cluster
        self.source = source
        self.ready_wait = ready_wait
        self._connect = connect
        self._informer_options = informer_options
        self._informer: Informer[ResolvedNamespace] | None = None
        self._started_in: int | None = None  # the pid that started the watch
        self._started_at: float | None = None  # time.monotonic() when this process's informer started
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: WebhookSettings) -> NamespaceCache:
        factory, source = client_source(settings)
        if factory is None:
            return cls(settings.cluster_seconds, None, source)

        def connect() -> Callable[..., Any]:
            return raw_list_call(factory(), "/api/v1/namespaces")  # not CoreV1Api, whose import weighs on every worker

        return cls(settings.cluster_seconds, connect, source)

    @property
    def enabled(self) -> bool:
        return self._connect is not None

    @property
    def synced(self) -> bool:
        informer = self._informer
        return informer is not None and informer.has_synced

    def ensure_started(self) -> None:
        """Start the watch once in this process; cheap enough to call for every review."""
        if self._started_in == os.getpid():
            return
        with self._lock:
            pid = os.getpid()
            if self._started_in == pid:
                return
            # An informer inherited through fork has no thread here; it is dropped, never touched.
            self._informer = None
            self._started_in = pid
            # Imported here, in the worker: the gunicorn master imports this module too (on_starting),
            # and a gauge made there would hold a live 0 that `livemin` never lets go.
            from webhook import metrics

            metrics.NAMESPACE_CACHE_SYNCED.set(0)
            if self._connect is None:
                return
            try:
                list_call = self._connect()
            except Exception as error:  # a broken config must not break admission: no cache, cluster defaults
                log.error(
                    "namespace cache off: cannot build the API client from %s (%s); the cluster defaults "
                    "apply to every namespace",
                    self.source,
                    " ".join(str(error).split()),
                )
                return
            informer: Informer[ResolvedNamespace] = Informer(
                "namespaces",
                list_call,
                functools.partial(namespace_view, cluster=self.cluster),
                **self._informer_options,
            )
            informer.start()
            self._started_at = time.monotonic()
            self._informer = informer
            threading.Thread(
                target=self._report_sync, args=(informer,), name="namespace-cache-synced", daemon=True
            ).start()

    def _report_sync(self, informer: Informer[ResolvedNamespace]) -> None:
        while not informer.wait_for_sync(timeout=1.0):
            if not informer.running:
                return
        from webhook import metrics

        metrics.NAMESPACE_CACHE_SYNCED.set(1)
        log.info("namespace cache synced from %s: %d namespaces", self.source, len(informer))

    def unready_reason(self, now: float) -> str | None:
        """Why this process should not be sent admissions yet (`now`: time.monotonic()), or None. Each
        gunicorn worker has its own cache; the probe reaches one of them, and they start together."""
        informer, started_at = self._informer, self._started_at
        if informer is None or started_at is None or informer.has_synced:
            return None  # off, or synced
        waited = now - started_at
        if waited >= self.ready_wait:
            return None  # the API is out of reach: serve with the cluster defaults rather than not at all
        return f"namespace cache not synced yet ({waited:.1f}s of {self.ready_wait:g}s)"

    def lookup(self, namespace: str) -> NamespaceDefaults | None:
        """What is known about `namespace`; None (the cluster defaults apply) when the cache is off,
        not synced yet, or has not seen the namespace. Never blocks on the API."""
        informer = self._informer
        if informer is None or not informer.has_synced:
            return None
        view = informer.get(namespace)
        return None if view is None else view.defaults

    def stop(self) -> None:
        informer = self._informer
        if informer is not None and self._started_in == os.getpid():
            informer.stop()
