"""controller.status_command: the flags, the reads (against a local stand-in for the apiserver), the output and
--watch; and `kubectl taintkeeper status` / `python -m controller status`."""

from __future__ import annotations

import importlib.metadata
import io
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from controller import __main__ as controller_main
from controller import kubectl_plugin
from controller.kubectl_plugin import ExplainNode
from controller.nodelifecycle.decision import MonitorSettings
from controller.status_command import (
    CLEAR,
    ERASE_BELOW,
    HOME,
    StatusRequest,
    metrics_path,
    parse_args,
    pods_query,
    run,
    use_colour,
    watch,
)
from kube.timestamps import format_time
from tests.support.api_json import lease_json, node_json, pod_json
from tests.support.builders import NOT_READY, UNREACHABLE, kubeconfig_file, taint, toleration

POD = "taintkeeper-controller-7d9f8-abcde"
HOLDER = f"{POD}_0f1e2d3c4b5a69788796a5b4c3d2e1f0"
LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/taintkeeper-system/leases/taintkeeper-controller"
METRICS_PATH = f"/api/v1/namespaces/taintkeeper-system/pods/{POD}:10258/proxy/metrics"


def request(**changes: Any) -> StatusRequest:
    defaults: dict[str, Any] = {"kubeconfig": None, "namespace": None, "selector": None, "output": "text",
                                "watch": False, "lease_namespace": "taintkeeper-system",
                                "lease_name": "taintkeeper-controller", "metrics_port": 10258,
                                "settings": MonitorSettings()}
    return StatusRequest(**(defaults | changes))


# --- flags ---------------------------------------------------------------------------------------------

GOOD = {
    "no flags: every default is the controller's": ([], request()),
    "-o json": (["-o", "json"], request(output="json")),
    "--output json": (["--output=json"], request(output="json")),
    "namespace and selector, short": (["-n", "shop", "-l", "app=web"], request(namespace="shop", selector="app=web")),
    "namespace and selector, long": (["--namespace", "shop", "--selector", "app in (a,b)"],
                                     request(namespace="shop", selector="app in (a,b)")),
    "--watch": (["--watch"], request(watch=True)),
    "the four rate flags": (["--node-eviction-rate", "2", "--secondary-node-eviction-rate", "0.5",
                             "--large-cluster-size-threshold", "10", "--unhealthy-zone-threshold", "0.4"],
                            request(settings=MonitorSettings(node_eviction_rate=2, secondary_node_eviction_rate=0.5,
                                                             large_cluster_size_threshold=10,
                                                             unhealthy_zone_threshold=0.4))),
    "another Lease and metrics port": (["--lease-namespace", "tk", "--lease-name", "l", "--metrics-port", "9000"],
                                       request(lease_namespace="tk", lease_name="l", metrics_port=9000)),
    "--kubeconfig": (["--kubeconfig", "/k"], request(kubeconfig="/k")),
}


@pytest.mark.parametrize(("argv", "expected"), GOOD.values(), ids=GOOD.keys())
def test_the_flags(argv: list[str], expected: StatusRequest) -> None:
    assert parse_args(argv) == expected


BAD = {
    "an unknown flag": (["--context", "c"], "unrecognized arguments: --context c"),
    "an output other than text or json": (["-o", "yaml"], "invalid choice: 'yaml'"),
    "a negative rate": (["--node-eviction-rate", "-1"], "--node-eviction-rate: must be a number >= 0"),
    "a rate that is no number": (["--secondary-node-eviction-rate", "fast"], "--secondary-node-eviction-rate"),
    "a threshold that is not whole": (["--large-cluster-size-threshold", "2.5"],
                                      "--large-cluster-size-threshold: invalid whole number '2.5'"),
    "an unhealthy share of 0": (["--unhealthy-zone-threshold", "0"], "--unhealthy-zone-threshold must be in (0, 1]"),
    "an unhealthy share above 1": (["--unhealthy-zone-threshold", "1.5"], "must be in (0, 1]"),
    "a port out of range": (["--metrics-port", "70000"], "not a port number: '70000'"),
    "an argument": (["extra"], "unrecognized arguments: extra"),
}


@pytest.mark.parametrize(("argv", "message"), BAD.values(), ids=BAD.keys())
def test_bad_flags_exit_2_with_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m controller status: error:") and message in lines[0], lines


