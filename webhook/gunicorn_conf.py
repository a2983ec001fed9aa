"""gunicorn configuration for the webhook: TLS 1.2+, gthread workers, multiprocess metrics.

Use: gunicorn -c python:webhook.gunicorn_conf 'webhook.app:create_app()'
(`python -m webhook` does exactly this after validating its flags). Settings come from the
TAINTKEEPER_* environment variables (webhook/settings.py).

Why gthread: kube-apiserver keeps its connections to webhooks alive, and the sync worker
closes every connection, so each review would pay a full TLS handshake (10-40x slower here).
gunicorn builds a fresh SSL context per accepted connection, so a rotated certificate file is
served to new connections without a restart.
"""

from __future__ import annotations

import logging
import os
import shutil
import ssl
import tempfile

from shared.jsonlog import configure_logging
from webhook.settings import ServingSettings, WebhookSettings

_serving = ServingSettings.from_env()
_app_settings = WebhookSettings.from_env()

# Must be set before prometheus_client is first imported (in the workers, after fork).
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="taintkeeper-webhook-metrics-"))

bind = [_serving.bind]
certfile = _serving.cert_file
keyfile = _serving.key_file
workers = _serving.workers
threads = _serving.threads
worker_class = "gthread"
keepalive = 75  # longer than kube-apiserver's idle connection timeout, so it closes first
graceful_timeout = 20
accesslog = None


def ssl_context(config, default_ssl_context_factory):  # type: ignore[no-untyped-def]
    context = default_ssl_context_factory()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def on_starting(server) -> None:  # type: ignore[no-untyped-def]
    configure_logging(_app_settings.log_format, _app_settings.log_level)
    # Files left by an earlier run would be merged into this run's counters.
    directory = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory, exist_ok=True)
    # Said once, by the master; each worker starts its own watch after fork (post_worker_init).
    from webhook.namespaces import client_source

    factory, source = client_source(_app_settings)
    log = logging.getLogger("taintkeeper.webhook.namespaces")
    if factory is None:
        log.info("namespace cache off (%s): the cluster defaults apply to every namespace", source)
    else:
        log.info("namespace cache on, from %s: until it has synced, the cluster defaults apply", source)


def post_worker_init(worker) -> None:  # type: ignore[no-untyped-def]
    # After fork, in the worker: the watch thread must live in the process that serves.
    from webhook.app import namespace_cache_of

    cache = namespace_cache_of(worker.wsgi)
    if cache is not None:
        cache.ensure_started()


def worker_exit(server, worker) -> None:  # type: ignore[no-untyped-def]
    from webhook.app import namespace_cache_of

    cache = namespace_cache_of(getattr(worker, "wsgi", None))
    if cache is not None:
        cache.stop()


def child_exit(server, worker) -> None:  # type: ignore[no-untyped-def]
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
