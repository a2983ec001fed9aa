"""controller/options.py: every flag in its kube-controller-manager form, and the one-line refusals.

A bad value must stop `python -m controller` before anything starts, with one line on stderr
(`controller: error: ...`) and exit code 2.
"""

from __future__ import annotations

import pytest

from controller.__main__ import main
from controller.backfill.decision import BackfillSettings
from controller.options import (
    CONTROLLER_NAMES,
    DROP_TERM_CHECKS,
    NODE_LIFECYCLE,
    OUT_OF_SERVICE,
    SABOTAGE_ENV,
    TAINT_EVICTION,
    TOLERATION_BACKFILL,
    OptionsError,
    parse_go_bool,
    parse_options,
)
from shared.defaults import DefaultSeconds


def test_the_defaults_are_kube_controller_managers():
    options = parse_options([])
    assert (options.kubeconfig, options.leader_elect, options.dry_run) == (None, True, False)
    assert (
        options.leader_elect_lease_duration,
        options.leader_elect_renew_deadline,
        options.leader_elect_retry_period,
    ) == (15.0, 10.0, 2.0)
    assert (options.leader_elect_resource_name, options.leader_elect_resource_namespace) == (
        "taintkeeper-controller",
        "taintkeeper-system",
    )
    assert (options.bind_address, options.port, options.taint_eviction_workers) == ("0.0.0.0", 0, 8)
    serving = options.secure_serving
    assert (serving.port, serving.cert_file, serving.key_file) == (10257, "", "")
    assert (serving.auth.token_ttl, serving.auth.authorized_ttl, serving.auth.unauthorized_ttl) == (10.0, 10.0, 10.0)
    assert serving.auth.always_allow_paths == ("/healthz", "/readyz", "/livez")
    assert options.controllers == frozenset(CONTROLLER_NAMES)
    assert (options.log_format, options.log_level) == ("plain", "INFO")
    monitor = options.monitor
    assert (monitor.node_monitor_period, monitor.node_monitor_grace_period, monitor.node_startup_grace_period) == (
        5.0,
        50.0,
        60.0,
    )
    assert (
        monitor.node_eviction_rate,
        monitor.secondary_node_eviction_rate,
        monitor.large_cluster_size_threshold,
        monitor.unhealthy_zone_threshold,
    ) == (0.1, 0.01, 50, 0.55)
    assert monitor.mark_pods_not_ready_on_transition_only is False  # taintkeeper's rule; true: upstream's
    assert options.backfill == BackfillSettings(
        True, 10.0, frozenset({"taintkeeper-system", "kube-system"}), DefaultSeconds(300, 300)
    )


