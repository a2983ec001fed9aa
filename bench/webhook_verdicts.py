"""The webhook benchmark's targets and its PASS/MISS lines: ratios of ours to the static app and to kopf.

The stuck-client verdicts are in bench/stuck_client_reviews.py.
"""

from __future__ import annotations

import argparse
import os

from bench.machine_load import QUIET_CORES
from bench.paired_slices import PairedRatio
from bench.webhook_rounds import Measurement, Summary, ratios_within

TARGET_P99_FACTOR = 1.2  # ours' p99 at the fixed rate at most this times the static app's
TARGET_RATE = 500
TARGET_STATIC_SHARE = 0.90
TARGET_KOPF_FACTOR = 3.8
RATE_TOLERANCE = 0.95  # the fixed-rate run counts only if it reached 95% of the asked rate


def per_round_ratios(runs: list[Measurement], top: str, bottom: str, figure: str = "peak_rps") -> list[float]:
    """top/bottom peak throughput (or fixed-rate p99) within each round, to show how much the ratio of medians moves."""

    def value(r: Measurement) -> float:
        return r.peak.rps if figure == "peak_rps" else r.fixed.p99_ms

    return ratios_within({(r.round, r.server): value(r) for r in runs}, top, bottom)


def mark(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def throughput_verdict(
    top: Summary, bottom: Summary, runs: list[Measurement], target: float, target_text: str, paired: PairedRatio | None
) -> str:
    """top/bottom peak throughput against `target`: from the paired slices' median when given, else the rounds'.

    The rounds' ratio of medians and per-round ratios are shown either way.
    """
    share = top.peak_rps / bottom.peak_rps
    each = ", ".join(f"{ratio:.2f}x" for ratio in per_round_ratios(runs, top.server, bottom.server))
    rounds = f"{share:.2f}x ({top.peak_rps:,.0f} / {bottom.peak_rps:,.0f} req/s; per round {each})"
    name = f"{top.server}/{bottom.server} throughput"
    if paired is None:
        return f"- {name}: {rounds} -- target >= {target_text}: {mark(share >= target)}"
    return (
        f"- {name}, from the paired slices: {paired.median:.2f}x (median of {len(paired.ratios)} per-cycle "
        f"ratios, {paired.low:.2f}-{paired.high:.2f}x); rounds: {rounds} -- target >= {target_text}, "
        f"on the paired median: {mark(paired.median >= target)}"
    )


def verdict_lines(
    summaries: dict[str, Summary],
    runs: list[Measurement],
    args: argparse.Namespace,
    paired: list[PairedRatio] | None = None,
) -> list[str]:
    """The ratios (of medians, with the per-round ratios; throughput from the paired slices if they ran) and
    PASS/MISS against each target."""
    ours = summaries.get("ours")
    static = summaries.get("static")
    kopf = summaries.get("kopf")
    by_pair = {(r.top, r.bottom): r for r in paired or []}

    lines = []
    if ours and static:
        rate_ok = all(
            s.fixed_rps >= RATE_TOLERANCE * args.rate and s.bad_responses == 0 and s.errors == 0 for s in (ours, static)
        )
        factor = ours.fixed_p99 / static.fixed_p99
        each = ", ".join(f"{ratio:.2f}x" for ratio in per_round_ratios(runs, "ours", "static", "fixed_p99"))
        lines.append(
            f"- ours/static p99 at {args.rate} req/s: {factor:.2f}x ({ours.fixed_p99:.2f} / {static.fixed_p99:.2f} ms; "
            f"per round {each}; achieved {ours.fixed_rps:.1f} / {static.fixed_rps:.1f} req/s, "
            f"{ours.bad_responses} non-2xx, {ours.errors} errors) -- target <= {TARGET_P99_FACTOR:g}x at "
            f"{TARGET_RATE} req/s: {mark(factor <= TARGET_P99_FACTOR and rate_ok)}"
        )
        lines.append(
            throughput_verdict(
                ours, static, runs, TARGET_STATIC_SHARE, f"{TARGET_STATIC_SHARE:.2f}x", by_pair.get(("ours", "static"))
            )
        )
    if ours and kopf:
        lines.append(
            throughput_verdict(
                ours, kopf, runs, TARGET_KOPF_FACTOR, f"{TARGET_KOPF_FACTOR:g}x", by_pair.get(("ours", "kopf"))
            )
        )
    for top, bottom in (("ours-gthread", "static-gthread"), ("ours", "ours-gthread"), ("ours-gthread", "kopf")):
        if top in summaries and bottom in summaries:
            a, b = summaries[top], summaries[bottom]
            lines.append(
                f"- (choosing the worker class) {top}/{bottom}: throughput {a.peak_rps / b.peak_rps:.2f}x "
                f"({a.peak_rps:,.0f} / {b.peak_rps:,.0f} req/s), p99 at {args.rate} req/s "
                f"{a.fixed_p99 / b.fixed_p99:.2f}x ({a.fixed_p99:.2f} / {b.fixed_p99:.2f} ms)"
            )
    busiest = max((s.other_cores for s in summaries.values()), default=0.0)
    if busiest >= QUIET_CORES:
        lines.append(
            f"- WARNING: processes outside this benchmark used up to {busiest:.2f} cores (median per server) "
            f"of the machine's {os.cpu_count()} while it ran; all figures are depressed and noisy"
        )
    if args.rate != TARGET_RATE:
        lines.append(f"- note: the fixed-rate run used {args.rate} req/s, not the target's {TARGET_RATE} req/s")
    return lines
