"""kubectl_taintkeeper/fencing_command.py without a cluster: the flags, and `fence`/`unfence` against an in-memory
stand-in of their requests (FenceApi) whose node PATCH is applied for real (the `jsonpatch` library: a
node changed since it was read fails the `test` op with 422, as on the apiserver). Against the real
apiserver and real kubelets: tests/realnodes/test_fencing.py."""

from __future__ import annotations

import copy
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from kubernetes.client.rest import ApiException

from controller import __main__ as controller_main
from controller.fencing import CONFIRMED_AT_ANNOTATION, FENCED_AT_ANNOTATION, FENCED_BY_ANNOTATION
from kube.timestamps import format_time
from kubectl_taintkeeper import plugin as kubectl_plugin
from kubectl_taintkeeper.fencing_command import (
    VOLUME_ATTACHMENTS_PATH,
    FenceRequest,
    Terminal,
    fence,
    fencer,
    parse_args,
    run,
    unfence,
)
from shared.taints import NO_EXECUTE, OUT_OF_SERVICE, UNREACHABLE
from tests.support.fencing import OUT_OF_SERVICE_TAINT, START, attachment_json, node_json, owner, pod_json

NOW = START
WHO = "alice@laptop as admin"
UNREACHABLE_TAINT = {"key": UNREACHABLE, "effect": NO_EXECUTE, "timeAdded": format_time(NOW - 500)}


# --- flags -----------------------------------------------------------------------------------------------

GOOD = {
    "fence: the defaults": (["fence", "node1"], FenceRequest("fence", "node1", None, 300.0, False)),
    "fence: --min-down and --yes": (
        ["fence", "node1", "--min-down", "90s", "--yes"],
        FenceRequest("fence", "node1", None, 90.0, True),
    ),
    "fence: -y and a kubeconfig": (
        ["fence", "--kubeconfig=/k", "node1", "-y"],
        FenceRequest("fence", "node1", "/k", 300.0, True),
    ),
    "fence: --min-down 0": (["fence", "node1", "--min-down=0"], FenceRequest("fence", "node1", None, 0.0, False)),
    "unfence": (["unfence", "node1"], FenceRequest("unfence", "node1", None)),
}


@pytest.mark.parametrize(("argv", "expected"), GOOD.values(), ids=GOOD.keys())
def test_the_flags(argv: list[str], expected: FenceRequest) -> None:
    assert parse_args(argv[0], argv[1:]) == expected


BAD = {
    "no node": (["fence"], "required: NODE"),
    "two nodes": (["fence", "a", "b"], "unrecognized arguments: b"),
    "--min-down that is no duration": (["fence", "a", "--min-down", "5"], "--min-down: invalid duration '5'"),
    "a negative --min-down": (["fence", "a", "--min-down=-1m"], "--min-down must not be negative"),
    "unfence takes no --yes": (["unfence", "a", "--yes"], "unrecognized arguments: --yes"),
    "unfence takes no --min-down": (["unfence", "a", "--min-down", "1m"], "unrecognized arguments"),
}


@pytest.mark.parametrize(("argv", "message"), BAD.values(), ids=BAD.keys())
def test_bad_flags_are_one_line_and_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(argv[0], argv[1:])
    assert exited.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"python -m controller {argv[0]}: error:"), lines
    assert message in lines[0]


