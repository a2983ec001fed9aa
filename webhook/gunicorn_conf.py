"""gunicorn configuration for the webhook: TLS 1.2+, gevent workers, multiprocess metrics.

Use: gunicorn -c python:webhook.gunicorn_conf 'webhook.app:create_app()'
(`python -m webhook` does exactly this after validating its flags). Settings come from the
TAINTKEEPER_* environment variables (webhook/settings.py).

Why keep-alive workers: kube-apiserver keeps its connections to webhooks alive, and the sync
worker closes every connection, so each review would pay a full TLS handshake.
Why gevent over gthread: a client that never completes its handshake or its request holds a gthread
thread, so as many such clients as there are threads stop the webhook; a greenlet per connection
keeps serving beside them (bench/REPORT.md, "Webhook serving setup"). With `--fast-paths` (the
default) the greenlets are the webhook's own worker (webhook/worker.py), with deadlines on
handshakes, requests and idle time and a fresh TLS context per connection (a renewed certificate file
is served to new connections without a restart); it relies on gunicorn's internals, so it is checked
here first and a mismatch stops the start with one line. With the switch off, gunicorn's own gevent
worker serves, through gunicorn's public behaviour only: no `--request-timeout` (a connection waiting
for its request headers is closed after `--keepalive-timeout`, one stuck in its TLS handshake or its
body only by the client), and a TLS context made once per worker (a renewed certificate is served
once the workers restart); the start says so in one line.
Each gevent worker listens on its own SO_REUSEPORT socket, so the kernel spreads connections over
the workers: on one shared socket, the first worker to wake takes every connection of a burst.
"""

from __future__ import annotations

import gc
import logging
import os
import shutil
import ssl
import sys
import tempfile

from plumbing.log_lines import configure_logging
from webhook.settings import ServingSettings, WebhookSettings, patch_for_gevent

_serving = ServingSettings.from_env()
patch_for_gevent(_serving)  # before on_starting imports urllib3 (`python -m webhook` has done it already)
_app_settings = WebhookSettings.from_env()
GUNICORNS_GEVENT_WORKER = "gevent"
WEBHOOK_WORKER = "webhook.worker.WebhookWorker"


def _gevent_worker_class() -> str:
    """The webhook's worker with the fast-paths switch on, once its check of gunicorn's internals has
    passed; gunicorn's own gevent worker with the switch off. A failed check ends the start here, in the
    master, before anything is bound or forked: serving on gunicorn's worker instead would silently drop
    the deadlines the operator chose the webhook's worker for."""
    if not _app_settings.fast_paths:
        return GUNICORNS_GEVENT_WORKER
    import gunicorn

    from webhook.worker import gunicorn_mismatch

    wrong = gunicorn_mismatch()
    if wrong is not None:
        print(
            f"webhook: error: the webhook's worker does not fit gunicorn {gunicorn.__version__}: {wrong} "
            "(--fast-paths=false serves with gunicorn's own gevent worker, without --request-timeout)",
            file=sys.stderr,
        )
        sys.exit(2)
    return WEBHOOK_WORKER


if _serving.worker_class == "gevent":
    worker_class = _gevent_worker_class()
    reuse_port = True
else:
    worker_class = "gthread"
    threads = _serving.threads

# Must be set before prometheus_client is first imported (in the workers, after fork). A directory
# made here is this server's to remove when it exits (on_exit); one the operator names is emptied at
# start (on_starting) but kept.
_MADE_METRICS_DIRECTORY = "PROMETHEUS_MULTIPROC_DIR" not in os.environ
if _MADE_METRICS_DIRECTORY:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="taintkeeper-webhook-metrics-")

bind = [_serving.bind]
certfile = _serving.cert_file
keyfile = _serving.key_file
workers = _serving.workers
worker_connections = _serving.max_connections
keepalive = _serving.keepalive_timeout  # 75 s by default: longer than kube-apiserver's idle timeout, so it closes first
graceful_timeout = 20
accesslog = None
control_socket_disable = True  # gunicorn would otherwise open a management socket in $HOME; nothing here uses it
# The app and all it imports (Flask, the Kubernetes client) are loaded once, in the master, and shared
# copy-on-write by the workers; pre_fork's gc.freeze() keeps each worker's collector from writing to
# those objects (and so copying their pages). bench/webhook_memory.py measures what it saves.
preload_app = True


def ssl_context(config, default_ssl_context_factory):
    context = default_ssl_context_factory()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def on_starting(server) -> None:
    configure_logging(_app_settings.log_format, _app_settings.log_level)
    # Said once, by the master; the workers it forks inherit its checks' answers and logging's setup.
    from webhook.fast_paths import FastPaths

    fast_paths = FastPaths(_app_settings.fast_paths)
    fast_paths.skip_caller_lookup()
    for line in fast_paths.off_lines():
        logging.getLogger("taintkeeper.webhook.fast_paths").warning(line)
    if worker_class == GUNICORNS_GEVENT_WORKER:
        logging.getLogger("taintkeeper.webhook.fast_paths").warning(
            "fast paths off: gunicorn's own gevent worker serves, without --request-timeout; a renewed "
            "certificate is served once the workers restart"
        )
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


def pre_fork(server, worker) -> None:
    gc.freeze()  # everything allocated so far is shared: out of the collector's reach in every worker


def post_worker_init(worker) -> None:
    # After fork, in the worker: the watch thread and the bookkeeping thread must live in the process that serves.
    from webhook.app import bookkeeping_of, namespace_cache_of

    cache = namespace_cache_of(worker.wsgi)
    if cache is not None:
        cache.ensure_started()
    bookkeeping = bookkeeping_of(worker.wsgi)
    if bookkeeping is not None:
        bookkeeping.start()


def worker_exit(server, worker) -> None:
    from webhook.app import bookkeeping_of, namespace_cache_of

    app = getattr(worker, "wsgi", None)
    bookkeeping = bookkeeping_of(app)
    if bookkeeping is not None:
        bookkeeping.drain()  # the log lines and counts of the last reviews
    cache = namespace_cache_of(app)
    if cache is not None:
        cache.stop()


def on_exit(server) -> None:
    if _MADE_METRICS_DIRECTORY:  # runs on a host would otherwise leave one directory in TMPDIR per start
        shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)


def child_exit(server, worker) -> None:
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
