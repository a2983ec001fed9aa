"""The webhook benchmark's markdown tables: medians per server, every round, the paired slices and their cycles."""

from __future__ import annotations

import argparse
import statistics

from bench.paired_slices import Slice, paired_ratios, ratio_pairs
from bench.webhook_rounds import Measurement, Summary


def server_labels(workers: int, threads: int) -> dict[str, str]:
    return {
        "ours": f"taintkeeper webhook (gunicorn gevent, {workers} workers)",
        "static": f"static Flask app (same gunicorn, gevent, {workers} workers)",
        "kopf": "kopf admission webhook (1 asyncio process)",
        "ours-gthread": f"taintkeeper webhook on gthread ({workers}x{threads})",
        "static-gthread": f"static Flask app on gthread ({workers}x{threads})",
        "ours-plain": f"taintkeeper webhook, fast paths off ({workers} workers)",
    }


def results_table(summaries: dict[str, Summary], args: argparse.Namespace) -> str:
    labels = server_labels(args.workers, args.threads)
    rate = args.rate
    lines = [
        f"| server | peak req/s | peak p50 | peak p99 | @{rate} req/s p50 | @{rate} req/s p99 | achieved rate "
        "| non-2xx / errors | other CPU |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in summaries.items():
        lines.append(
            f"| {labels[name]} | {s.peak_rps:,.0f} | {s.peak_p50:.2f} ms | {s.peak_p99:.2f} ms | "
            f"{s.fixed_p50:.2f} ms | {s.fixed_p99:.2f} ms | {s.fixed_rps:.1f} req/s | "
            f"{s.bad_responses} / {s.errors} | {s.other_cores:.2f} cores |"
        )
    return "\n".join(lines)


def rounds_table(runs: list[Measurement]) -> str:
    lines = [
        "| round | server | peak req/s | peak p50 | peak p99 | fixed p50 | fixed p99 | achieved | "
        "requests (peak / fixed) | non-2xx | errors | log errors | other CPU before / during | core speed |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(
            f"| {r.round} | {r.server} | {r.peak.rps:,.0f} | {r.peak.p50_ms:.2f} ms | {r.peak.p99_ms:.2f} ms | "
            f"{r.fixed.p50_ms:.2f} ms | {r.fixed.p99_ms:.2f} ms | {r.fixed.rps:.1f} | "
            f"{r.peak.requests:,} / {r.fixed.requests:,} | {r.peak.bad_responses + r.fixed.bad_responses} | "
            f"{r.peak.errors + r.fixed.errors} | {len(r.log_lines)} | {r.quiet_before:.2f} / {r.other_cores:.2f} "
            f"| {r.calibration:.2f} s |"
        )
    return "\n".join(lines)


def paired_table(slices: list[Slice]) -> str:
    """Per server, its slices' median req/s and range; per ratio, the median of the per-cycle ratios and range."""
    lines = [
        "| server | median req/s over slices | min-max req/s | slices | non-2xx / errors |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in dict.fromkeys(s.server for s in slices):  # in the order of the first cycle
        loads = [s.peak for s in slices if s.server == name]
        rates = [load.rps for load in loads]
        lines.append(
            f"| {name} | {statistics.median(rates):,.0f} | {min(rates):,.0f}-{max(rates):,.0f} | "
            f"{len(loads)} | {sum(load.bad_responses for load in loads)} / "
            f"{sum(load.errors for load in loads)} |"
        )
    lines += ["", "| ratio | median of per-cycle ratios | min-max | cycles |", "|---|---:|---:|---:|"]
    lines += [
        f"| {r.top}/{r.bottom} | {r.median:.2f}x | {r.low:.2f}-{r.high:.2f}x | {len(r.ratios)} |"
        for r in paired_ratios(slices)
    ]
    return "\n".join(lines)


def cycles_table(slices: list[Slice]) -> str:
    """One row per cycle: the order the servers ran in, each one's req/s, and the cycle's ratios."""
    servers = list(dict.fromkeys(s.server for s in slices))
    pairs = ratio_pairs(servers)
    lines = [
        "| cycle | order | "
        + " | ".join(f"{name} req/s" for name in servers)
        + "".join(f" | {top}/{bottom}" for top, bottom in pairs)
        + " |",
        "|---:|---|" + "---:|" * (len(servers) + len(pairs)),
    ]
    for cycle in sorted({s.cycle for s in slices}):
        this = [s for s in slices if s.cycle == cycle]
        rates = {s.server: f"{s.peak.rps:,.0f}" for s in this}
        ratios = {(r.top, r.bottom): f"{r.median:.2f}x" for r in paired_ratios(this)}  # one ratio per pair here
        cells = [*(rates.get(name, "-") for name in servers), *(ratios.get(pair, "-") for pair in pairs)]
        lines.append(f"| {cycle} | {', '.join(s.server for s in this)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
