"""tests/support/suite_times.py: the table `make test` ends with, from each session's recorded times."""

from __future__ import annotations

from tests.support.suite_times import OUTSIDE_TESTS, Recorder, table


def recorded(label: str, wall: float, reports: list[tuple[str, str, float, str]]) -> dict:
    recorder = Recorder(label)
    for report in reports:
        recorder.add(*report)
    return {"label": label, "wall": wall, "tests": recorder.tests}


def test_each_suite_sums_its_tests_setup_call_and_teardown_and_counts_outcomes():
    run = recorded(
        "kubernetes-1.37",
        100.0,
        [
            ("tests/e2e/test_a.py::test_x", "setup", 30.0, "passed"),  # a cluster brought up by a fixture
            ("tests/e2e/test_a.py::test_x", "call", 5.0, "failed"),
            ("tests/e2e/test_a.py::test_x", "teardown", 1.0, "passed"),
            ("tests/unit/test_b.py::test_y", "call", 2.0, "passed"),
            ("tests/unit/test_b.py::test_z", "setup", 0.5, "skipped"),
        ],
    )
    lines = table([run], slowest=2).splitlines()
    assert lines[0] == "kubernetes-1.37: 1.7 min"
    assert lines[2].split() == ["e2e", "36s", "0", "0", "1"]  # the slowest suite first
    assert lines[3].split() == ["unit", "2s", "1", "1", "0"]
    assert lines[4].split()[-1] == "62s" and OUTSIDE_TESTS in lines[4]  # 100 s of wall, 38.5 in tests
    assert lines[6].split() == ["36.0s", "tests/e2e/test_a.py::test_x"]
    assert lines[7].split() == ["2.0s", "tests/unit/test_b.py::test_y"]


def test_an_error_outside_the_call_counts_as_failed():
    run = recorded("r", 1.0, [("tests/unit/t.py::test_e", "setup", 0.1, "failed")])
    assert run["tests"]["tests/unit/t.py::test_e"]["outcome"] == "error"
    assert table([run]).splitlines()[2].split() == ["unit", "0s", "0", "0", "1"]


def test_sessions_of_two_lanes_side_by_side_span_less_than_their_sum():
    def timed(label: str, lane: str, began: float, ended: float) -> dict:
        run = recorded(label, ended - began, [("tests/unit/t.py::test_a", "call", 1.0, "passed")])
        return {**run, "lane": lane, "began": began, "ended": ended}

    runs = [
        timed("1.37-integration", "apiserver", 1000.0, 1600.0),
        timed("1.37-nodes", "nodes", 990.0, 3390.0),
        timed("1.37-unit", "apiserver", 995.0, 1000.0),
    ]
    lines = table(runs).splitlines()
    assert lines[0] == "all sessions: 40.0 min from the first one's start to the last one's end"
    assert lines[1] == "  lane apiserver: 10.1 min (1.37-unit, 1.37-integration)"
    assert lines[2] == "  lane nodes: 40.0 min (1.37-nodes)"
    assert [line.split(":")[0] for line in lines if line.startswith("1.37")] == [
        "1.37-nodes",
        "1.37-unit",
        "1.37-integration",
    ]  # the sessions by when they began


def test_each_session_of_a_run_keeps_its_own_record(tmp_path, monkeypatch):
    from tests.support import suite_times

    for session in ("1.37-nodes", "1.37-integration"):
        monkeypatch.setenv("TAINTKEEPER_TEST_SESSION", session)
        suite_times.Recorder(suite_times.session_label(), "a lane").write(tmp_path)
    assert sorted(run["label"] for run in suite_times.load(tmp_path)) == ["1.37-integration", "1.37-nodes"]
