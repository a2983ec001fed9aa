"""webhook settings and `python -m webhook` start-up: bad values fail at start with one line."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.builders import kubeconfig_file
from tests.unit.webhook.starting import run_python
from webhook.__main__ import parse_args as webhook_args
from webhook.settings import ServingSettings, SettingsError, WebhookSettings

ROOT = Path(__file__).resolve().parents[3]
NR_ENV = "TAINTKEEPER_DEFAULT_NOT_READY_TOLERATION_SECONDS"
UR_ENV = "TAINTKEEPER_DEFAULT_UNREACHABLE_TOLERATION_SECONDS"


def test_defaults_are_upstream_300_seconds():
    settings = WebhookSettings.from_env({})
    assert (settings.not_ready_seconds, settings.unreachable_seconds) == (300, 300)


def test_each_key_is_set_separately_from_the_environment():
    settings = WebhookSettings.from_env({NR_ENV: "60", UR_ENV: "0"})
    assert (settings.not_ready_seconds, settings.unreachable_seconds) == (60, 0)


def test_the_namespace_cache_is_on_by_default_and_uses_the_in_cluster_config():
    settings = WebhookSettings.from_env({})
    assert (settings.namespace_cache, settings.kubeconfig) == (True, "")


NAMESPACE_CACHE_VALUES = [("true", True), ("false", False), ("FALSE", False), (" True ", True)]


@pytest.mark.parametrize(("raw", "expected"), NAMESPACE_CACHE_VALUES, ids=[v[0] for v in NAMESPACE_CACHE_VALUES])
def test_the_namespace_cache_is_turned_on_or_off(raw, expected):
    assert WebhookSettings.from_env({"TAINTKEEPER_NAMESPACE_CACHE": raw}).namespace_cache is expected


def test_builtin_defaults_are_left_alone_by_default_and_are_300_seconds():
    settings = WebhookSettings.from_env({})
    assert (settings.replace_builtin_defaults, settings.builtin_default_seconds) == (False, 300)
    assert settings.replace_builtin_seconds is None


REPLACE_VALUES = [
    ("true turns it on", {"TAINTKEEPER_REPLACE_BUILTIN_DEFAULTS": "true"}, 300),
    ("case and spaces do not matter", {"TAINTKEEPER_REPLACE_BUILTIN_DEFAULTS": " TRUE "}, 300),
    ("false keeps it off", {"TAINTKEEPER_REPLACE_BUILTIN_DEFAULTS": "false"}, None),
    (
        "the built-in seconds are the apiserver's",
        {"TAINTKEEPER_REPLACE_BUILTIN_DEFAULTS": "true", "TAINTKEEPER_BUILTIN_DEFAULT_SECONDS": "120"},
        120,
    ),
    ("the built-in seconds alone change nothing", {"TAINTKEEPER_BUILTIN_DEFAULT_SECONDS": "120"}, None),
]


@pytest.mark.parametrize(("env", "replaced"), [c[1:] for c in REPLACE_VALUES], ids=[c[0] for c in REPLACE_VALUES])
def test_replacing_the_builtin_defaults_is_set_from_the_environment(env, replaced):
    assert WebhookSettings.from_env(env).replace_builtin_seconds == replaced


FLAG_VALUES = [
    ("a bare boolean flag means true", ["--replace-builtin-defaults"], "true"),
    ("a boolean flag takes a value", ["--replace-builtin-defaults=false"], "false"),
    ("a separate value is taken too", ["--replace-builtin-defaults", "false"], "false"),
]


@pytest.mark.parametrize(("argv", "value"), [c[1:] for c in FLAG_VALUES], ids=[c[0] for c in FLAG_VALUES])
def test_boolean_flags_may_be_given_bare(argv, value):
    assert webhook_args(argv) == {"TAINTKEEPER_REPLACE_BUILTIN_DEFAULTS": value}


def test_the_fast_paths_are_on_by_default_and_switched_by_flag_or_environment():
    assert WebhookSettings().fast_paths is True
    assert WebhookSettings.from_env({}).fast_paths is True
    assert WebhookSettings.from_env({"TAINTKEEPER_FAST_PATHS": " False "}).fast_paths is False
    assert webhook_args(["--fast-paths=false"]) == {"TAINTKEEPER_FAST_PATHS": "false"}
    assert webhook_args(["--fast-paths"]) == {"TAINTKEEPER_FAST_PATHS": "true"}


def test_the_builtin_seconds_flag_sets_its_environment_variable():
    assert webhook_args(["--builtin-default-seconds", "120"]) == {"TAINTKEEPER_BUILTIN_DEFAULT_SECONDS": "120"}


def test_the_metrics_callers_check_has_kube_controller_managers_defaults():
    auth = WebhookSettings.from_env({}).auth
    assert (auth.token_ttl, auth.authorized_ttl, auth.unauthorized_ttl) == (10.0, 10.0, 10.0)
    assert auth.always_allow_paths == ("/healthz", "/readyz", "/livez")


AUTH_VALUES = [
    ("a token cache TTL", {"TAINTKEEPER_AUTHENTICATION_TOKEN_WEBHOOK_CACHE_TTL": "1m"}, "token_ttl", 60.0),
    (
        "an authorized cache TTL",
        {"TAINTKEEPER_AUTHORIZATION_WEBHOOK_CACHE_AUTHORIZED_TTL": "0s"},
        "authorized_ttl",
        0.0,
    ),
    (
        "an unauthorized cache TTL",
        {"TAINTKEEPER_AUTHORIZATION_WEBHOOK_CACHE_UNAUTHORIZED_TTL": "1.5s"},
        "unauthorized_ttl",
        1.5,
    ),
    (
        "paths always allowed, spaces aside",
        {"TAINTKEEPER_AUTHORIZATION_ALWAYS_ALLOW_PATHS": "/healthz, /metrics,/debug/*"},
        "always_allow_paths",
        ("/healthz", "/metrics", "/debug/*"),
    ),
    ("no path always allowed", {"TAINTKEEPER_AUTHORIZATION_ALWAYS_ALLOW_PATHS": ""}, "always_allow_paths", ()),
]


@pytest.mark.parametrize(("env", "field", "value"), [c[1:] for c in AUTH_VALUES], ids=[c[0] for c in AUTH_VALUES])
def test_the_metrics_callers_check_is_set_from_the_environment(env, field, value):
    assert getattr(WebhookSettings.from_env(env).auth, field) == value


def test_the_metrics_callers_check_flags_are_the_controllers_and_set_their_environment_variables():
    assert webhook_args(
        [
            "--authentication-token-webhook-cache-ttl=5s",
            "--authorization-webhook-cache-authorized-ttl=6s",
            "--authorization-webhook-cache-unauthorized-ttl=7s",
            "--authorization-always-allow-paths=/metrics",
        ]
    ) == {
        "TAINTKEEPER_AUTHENTICATION_TOKEN_WEBHOOK_CACHE_TTL": "5s",
        "TAINTKEEPER_AUTHORIZATION_WEBHOOK_CACHE_AUTHORIZED_TTL": "6s",
        "TAINTKEEPER_AUTHORIZATION_WEBHOOK_CACHE_UNAUTHORIZED_TTL": "7s",
        "TAINTKEEPER_AUTHORIZATION_ALWAYS_ALLOW_PATHS": "/metrics",
    }


def test_serving_defaults_are_gevent_with_bounded_clients():
    serving = ServingSettings.from_env({})
    assert (
        serving.worker_class,
        serving.request_timeout,
        serving.keepalive_timeout,
        serving.max_connections,
        serving.workers,
        serving.threads,
    ) == ("gevent", 10, 75, 500, 2, 8)


SERVING_VALUES = [
    ("gthread, case and spaces aside", {"TAINTKEEPER_WORKER_CLASS": " GThread "}, "worker_class", "gthread"),
    ("a request timeout", {"TAINTKEEPER_REQUEST_TIMEOUT": "3"}, "request_timeout", 3),
    ("a keep-alive timeout", {"TAINTKEEPER_KEEPALIVE_TIMEOUT": "120"}, "keepalive_timeout", 120),
    ("a connection limit", {"TAINTKEEPER_MAX_CONNECTIONS": "50"}, "max_connections", 50),
]


@pytest.mark.parametrize(("env", "field", "value"), [c[1:] for c in SERVING_VALUES], ids=[c[0] for c in SERVING_VALUES])
def test_serving_settings_are_read_from_the_environment(env, field, value):
    assert getattr(ServingSettings.from_env(env), field) == value


def test_the_serving_flags_set_their_environment_variables():
    assert webhook_args(
        ["--worker-class", "gthread", "--request-timeout", "5", "--keepalive-timeout", "30", "--max-connections", "200"]
    ) == {
        "TAINTKEEPER_WORKER_CLASS": "gthread",
        "TAINTKEEPER_REQUEST_TIMEOUT": "5",
        "TAINTKEEPER_KEEPALIVE_TIMEOUT": "30",
        "TAINTKEEPER_MAX_CONNECTIONS": "200",
    }


GUNICORN_CONFIG = [
    (
        "gevent by default",
        {},
        {
            "worker_class": "webhook.worker.WebhookWorker",
            "reuse_port": True,
            "worker_connections": 500,
            "keepalive": 75,
            "control_socket_disable": True,
        },
    ),
    (
        "gunicorn's own gevent worker with the fast paths off",
        {"TAINTKEEPER_FAST_PATHS": "false"},
        {"worker_class": "gevent", "reuse_port": True, "worker_connections": 500, "keepalive": 75},
    ),
    (
        "gthread on request",
        {"TAINTKEEPER_WORKER_CLASS": "gthread", "TAINTKEEPER_THREADS": "4"},
        {"worker_class": "gthread", "threads": 4, "reuse_port": None},
    ),
    (
        "limits and timeouts",
        {"TAINTKEEPER_MAX_CONNECTIONS": "64", "TAINTKEEPER_KEEPALIVE_TIMEOUT": "20"},
        {"worker_connections": 64, "keepalive": 20},
    ),
]


@pytest.mark.parametrize(("env", "expected"), [c[1:] for c in GUNICORN_CONFIG], ids=[c[0] for c in GUNICORN_CONFIG])
def test_the_gunicorn_config_follows_the_serving_settings(tmp_path, env, expected):
    """In a subprocess: with gevent, importing the config monkey-patches the process (as it must, early)."""
    code = (
        "import json, webhook.gunicorn_conf as c\n"
        f"print(json.dumps({{name: getattr(c, name, None) for name in {sorted(expected)!r}}}))\n"
    )
    result = run_python(code, tmp_path, env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == expected


def test_an_existing_kubeconfig_is_accepted(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("")
    assert WebhookSettings.from_env({"TAINTKEEPER_KUBECONFIG": str(kubeconfig)}).kubeconfig == str(kubeconfig)


BAD_ENV = [
    ("a negative not-ready value", {NR_ENV: "-1"}, "must be a whole number of seconds from 0"),
    ("more seconds than a policy's patch carries exactly", {UR_ENV: "9007199254740992"}, "to 9007199254740991"),
    ("a fractional unreachable value", {UR_ENV: "2.5"}, "must be a whole number"),
    ("a word", {NR_ENV: "five"}, "must be a whole number"),
    ("an empty value", {NR_ENV: ""}, "must be a whole number"),
    ("an unknown log format", {"TAINTKEEPER_LOG_FORMAT": "xml"}, "--log-format must be one of"),
    ("a zero size cap", {"TAINTKEEPER_MAX_REQUEST_BYTES": "0"}, "must be >= 1"),
    (
        "a namespace cache that is neither true nor false",
        {"TAINTKEEPER_NAMESPACE_CACHE": "yes"},
        "--namespace-cache must be true or false, got 'yes'",
    ),
    ("an empty namespace cache value", {"TAINTKEEPER_NAMESPACE_CACHE": ""}, "--namespace-cache must be true or false"),
    (
        "a kubeconfig that does not exist",
        {"TAINTKEEPER_KUBECONFIG": "/nonexistent/kubeconfig"},
        "--kubeconfig '/nonexistent/kubeconfig' is not a readable file",
    ),
    (
        "a replace-builtin-defaults that is neither true nor false",
        {"TAINTKEEPER_REPLACE_BUILTIN_DEFAULTS": "1"},
        "--replace-builtin-defaults must be true or false, got '1'",
    ),
    (
        "a fast-paths switch that is neither true nor false",
        {"TAINTKEEPER_FAST_PATHS": "on"},
        "--fast-paths must be true or false, got 'on'",
    ),
    (
        "negative built-in seconds",
        {"TAINTKEEPER_BUILTIN_DEFAULT_SECONDS": "-300"},
        "--builtin-default-seconds must be >= 0",
    ),
    (
        "fractional built-in seconds",
        {"TAINTKEEPER_BUILTIN_DEFAULT_SECONDS": "300.0"},
        "--builtin-default-seconds must be a whole number",
    ),
    (
        "a token cache TTL without a unit",
        {"TAINTKEEPER_AUTHENTICATION_TOKEN_WEBHOOK_CACHE_TTL": "10"},
        "--authentication-token-webhook-cache-ttl: invalid duration '10'",
    ),
    (
        "a negative authorized cache TTL",
        {"TAINTKEEPER_AUTHORIZATION_WEBHOOK_CACHE_AUTHORIZED_TTL": "-1s"},
        "--authorization-webhook-cache-authorized-ttl must not be negative",
    ),
    (
        "an unauthorized cache TTL that is a word",
        {"TAINTKEEPER_AUTHORIZATION_WEBHOOK_CACHE_UNAUTHORIZED_TTL": "soon"},
        "--authorization-webhook-cache-unauthorized-ttl: invalid duration 'soon'",
    ),
    (
        "an always-allowed path without its leading slash",
        {"TAINTKEEPER_AUTHORIZATION_ALWAYS_ALLOW_PATHS": "/healthz,metrics"},
        "--authorization-always-allow-paths: 'metrics' does not start with /",
    ),
    (
        "an always-allowed path with a star inside",
        {"TAINTKEEPER_AUTHORIZATION_ALWAYS_ALLOW_PATHS": "/me*rics"},
        r"--authorization-always-allow-paths: '/me\*rics': \* may only end a path",
    ),
]


@pytest.mark.parametrize(("env", "message"), [c[1:] for c in BAD_ENV], ids=[c[0] for c in BAD_ENV])
def test_bad_environment_values_are_refused(env, message):
    with pytest.raises(SettingsError, match=message):
        WebhookSettings.from_env(env)


BAD_SERVING_ENV = [
    (
        "an unknown worker class",
        {"TAINTKEEPER_WORKER_CLASS": "sync"},
        "--worker-class must be one of gevent, gthread, got 'sync'",
    ),
    ("a zero request timeout", {"TAINTKEEPER_REQUEST_TIMEOUT": "0"}, "--request-timeout must be >= 1, got 0"),
    (
        "a fractional request timeout",
        {"TAINTKEEPER_REQUEST_TIMEOUT": "2.5"},
        "--request-timeout must be a whole number",
    ),
    ("a negative keep-alive timeout", {"TAINTKEEPER_KEEPALIVE_TIMEOUT": "-1"}, "--keepalive-timeout must be >= 1"),
    ("no connections allowed", {"TAINTKEEPER_MAX_CONNECTIONS": "0"}, "--max-connections must be >= 1"),
    (
        "a connection limit that is a word",
        {"TAINTKEEPER_MAX_CONNECTIONS": "many"},
        "--max-connections must be a whole number",
    ),
]


@pytest.mark.parametrize(("env", "message"), [c[1:] for c in BAD_SERVING_ENV], ids=[c[0] for c in BAD_SERVING_ENV])
def test_bad_serving_values_are_refused(env, message):
    with pytest.raises(SettingsError, match=message):
        ServingSettings.from_env(env)


@pytest.mark.parametrize("bind", ["8443", ":8443", "host:", "host:99999", "host:https"])
def test_a_bind_address_must_be_host_and_port(bind):
    with pytest.raises(SettingsError, match="--bind must be HOST:PORT"):
        ServingSettings.from_env({"TAINTKEEPER_BIND": bind})


BAD_FLAGS = [
    ("a negative toleration", ["--default-not-ready-toleration-seconds=-1"], "must be a whole number of seconds"),
    ("a non-integer toleration", ["--default-unreachable-toleration-seconds", "1.5"], "must be a whole number"),
    ("an unknown flag", ["--no-such-flag"], "unrecognized arguments"),
    ("a missing certificate", ["--cert-file", "/nonexistent/tls.crt"], "is not a readable file"),
    ("zero workers", ["--workers", "0"], "--workers must be >= 1"),
    (
        "a namespace cache flag that is not a boolean",
        ["--namespace-cache", "maybe"],
        "--namespace-cache must be true or false",
    ),
    ("a missing kubeconfig", ["--kubeconfig", "/nonexistent/kubeconfig"], "is not a readable file"),
    (
        "a replace-builtin-defaults flag that is not a boolean",
        ["--replace-builtin-defaults=yes"],
        "--replace-builtin-defaults must be true or false, got 'yes'",
    ),
    (
        "built-in seconds that are a word",
        ["--builtin-default-seconds", "five"],
        "--builtin-default-seconds must be a whole number",
    ),
    ("an unknown worker class", ["--worker-class=eventlet"], "--worker-class must be one of gevent, gthread"),
    ("a zero request timeout", ["--request-timeout", "0"], "--request-timeout must be >= 1"),
    ("a fractional keep-alive timeout", ["--keepalive-timeout", "7.5"], "--keepalive-timeout must be a whole number"),
    ("a negative connection limit", ["--max-connections=-5"], "--max-connections must be >= 1"),
    (
        "a negative token cache TTL",
        ["--authentication-token-webhook-cache-ttl=-5s"],
        "--authentication-token-webhook-cache-ttl must not be negative",
    ),
    (
        "an always-allowed path without its leading slash",
        ["--authorization-always-allow-paths", "metrics"],
        "--authorization-always-allow-paths: 'metrics' does not start with /",
    ),
]


@pytest.mark.parametrize(("argv", "message"), [c[1:] for c in BAD_FLAGS], ids=[c[0] for c in BAD_FLAGS])
def test_bad_flags_end_the_start_with_one_line_and_exit_2(argv, message):
    result = subprocess.run(
        [sys.executable, "-m", "webhook", *argv], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("webhook: error:")
    assert message in lines[0]


def test_a_kubeconfig_that_does_not_load_ends_the_start_with_one_line_and_exit_2(tmp_path):
    for name in ("tls.crt", "tls.key", "kubeconfig"):
        (tmp_path / name).write_text("not: [a kubeconfig")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "--cert-file",
            str(tmp_path / "tls.crt"),
            "--key-file",
            str(tmp_path / "tls.key"),
            "--kubeconfig",
            str(tmp_path / "kubeconfig"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("webhook: error: --kubeconfig: invalid kubeconfig")


def test_validating_the_start_loads_no_api_client_before_gevent_patches():
    """`python -m webhook` reads every setting, the /metrics callers' check among them, before it patches:
    urllib3 (the Kubernetes client's) imported then would bind the unpatched ssl.SSLContext."""
    code = (
        "import sys\n"
        "import webhook.__main__\n"
        "from webhook.settings import ServingSettings, WebhookSettings\n"
        "WebhookSettings.from_env({'TAINTKEEPER_AUTHORIZATION_ALWAYS_ALLOW_PATHS': '/metrics'})\n"
        "ServingSettings.from_env({})\n"
        "assert 'urllib3' not in sys.modules, 'imported before patching'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_validating_the_start_imports_no_prometheus_client(tmp_path):
    """prometheus_client picks its multiprocess mode when first imported: `python -m webhook` must leave
    that to the gunicorn config, which sets PROMETHEUS_MULTIPROC_DIR first. Nor may the gunicorn master
    (whose on_starting reads webhook.namespaces) make the metrics: its live 0 would pin the livemin gauge."""
    kubeconfig = kubeconfig_file(tmp_path)
    code = (
        "import sys\n"
        "import webhook.__main__\n"
        "import webhook.namespaces\n"
        "from webhook.settings import WebhookSettings, check_kubeconfig\n"
        f"check_kubeconfig(WebhookSettings.from_env({{'TAINTKEEPER_KUBECONFIG': {str(kubeconfig)!r}}}))\n"
        "assert 'prometheus_client' not in sys.modules, 'imported too early'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
