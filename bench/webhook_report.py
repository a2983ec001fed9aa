"""The webhook benchmark's report (today's bench/runs/DATE-webhook.md, or --report's file), between
its markers: rewritten by each run.

What comes before the start marker and what was appended after the end marker are kept; under
something before it, the report's headings go one level down.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
from datetime import UTC, datetime
from pathlib import Path

from bench.load_tools import hey_command, wrk_command
from bench.machine_load import QUIET_CORES
from bench.paired_slices import PairedRun
from bench.stuck_client_reviews import STUCK, STUCK_REVIEW_TIMEOUT, StuckResult, stuck_lines, stuck_verdicts
from bench.webhook_environment import environment_lines
from bench.webhook_rounds import Measurement
from bench.webhook_servers import DEFAULT_SERVERS, KOPF_HANDLER_ID, Setup
from bench.webhook_tables import cycles_table, paired_table, rounds_table


def paired_section(paired: PairedRun | None, args: argparse.Namespace) -> list[str]:
    """The report's section on the paired slices (nothing when they did not run)."""
    if paired is None:
        return []
    return [
        "## Paired slices",
        "",
        f"After the rounds, every server ran at once (each checked to answer the review with the expected patch "
        f"and warmed up, and checked again at the end); then {args.paired_slices} cycles, in each of which every "
        f"server got one {args.slice_seconds} s wrk slice (same settings as the peak run) while the others waited "
        "idle on their sockets, in the order given in odd cycles and reversed in even ones. A cycle's ratio "
        "compares its own slices, so the servers see the same machine; the throughput verdicts use the median "
        "of these per-cycle ratios.",
        "",
        paired_table(paired.slices),
        "",
        cycles_table(paired.slices),
        "",
        f"`other CPU` before / during: {paired.quiet_before:.2f} / {paired.other_cores:.2f} cores; `core speed` "
        f"just before: {paired.calibration:.2f} s; log errors: "
        + ", ".join(f"{name} {len(lines)}" for name, lines in paired.log_lines.items())
        + ".",
        "",
    ]


def log_problem_lines(runs: list[Measurement], paired: PairedRun | None = None) -> list[str]:
    """A report section listing each distinct server log problem and how often each server had it."""
    counts: dict[tuple[str, str], int] = {}
    logged = [(r.server, r.log_lines) for r in runs] + list(paired.log_lines.items() if paired else [])
    for server, problems in logged:
        for problem in problems:
            counts[server, problem] = counts.get((server, problem), 0) + 1
    if not counts:
        return []
    lines = [
        "## Server log problems",
        "",
        "| server | times | problem (traceback's last line or ERROR line) |",
        "|---|---:|---|",
    ]
    for (server, problem), times in sorted(counts.items(), key=lambda item: (item[0][0], -item[1])):
        lines.append(f"| {server} | {times} | `{problem[:300].replace('|', '/')}` |")
    return [*lines, ""]


def command_lines(setup: Setup, args: argparse.Namespace, paired: bool = False) -> list[str]:
    sample_url = "https://127.0.0.1:$PORT/mutate"
    per_worker = args.rate // args.rate_workers
    lua = setup.lua_path.read_text().replace(str(setup.body_path), "review.json")
    warmup = wrk_command(sample_url, Path("post.lua"), args.warmup, args.wrk_threads, args.connections)
    peak = wrk_command(sample_url, Path("post.lua"), args.duration, args.wrk_threads, args.connections)
    fixed = hey_command(sample_url, Path("review.json"), args.duration, args.rate_workers, per_worker)
    lines = [
        "Servers (one at a time, started fresh for each server and round; `$CERTS` holds ca.crt/tls.crt/tls.key):",
        "",
    ]
    lines += [f"- {name}: `{command}`" for name, command in setup.commands.items()]
    lines += [
        "",
        f"Load, per server and round, in this order (kopf's URL is `https://127.0.0.1:$PORT/{KOPF_HANDLER_ID}`):",
        "",
        f"- warm-up (not recorded): `{shlex.join(warmup)}`" if args.warmup > 0 else "- no warm-up",
        f"- peak throughput: `{shlex.join(peak)}`",
        f"- fixed rate ({args.rate_workers} x {per_worker} = {args.rate_workers * per_worker} req/s): "
        f"`{shlex.join(fixed)}`",
        "",
    ]
    if paired:
        one_slice = wrk_command(sample_url, Path("post.lua"), args.slice_seconds, args.wrk_threads, args.connections)
        lines += [
            "Paired slices, after the rounds: every server started at once (the same commands), each given the "
            f"warm-up above, then {args.paired_slices} cycles of one slice per server, the order alternating: "
            f"`{shlex.join(one_slice)}`",
            "",
        ]
    lines += [
        f"`review.json` is the {len(setup.body)}-byte pod AdmissionReview from bench/review.py "
        "(admission.k8s.io/v1 CREATE, no tolerations, so every request is mutated); `post.lua`:",
        "",
        "```lua",
        lua.rstrip(),
        "```",
    ]
    return lines


