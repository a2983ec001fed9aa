"""The webhook's settings: read once at start from flags or the environment, validated there.

Every setting has an environment variable (so `create_app()` with no arguments and a bare
`gunicorn -c python:webhook.gunicorn_conf 'webhook.app:create_app()'` both work) and a flag of
`python -m webhook` that overrides it. Bad values fail at start with one line, never per request.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from plumbing.auth_settings import (
    ALWAYS_ALLOW_PATHS_FLAG,
    AUTHORIZED_TTL_FLAG,
    TOKEN_TTL_FLAG,
    UNAUTHORIZED_TTL_FLAG,
    AuthSettings,
    parse_auth_settings,
)
from plumbing.log_formats import LOG_FORMATS
from shared.defaults import (
    BUILTIN_DEFAULT_TOLERATION_SECONDS,
    DEFAULT_TOLERATION_SECONDS,
    DefaultSeconds,
    toleration_seconds,
)

# controller-runtime's cap; an AdmissionReview carries the object twice on UPDATE, and
# kube-apiserver accepts objects up to about 3 MiB.
DEFAULT_MAX_REQUEST_BYTES = 7 * 1024 * 1024
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


class SettingsError(ValueError):
    """A setting that cannot be used; the message names it and says what is wanted."""


@dataclass(frozen=True)
class Setting:
    """One setting: its flag, the environment variable behind it, and its default."""

    flag: str
    env: str
    default: str
    help: str


NOT_READY_SECONDS = Setting(
    "--default-not-ready-toleration-seconds",
    "TAINTKEEPER_DEFAULT_NOT_READY_TOLERATION_SECONDS",
    str(DEFAULT_TOLERATION_SECONDS),
    "tolerationSeconds of the node.kubernetes.io/not-ready:NoExecute toleration added to pods",
)
UNREACHABLE_SECONDS = Setting(
    "--default-unreachable-toleration-seconds",
    "TAINTKEEPER_DEFAULT_UNREACHABLE_TOLERATION_SECONDS",
    str(DEFAULT_TOLERATION_SECONDS),
    "tolerationSeconds of the node.kubernetes.io/unreachable:NoExecute toleration added to pods",
)
MAX_REQUEST_BYTES = Setting(
    "--max-request-bytes",
    "TAINTKEEPER_MAX_REQUEST_BYTES",
    str(DEFAULT_MAX_REQUEST_BYTES),
    "larger AdmissionReview bodies are refused with HTTP 400",
)
LOG_FORMAT = Setting("--log-format", "TAINTKEEPER_LOG_FORMAT", "plain", "plain or json")
LOG_LEVEL = Setting("--log-level", "TAINTKEEPER_LOG_LEVEL", "INFO", "DEBUG, INFO, WARNING or ERROR")
BIND = Setting("--bind", "TAINTKEEPER_BIND", "0.0.0.0:8443", "HOST:PORT to serve HTTPS on")
CERT_FILE = Setting(
    "--cert-file",
    "TAINTKEEPER_CERT_FILE",
    "/etc/taintkeeper/tls/tls.crt",
    "PEM serving certificate (re-read for new connections, so rotation needs no restart)",
)
KEY_FILE = Setting("--key-file", "TAINTKEEPER_KEY_FILE", "/etc/taintkeeper/tls/tls.key", "PEM private key")
WORKERS = Setting("--workers", "TAINTKEEPER_WORKERS", "2", "gunicorn worker processes")
WORKER_CLASS = Setting(
    "--worker-class",
    "TAINTKEEPER_WORKER_CLASS",
    "gevent",
    "gevent (a greenlet per connection, every client's time bounded) or gthread (a thread per connection "
    "being served: as many stuck clients as threads stop the webhook)",
)
THREADS = Setting("--threads", "TAINTKEEPER_THREADS", "8", "threads per worker (gthread only)")
REQUEST_TIMEOUT = Setting(
    "--request-timeout",
    "TAINTKEEPER_REQUEST_TIMEOUT",
    "10",
    "seconds a connection has for its TLS handshake and first request, and each later request from its "
    "first byte, to arrive in full and be answered; slower connections are closed (gevent with --fast-paths only)",
)
KEEPALIVE_TIMEOUT = Setting(
    "--keepalive-timeout",
    "TAINTKEEPER_KEEPALIVE_TIMEOUT",
    "75",
    "seconds an idle keep-alive connection stays open between two requests",
)
MAX_CONNECTIONS = Setting(
    "--max-connections",
    "TAINTKEEPER_MAX_CONNECTIONS",
    "500",
    "open connections per worker; a worker that has this many accepts no more until one closes",
)
KUBECONFIG = Setting(
    "--kubeconfig",
    "TAINTKEEPER_KUBECONFIG",
    "",
    "kubeconfig for the namespace cache and the apiserver's check of /metrics callers; empty: the in-cluster "
    "config if running in a pod, else neither (no cache; /metrics only if always allowed)",
)
NAMESPACE_CACHE = Setting(
    "--namespace-cache",
    "TAINTKEEPER_NAMESPACE_CACHE",
    "true",
    "true or false: watch namespaces for per-namespace seconds and the skip label",
)
REPLACE_BUILTIN_DEFAULTS = Setting(
    "--replace-builtin-defaults",
    "TAINTKEEPER_REPLACE_BUILTIN_DEFAULTS",
    "false",
    "true or false: on pod CREATE, give taintkeeper's seconds to tolerations that are exactly the built-in "
    "DefaultTolerationSeconds plugin's (for clusters where it cannot be disabled)",
)
BUILTIN_DEFAULT_SECONDS = Setting(
    "--builtin-default-seconds",
    "TAINTKEEPER_BUILTIN_DEFAULT_SECONDS",
    str(BUILTIN_DEFAULT_TOLERATION_SECONDS),
    "tolerationSeconds the built-in plugin adds (kube-apiserver's --default-*-toleration-seconds); "
    "used by --replace-builtin-defaults",
)
FAST_PATHS = Setting(
    "--fast-paths",
    "TAINTKEEPER_FAST_PATHS",
    "true",
    "true or false: take the fast paths that rely on gunicorn's, werkzeug's, prometheus_client's and logging's "
    "internals (webhook/fast_paths.py), each one whose internal has changed off anyway, said at start; and with "
    "gevent, serve with the webhook's worker (webhook/worker.py: --request-timeout, certificates re-read), which "
    "relies on gunicorn's internals and stops the start if they have changed. false: gunicorn's own gevent worker",
)
# /metrics is answered to callers the apiserver authenticates and authorizes (webhook/metrics_access.py),
# with kube-controller-manager's flags; /mutate (the apiserver's calls) and the probes are answered to all.
TOKEN_CACHE_TTL = Setting(
    TOKEN_TTL_FLAG.flag,
    "TAINTKEEPER_AUTHENTICATION_TOKEN_WEBHOOK_CACHE_TTL",
    TOKEN_TTL_FLAG.default,
    TOKEN_TTL_FLAG.help,
)
AUTHORIZED_CACHE_TTL = Setting(
    AUTHORIZED_TTL_FLAG.flag,
    "TAINTKEEPER_AUTHORIZATION_WEBHOOK_CACHE_AUTHORIZED_TTL",
    AUTHORIZED_TTL_FLAG.default,
    AUTHORIZED_TTL_FLAG.help,
)
UNAUTHORIZED_CACHE_TTL = Setting(
    UNAUTHORIZED_TTL_FLAG.flag,
    "TAINTKEEPER_AUTHORIZATION_WEBHOOK_CACHE_UNAUTHORIZED_TTL",
    UNAUTHORIZED_TTL_FLAG.default,
    UNAUTHORIZED_TTL_FLAG.help,
)
ALWAYS_ALLOW_PATHS = Setting(
    ALWAYS_ALLOW_PATHS_FLAG.flag,
    "TAINTKEEPER_AUTHORIZATION_ALWAYS_ALLOW_PATHS",
    ALWAYS_ALLOW_PATHS_FLAG.default,
    ALWAYS_ALLOW_PATHS_FLAG.help + "; /metrics is the only path checked: /mutate and the probes are answered to all",
)

APP_SETTINGS = (
    NOT_READY_SECONDS,
    UNREACHABLE_SECONDS,
    MAX_REQUEST_BYTES,
    LOG_FORMAT,
    LOG_LEVEL,
    KUBECONFIG,
    NAMESPACE_CACHE,
    REPLACE_BUILTIN_DEFAULTS,
    BUILTIN_DEFAULT_SECONDS,
    FAST_PATHS,
    TOKEN_CACHE_TTL,
    AUTHORIZED_CACHE_TTL,
    UNAUTHORIZED_CACHE_TTL,
    ALWAYS_ALLOW_PATHS,
)
# Booleans may be given bare (`--replace-builtin-defaults` means true), as kube-apiserver's flags can.
BOOLEAN_SETTINGS = (NAMESPACE_CACHE, REPLACE_BUILTIN_DEFAULTS, FAST_PATHS)
SERVING_SETTINGS = (
    BIND,
    CERT_FILE,
    KEY_FILE,
    WORKERS,
    WORKER_CLASS,
    THREADS,
    REQUEST_TIMEOUT,
    KEEPALIVE_TIMEOUT,
    MAX_CONNECTIONS,
)
WORKER_CLASSES = ("gevent", "gthread")


def parse_int(setting: Setting, raw: str, minimum: int) -> int:
    """A whole number >= minimum, written in decimal digits (no '3.0', no '1e3', no spaces)."""
    text = raw.strip()
    if not (text.isdigit() or (text.startswith("-") and text[1:].isdigit())):
        raise SettingsError(f"{setting.flag} must be a whole number, got {raw!r}")
    value = int(text)
    if value < minimum:
        raise SettingsError(f"{setting.flag} must be >= {minimum}, got {value}")
    return value


def parse_seconds(setting: Setting, raw: str) -> int:
    """tolerationSeconds for the added tolerations, by the rule every seconds value follows (shared.defaults)."""
    try:
        return toleration_seconds(raw)
    except ValueError as error:
        raise SettingsError(f"{setting.flag} {error}") from None


def parse_choice(setting: Setting, raw: str, choices: tuple[str, ...]) -> str:
    value = raw.strip()
    normalised = value.upper() if setting is LOG_LEVEL else value.lower()
    if normalised not in choices:
        raise SettingsError(f"{setting.flag} must be one of {', '.join(choices)}, got {raw!r}")
    return normalised


def parse_bool(setting: Setting, raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise SettingsError(f"{setting.flag} must be true or false, got {raw!r}")
    return value == "true"


def parse_file(setting: Setting, raw: str) -> str:
    """An existing file, or empty for none (checked at start: the file is read only in the workers)."""
    path = raw.strip()
    if path and not os.path.isfile(path):
        raise SettingsError(f"{setting.flag} {path!r} is not a readable file")
    return path


def lookup(setting: Setting, env: Mapping[str, str]) -> str:
    return env.get(setting.env, setting.default)


def parse_auth(env: Mapping[str, str]) -> AuthSettings:
    """The check of /metrics callers, by the rules the controller's same flags follow (plumbing/auth_settings.py)."""
    try:
        return parse_auth_settings(
            token_ttl=lookup(TOKEN_CACHE_TTL, env),
            authorized_ttl=lookup(AUTHORIZED_CACHE_TTL, env),
            unauthorized_ttl=lookup(UNAUTHORIZED_CACHE_TTL, env),
            always_allow_paths=lookup(ALWAYS_ALLOW_PATHS, env),
        )
    except ValueError as error:
        raise SettingsError(str(error)) from None