# (flag as given, where the value lands, the value)
FLAGS = [
    (["--kubeconfig=/etc/kube.conf"], "kubeconfig", "/etc/kube.conf"),
    (["--kubeconfig", "/etc/kube.conf"], "kubeconfig", "/etc/kube.conf"),
    (["--leader-elect=false"], "leader_elect", False),
    (["--leader-elect"], "leader_elect", True),
    (["--leader-elect=0"], "leader_elect", False),
    (["--leader-elect-lease-duration=1m"], "leader_elect_lease_duration", 60.0),
    (["--leader-elect-renew-deadline=12s"], "leader_elect_renew_deadline", 12.0),
    (["--leader-elect-retry-period=500ms"], "leader_elect_retry_period", 0.5),
    (["--leader-elect-resource-name=other"], "leader_elect_resource_name", "other"),
    (["--leader-elect-resource-namespace=ops"], "leader_elect_resource_namespace", "ops"),
    (["--dry-run"], "dry_run", True),
    (["--dry-run=true"], "dry_run", True),
    (["--dry-run=F"], "dry_run", False),
    (["--bind-address=127.0.0.1"], "bind_address", "127.0.0.1"),
    (["--port=0"], "port", 0),
    (["--port=65535"], "port", 65535),
    (["--secure-port=0"], "secure_serving.port", 0),
    (["--secure-port=8443"], "secure_serving.port", 8443),
    (["--tls-cert-file=/c", "--tls-private-key-file=/k"], "secure_serving.cert_file", "/c"),
    (["--tls-cert-file=/c", "--tls-private-key-file=/k"], "secure_serving.key_file", "/k"),
    (["--authentication-token-webhook-cache-ttl=1m"], "secure_serving.auth.token_ttl", 60.0),
    (["--authorization-webhook-cache-authorized-ttl=0s"], "secure_serving.auth.authorized_ttl", 0.0),
    (["--authorization-webhook-cache-unauthorized-ttl=2s"], "secure_serving.auth.unauthorized_ttl", 2.0),
    (
        ["--authorization-always-allow-paths=/healthz, /metrics,/debug/*"],
        "secure_serving.auth.always_allow_paths",
        ("/healthz", "/metrics", "/debug/*"),
    ),
    (["--taint-eviction-workers=3"], "taint_eviction_workers", 3),
    (["--controllers=nodelifecycle"], "controllers", frozenset({NODE_LIFECYCLE})),
    (
        ["--controllers=*,-nodelifecycle"],
        "controllers",
        frozenset({TAINT_EVICTION, TOLERATION_BACKFILL, OUT_OF_SERVICE}),
    ),
    (
        ["--controllers=*,-out-of-service"],
        "controllers",
        frozenset({NODE_LIFECYCLE, TAINT_EVICTION, TOLERATION_BACKFILL}),
    ),
    ([], "auto_fence_after", None),
    (["--auto-fence-after=0"], "auto_fence_after", None),
    (["--auto-fence-after=10m"], "auto_fence_after", 600.0),
    ([], "feature_gates", {"TaintTolerationComparisonOperators": False}),
    (
        ["--feature-gates=TaintTolerationComparisonOperators=true"],
        "feature_gates",
        {"TaintTolerationComparisonOperators": True},
    ),
    (
        ["--controllers=taint-eviction-controller,toleration-backfill"],
        "controllers",
        frozenset({TAINT_EVICTION, TOLERATION_BACKFILL}),
    ),
    (["--node-monitor-period=2s"], "monitor.node_monitor_period", 2.0),
    (["--node-monitor-grace-period=40s"], "monitor.node_monitor_grace_period", 40.0),
    (["--node-startup-grace-period=1m30s"], "monitor.node_startup_grace_period", 90.0),
    (["--node-eviction-rate=0.5"], "monitor.node_eviction_rate", 0.5),
    (["--secondary-node-eviction-rate=0"], "monitor.secondary_node_eviction_rate", 0.0),
    (["--large-cluster-size-threshold=10"], "monitor.large_cluster_size_threshold", 10),
    (["--unhealthy-zone-threshold=1"], "monitor.unhealthy_zone_threshold", 1.0),
    ([], "monitor.mark_pods_not_ready_on_transition_only", False),
    (["--mark-pods-not-ready-on-transition-only"], "monitor.mark_pods_not_ready_on_transition_only", True),
    (["--mark-pods-not-ready-on-transition-only=true"], "monitor.mark_pods_not_ready_on_transition_only", True),
    (["--mark-pods-not-ready-on-transition-only=false"], "monitor.mark_pods_not_ready_on_transition_only", False),
    (["--backfill-default-tolerations=false"], "backfill.enabled", False),
    (["--backfill-default-tolerations"], "backfill.enabled", True),
    ([], "backfill.excluded_namespaces", frozenset({"taintkeeper-system", "kube-system"})),
    # Its own namespace is where its Lease is: installed elsewhere (helm -n), it still leaves its pods alone.
    (
        ["--leader-elect-resource-namespace=team-a"],
        "backfill.excluded_namespaces",
        frozenset({"team-a", "kube-system"}),
    ),
    (
        ["--leader-elect-resource-namespace=team-a", "--backfill-excluded-namespaces=kube-system"],
        "backfill.excluded_namespaces",
        frozenset({"kube-system"}),
    ),
    (["--backfill-excluded-namespaces= a, b,"], "backfill.excluded_namespaces", frozenset({"a", "b"})),
    (["--backfill-excluded-namespaces="], "backfill.excluded_namespaces", frozenset()),
    (["--backfill-rate=2.5"], "backfill.rate", 2.5),
    (["--default-not-ready-toleration-seconds=60"], "backfill.cluster_seconds.not_ready", 60),
    (["--default-unreachable-toleration-seconds", "0"], "backfill.cluster_seconds.unreachable", 0),
    (["--log-format=json"], "log_format", "json"),
    (["--log-level=debug"], "log_level", "DEBUG"),
]


