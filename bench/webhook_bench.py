"""Throughput and latency of taintkeeper's webhook next to its stack's ceiling and to kopf, and beside stuck clients.

Run from the repository root: `.venv/bin/python bench/webhook_bench.py [--rounds 3] [--duration 10]`
(or `make bench`). Three servers answer the same pod AdmissionReview over TLS, one at a time,
because load generator and server share the machine's cores:

- ours: `python -m webhook` with its defaults (gunicorn, gevent worker class, ECDSA P-256 certificate);
- static: a Flask app returning one precomputed reply, on the SAME gunicorn config and settings,
  so it is the ceiling of the serving stack;
- kopf: `kopf run --standalone` with one mutating handler doing the same mutation (one asyncio
  process; it needs a reachable cluster, so a local kube-apiserver is started for it);
- ours-gthread, static-gthread (only when asked for with --servers): the same two on gunicorn's
  gthread worker class (--worker-class gthread), the setup the webhook had before;
- ours-plain (only when asked for with --servers): ours with `--fast-paths false`
  (webhook/fast_paths.py), for the paired ratio ours/ours-plain.

Each round alternates the servers; every server must answer the review with the expected
patch before it is loaded. Per server and round: a short warm-up, `wrk` at full speed (peak
req/s, p50, p99), then `hey` at a fixed 500 req/s (p50, p99, achieved rate, status codes).
After the rounds, each of our webhooks is started once more and held by 100 stuck connections
(hack/stuck_clients.py: 50 plain TCP that never send a TLS ClientHello, 50 TLS that never send a
request or only part of one) while reviews on fresh connections are timed; then the time until
the server closed each stuck connection is taken. Between the two (--paired-slices, on by default),
every server runs at once and each cycle gives each one a short wrk slice in turn, the order
reversed every other cycle, so the throughput ratios compare servers under the same machine
conditions; the throughput verdicts use the median of those per-cycle ratios. Medians across rounds
go to stdout and, with the environment and exact commands, to today's bench/runs/DATE-webhook.md
(--report).

This file parses the flags and runs the parts, each in its own file beside it: webhook_servers.py
(starting and checking the servers, the local cluster), load_tools.py (wrk and hey, and parsing their
output), webhook_rounds.py, paired_slices.py and stuck_client_reviews.py (the three measurements),
machine_load.py and cpu_calibration.py (how busy and how fast the machine is), server_logs.py,
bench_error.py, and webhook_verdicts.py, webhook_tables.py, webhook_environment.py and webhook_report.py
(what is printed and written to the run's report).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script, bench/ and hack/ are not installed packages
    sys.path.insert(0, str(ROOT))

from bench.bench_error import BenchError  # noqa: E402
from bench.cpu_calibration import CALIBRATION_LOOPS, cpu_calibration  # noqa: E402
from bench.load_tools import wrk_lua  # noqa: E402
from bench.paired_slices import measure_paired, paired_ratios, ratio_pairs  # noqa: E402
from bench.review import review_bytes  # noqa: E402
from bench.run_reports import run_report_path  # noqa: E402
from bench.stuck_client_reviews import StuckResult, measure_stuck, stuck_lines, stuck_verdicts  # noqa: E402
from bench.webhook_report import write_report  # noqa: E402
from bench.webhook_rounds import Measurement, measure, summarise  # noqa: E402
from bench.webhook_servers import DEFAULT_SERVERS, SERVER_NAMES, Setup, local_cluster  # noqa: E402
from bench.webhook_tables import paired_table, results_table  # noqa: E402
from bench.webhook_verdicts import TARGET_RATE, verdict_lines  # noqa: E402
from hack.servers import make_certs  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/webhook_bench.py", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds; medians are reported (%(default)s)")
    parser.add_argument("--duration", type=int, default=10, help="seconds per load run (%(default)s)")
    parser.add_argument("--warmup", type=int, default=2, help="seconds of unrecorded wrk load first (%(default)s)")
    parser.add_argument(
        "--servers",
        default=",".join(DEFAULT_SERVERS),
        help=f"comma-separated subset of {','.join(SERVER_NAMES)} (%(default)s)",
    )
    parser.add_argument(
        "--stuck-reviews",
        type=int,
        default=200,
        help="reviews timed beside 100 stuck connections, per webhook; 0 skips that part (%(default)s)",
    )
    parser.add_argument(
        "--stuck-close-wait",
        type=float,
        default=30.0,
        help="seconds to wait for the server to close the stuck connections (%(default)s)",
    )
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers for ours and static (%(default)s)")
    parser.add_argument("--threads", type=int, default=8, help="gthread threads per worker (%(default)s)")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections (%(default)s)")
    parser.add_argument("--wrk-threads", type=int, default=2, help="wrk threads (%(default)s)")
    parser.add_argument("--rate", type=int, default=TARGET_RATE, help="fixed rate for hey, req/s (%(default)s)")
    parser.add_argument("--rate-workers", type=int, default=10, help="hey workers sharing the rate (%(default)s)")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=120,
        help="seconds to wait for other processes to go quiet before each server (%(default)s)",
    )
    parser.add_argument(
        "--paired-slices",
        type=int,
        default=12,
        help="after the rounds, cycles of short wrk slices with every server running at once, the "
        "order alternating; the throughput verdicts come from them; 0 skips them (%(default)s)",
    )
    parser.add_argument("--slice-seconds", type=int, default=3, help="seconds per paired slice (%(default)s)")
    parser.add_argument("--kubeconfig", type=Path, help="use this cluster for kopf instead of starting one")
    parser.add_argument(
        "--report", type=Path, default=run_report_path("webhook"), help="where to write the report (%(default)s)"
    )
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.servers.split(",") if name.strip()]
    unknown = sorted(set(names) - set(SERVER_NAMES))
    if unknown or not names:
        parser.error(f"--servers takes names from {','.join(SERVER_NAMES)}, got {args.servers!r}")
    args.server_names = [name for name in SERVER_NAMES if name in names]
    for option in ("stuck_reviews", "paired_slices"):
        if getattr(args, option) < 0:
            parser.error(f"--{option.replace('_', '-')} must be >= 0")
    for option in (
        "rounds",
        "duration",
        "slice_seconds",
        "workers",
        "threads",
        "connections",
        "wrk_threads",
        "rate",
        "rate_workers",
    ):
        if getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')} must be >= 1")
    if args.rate % args.rate_workers:
        parser.error("--rate must be a multiple of --rate-workers (hey's -q is per worker)")
    return args


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through the finally blocks that stop the servers


def run(args: argparse.Namespace, work: Path) -> int:
    missing = [tool for tool in ("wrk", "hey") if shutil.which(tool) is None]
    if missing:  # installed from Debian by the project's own installer, as the tests' tools are
        print(f"installing the load tools: {' '.join(missing)} (hack/local-cluster.sh deps --bench)", flush=True)
        subprocess.run(["bash", str(ROOT / "hack" / "local-cluster.sh"), "deps", "--bench"], check=False)
        missing = [tool for tool in ("wrk", "hey") if shutil.which(tool) is None]
    if missing:
        raise BenchError(f"missing load tools after `hack/local-cluster.sh deps --bench`: {' '.join(missing)}")
    calibration = min(cpu_calibration() for _ in range(3))
    print(f"{os.cpu_count()} CPUs; {CALIBRATION_LOOPS:,}-iteration Python loop: {calibration:.2f} s", flush=True)
    cert_dir = work / "certs"
    cert_dir.mkdir()
    make_certs(cert_dir)
    body = review_bytes()
    body_path = work / "review.json"
    body_path.write_bytes(body)
    lua_path = work / "post.lua"
    lua_path.write_text(wrk_lua(body_path))

    with contextlib.ExitStack() as stack:
        kubeconfig = args.kubeconfig
        if "kopf" in args.server_names and kubeconfig is None:
            print("starting the local cluster kopf needs (hack/local-cluster.sh up)...", flush=True)
            kubeconfig = stack.enter_context(local_cluster(work / "cluster"))
        setup = Setup(work, cert_dir, body_path, body, lua_path, args.workers, args.threads, kubeconfig)
        runs: list[Measurement] = []
        names = args.server_names
        for round_no in range(1, args.rounds + 1):
            shift = (round_no - 1) % len(names)
            for name in names[shift:] + names[:shift]:
                print(f"round {round_no}/{args.rounds}: {name}...", flush=True)
                result = measure(setup, name, round_no, args)
                runs.append(result)
                print(
                    f"  peak {result.peak.rps:,.0f} req/s p50 {result.peak.p50_ms:.2f} ms "
                    f"p99 {result.peak.p99_ms:.2f} ms | @{args.rate}: {result.fixed.rps:.1f} req/s "
                    f"p50 {result.fixed.p50_ms:.2f} ms p99 {result.fixed.p99_ms:.2f} ms | non-2xx "
                    f"{result.peak.bad_responses + result.fixed.bad_responses} errors "
                    f"{result.peak.errors + result.fixed.errors} log errors {len(result.log_lines)} | other CPU "
                    f"{result.other_cores:.2f} cores | core speed {result.calibration:.2f} s",
                    flush=True,
                )

        paired = None
        if args.paired_slices and ratio_pairs(names):
            print(f"paired slices: {', '.join(names)} at once...", flush=True)
            paired = measure_paired(setup, names, args)

        stuck: list[StuckResult] = []
        for name in [n for n in names if n.startswith("ours")] if args.stuck_reviews else []:
            print(f"stuck clients: {name}...", flush=True)
            stuck.append(measure_stuck(setup, name, args))
            print("\n".join(stuck_lines(stuck[-1:])[2:]), flush=True)

    summaries = {name: summarise(name, [r for r in runs if r.server == name]) for name in names}
    table = results_table(summaries, args)
    ratios = paired_ratios(paired.slices) if paired else None
    verdicts = verdict_lines(summaries, runs, args, ratios)
    print()
    print(table)
    print()
    if paired:
        print("paired slices:")
        print(paired_table(paired.slices))
        print()
    print("\n".join(verdicts + stuck_verdicts(stuck, args)))
    if stuck:
        print()
        print("\n".join(stuck_lines(stuck)))
    write_report(args.report, setup, args, runs, table, verdicts, calibration, stuck, paired)
    print(f"\nreport written to {args.report}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; everything started is stopped again, also on Ctrl-C or SIGTERM."""
    args = parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    work = Path(tempfile.mkdtemp(prefix="tk-bench-"))
    keep = False
    try:
        return run(args, work)
    except BenchError as error:
        keep = True
        print(f"webhook_bench: error: {error}\n(server logs kept in {work})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("webhook_bench: interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
