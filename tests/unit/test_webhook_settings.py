"""webhook settings and `python -m webhook` start-up: bad values fail at start with one line."""

import subprocess
import sys
from pathlib import Path

import pytest

from webhook.settings import ServingSettings, SettingsError, WebhookSettings

ROOT = Path(__file__).resolve().parents[2]
NR_ENV = "TAINTKEEPER_DEFAULT_NOT_READY_TOLERATION_SECONDS"
UR_ENV = "TAINTKEEPER_DEFAULT_UNREACHABLE_TOLERATION_SECONDS"


def test_defaults_are_upstream_300_seconds():
    settings = WebhookSettings.from_env({})
    assert (settings.not_ready_seconds, settings.unreachable_seconds) == (300, 300)


def test_each_key_is_set_separately_from_the_environment():
    settings = WebhookSettings.from_env({NR_ENV: "60", UR_ENV: "0"})
    assert (settings.not_ready_seconds, settings.unreachable_seconds) == (60, 0)


BAD_ENV = [
    ("a negative not-ready value", {NR_ENV: "-1"}, "must be >= 0"),
    ("a fractional unreachable value", {UR_ENV: "2.5"}, "must be a whole number"),
    ("a word", {NR_ENV: "five"}, "must be a whole number"),
    ("an empty value", {NR_ENV: ""}, "must be a whole number"),
    ("an unknown log format", {"TAINTKEEPER_LOG_FORMAT": "xml"}, "--log-format must be one of"),
    ("a zero size cap", {"TAINTKEEPER_MAX_REQUEST_BYTES": "0"}, "must be >= 1"),
]


@pytest.mark.parametrize(("env", "message"), [c[1:] for c in BAD_ENV], ids=[c[0] for c in BAD_ENV])
def test_bad_environment_values_are_refused(env, message):
    with pytest.raises(SettingsError, match=message):
        WebhookSettings.from_env(env)


@pytest.mark.parametrize("bind", ["8443", ":8443", "host:", "host:99999", "host:https"])
def test_a_bind_address_must_be_host_and_port(bind):
    with pytest.raises(SettingsError, match="--bind must be HOST:PORT"):
        ServingSettings.from_env({"TAINTKEEPER_BIND": bind})


BAD_FLAGS = [
    ("a negative toleration", ["--default-not-ready-toleration-seconds=-1"], "must be >= 0"),
    ("a non-integer toleration", ["--default-unreachable-toleration-seconds", "1.5"], "must be a whole number"),
    ("an unknown flag", ["--no-such-flag"], "unrecognized arguments"),
    ("a missing certificate", ["--cert-file", "/nonexistent/tls.crt"], "is not a readable file"),
    ("zero workers", ["--workers", "0"], "--workers must be >= 1"),
]


@pytest.mark.parametrize(("argv", "message"), [c[1:] for c in BAD_FLAGS], ids=[c[0] for c in BAD_FLAGS])
def test_bad_flags_end_the_start_with_one_line_and_exit_2(argv, message):
    result = subprocess.run([sys.executable, "-m", "webhook", *argv], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("webhook: error:")
    assert message in lines[0]