@dataclass(frozen=True)
class WebhookSettings:
    """What the app needs (the admission handler, the check of /metrics callers); serving settings live with
    gunicorn."""

    not_ready_seconds: int = DEFAULT_TOLERATION_SECONDS
    unreachable_seconds: int = DEFAULT_TOLERATION_SECONDS
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    log_format: str = "plain"
    log_level: str = "INFO"
    kubeconfig: str = ""  # empty: the in-cluster config when running in a pod, else no cluster client
    # Off by default here, so an app built in a test never talks to a cluster; from_env defaults to on.
    namespace_cache: bool = False
    replace_builtin_defaults: bool = False
    builtin_default_seconds: int = BUILTIN_DEFAULT_TOLERATION_SECONDS
    fast_paths: bool = True  # webhook/fast_paths.py, and the worker (gunicorn_conf.py); the same answers either way
    auth: AuthSettings = field(default_factory=AuthSettings)  # who may read /metrics

    @property
    def cluster_seconds(self) -> DefaultSeconds:
        return DefaultSeconds(self.not_ready_seconds, self.unreachable_seconds)

    @property
    def replace_builtin_seconds(self) -> int | None:
        """The built-in plugin's seconds to replace, or None to leave existing tolerations alone."""
        return self.builtin_default_seconds if self.replace_builtin_defaults else None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> WebhookSettings:
        env = os.environ if env is None else env
        return cls(
            not_ready_seconds=parse_seconds(NOT_READY_SECONDS, lookup(NOT_READY_SECONDS, env)),
            unreachable_seconds=parse_seconds(UNREACHABLE_SECONDS, lookup(UNREACHABLE_SECONDS, env)),
            max_request_bytes=parse_int(MAX_REQUEST_BYTES, lookup(MAX_REQUEST_BYTES, env), 1),
            log_format=parse_choice(LOG_FORMAT, lookup(LOG_FORMAT, env), LOG_FORMATS),
            log_level=parse_choice(LOG_LEVEL, lookup(LOG_LEVEL, env), LOG_LEVELS),
            kubeconfig=parse_file(KUBECONFIG, lookup(KUBECONFIG, env)),
            namespace_cache=parse_bool(NAMESPACE_CACHE, lookup(NAMESPACE_CACHE, env)),
            replace_builtin_defaults=parse_bool(REPLACE_BUILTIN_DEFAULTS, lookup(REPLACE_BUILTIN_DEFAULTS, env)),
            builtin_default_seconds=parse_int(BUILTIN_DEFAULT_SECONDS, lookup(BUILTIN_DEFAULT_SECONDS, env), 0),
            fast_paths=parse_bool(FAST_PATHS, lookup(FAST_PATHS, env)),
            auth=parse_auth(env),
        )


