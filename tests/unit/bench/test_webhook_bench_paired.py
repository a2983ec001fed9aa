"""The webhook benchmark's paired slices: order alternation, per-cycle ratios and medians, tables, verdicts.

bench/webhook_bench.py's parts: bench/paired_slices.py, bench/webhook_tables.py, bench/webhook_verdicts.py,
bench/webhook_report.py and the flags of bench/webhook_bench.py itself.

Only the pure parts: no server is started and no load is run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.load_tools import LoadResult
from bench.paired_slices import (
    PairedRatio,
    PairedRun,
    Slice,
    cycle_line,
    cycle_ratios,
    paired_ratios,
    ratio_pairs,
    slice_order,
)
from bench.webhook_bench import parse_args
from bench.webhook_report import REPORT_END, REPORT_START, log_problem_lines, paired_section, write_report
from bench.webhook_rounds import Measurement, Summary
from bench.webhook_servers import Setup
from bench.webhook_tables import cycles_table, paired_table
from bench.webhook_verdicts import per_round_ratios, throughput_verdict, verdict_lines


def load(rps: float, bad: int = 0, errors: int = 0) -> LoadResult:
    return LoadResult(
        rps=rps, p50_ms=1.0, p99_ms=2.0, requests=int(rps), bad_responses=bad, errors=errors, command=["wrk"]
    )


def slices(*cycles: dict[str, float]) -> list[Slice]:
    """One dict per cycle (from 1), server -> req/s, in the order the servers ran."""
    return [Slice(n, server, load(rps)) for n, cycle in enumerate(cycles, start=1) for server, rps in cycle.items()]


def summary(server: str, peak_rps: float) -> Summary:
    return Summary(
        server=server,
        peak_rps=peak_rps,
        peak_p50=1.0,
        peak_p99=2.0,
        fixed_p50=1.0,
        fixed_p99=2.0,
        fixed_rps=500.0,
        bad_responses=0,
        errors=0,
        log_problems=0,
        other_cores=0.0,
        rounds=1,
    )


def measurement(server: str, round_no: int, peak_rps: float, log_lines: list[str] | None = None) -> Measurement:
    return Measurement(server, round_no, load(peak_rps), load(500.0), log_lines or [], 0.0, 0.0, 0.1)


# --- the order of the servers within a cycle ------------------------------------------------

ORDERS = [
    ("the first cycle keeps the given order", ["ours", "static"], 1, ["ours", "static"]),
    ("the second cycle reverses it", ["ours", "static"], 2, ["static", "ours"]),
    ("the third cycle is the given order again", ["ours", "static"], 3, ["ours", "static"]),
    ("three servers are reversed as a whole", ["ours", "static", "kopf"], 2, ["kopf", "static", "ours"]),
    ("a single server stays where it is", ["ours"], 2, ["ours"]),
]


@pytest.mark.parametrize(("names", "cycle", "expected"), [c[1:] for c in ORDERS], ids=[c[0] for c in ORDERS])
def test_the_order_alternates_from_cycle_to_cycle(names, cycle, expected):
    assert slice_order(names, cycle) == expected


@pytest.mark.parametrize("count", [2, 3, 4, 5])
def test_over_two_cycles_every_server_has_the_same_mean_position(count):
    names = [f"server{i}" for i in range(count)]
    positions = {name: slice_order(names, 1).index(name) + slice_order(names, 2).index(name) for name in names}
    assert set(positions.values()) == {count - 1}


def test_the_order_leaves_the_given_list_alone():
    names = ["ours", "static"]
    slice_order(names, 2)
    assert names == ["ours", "static"]


# --- per-cycle ratios and their medians -----------------------------------------------------

CYCLE_RATIOS = [
    (
        "each cycle's ratio comes from that cycle's own slices",
        slices({"ours": 900, "static": 1000}, {"static": 500, "ours": 600}),
        [0.9, 1.2],
    ),
    (
        "ratios come in cycle order whatever order the slices are listed in",
        list(reversed(slices({"ours": 100, "static": 400}, {"ours": 300, "static": 100}))),
        [0.25, 3.0],
    ),
    (
        "a cycle missing either server is left out",
        [*slices({"ours": 100, "static": 200}), Slice(2, "ours", load(500))],
        [0.5],
    ),
    ("no slices give no ratios", [], []),
]


@pytest.mark.parametrize(("given", "expected"), [c[1:] for c in CYCLE_RATIOS], ids=[c[0] for c in CYCLE_RATIOS])
def test_a_ratio_per_cycle_from_that_cycles_slices(given, expected):
    assert cycle_ratios(given, "ours", "static") == pytest.approx(expected)


PAIRS = [
    (
        "the default servers give ours/static and ours/kopf",
        {"ours", "static", "kopf"},
        [("ours", "static"), ("ours", "kopf")],
    ),
    ("ours alone gives none", {"ours"}, []),
    ("without ours there is none", {"static", "kopf"}, []),
    (
        "the gthread variants give their own ours/static",
        {"ours-gthread", "static-gthread"},
        [("ours-gthread", "static-gthread")],
    ),
    ("ours with the fast paths off gives ours/ours-plain", {"ours", "ours-plain"}, [("ours", "ours-plain")]),
]


@pytest.mark.parametrize(("servers", "expected"), [c[1:] for c in PAIRS], ids=[c[0] for c in PAIRS])
def test_ratios_are_taken_for_the_pairs_whose_servers_both_ran(servers, expected):
    assert ratio_pairs(servers) == expected


MEDIANS = [
    (
        "the median of per-cycle ratios, not the ratio of per-server medians (which is 1.00x here)",
        slices({"ours": 100, "static": 50}, {"ours": 200, "static": 400}, {"ours": 300, "static": 200}),
        1.5,
        0.5,
        2.0,
    ),
    (
        "an even number of cycles takes the mean of the middle two",
        slices(
            {"ours": 80, "static": 100},
            {"ours": 90, "static": 100},
            {"ours": 95, "static": 100},
            {"ours": 70, "static": 100},
        ),
        0.85,
        0.7,
        0.95,
    ),
    ("a single cycle is its own median, min and max", slices({"ours": 90, "static": 100}), 0.9, 0.9, 0.9),
]


@pytest.mark.parametrize(("given", "median", "low", "high"), [c[1:] for c in MEDIANS], ids=[c[0] for c in MEDIANS])
def test_a_paired_ratio_is_the_median_of_the_cycles_with_their_range(given, median, low, high):
    (ratio,) = paired_ratios(given)
    assert (ratio.top, ratio.bottom) == ("ours", "static")
    assert (ratio.median, ratio.low, ratio.high) == pytest.approx((median, low, high))


def test_paired_ratios_cover_every_pair_present_in_the_slices():
    given = slices({"ours": 100, "static": 125, "kopf": 25}, {"kopf": 20, "static": 100, "ours": 80})
    assert [(r.top, r.bottom, r.ratios) for r in paired_ratios(given)] == [
        ("ours", "static", pytest.approx([0.8, 0.8])),
        ("ours", "kopf", pytest.approx([4.0, 4.0])),
    ]


def test_per_round_ratios_still_leave_out_rounds_missing_a_server():
    runs = [measurement("ours", 1, 90), measurement("static", 1, 100), measurement("ours", 2, 50)]
    assert per_round_ratios(runs, "ours", "static") == pytest.approx([0.9])


# --- what is printed and written ------------------------------------------------------------


def test_a_cycles_progress_line_lists_the_servers_in_the_order_they_ran_and_the_cycles_ratios():
    given = slices({"ours": 900, "static": 1000, "kopf": 200}, {"kopf": 250, "static": 1200, "ours": 1000})
    assert cycle_line(given, 2, 12) == (
        "paired cycle 2/12: kopf 250, static 1,200, ours 1,000 req/s | ours/static 0.83x, ours/kopf 4.00x"
    )


def test_the_paired_table_gives_each_servers_median_and_range_and_each_ratios_median_and_range():
    given = [
        *slices({"ours": 900, "static": 1000}, {"static": 2000, "ours": 1500}),
        Slice(3, "ours", load(1200, bad=1)),
        Slice(3, "static", load(1500, errors=2)),
    ]
    assert paired_table(given).splitlines() == [
        "| server | median req/s over slices | min-max req/s | slices | non-2xx / errors |",
        "|---|---:|---:|---:|---:|",
        "| ours | 1,200 | 900-1,500 | 3 | 1 / 0 |",
        "| static | 1,500 | 1,000-2,000 | 3 | 0 / 2 |",
        "",
        "| ratio | median of per-cycle ratios | min-max | cycles |",
        "|---|---:|---:|---:|",
        "| ours/static | 0.80x | 0.75-0.90x | 3 |",
    ]


def test_the_cycles_table_shows_each_cycles_order_rates_and_ratios():
    given = [*slices({"ours": 900, "static": 1000}, {"static": 2000, "ours": 1500}), Slice(3, "ours", load(700))]
    assert cycles_table(given).splitlines() == [
        "| cycle | order | ours req/s | static req/s | ours/static |",
        "|---:|---|---:|---:|---:|",
        "| 1 | ours, static | 900 | 1,000 | 0.90x |",
        "| 2 | static, ours | 1,500 | 2,000 | 0.75x |",
        "| 3 | ours | 700 | - | - |",
    ]


THROUGHPUT = [
    (
        "without paired slices the rounds' ratio of medians is judged, as before",
        None,
        "- ours/static throughput: 0.80x (800 / 1,000 req/s; per round 0.80x) -- target >= 0.90x: MISS",
    ),
    (
        "paired slices above the target pass although the rounds missed it",
        PairedRatio("ours", "static", [0.92, 0.95]),
        "- ours/static throughput, from the paired slices: 0.94x (median of 2 per-cycle ratios, 0.92-0.95x); "
        "rounds: 0.80x (800 / 1,000 req/s; per round 0.80x) -- target >= 0.90x, on the paired median: PASS",
    ),
    (
        "paired slices below the target miss",
        PairedRatio("ours", "static", [0.7, 0.85, 0.99]),
        "- ours/static throughput, from the paired slices: 0.85x (median of 3 per-cycle ratios, 0.70-0.99x); "
        "rounds: 0.80x (800 / 1,000 req/s; per round 0.80x) -- target >= 0.90x, on the paired median: MISS",
    ),
]


@pytest.mark.parametrize(("paired", "expected"), [c[1:] for c in THROUGHPUT], ids=[c[0] for c in THROUGHPUT])
def test_the_throughput_verdict_comes_from_the_paired_median_when_there_is_one(paired, expected):
    runs = [measurement("ours", 1, 800), measurement("static", 1, 1000)]
    assert throughput_verdict(summary("ours", 800), summary("static", 1000), runs, 0.9, "0.90x", paired) == expected


def test_a_pair_without_paired_slices_keeps_its_verdict_from_the_rounds():
    summaries = {"ours": summary("ours", 800), "static": summary("static", 1000), "kopf": summary("kopf", 200)}
    runs = [measurement(name, 1, s.peak_rps) for name, s in summaries.items()]
    lines = verdict_lines(summaries, runs, parse_args([]), [PairedRatio("ours", "static", [0.95])])
    assert [line.split(":", 1)[0] for line in lines if "throughput" in line] == [
        "- ours/static throughput, from the paired slices",
        "- ours/kopf throughput",
    ]
    assert lines[-1].endswith("target >= 3.8x: PASS")


OPTIONS = [
    ("by default 12 cycles of 3 s slices", [], (12, 3)),
    ("0 cycles turn the paired slices off", ["--paired-slices", "0"], (0, 3)),
    ("both can be set", ["--paired-slices", "4", "--slice-seconds", "1"], (4, 1)),
]


@pytest.mark.parametrize(("argv", "expected"), [c[1:] for c in OPTIONS], ids=[c[0] for c in OPTIONS])
def test_the_paired_options(argv, expected):
    args = parse_args(argv)
    assert (args.paired_slices, args.slice_seconds) == expected


@pytest.mark.parametrize(
    "argv", [["--paired-slices", "-1"], ["--slice-seconds", "0"]], ids=["negative cycles", "slices of no seconds"]
)
def test_impossible_paired_options_stop_the_start(argv):
    with pytest.raises(SystemExit):
        parse_args(argv)


def paired_run() -> PairedRun:
    return PairedRun(
        slices({"ours": 900, "static": 1000}, {"static": 1000, "ours": 940}),
        {"ours": ["ValueError: boom"], "static": []},
        0.05,
        0.01,
        0.12,
    )


def test_the_report_section_is_left_out_when_the_paired_slices_did_not_run():
    assert paired_section(None, parse_args([])) == []


def test_the_log_problems_of_the_paired_servers_are_listed_with_the_rounds_ones():
    lines = log_problem_lines([measurement("ours", 1, 900, ["ValueError: boom"])], paired_run())
    assert "| ours | 2 | `ValueError: boom` |" in lines


def write_paired_report(report: Path) -> None:
    """The report of two servers' paired slices, written to `report` (its review and script beside it)."""
    here = report.parent
    (here / "review.json").write_text("{}")
    (here / "post.lua").write_text(f'local file = assert(io.open("{here / "review.json"}", "rb"))\n')
    setup = Setup(here, here, here / "review.json", b"{}", here / "post.lua", 2, 8, None)
    args = parse_args(["--servers", "ours,static", "--paired-slices", "2", "--slice-seconds", "1"])
    write_report(report, setup, args, [], "TABLE", ["- VERDICT"], 0.1, [], paired_run())