def test_python_m_controller_runs_them(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[FenceRequest] = []

    def record(request: FenceRequest) -> int:
        called.append(request)
        return 0

    monkeypatch.setattr("kubectl_taintkeeper.fencing_command.run", record)
    assert controller_main.main(["fence", "node1", "--yes"]) == 0
    assert controller_main.main(["unfence", "node1"]) == 0
    assert called == [FenceRequest("fence", "node1", None, 300.0, True), FenceRequest("unfence", "node1", None)]


def test_the_kubectl_plugin_runs_them(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[FenceRequest] = []

    def record(request: FenceRequest) -> int:
        called.append(request)
        return 0

    monkeypatch.setattr("kubectl_taintkeeper.fencing_command.run", record)
    monkeypatch.setenv("KUBECONFIG", "/from/env")
    assert kubectl_plugin.main(["fence", "node1", "--min-down", "1m", "-y"]) == 0
    assert kubectl_plugin.main(["unfence", "node1", "--kubeconfig", "/k"]) == 0
    assert called == [FenceRequest("fence", "node1", "/from/env", 60.0, True), FenceRequest("unfence", "node1", "/k")]


def test_the_kubectl_plugin_refuses_bad_flags_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        kubectl_plugin.parse_args(["fence", "node1", "--min-down", "soon"], {})
    assert exited.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("kubectl taintkeeper: error: --min-down: invalid duration 'soon'")


def test_a_kubeconfig_that_does_not_load_is_one_line_and_exit_2(tmp_path: Path) -> None:
    err = io.StringIO()
    code = run(FenceRequest("fence", "node1", str(tmp_path / "missing"), yes=True), io.StringIO(), err)
    assert code == 2
    (line,) = err.getvalue().splitlines()
    assert line.startswith("fence: error: kubeconfig ") and "does not exist" in line


def test_who_fences_is_the_login_and_the_kubeconfig_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: k, cluster: "
        "{server: 'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: k, user: ops}}]\n"
        "users: [{name: ops, user: {token: t}}]\n"
    )
    monkeypatch.setattr("getpass.getuser", lambda: "alice")
    monkeypatch.setattr("socket.gethostname", lambda: "laptop")
    assert fencer(str(kubeconfig)) == "alice@laptop as ops"
    assert fencer(str(tmp_path / "missing")) == "alice@laptop"


# --- fence and unfence against the stand-in ---------------------------------------------------------------


class Cluster:
    """The requests the commands make (FenceApi), answered from memory; the PATCH applied for real."""

    def __init__(
        self,
        node: dict[str, Any] | None,
        pods: list[dict[str, Any]] | None = None,
        attachments: list[dict[str, Any]] | None = None,
    ) -> None:
        self.node = copy.deepcopy(node)
        self.pods = pods or []
        self.attachments = attachments or []
        self.gets: list[str] = []
        self.patches: list[list[dict[str, Any]]] = []
        self.before_patch: list[Any] = []  # changes someone else makes right before each of our patches
        self.failing_get: int | None = None
        self.attachments_forbidden = False

    def get_json(self, path: str, query: list[tuple[str, str]]) -> dict[str, Any]:
        self.gets.append(path)
        if path == VOLUME_ATTACHMENTS_PATH and self.attachments_forbidden:
            raise ApiException(status=403, reason="Forbidden")
        if self.failing_get is not None:
            raise ApiException(status=self.failing_get, reason="Forbidden")
        if path == "/api/v1/nodes/node1":
            if self.node is None:
                raise ApiException(status=404, reason="Not Found")
            return copy.deepcopy(self.node)
        if path == "/api/v1/pods":
            assert query == [("fieldSelector", "spec.nodeName=node1")]
            return {"items": self.pods}
        assert path == VOLUME_ATTACHMENTS_PATH
        return {"items": self.attachments}

    def patch_json(self, path: str, ops: Sequence[dict[str, Any]]) -> dict[str, Any]:
        assert path == "/api/v1/nodes/node1" and self.node is not None
        if self.before_patch:
            self.before_patch.pop(0)(self.node)
            self.node["metadata"]["resourceVersion"] = str(int(self.node["metadata"]["resourceVersion"]) + 1)
        self.patches.append(list(ops))
        try:
            self.node = jsonpatch.apply_patch(self.node, list(ops))
        except jsonpatch.JsonPatchTestFailed as error:
            raise ApiException(status=422, reason="Unprocessable Entity") from error
        self.node["metadata"]["resourceVersion"] = str(int(self.node["metadata"]["resourceVersion"]) + 1)
        return self.node

    def taints(self) -> list[tuple[str, str]]:
        return [(t["key"], t.get("value", "")) for t in (self.node or {})["spec"].get("taints") or []]


class Keyboard(io.StringIO):
    """stdin: a terminal or not, with the answer typed."""

    def __init__(self, answer: str = "", tty: bool = True) -> None:
        super().__init__(answer)
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def fenced(
    cluster: Cluster, *, yes: bool = True, min_down: float = 300.0, answer: str = "", tty: bool = True
) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    request = FenceRequest("fence", "node1", None, min_down, yes)
    code = fence(request, cluster, Terminal(out, err, Keyboard(answer, tty)), WHO, now=lambda: NOW)
    return code, out.getvalue(), err.getvalue()


def dead_node(**changes: Any) -> dict[str, Any]:
    return node_json("node1", "Unknown", since=NOW - 600, **({"taints": [UNREACHABLE_TAINT]} | changes))


def test_a_dead_node_is_shown_then_fenced_with_who_and_when() -> None:
    cluster = Cluster(
        dead_node(),
        [pod_json("web-1", owners=[owner("StatefulSet", "web")])],
        [attachment_json("csi-1", volume="pvc-web-1")],
    )
    code, out, err = fenced(cluster)
    assert (code, err) == (0, "")
    assert cluster.taints() == [(UNREACHABLE, ""), (OUT_OF_SERVICE, "nodeshutdown")]
    assert cluster.node is not None
    assert cluster.node["metadata"]["annotations"] == {
        FENCED_BY_ANNOTATION: WHO,
        FENCED_AT_ANNOTATION: "2027-01-15T08:00:00Z",
    }
    assert "  apps/web-1  StatefulSet/web  it does not tolerate node.kubernetes.io/out-of-service" in out
    assert "  csi-1             pvc-web-1  csi.example.com" in out
    assert "Node node1 fenced: taint node.kubernetes.io/out-of-service=nodeshutdown:NoExecute" in out
    assert "kubectl taintkeeper unfence node1" in out


REFUSED = {
    "a Ready node": (
        node_json("node1", "True", since=NOW - 3600),
        300.0,
        "fence: error: node node1 is Ready: its kubelet is reporting",
    ),
    "a node down less than --min-down": (
        dead_node(),
        900.0,
        "fence: error: node node1 has not been Ready for only 10m0s",
    ),
    "a node that does not exist": (None, 300.0, "fence: error: node node1 not found"),
}


@pytest.mark.parametrize(("node", "min_down", "message"), REFUSED.values(), ids=REFUSED.keys())
def test_refusals_are_one_line_exit_1_and_change_nothing(
    node: dict[str, Any] | None, min_down: float, message: str
) -> None:
    cluster = Cluster(node, [pod_json("web-1")])
    code, out, err = fenced(cluster, min_down=min_down)
    assert code == 1 and out == ""
    (line,) = err.splitlines()
    assert line.startswith(message), line
    assert cluster.patches == []


def test_without_a_terminal_and_without_yes_nothing_is_even_read() -> None:
    cluster = Cluster(dead_node())
    code, out, err = fenced(cluster, yes=False, tty=False)
    assert (code, out) == (2, "")
    assert err == (
        "fence: error: stdin is not a terminal, so nobody can confirm: pass --yes to fence node node1 without asking\n"
    )
    assert cluster.gets == [] and cluster.patches == []


@pytest.mark.parametrize(
    ("answer", "done"),
    [("y\n", True), ("yes\n", True), ("Y\n", True), ("n\n", False), ("\n", False), ("", False), ("sure\n", False)],
)
def test_on_a_terminal_it_asks_and_only_yes_fences(answer: str, done: bool) -> None:
    cluster = Cluster(dead_node())
    code, out, _ = fenced(cluster, yes=False, answer=answer)
    assert "Fence node node1? [y/N] " in out
    assert code == (0 if done else 1)
    assert bool(cluster.patches) is done
    if not done:
        assert "Not fenced: node node1 is left as it was." in out


def test_a_node_fenced_already_is_left_alone() -> None:
    cluster = Cluster(
        dead_node(
            taints=[OUT_OF_SERVICE_TAINT], annotations={FENCED_BY_ANNOTATION: "bob@ops", FENCED_AT_ANNOTATION: "t"}
        )
    )
    code, out, _ = fenced(cluster)
    assert code == 0 and cluster.patches == []
    assert out == (
        "Node node1 is already fenced (node.kubernetes.io/out-of-service=nodeshutdown:NoExecute, by "
        "bob@ops at t); nothing to do.\n"
    )


def test_a_concurrent_taint_change_is_kept_the_patch_is_redone_on_a_fresh_read() -> None:
    cluster = Cluster(dead_node())
    other = {"key": "example.com/maintenance", "effect": "NoSchedule"}
    cluster.before_patch.append(lambda node: node["spec"]["taints"].append(other))
    code, _, err = fenced(cluster)
    assert (code, err) == (0, "")
    assert len(cluster.patches) == 2  # the first failed its resourceVersion test
    assert cluster.taints() == [(UNREACHABLE, ""), ("example.com/maintenance", ""), (OUT_OF_SERVICE, "nodeshutdown")]


def test_a_node_that_came_back_meanwhile_is_not_fenced() -> None:
    cluster = Cluster(dead_node())
    cluster.before_patch.append(
        lambda node: node["status"]["conditions"][0].update(status="True", lastTransitionTime=format_time(NOW - 1))
    )
    code, _, err = fenced(cluster)
    assert code == 1
    assert err.startswith("fence: error: node node1 is Ready")
    assert cluster.taints() == [(UNREACHABLE, "")]


def test_a_read_the_apiserver_refuses_is_one_line_and_exit_1() -> None:
    cluster = Cluster(dead_node())
    cluster.failing_get = 403
    code, _, err = fenced(cluster)
    assert code == 1
    (line,) = err.splitlines()
    assert line.startswith("fence: error: cannot read the cluster: 403 Forbidden")


def test_a_user_who_may_not_list_volume_attachments_is_told_so_and_may_still_fence() -> None:
    cluster = Cluster(dead_node())
    cluster.attachments_forbidden = True
    code, out, err = fenced(cluster)
    assert (code, err) == (0, "")
    assert (
        "The volume attachments could not be read (403 Forbidden); taintkeeper's controller deletes the node's anyway."
    ) in out
    assert cluster.taints()[-1] == (OUT_OF_SERVICE, "nodeshutdown")


def unfenced(cluster: Cluster) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = unfence(FenceRequest("unfence", "node1", None), cluster, Terminal(out, err, Keyboard()))
    return code, out.getvalue(), err.getvalue()


def test_unfence_removes_the_taint_and_the_annotations() -> None:
    cluster = Cluster(
        node_json(
            "node1",
            "True",
            taints=[OUT_OF_SERVICE_TAINT],
            annotations={
                "keep": "me",
                FENCED_BY_ANNOTATION: WHO,
                FENCED_AT_ANNOTATION: "t",
                CONFIRMED_AT_ANNOTATION: "c",
            },
        )
    )
    code, out, err = unfenced(cluster)
    assert (code, err) == (0, "")
    assert cluster.taints() == []
    assert cluster.node is not None and cluster.node["metadata"]["annotations"] == {"keep": "me"}
    assert out == (
        "Node node1 unfenced: removed the taint node.kubernetes.io/out-of-service=nodeshutdown:NoExecute "
        "and the annotation(s) taintkeeper.io/fenced-by, taintkeeper.io/fenced-at, "
        "taintkeeper.io/fencing-confirmed-at.\n"
    )


def test_unfencing_a_node_that_is_still_down_says_what_that_means() -> None:
    cluster = Cluster(dead_node(taints=[OUT_OF_SERVICE_TAINT]))
    code, out, _ = unfenced(cluster)
    assert code == 0
    assert "Node node1 is not Ready (Unknown): its pods are no longer force deleted" in out


def test_unfencing_a_node_that_is_not_fenced_changes_nothing() -> None:
    cluster = Cluster(dead_node())
    code, out, _ = unfenced(cluster)
    assert code == 0 and cluster.patches == []
    assert out == ("Node node1 is not fenced (no out-of-service taint, no fencing annotations); nothing to do.\n")


def test_unfence_keeps_a_concurrent_taint_change() -> None:
    cluster = Cluster(node_json("node1", "True", taints=[OUT_OF_SERVICE_TAINT]))
    other = {"key": "example.com/maintenance", "effect": "NoSchedule"}
    cluster.before_patch.append(lambda node: node["spec"]["taints"].insert(0, other))
    code, _, _ = unfenced(cluster)
    assert code == 0 and len(cluster.patches) == 2
    assert cluster.taints() == [("example.com/maintenance", "")]


def test_unfencing_a_node_that_does_not_exist_is_one_line_and_exit_1() -> None:
    code, out, err = unfenced(Cluster(None))
    assert (code, out, err) == (1, "", "unfence: error: node node1 not found\n")