def check_kubeconfig(settings: WebhookSettings) -> None:
    """At start: a given kubeconfig must load (nothing is connected to), or SettingsError says why.

    Imports only the Kubernetes client: `python -m webhook` must not import prometheus_client
    before the gunicorn config has set PROMETHEUS_MULTIPROC_DIR.
    """
    if not settings.kubeconfig:  # used with or without the namespace cache: /metrics callers are checked through it
        return
    from kube.client import ClientConfigError, make_api_client
    from kube.identity import WEBHOOK

    try:
        make_api_client(settings.kubeconfig, component=WEBHOOK).close()
    except ClientConfigError as error:
        raise SettingsError(f"{KUBECONFIG.flag}: {error}") from error


@dataclass(frozen=True)
class ServingSettings:
    bind: str
    cert_file: str
    key_file: str
    workers: int
    threads: int
    worker_class: str = "gevent"
    request_timeout: int = 10
    keepalive_timeout: int = 75
    max_connections: int = 500

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ServingSettings:
        env = os.environ if env is None else env
        bind = lookup(BIND, env)
        host, sep, port = bind.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise SettingsError(f"{BIND.flag} must be HOST:PORT, got {bind!r}")
        return cls(
            bind=bind,
            cert_file=lookup(CERT_FILE, env),
            key_file=lookup(KEY_FILE, env),
            workers=parse_int(WORKERS, lookup(WORKERS, env), 1),
            threads=parse_int(THREADS, lookup(THREADS, env), 1),
            worker_class=parse_choice(WORKER_CLASS, lookup(WORKER_CLASS, env), WORKER_CLASSES),
            request_timeout=parse_int(REQUEST_TIMEOUT, lookup(REQUEST_TIMEOUT, env), 1),
            keepalive_timeout=parse_int(KEEPALIVE_TIMEOUT, lookup(KEEPALIVE_TIMEOUT, env), 1),
            max_connections=parse_int(MAX_CONNECTIONS, lookup(MAX_CONNECTIONS, env), 1),
        )

    def check_files(self) -> None:
        """gunicorn needs both files when it opens its listener; say which one is missing."""
        for setting, path in ((CERT_FILE, self.cert_file), (KEY_FILE, self.key_file)):
            if not os.path.isfile(path):
                raise SettingsError(f"{setting.flag} {path!r} is not a readable file")


def patch_for_gevent(serving: ServingSettings) -> None:
    """With the gevent worker class: gevent's monkey-patching, as early as the process allows.

    Must run before anything imports urllib3 (the namespace cache's Kubernetes client): urllib3 binds
    `ssl.SSLContext` when first imported, and a context made from the unpatched class would block a
    whole worker on the namespace watch. gunicorn's gevent worker patches only in the worker, after
    fork, too late for modules the master has imported. Forking, child reaping and signals stay
    unpatched in the gunicorn master (the worker patches them for itself).
    """
    if serving.worker_class != "gevent":
        return
    from gevent import monkey

    monkey.patch_all(os=False, signal=False, subprocess=False)