@pytest.mark.parametrize(("argv", "where", "expected"), FLAGS, ids=[" ".join(argv) for argv, _, _ in FLAGS])
def test_each_flag_is_parsed(argv, where, expected):
    value = parse_options(argv)
    for name in where.split("."):
        value = getattr(value, name)
    assert value == expected


def test_leader_election_timings_are_not_checked_without_leader_election():
    options = parse_options(["--leader-elect=false", "--leader-elect-lease-duration=1s"])
    assert (options.leader_elect, options.leader_elect_lease_duration) == (False, 1.0)


# (flags, what the one line must say)
BAD = [
    (["--leader-elect=maybe"], "--leader-elect: invalid boolean 'maybe'"),
    (["--dry-run=yes"], "--dry-run: invalid boolean 'yes'"),
    (["--feature-gates=NodeLifecycleConditions=true"], "--feature-gates: unrecognized feature gate: NodeLifecycle"),
    (["--feature-gates=TaintTolerationComparisonOperators"], "--feature-gates: missing bool value for Taint"),
    (["--feature-gates=TaintTolerationComparisonOperators=yes"], "--feature-gates: invalid boolean 'yes'"),
    (["--leader-elect-lease-duration=15"], "--leader-elect-lease-duration: invalid duration '15'"),
    (["--leader-elect-renew-deadline=10 s"], "--leader-elect-renew-deadline: invalid duration"),
    (["--leader-elect-lease-duration=10s"], "must be greater than --leader-elect-renew-deadline"),
    (["--leader-elect-retry-period=9s"], "must be greater than 1.2 x --leader-elect-retry-period"),
    (["--leader-elect-retry-period=0s"], "must be greater than zero"),
    (["--leader-elect-resource-name="], "must not be empty"),
    (["--port=70000"], "--port: 70000 is not a port number"),
    (["--port=-1"], "--port: invalid whole number '-1'"),
    (["--secure-port=65536"], "--secure-port: 65536 is not a port number"),
    (["--tls-cert-file=/c"], "--tls-cert-file and --tls-private-key-file go together"),
    (["--tls-private-key-file=/k"], "--tls-cert-file and --tls-private-key-file go together"),
    (["--authentication-token-webhook-cache-ttl=10"], "--authentication-token-webhook-cache-ttl: invalid duration"),
    (["--authorization-webhook-cache-authorized-ttl=-1s"], "must not be negative"),
    (["--authorization-always-allow-paths=healthz"], "'healthz' does not start with /"),
    (["--authorization-always-allow-paths=/a*b"], "* may only end a path"),
    (["--taint-eviction-workers=0"], "--taint-eviction-workers must be at least 1"),
    (["--taint-eviction-workers=two"], "--taint-eviction-workers: invalid whole number 'two'"),
    (["--controllers=foo"], "--controllers: unknown controller 'foo'"),
    (["--controllers=-nodelifecycle"], "--controllers: no controller left to run"),
    (["--node-monitor-period=0s"], "--node-monitor-period must be greater than zero"),
    (["--node-startup-grace-period=-1s"], "--node-startup-grace-period must be greater than zero"),
    (["--node-monitor-grace-period=1s"], "--node-monitor-grace-period must be at least --node-monitor-period"),
    (["--node-eviction-rate=-1"], "--node-eviction-rate: must be a number >= 0"),
    (["--secondary-node-eviction-rate=nan"], "--secondary-node-eviction-rate: must be a number >= 0"),
    (["--large-cluster-size-threshold=1.5"], "--large-cluster-size-threshold: invalid whole number"),
    (["--unhealthy-zone-threshold=1.5"], "--unhealthy-zone-threshold must be in (0, 1]"),
    (["--unhealthy-zone-threshold=0"], "--unhealthy-zone-threshold must be in (0, 1]"),
    (["--backfill-rate=0"], "--backfill-rate must be greater than zero"),
    (["--backfill-rate=fast"], "--backfill-rate: could not convert"),
    (["--backfill-default-tolerations=yes"], "--backfill-default-tolerations: invalid boolean"),
    (["--mark-pods-not-ready-on-transition-only=on"], "--mark-pods-not-ready-on-transition-only: invalid boolean 'on'"),
    (["--default-not-ready-toleration-seconds=-1"], "--default-not-ready-toleration-seconds: must be a whole number"),
    (["--default-unreachable-toleration-seconds=1.5"], "--default-unreachable-toleration-seconds: must be a whole"),
    (
        ["--default-unreachable-toleration-seconds=9007199254740992"],
        "must be a whole number of seconds from 0 to 9007199254740991, got '9007199254740992'",
    ),
    (["--controllers=toleration-backfill", "--backfill-default-tolerations=false"], "no controller left to run"),
    (["--auto-fence-after=10"], "--auto-fence-after: invalid duration '10'"),
    (["--auto-fence-after=-5m"], "--auto-fence-after must not be negative"),
    (
        ["--auto-fence-after=5m", "--controllers=*,-out-of-service"],
        "--auto-fence-after needs the out-of-service controller (--controllers)",
    ),
    (["--log-format=xml"], "--log-format must be one of"),
    (["--log-level=TRACE"], "--log-level must be DEBUG, INFO, WARNING or ERROR"),
    (
        ["--unsafe-drop-term-checks"],
        "--unsafe-drop-term-checks is a sabotage for testing the soak's judge, refused unless "
        "TAINTKEEPER_SABOTAGE=drop-term-checks is set",
    ),
    (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["--leader-elect-lease"], "unrecognized arguments"),  # no abbreviations: kube-controller-manager has none
]