def test_a_report_of_its_own_opens_with_the_benchmarks_heading(tmp_path: Path):
    report = tmp_path / "2026-11-28-webhook.md"
    write_paired_report(report)
    assert report.read_text().startswith(f"{REPORT_START}\n# Webhook benchmark\n")
    assert "\n## Paired slices\n" in report.read_text()


def test_the_report_gets_the_paired_section_and_keeps_the_current_state_before_and_what_follows(tmp_path: Path):
    report = tmp_path / "REPORT.md"
    state = "# Where it stands\n\n| figure | today |\n\n# History\n\n"
    report.write_text(
        f"{state}{REPORT_START}\n## Webhook benchmark\n\nold figures\n\n{REPORT_END}\n\n## Another benchmark\n\nkept\n"
    )
    write_paired_report(report)
    before, rest = report.read_text().split(REPORT_START)
    ours, kept = rest.split(REPORT_END)
    assert before == state
    assert "old figures" not in ours
    assert "--paired-slices 2 --slice-seconds 1`" in ours
    assert ours.startswith("\n## Webhook benchmark\n")  # a heading level below the report's "# History"
    assert "\n### Paired slices\n" in ours and "| ours/static | 0.92x | 0.90-0.94x | 2 |" in ours
    assert "`wrk -t2 -c16 -d1s --latency -s post.lua 'https://127.0.0.1:$PORT/mutate'`" in ours
    assert kept == "\n\n## Another benchmark\n\nkept\n"
