"""tests/support/lanes.py: `make test`'s sessions in two lanes, the node suites one after another beside the rest."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest

from tests.support import lanes
from tests.support.lanes import APISERVER, NODES, Lane, Runner, Session, plan

TESTS = Path(__file__).resolve().parents[2]
# What makes a suite need real nodes, or the host state a cluster with nodes changes: the fixtures and
# providers that bring one up, taintkeeper's image (its test runs containerd), a Docker engine or kind.
NODE_FIXTURES = re.compile(r"\b(node_packages|taintkeeper_image|LocalProvider|KindProvider|docker-up|kind-up)\b")


def top_level_suites() -> set[str]:
    return {d.name for d in TESTS.iterdir() if d.is_dir() and any(d.rglob("test_*.py")) and d.name != "support"}


def test_every_suite_runs_in_exactly_one_lane():
    named = [*lanes.NODE_SUITES, *lanes.BUILD_SUITES, *lanes.CPU_SUITES, *lanes.CONTROL_PLANE_SUITES]
    assert len(named) == len(set(named))
    assert set(named) == top_level_suites()


def test_every_suite_that_brings_up_nodes_runs_in_the_nodes_lane():
    needing = {
        suite
        for suite in top_level_suites() - {"unit"}  # unit tests the suites' helpers, in memory: the names appear
        if any(NODE_FIXTURES.search(path.read_text()) for path in (TESTS / suite).rglob("*.py"))
    }
    assert needing <= set(lanes.NODE_SUITES), needing - set(lanes.NODE_SUITES)


def names(lanes_planned: list[Lane]) -> dict[str, list[str]]:
    return {lane.name: [session.name for session in lane.sessions] for lane in lanes_planned}


PLANS = [
    (
        "make test: 1.37 in both lanes, then the old end's suites each in its own lane",
        (None, "1.20", ["tests/integration", "tests/realnodes"], '-m "not version_independent"'),
        {
            NODES: ["1.37-nodes", "1.37-e2e-kind", "1.20-realnodes"],
            APISERVER: ["1.37-kindnode", "1.37-unit-conformance-chart", "1.37-integration", "1.20-integration"],
        },
    ),
    (
        "TAINTKEEPER_KUBERNETES=1.20 make test: every suite on 1.20, no old-end pass",
        ("1.20", "1.20", ["tests/integration", "tests/realnodes"], ""),
        {NODES: ["1.20-nodes"], APISERVER: ["1.20-unit-conformance-chart", "1.20-integration"]},
    ),
    (
        "an old end of files and node ids: each to its suite's lane",
        (None, "1.20", ["tests/realnodes/test_a.py", "tests/integration/test_b.py::test_c"], ""),
        {
            NODES: ["1.37-nodes", "1.37-e2e-kind", "1.20-realnodes"],
            APISERVER: ["1.37-kindnode", "1.37-unit-conformance-chart", "1.37-integration", "1.20-integration"],
        },
    ),
    (
        "an old end of one suite adds a session to its lane only",
        (None, "1.20", ["tests/realnodes/"], ""),
        {
            NODES: ["1.37-nodes", "1.37-e2e-kind", "1.20-realnodes"],
            APISERVER: ["1.37-kindnode", "1.37-unit-conformance-chart", "1.37-integration"],
        },
    ),
]


@pytest.mark.parametrize(("args", "expected"), [p[1:] for p in PLANS], ids=[p[0] for p in PLANS])
def test_plan(args: tuple, expected: dict[str, list[str]]):
    planned = plan(*args)
    assert names(planned) == expected
    every = [session.name for lane in planned for session in lane.sessions]
    assert len(every) == len(set(every))  # each session's record and log has its own name


def test_the_old_end_runs_its_version_with_its_selection_and_only_the_cpu_session_is_niced():
    nodes, apiserver = plan(None, "1.20", ["tests/integration", "tests/realnodes"], '-m "not version_independent"')
    old = nodes.sessions[2]
    assert old.kubernetes == "1.20"
    assert old.argv("py") == [
        "py",
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-m",
        "not version_independent",
        "tests/realnodes",
    ]
    assert [s.nice for s in apiserver.sessions] == [10, 10, 10, 10]  # the apiserver lane yields to the nodes lane
    assert [s.nice for s in nodes.sessions] == [0, 0, 0]
    env = lanes.session_env(nodes, old, {"PATH": "/bin"})
    assert env == {
        "PATH": "/bin",
        "TAINTKEEPER_TEST_LANE": NODES,
        "TAINTKEEPER_TEST_SESSION": "1.20-realnodes",
        "TAINTKEEPER_KUBERNETES": "1.20",
        "PYTHONUNBUFFERED": "1",
    }


class ScriptedRunner(Runner):
    """Each session runs `python -c CODE`, CODE its suites' first name: a stand-in for pytest."""

    def argv_of(self, session: Session) -> list[str]:
        return [sys.executable, "-c", session.paths[0]]


