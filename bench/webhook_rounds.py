"""The rounds of the webhook benchmark: one server at a time, loaded by wrk then hey; medians across rounds.

Each measurement starts its server fresh, checks that it answers the review with the expected patch,
warms it up, runs the load, and checks it again before stopping it.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass

from bench.cpu_calibration import cpu_calibration
from bench.load_tools import LoadResult, hey_command, parse_hey, parse_wrk, run_tool, wrk_command
from bench.machine_load import OtherLoad, settle
from bench.server_logs import log_problems, log_size
from bench.webhook_servers import SERVERS, Setup, check_mutates


@dataclass(frozen=True)
class Measurement:
    """One server in one round."""

    server: str
    round: int
    peak: LoadResult
    fixed: LoadResult
    log_lines: list[str]  # Traceback/ERROR/CRITICAL lines from the server's log
    other_cores: float  # CPU of other processes during the run, in cores
    quiet_before: float  # the same, in the last second before the server started
    calibration: float  # seconds for the calibration loop just before the server started


def warm_up(setup: Setup, url: str, args: argparse.Namespace) -> None:
    """--warmup seconds of unrecorded wrk load, with the measurement's settings."""
    if args.warmup > 0:
        run_tool(wrk_command(url, setup.lua_path, args.warmup, args.wrk_threads, args.connections), args.warmup + 60)


def run_wrk(setup: Setup, url: str, seconds: int, args: argparse.Namespace) -> LoadResult:
    """wrk at full speed for `seconds` with --wrk-threads, --connections and the review body."""
    command = wrk_command(url, setup.lua_path, seconds, args.wrk_threads, args.connections)
    return parse_wrk(run_tool(command, seconds + 60), command)


def measure(setup: Setup, name: str, round_no: int, args: argparse.Namespace) -> Measurement:
    """Start one server, check its mutation, warm it up, run wrk then hey, check it again, stop it."""
    log_path = setup.work / f"{name}.log"
    offset = log_size(log_path)
    per_worker = args.rate // args.rate_workers
    quiet_before = settle(args.quiet_wait)
    calibration = cpu_calibration()
    other = OtherLoad()
    with SERVERS[name](setup) as url:
        check_mutates(url, setup.body)
        warm_up(setup, url, args)
        peak = run_wrk(setup, url, args.duration, args)
        command = hey_command(url, setup.body_path, args.duration, args.rate_workers, per_worker)
        fixed = parse_hey(run_tool(command, args.duration + 60), command)
        check_mutates(url, setup.body)
    return Measurement(
        name, round_no, peak, fixed, log_problems(log_path, offset), other.cores(), quiet_before, calibration
    )


@dataclass(frozen=True)
class Summary:
    """Medians across rounds for one server, and the problem counts summed over them."""

    server: str
    peak_rps: float
    peak_p50: float
    peak_p99: float
    fixed_p50: float
    fixed_p99: float
    fixed_rps: float
    bad_responses: int
    errors: int
    log_problems: int
    other_cores: float
    rounds: int


def summarise(name: str, runs: list[Measurement]) -> Summary:
    def med(values: list[float]) -> float:
        return statistics.median(values)

    return Summary(
        server=name,
        peak_rps=med([r.peak.rps for r in runs]),
        peak_p50=med([r.peak.p50_ms for r in runs]),
        peak_p99=med([r.peak.p99_ms for r in runs]),
        fixed_p50=med([r.fixed.p50_ms for r in runs]),
        fixed_p99=med([r.fixed.p99_ms for r in runs]),
        fixed_rps=med([r.fixed.rps for r in runs]),
        bad_responses=sum(r.peak.bad_responses + r.fixed.bad_responses for r in runs),
        errors=sum(r.peak.errors + r.fixed.errors for r in runs),
        log_problems=sum(len(r.log_lines) for r in runs),
        other_cores=med([r.other_cores for r in runs]),
        rounds=len(runs),
    )


def ratios_within(values: dict[tuple[int, str], float], top: str, bottom: str) -> list[float]:
    """top/bottom within each group (a round, or a cycle of paired slices), keyed (group, server), in group order.

    A group in which either server has no figure is left out.
    """
    groups = sorted({group for group, _ in values})
    return [values[g, top] / values[g, bottom] for g in groups if (g, top) in values and (g, bottom) in values]