@pytest.mark.parametrize(("argv", "message"), BAD.values(), ids=BAD.keys())
def test_the_plugin_refuses_bad_status_flags_with_one_line_too(argv: list[str], message: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        kubectl_plugin.parse_args(["status", *argv], {})
    assert exited.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kubectl taintkeeper: error:") and message in lines[0], lines


PLUGIN = {
    "status with flags": (["status", "-o", "json", "-n", "shop"], {},
                          request(output="json", namespace="shop")),
    "KUBECONFIG from the environment": (["status"], {"KUBECONFIG": "/e"}, request(kubeconfig="/e")),
    "--kubeconfig before the command": (["--kubeconfig", "/k", "status"], {"KUBECONFIG": "/e"},
                                        request(kubeconfig="/k")),
    "--kubeconfig after the command": (["status", "--kubeconfig", "/k"], {"KUBECONFIG": "/e"},
                                       request(kubeconfig="/k")),
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
    monkeypatch.setattr("controller.status_command.run", fake_run)
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
    "pods matching a selector": (None, "app=web,tier!=db", "/api/v1/pods",
                                 [("resourceVersion", "0"), ("labelSelector", "app=web,tier!=db")]),
    "both": ("shop", "app=web", "/api/v1/namespaces/shop/pods",
             [("resourceVersion", "0"), ("labelSelector", "app=web")]),
    "a namespace is one path segment": ("a/b", None, "/api/v1/namespaces/a%2Fb/pods", [("resourceVersion", "0")]),
}


@pytest.mark.parametrize(("namespace", "selector", "path", "query"), QUERIES.values(), ids=QUERIES.keys())
def test_the_pod_filters_go_into_the_list_query(namespace: str | None, selector: str | None, path: str,
                                                query: list[tuple[str, str]]) -> None:
    assert pods_query(namespace, selector) == (path, query)


def test_the_metrics_are_read_through_the_pod_proxy_over_plain_http() -> None:
    assert metrics_path("taintkeeper-system", POD, 10258) == METRICS_PATH


# --- against a stand-in apiserver -----------------------------------------------------------------------

# The stand-in's objects are dated from here; the command reads the real clock, so this is a moment ago.
NOW = float(int(time.time()) - 1)


@dataclass
class Cluster:
    """What the stand-in apiserver serves, and the requests it was sent (path, query, User-Agent)."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    lease: dict[str, Any] | None = None
    metrics: str | None = "taintkeeper_last_monitor_pass_timestamp_seconds 1.0e+09\n"  # None: the proxy fails
    forbid_nodes: bool = False
    requests: list[tuple[str, list[tuple[str, str]], str]] = field(default_factory=list)


class StandIn(ThreadingHTTPServer):
    def __init__(self, cluster: Cluster) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.cluster = cluster


class Handler(BaseHTTPRequestHandler):
    server: StandIn

    def do_GET(self) -> None:
        cluster = self.server.cluster
        url = urlsplit(self.path)
        cluster.requests.append((url.path, parse_qsl(url.query), self.headers.get("User-Agent", "")))
        if url.path == "/api/v1/nodes":
            if cluster.forbid_nodes:
                return self._status(403, "Forbidden", 'nodes is forbidden: User "u" cannot list resource "nodes"')
            return self._json({"items": cluster.nodes})
        if url.path.endswith("/pods") and url.path.startswith("/api/v1/"):
            namespace = url.path.split("/")[4] if "/namespaces/" in url.path else None
            return self._json({"items": [p for p in cluster.pods
                                         if namespace is None or p["metadata"]["namespace"] == namespace]})
        if url.path == LEASE_PATH:
            if cluster.lease is None:
                return self._status(404, "NotFound", "leases \"taintkeeper-controller\" not found")
            return self._json(cluster.lease)
        if url.path == METRICS_PATH and cluster.metrics is not None:
            return self._reply(200, cluster.metrics.encode(), "text/plain; version=0.0.4")
        if url.path == METRICS_PATH:
            return self._status(503, "ServiceUnavailable", "error trying to reach service: dial tcp: i/o timeout")
        return self._status(404, "NotFound", "not found")

    def _json(self, body: Any) -> None:
        self._reply(200, json.dumps(body).encode(), "application/json")

    def _status(self, code: int, reason: str, message: str) -> None:
        self._reply(code, json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
                                      "code": code, "message": message}).encode(), "application/json")

    def _reply(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def cluster() -> Cluster:
    return Cluster()


@pytest.fixture
def kubeconfig(tmp_path: Path, cluster: Cluster) -> Iterator[str]:
    server = StandIn(cluster)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    yield str(path)
    server.shutdown()
    server.server_close()
    thread.join()


def tainted_cluster(cluster: Cluster) -> None:
    born = NOW - 3600
    cluster.nodes = [node_json("n1", "Unknown", taint(UNREACHABLE, NOW - 60), zone="a"), node_json("n2", zone="a")]
    cluster.pods = [pod_json("web", "n1", [toleration(UNREACHABLE, 300)], namespace="shop", created=born),
                    pod_json("db", "n1", [], namespace="data", created=born)]
    cluster.lease = lease_json(HOLDER, NOW)


def run_status(kubeconfig: str, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(parse_args(["--kubeconfig", kubeconfig, *argv]), out, err)
    return code, out.getvalue(), err.getvalue()


def test_the_report_is_read_from_the_api_with_the_pod_filters_in_the_list(cluster: Cluster, kubeconfig: str) -> None:
    tainted_cluster(cluster)
    code, out, err = run_status(kubeconfig, "-n", "shop", "-l", "app=web")
    assert (code, err) == (0, "")
    assert "shop/web" in out and "data/db" not in out
    assert f"LEADER  {POD} (Lease taintkeeper-system/taintkeeper-controller held by {HOLDER}" in out
    assert "  last monitor pass " in out and " ago" in out
    version = importlib.metadata.version("taintkeeper")
    assert [(path, query) for path, query, _agent in cluster.requests] == [
        ("/api/v1/nodes", [("resourceVersion", "0")]),
        ("/api/v1/namespaces/shop/pods", [("resourceVersion", "0"), ("labelSelector", "app=web")]),
        (LEASE_PATH, []),
        (METRICS_PATH, []),
    ]
    assert {agent.split(" ")[0] for _path, _query, agent in cluster.requests} == {f"taintkeeper-status/{version}"}


def test_without_a_no_execute_taint_the_pods_are_not_listed(cluster: Cluster, kubeconfig: str) -> None:
    cluster.nodes = [node_json("n1", "False", taint(NOT_READY, effect="NoSchedule"))]
    code, out, _err = run_status(kubeconfig)
    assert code == 0 and "PENDING EVICTIONS  (0, soonest first)" in out
    assert [path for path, _query, _agent in cluster.requests] == ["/api/v1/nodes", LEASE_PATH]


def test_json_output(cluster: Cluster, kubeconfig: str) -> None:
    tainted_cluster(cluster)
    code, out, _err = run_status(kubeconfig, "-o", "json")
    document = json.loads(out)
    assert code == 0 and list(document) == ["zones", "brake", "nodes", "leader", "pendingEvictions"]
    assert [(p["namespace"], p["pod"]) for p in document["pendingEvictions"]] == [("data", "db"), ("shop", "web")]
    assert document["pendingEvictions"][1]["deadline"] == format_time(NOW + 240)


def test_metrics_that_cannot_be_reached_are_one_line_of_the_report(cluster: Cluster, kubeconfig: str) -> None:
    tainted_cluster(cluster)
    cluster.metrics = None
    code, out, err = run_status(kubeconfig)
    assert (code, err) == (0, "")
    assert ("  last monitor pass: cannot tell: cannot reach the leader's /metrics through the apiserver's pod proxy: "
            "503 Service Unavailable: error trying to reach service: dial tcp: i/o timeout") in out.splitlines()


def test_no_lease_means_no_leader_and_no_metrics_request(cluster: Cluster, kubeconfig: str) -> None:
    code, out, _err = run_status(kubeconfig)
    assert code == 0 and "LEADER  none (the Lease taintkeeper-system/taintkeeper-controller does not exist)" in out
    assert METRICS_PATH not in [path for path, _query, _agent in cluster.requests]


def test_an_api_error_is_one_line_and_exit_1(cluster: Cluster, kubeconfig: str) -> None:
    cluster.forbid_nodes = True
    code, out, err = run_status(kubeconfig)
    assert (code, out) == (1, "")
    assert err.splitlines() == ['status: error: cannot read the cluster: 403 Forbidden: nodes is forbidden: User "u" '
                                'cannot list resource "nodes"']


def test_an_apiserver_that_cannot_be_reached_is_one_line_and_exit_1(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = run(parse_args(["--kubeconfig", str(kubeconfig_file(tmp_path))]), out, err)
    assert code == 1 and len(err.getvalue().splitlines()) == 1
    assert err.getvalue().startswith("status: error: cannot read the cluster: ") and "Traceback" not in err.getvalue()


def test_a_kubeconfig_that_does_not_load_is_one_line_and_exit_2(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert run(parse_args(["--kubeconfig", str(tmp_path / "missing")]), out, err) == 2
    assert err.getvalue().splitlines() == [f"status: error: kubeconfig {tmp_path / 'missing'} does not exist or is "
                                           "not a file"]


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
    assert out.getvalue() == (CLEAR + HOME + f"a{erase}\nb{erase}\n" + ERASE_BELOW
                              + HOME + f"c{erase}\n" + ERASE_BELOW)


def test_watch_waits_only_what_is_left_of_the_interval() -> None:
    clock = iter([10.0, 10.25])
    slept: list[float] = []
    watch(frames("x"), io.StringIO(), tty=False, sleep=slept.append, monotonic=lambda: next(clock, 99.0))
    assert slept == [0.75]


def test_watch_in_json_prints_one_document_per_line(cluster: Cluster, kubeconfig: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    tainted_cluster(cluster)
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 2:
            raise KeyboardInterrupt
    monkeypatch.setattr("controller.status_command.time.sleep", sleep)
    code, out, _err = run_status(kubeconfig, "-o", "json", "--watch")
    assert code == 0
    documents = [json.loads(line) for line in out.splitlines()]
    assert len(documents) == 2 and all(d["pendingEvictions"][1]["pod"] == "web" for d in documents)