REPORT_START = "<!-- bench/webhook_bench.py's report, rewritten by each run -->"
REPORT_END = "<!-- end of bench/webhook_bench.py's report; other benchmarks append below -->"


def current_state(path: Path) -> str:
    """What comes before this benchmark's part (kept as it is)."""
    if not path.exists():
        return ""
    text = path.read_text()
    return text.split(REPORT_START, 1)[0] if REPORT_START in text else ""


def other_sections(path: Path) -> str:
    """What other benchmarks appended to the report after this one's part (kept when it is rewritten)."""
    if not path.exists():
        return ""
    text = path.read_text()
    if REPORT_END in text:
        return text.split(REPORT_END, 1)[1].lstrip("\n")
    ours = (
        "## Paired slices",
        "## Every round",
        "## Server log problems",
        "## Environment",
        "## Exact commands",
        "## Stuck clients",
    )
    for match in re.finditer(r"^## .*$", text, re.MULTILINE):  # a report written before the end marker existed
        if not match.group(0).startswith(ours):
            return text[match.start() :]
    return ""


def write_report(
    path: Path,
    setup: Setup,
    args: argparse.Namespace,
    runs: list[Measurement],
    table: str,
    verdicts: list[str],
    calibration: float,
    stuck: list[StuckResult],
    paired: PairedRun | None = None,
) -> None:
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    before, kept = current_state(path), other_sections(path)
    stuck_part = (
        []
        if not stuck
        else [
            "## Stuck clients",
            "",
            "Each of our webhooks, started fresh with its defaults (--request-timeout 10), while 100 stuck "
            f"connections are open ({', '.join(f'{n} {kind}' for kind, n in STUCK.items())}; "
            "hack/stuck_clients.py: `tcp` never sends a TLS ClientHello, `tls` completes the handshake and "
            "sends nothing, `headers` sends part of the request headers, `body` complete headers and part of "
            "the body): "
            f"up to {args.stuck_reviews} reviews, one after another, each on a fresh TLS connection (handshake "
            f"included), each failed if not answered with the patch within {STUCK_REVIEW_TIMEOUT:g} s; then the time "
            "from each stuck connection's connect until the server closed it. `refused`: a TLS connection whose "
            "handshake the server never completed (opened as plain TCP once the first one timed out).",
            "",
            *stuck_lines(stuck),
            "",
            *stuck_verdicts(stuck, args),
            "",
            "`core speed` before the stuck-client runs: "
            + ", ".join(f"{r.server} {r.calibration:.2f} s" for r in stuck),
            "",
        ]
    )
    text = "\n".join(
        [
            "# Webhook benchmark",
            "",
            f"Generated by `bench/webhook_bench.py --rounds {args.rounds} --duration {args.duration}"
            f"{'' if args.server_names == list(DEFAULT_SERVERS) else ' --servers ' + ','.join(args.server_names)}"
            f"{f' --paired-slices {args.paired_slices} --slice-seconds {args.slice_seconds}' if paired else ''}` "
            f"on {started}. "
            f"Medians across {args.rounds} rounds; in each round the servers ran one after another (order rotated "
            "per round), each started fresh and checked to answer the review with the expected patch before "
            "and after its load runs. The load generator and the server share the machine's cores, so absolute "
            "figures are pessimistic; compare rows.",
            "",
            table,
            "",
            "Targets (for ours):",
            "",
            *verdicts,
            *stuck_verdicts(stuck, args),
            "",
            "Latency is per request, from the load generator. wrk runs 16 closed-loop connections as fast as the "
            "server answers (no coordinated-omission correction); hey paces each of its workers, so an achieved "
            "rate below the asked one means the server could not keep up. hey prints latencies to 0.1 ms.",
            "",
            *paired_section(paired, args),
            "## Every round",
            "",
            rounds_table(runs),
            "",
            "`log errors` counts the tracebacks and ERROR/CRITICAL lines the server logged during its runs "
            "(listed under Server log problems). `other CPU` is "
            "the CPU (in cores, of the machine's {cpus}) that processes this benchmark did not start used in the "
            "last second before the server started and, averaged, while it was measured (from /proc/stat minus this "
            "run's own processes; it includes the idle local cluster). Before each server the benchmark waits up to "
            f"{args.quiet_wait:g}s for it to drop below {QUIET_CORES} cores. `core speed` is the calibration loop "
            "(see Environment) timed just before the server started: this VM's core speed varies over time, and "
            "a slower loop means slower figures.".replace("{cpus}", str(os.cpu_count())),
            "",
            *log_problem_lines(runs, paired),
            "## Environment",
            "",
            *environment_lines(args, calibration),
            "",
            *stuck_part,
            "## Exact commands",
            "",
            *command_lines(setup, args, paired is not None),
            "",
            REPORT_END,
            "",
        ]
    )
    if before:  # under what comes before it (a "# History"): every heading one level down
        text = re.sub(r"^(#+) ", r"#\1 ", text, flags=re.MULTILINE)
    path.write_text(before + REPORT_START + "\n" + text + ("\n" + kept if kept else ""))
