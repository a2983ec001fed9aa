"""The paired slices: every server running at once, each cycle giving each one a short wrk slice in turn.

Consecutive 10 s runs of one server after the other pick up this VM's drift (its core speed
swings by +-40 % from second to second), so the ratio of two servers' medians wanders between
sessions. Here every server runs at once, idle but for its own short wrk slice, and each cycle
loads each server in turn: the ratio within a cycle compares servers under the same conditions.
The order is reversed every other cycle; the throughput verdicts use the median of the per-cycle ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
from collections.abc import Collection
from dataclasses import dataclass

from bench.cpu_calibration import cpu_calibration
from bench.load_tools import LoadResult
from bench.machine_load import OtherLoad, settle
from bench.server_logs import log_problems, log_size
from bench.webhook_rounds import ratios_within, run_wrk, warm_up
from bench.webhook_servers import SERVERS, Setup, check_mutates

PAIRED_RATIOS = (("ours", "static"), ("ours", "kopf"), ("ours-gthread", "static-gthread"), ("ours", "ours-plain"))


@dataclass(frozen=True)
class Slice:
    """One short wrk run against one server, in one cycle of the paired measurement (cycles count from 1)."""

    cycle: int
    server: str
    peak: LoadResult


@dataclass(frozen=True)
class PairedRatio:
    """top/bottom peak throughput from the slices of each cycle, in cycle order (at least one)."""

    top: str
    bottom: str
    ratios: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.ratios)

    @property
    def low(self) -> float:
        return min(self.ratios)

    @property
    def high(self) -> float:
        return max(self.ratios)


@dataclass(frozen=True)
class PairedRun:
    """The paired measurement: its slices in the order run, and what the servers and the machine did meanwhile."""

    slices: list[Slice]
    log_lines: dict[str, list[str]]  # server -> Traceback/ERROR/CRITICAL lines logged while paired
    other_cores: float  # CPU of other processes from the servers' start to their stop, in cores
    quiet_before: float
    calibration: float


def ratio_pairs(servers: Collection[str]) -> list[tuple[str, str]]:
    """The (top, bottom) ratios of PAIRED_RATIOS whose two servers are both among `servers`."""
    return [(top, bottom) for top, bottom in PAIRED_RATIOS if top in servers and bottom in servers]


def slice_order(names: list[str], cycle: int) -> list[str]:
    """The servers' order in `cycle` (from 1): as given in odd cycles, reversed in even ones.

    Over two cycles every server's mean position is the same, so a steady drift of the machine
    within a cycle favours none of them.
    """
    return list(names) if cycle % 2 else list(reversed(names))


def cycle_ratios(slices: list[Slice], top: str, bottom: str) -> list[float]:
    """top/bottom req/s within each cycle, from that cycle's slices, in cycle order."""
    return ratios_within({(s.cycle, s.server): s.peak.rps for s in slices}, top, bottom)


def paired_ratios(slices: list[Slice]) -> list[PairedRatio]:
    """Each ratio of PAIRED_RATIOS whose servers both ran slices, from the per-cycle ratios."""
    found = [
        PairedRatio(top, bottom, cycle_ratios(slices, top, bottom))
        for top, bottom in ratio_pairs({s.server for s in slices})
    ]
    return [ratio for ratio in found if ratio.ratios]


def cycle_line(slices: list[Slice], cycle: int, cycles: int) -> str:
    """Progress line of one cycle: each server's req/s in the order they ran, and the cycle's ratios."""
    this = [s for s in slices if s.cycle == cycle]
    rates = ", ".join(f"{s.server} {s.peak.rps:,.0f}" for s in this)
    ratios = ", ".join(f"{r.top}/{r.bottom} {r.median:.2f}x" for r in paired_ratios(this))
    return f"paired cycle {cycle}/{cycles}: {rates} req/s" + (f" | {ratios}" if ratios else "")


def run_slices(setup: Setup, urls: dict[str, str], args: argparse.Namespace) -> list[Slice]:
    """--paired-slices cycles of one --slice-seconds wrk run per server, the order alternating per cycle."""
    slices: list[Slice] = []
    for cycle in range(1, args.paired_slices + 1):
        slices += [
            Slice(cycle, name, run_wrk(setup, urls[name], args.slice_seconds, args))
            for name in slice_order(list(urls), cycle)
        ]
        print(cycle_line(slices, cycle, args.paired_slices), flush=True)
    return slices


def measure_paired(setup: Setup, names: list[str], args: argparse.Namespace) -> PairedRun:
    """Start every server at once, check and warm up each, run the cycles of slices, check each again, stop them."""
    offsets = {name: log_size(setup.work / f"{name}.log") for name in names}
    quiet_before = settle(args.quiet_wait)
    calibration = cpu_calibration()
    other = OtherLoad()
    with contextlib.ExitStack() as servers:
        urls = {name: servers.enter_context(SERVERS[name](setup)) for name in names}
        for url in urls.values():
            check_mutates(url, setup.body)
            warm_up(setup, url, args)
        slices = run_slices(setup, urls, args)
        for url in urls.values():
            check_mutates(url, setup.body)
    logged = {name: log_problems(setup.work / f"{name}.log", offsets[name]) for name in names}
    return PairedRun(slices, logged, other.cores(), quiet_before, calibration)
