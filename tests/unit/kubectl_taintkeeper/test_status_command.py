"""kubectl_taintkeeper.status_command without a cluster: the flags, the queries, an apiserver that cannot
be reached or a kubeconfig that does not load, colour and --watch's frames; and `kubectl taintkeeper
status` / `python -m controller status`. The reads against the real apiserver:
tests/integration/test_status_command.py."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from controller import __main__ as controller_main
from controller.nodelifecycle.decision import MonitorSettings
from controller.tainteviction.verdict import EvictionRule
from kubectl_taintkeeper import plugin as kubectl_plugin
from kubectl_taintkeeper.plugin import ExplainNode
from kubectl_taintkeeper.status_command import (
    CLEAR,
    ERASE_BELOW,
    HOME,
    StatusRequest,
    lease_path,
    parse_args,
    pods_query,
    run,
    use_colour,
    watch,
)
from tests.support.builders import kubeconfig_file

LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/taintkeeper-system/leases/taintkeeper-controller"


def request(**changes: Any) -> StatusRequest:
    defaults: dict[str, Any] = {
        "kubeconfig": None,
        "namespace": None,
        "selector": None,
        "output": "text",
        "watch": False,
        "lease_namespace": "taintkeeper-system",
        "lease_name": "taintkeeper-controller",
        "settings": MonitorSettings(),
    }
    return StatusRequest(**(defaults | changes))


# --- flags ---------------------------------------------------------------------------------------------

GOOD = {
    "no flags: every default is the controller's": ([], request()),
    "-o json": (["-o", "json"], request(output="json")),
    "--output json": (["--output=json"], request(output="json")),
    "namespace and selector, short": (["-n", "shop", "-l", "app=web"], request(namespace="shop", selector="app=web")),
    "namespace and selector, long": (
        ["--namespace", "shop", "--selector", "app in (a,b)"],
        request(namespace="shop", selector="app in (a,b)"),
    ),
    "--watch": (["--watch"], request(watch=True)),
    "the four rate flags": (
        [
            "--node-eviction-rate",
            "2",
            "--secondary-node-eviction-rate",
            "0.5",
            "--large-cluster-size-threshold",
            "10",
            "--unhealthy-zone-threshold",
            "0.4",
        ],
        request(
            settings=MonitorSettings(
                node_eviction_rate=2,
                secondary_node_eviction_rate=0.5,
                large_cluster_size_threshold=10,
                unhealthy_zone_threshold=0.4,
            )
        ),
    ),
    "another Lease": (["--lease-namespace", "tk", "--lease-name", "l"], request(lease_namespace="tk", lease_name="l")),
    "--kubeconfig": (["--kubeconfig", "/k"], request(kubeconfig="/k")),
    "the controller without its out-of-service handling, with Lt/Gt tolerations": (
        ["--controllers", "*,-out-of-service", "--feature-gates", "TaintTolerationComparisonOperators=true"],
        request(rule=EvictionRule(comparison_operators=True, defer_to_out_of_service=False)),
    ),
}


@pytest.mark.parametrize(("argv", "expected"), GOOD.values(), ids=GOOD.keys())
def test_the_flags(argv: list[str], expected: StatusRequest) -> None:
    assert parse_args(argv) == expected


BAD = {
    "an unknown flag": (["--context", "c"], "unrecognized arguments: --context c"),
    "an output other than text or json": (["-o", "yaml"], "invalid choice: 'yaml'"),
    "a negative rate": (["--node-eviction-rate", "-1"], "--node-eviction-rate: must be a number >= 0"),
    "a rate that is no number": (["--secondary-node-eviction-rate", "fast"], "--secondary-node-eviction-rate"),
    "a threshold that is not whole": (
        ["--large-cluster-size-threshold", "2.5"],
        "--large-cluster-size-threshold: invalid whole number '2.5'",
    ),
    "an unhealthy share of 0": (["--unhealthy-zone-threshold", "0"], "--unhealthy-zone-threshold must be in (0, 1]"),
    "an unhealthy share above 1": (["--unhealthy-zone-threshold", "1.5"], "must be in (0, 1]"),
    "an argument": (["extra"], "unrecognized arguments: extra"),
    "an unknown feature gate": (["--feature-gates", "Nope=true"], "--feature-gates: unrecognized feature gate: Nope"),
    "an unknown controller": (["--controllers", "*,-nope"], "--controllers"),
}


@pytest.mark.parametrize(("argv", "message"), BAD.values(), ids=BAD.keys())
def test_bad_flags_exit_2_with_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m controller status: error:") and message in lines[0], lines


@pytest.mark.parametrize(("argv", "message"), BAD.values(), ids=BAD.keys())
def test_the_plugin_refuses_bad_status_flags_with_one_line_too(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        kubectl_plugin.parse_args(["status", *argv], {})
    assert exited.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kubectl taintkeeper: error:") and message in lines[0], lines


PLUGIN = {
    "status with flags": (["status", "-o", "json", "-n", "shop"], {}, request(output="json", namespace="shop")),
    "KUBECONFIG from the environment": (["status"], {"KUBECONFIG": "/e"}, request(kubeconfig="/e")),
    "--kubeconfig before the command": (
        ["--kubeconfig", "/k", "status"],
        {"KUBECONFIG": "/e"},
        request(kubeconfig="/k"),
    ),
    "--kubeconfig after the command": (
        ["status", "--kubeconfig", "/k"],
        {"KUBECONFIG": "/e"},
        request(kubeconfig="/k"),
    ),
    "explain node NAME is unchanged": (["explain", "node", "n1"], {}, ExplainNode("n1", None)),
}


@pytest.mark.parametrize(("argv", "environ", "expected"), PLUGIN.values(), ids=PLUGIN.keys())
def test_the_plugins_status_command(argv: list[str], environ: dict[str, str], expected: object) -> None:
    assert kubectl_plugin.parse_args(argv, environ) == expected


def test_the_plugin_runs_status(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[StatusRequest] = []

    def fake_run(req: StatusRequest) -> int:
        ran.append(req)
        return 0

    monkeypatch.setattr("kubectl_taintkeeper.status_command.run", fake_run)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    assert kubectl_plugin.main(["status", "-l", "app=web"]) == 0
    assert ran == [request(selector="app=web")]


def test_python_m_controller_status_refuses_bad_flags_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        controller_main.main(["status", "--output", "yaml"])
    assert exited.value.code == 2
    assert len(capsys.readouterr().err.splitlines()) == 1


# --- the queries ---------------------------------------------------------------------------------------

QUERIES = {
    "every pod": (None, None, "/api/v1/pods", [("resourceVersion", "0")]),
    "one namespace's pods": ("shop", None, "/api/v1/namespaces/shop/pods", [("resourceVersion", "0")]),
    "pods matching a selector": (
        None,
        "app=web,tier!=db",
        "/api/v1/pods",
        [("resourceVersion", "0"), ("labelSelector", "app=web,tier!=db")],
    ),
    "both": (
        "shop",
        "app=web",
        "/api/v1/namespaces/shop/pods",
        [("resourceVersion", "0"), ("labelSelector", "app=web")],
    ),
    "a namespace is one path segment": ("a/b", None, "/api/v1/namespaces/a%2Fb/pods", [("resourceVersion", "0")]),
}


@pytest.mark.parametrize(("namespace", "selector", "path", "query"), QUERIES.values(), ids=QUERIES.keys())
def test_the_pod_filters_go_into_the_list_query(
    namespace: str | None, selector: str | None, path: str, query: list[tuple[str, str]]
) -> None:
    assert pods_query(namespace, selector) == (path, query)


METRICS_PORT_WARNING = (
    "status: warning: --metrics-port is deprecated and ignored: the last monitor pass is read from the leader's Lease"
)
METRICS_PORT = {
    "absent: nothing said": ([], []),
    "given: accepted, ignored, and said so on stderr": (["--metrics-port", "10258"], [METRICS_PORT_WARNING]),
    "given any value: a script that passed it goes on working": (["--metrics-port=9000"], [METRICS_PORT_WARNING]),
}


@pytest.mark.parametrize(("argv", "err"), METRICS_PORT.values(), ids=METRICS_PORT.keys())
def test_metrics_port_is_accepted_and_ignored(
    argv: list[str], err: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert parse_args(argv) == request()
    assert kubectl_plugin.parse_args(["status", *argv], {}) == request()
    captured = capsys.readouterr()
    assert (captured.out, captured.err.splitlines()) == ("", err * 2)


def test_the_lease_is_read_by_its_path() -> None:
    assert lease_path("taintkeeper-system", "taintkeeper-controller") == LEASE_PATH


# --- what cannot reach a cluster -----------------------------------------------------------------------
# The reads themselves, the report they make and the requests they are (the pods LIST and its query,
# the Lease and its annotation, an API error, --watch -o json) are tested against the real
# apiserver: tests/integration/test_status_command.py.


def test_an_apiserver_that_cannot_be_reached_is_one_line_and_exit_1(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = run(parse_args(["--kubeconfig", str(kubeconfig_file(tmp_path))]), out, err)
    assert code == 1 and len(err.getvalue().splitlines()) == 1
    assert err.getvalue().startswith("status: error: cannot read the cluster: ") and "Traceback" not in err.getvalue()


def test_a_kubeconfig_that_does_not_load_is_one_line_and_exit_2(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert run(parse_args(["--kubeconfig", str(tmp_path / "missing")]), out, err) == 2
    assert err.getvalue().splitlines() == [
        f"status: error: kubeconfig {tmp_path / 'missing'} does not exist or is not a file"
    ]


# --- output: colour and --watch -------------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


COLOUR = {
    "a terminal": (Terminal(), {}, True),
    "a pipe": (io.StringIO(), {}, False),
    "a terminal with NO_COLOR": (Terminal(), {"NO_COLOR": "1"}, False),
}


@pytest.mark.parametrize(("stream", "environ", "expected"), COLOUR.values(), ids=COLOUR.keys())
def test_colour_only_on_a_terminal(stream: io.StringIO, environ: dict[str, str], expected: bool) -> None:
    assert use_colour(stream, environ) is expected


def frames(*texts: str | None) -> Any:
    """A draw function giving `texts`, then Ctrl-C."""
    remaining = list(texts)

    def draw() -> str | None:
        if not remaining:
            raise KeyboardInterrupt
        return remaining.pop(0)

    return draw


def test_watch_piped_prints_one_frame_per_interval_and_ctrl_c_ends_it_with_0() -> None:
    out, slept = io.StringIO(), list[float]()
    assert watch(frames("one\nframe", None, "two"), out, tty=False, sleep=slept.append, monotonic=lambda: 5.0) == 0
    assert out.getvalue() == "one\nframe\n\ntwo\n\n"
    assert slept == [1.0, 1.0, 1.0]


def test_watch_on_a_terminal_clears_once_then_redraws_in_place() -> None:
    out = Terminal()
    assert watch(frames("a\nb", "c"), out, tty=True, sleep=lambda _s: None) == 0
    erase = "\x1b[K"
    assert out.getvalue() == (CLEAR + HOME + f"a{erase}\nb{erase}\n" + ERASE_BELOW + HOME + f"c{erase}\n" + ERASE_BELOW)


def test_watch_waits_only_what_is_left_of_the_interval() -> None:
    clock = iter([10.0, 10.25])
    slept: list[float] = []
    watch(frames("x"), io.StringIO(), tty=False, sleep=slept.append, monotonic=lambda: next(clock, 99.0))
    assert slept == [0.75]