@pytest.mark.parametrize(("argv", "message"), BAD, ids=[" ".join(argv) for argv, _ in BAD])
def test_a_bad_value_stops_the_start_with_one_line_and_exit_2(argv, message, capsys):
    with pytest.raises(OptionsError):
        parse_options(argv)
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("controller: error: "), captured.err
    assert message in lines[0]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", True),
        ("t", True),
        ("TRUE", True),
        ("True", True),
        ("0", False),
        ("f", False),
        ("FALSE", False),
        ("False", False),
    ],
)
def test_go_booleans(text, value):
    assert parse_go_bool(text) is value


def test_the_term_checks_are_dropped_only_where_the_environment_names_the_sabotage(capsys):
    assert parse_options([]).drop_term_checks is False
    allowed = {SABOTAGE_ENV: DROP_TERM_CHECKS}
    assert parse_options(["--unsafe-drop-term-checks"], allowed).drop_term_checks is True
    with pytest.raises(OptionsError):
        parse_options(["--unsafe-drop-term-checks"], {SABOTAGE_ENV: "something-else"})
    assert main(["--help"]) == 0
    assert "unsafe" not in capsys.readouterr().out  # no help line: it is for no cluster


def test_help_exits_0_and_names_every_flag(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for flag in (
        "--leader-elect-lease-duration",
        "--controllers",
        "--node-monitor-grace-period",
        "--backfill-rate",
        "--taint-eviction-workers",
    ):
        assert flag in out