PASS, FAIL = "print('ran')", "import sys; print('broke'); sys.exit(3)"


def test_a_failing_session_stops_its_lane_the_other_goes_on_and_the_run_fails(tmp_path: Path):
    out = io.StringIO()
    runner = ScriptedRunner(sys.executable, logs=tmp_path, out=out)
    planned = [
        Lane(NODES, [Session("n1", (FAIL,)), Session("n2", (PASS,))]),
        Lane(APISERVER, [Session("a1", (PASS,)), Session("a2", (PASS,))]),
    ]
    assert runner.run(planned, {}) == 1
    said = out.getvalue()
    assert "[nodes] broke" in said and "[apiserver] ran" in said
    assert "session n1 failed (exit 3)" in said
    assert {p.name for p in tmp_path.iterdir()} == {"n1.log", "a1.log", "a2.log"}  # n2 never ran
    assert (tmp_path / "n1.log").read_text() == "broke\n"
    assert said.splitlines()[-1] == f"lanes: nodes failed in session n1 (log: {tmp_path / 'n1'}.log)"


NOTHING = "import sys; sys.exit(5)"  # pytest: no test selected


def test_a_session_with_nothing_selected_does_not_stop_its_lane(tmp_path: Path):
    out = io.StringIO()
    runner = ScriptedRunner(sys.executable, logs=tmp_path, out=out)
    assert runner.run([Lane(APISERVER, [Session("a1", (NOTHING,)), Session("a2", (PASS,))])], {}) == 0
    assert "session a1: no test selected" in out.getvalue() and (tmp_path / "a2.log").read_text() == "ran\n"


class BrokenRunner(ScriptedRunner):
    def run_session(self, lane: Lane, session: Session, env: dict[str, str]) -> int:
        raise OSError("no space left on device")


def test_a_lane_that_breaks_fails_the_run(tmp_path: Path):
    out = io.StringIO()
    assert BrokenRunner(sys.executable, logs=tmp_path, out=out).run([Lane(NODES, [Session("n", (PASS,))])], {}) == 1
    assert "[nodes] the lane stopped: OSError('no space left on device')" in out.getvalue()


def test_the_old_end_comes_from_the_environment_make_exports(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TAINTKEEPER_OLD_END", "1.20")
    monkeypatch.setenv("TAINTKEEPER_OLD_END_SELECT", "-m 'not version_independent'")
    args = lanes.parse([])
    assert (args.old_end, args.old_end_select) == ("1.20", "-m 'not version_independent'")


def test_both_lanes_passing_pass_the_run(tmp_path: Path):
    runner = ScriptedRunner(sys.executable, logs=tmp_path, out=io.StringIO())
    assert runner.run([Lane(NODES, [Session("n", (PASS,))]), Lane(APISERVER, [Session("a", (PASS,))])], {}) == 0


def test_an_unknown_old_end_suite_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_info:
        lanes.parse(["--old-end", "1.20", "--old-end-tests", "tests/integration tests/nodes"])
    assert exit_info.value.code == 2
    assert "--old-end-tests: no suite tests/nodes (one of:" in capsys.readouterr().err


def test_dry_run_prints_each_session_and_runs_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("TAINTKEEPER_KUBERNETES", raising=False)
    assert lanes.main(["--old-end", "1.20", "--old-end-select=-m 'not version_independent'", "--dry-run"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in printed] == [
        "[nodes] 1.37-nodes",
        "[nodes] 1.37-e2e-kind",
        "[nodes] 1.20-realnodes",
        "[apiserver] 1.37-kindnode",
        "[apiserver] 1.37-unit-conformance-chart",
        "[apiserver] 1.37-integration",
        "[apiserver] 1.20-integration",
    ]
    assert printed[1].split(": ", 1)[1].startswith("TAINTKEEPER_E2E_PROVIDER=kind ")


def test_the_end_to_end_suite_runs_again_on_kind_with_its_provider_in_the_environment():
    nodes, _ = plan(None, "1.20", ["tests/integration", "tests/realnodes"], "")
    kind = next(session for session in nodes.sessions if session.name == "1.37-e2e-kind")
    assert kind.paths == ("tests/e2e",) and kind.kubernetes is None
    assert lanes.session_env(nodes, kind, {})["TAINTKEEPER_E2E_PROVIDER"] == "kind"
    assert "TAINTKEEPER_E2E_PROVIDER" not in lanes.session_env(nodes, nodes.sessions[0], {})
