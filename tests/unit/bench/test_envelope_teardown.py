"""When bench/envelope.py leaves its cluster up at the end of a run."""

from __future__ import annotations

import pytest

from bench.envelope import leaves_cluster_up, parse_args


@pytest.mark.parametrize(
    ("argv", "left_up"),
    [
        pytest.param([], False, id="a temporary directory's cluster is taken down"),
        pytest.param(["--dir", "/tmp/envelope-x"], True, id="a named directory's cluster is left up for a look"),
        pytest.param(["--dir", "/tmp/envelope-x", "--down"], False, id="--down takes a named directory's down"),
        pytest.param(["--down"], False, id="--down alone changes nothing"),
    ],
)
def test_the_cluster_is_left_up_only_in_a_named_directory_without_down(argv: list[str], left_up: bool):
    assert leaves_cluster_up(parse_args(["--controllers", "taintkeeper", *argv])) is left_up
