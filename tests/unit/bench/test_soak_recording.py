"""bench/soak/recording.py: a run's audit log cut to what the checker reads, judged the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.soak import recording
from bench.soak.check import check_run
from bench.soak.config import taintkeeper_config
from tests.unit.bench.test_soak_checker import node_dies_and_its_pod_goes_on_time, pod_deleted_early


@pytest.mark.parametrize("build", [node_dies_and_its_pod_goes_on_time, pod_deleted_early])
def test_a_recording_is_judged_as_the_run_it_was_cut_from(tmp_path: Path, build):
    world = build()
    audit, faults = world.write(tmp_path / "run")
    with audit.open("a") as stream:  # what the checker never reads is dropped
        stream.write(json.dumps({"stage": "ResponseComplete", "objectRef": {"resource": "configmaps"}}) + "\n")
    kept = recording.record(audit, faults, 1.5, tmp_path / "recorded")
    assert kept == len(world.script.lines())
    replayed = tmp_path / "replayed" / "audit.log"
    replayed.parent.mkdir()
    replayed.write_text("".join(json.dumps(event) + "\n" for event in recording.read_events(tmp_path / "recorded")))
    assert recording.since(tmp_path / "recorded") == 1.5
    original = check_run(audit, faults, taintkeeper_config())
    again = check_run(replayed, tmp_path / "recorded" / "faults.jsonl", taintkeeper_config())
    assert (again.violations, again.evictions_checked) == (original.violations, original.evictions_checked)


def test_the_command_refuses_a_run_without_its_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    argv = ["--audit", str(tmp_path / "audit.log"), "--faults", str(tmp_path / "f.jsonl"), "--since", "0"]
    assert recording.main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
