"""The write fence's cost on the hot path (kube/fence.py), beside what one write costs anyway.

Rows, each timed in a tight loop, in alternated rounds (the order rotates each round; the table
gives the median and the range over rounds, as this VM's core speed varies from second to second):
- an empty loop iteration, the overhead included in every row;
- `permits()` of an open fence (a leader that renewed just now) and of the fence without a lease
  (`--leader-elect=false`);
- `permits()` refused: the fence of `controller/runner.py` (it counts the refusal in
  taintkeeper_fenced_writes_total) whose last renewal is a minute old; its warning is rate-limited to one
  per 5 s, and the bench turns the fence's logger off so a terminal's speed is not measured;
- building and JSON-encoding the DisruptionTarget patch of one eviction (its smallest write);
- one whole eviction through the real edge, `KubeEvictionActions.evict` (a PATCH and a DELETE, each
  behind a fence check), to a no-op HTTP server in this process on loopback (keep-alive): a floor
  for a write, with no apiserver, etcd or network behind it.

    .venv/bin/python bench/fence_bench.py [--rounds 7] [--checks 1000000] [--evictions 2000]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kubernetes import client  # noqa: E402

from bench.cpu_calibration import CALIBRATION_LOOPS, cpu_calibration  # noqa: E402
from bench.run_reports import append_run_report  # noqa: E402
from controller.objects import PodView  # noqa: E402
from controller.options import parse_options  # noqa: E402
from controller.runner import write_fence  # noqa: E402
from controller.tainteviction.api import KubeEvictionActions, disruption_target_patch  # noqa: E402
from kube.fence import WriteFence  # noqa: E402

POD = PodView("default", "web-5d9c7-x2x7k", "0b6f2a4e-1c3d-4e5f-8a9b-0c1d2e3f4a5b", "node-00001", (), None, False, None)


class NoOpHandler(BaseHTTPRequestHandler):
    """Answers every request 200 `{}` on a kept-alive connection."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go in two sends: with Nagle, each answer waits ~40 ms

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_PATCH = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:  # one line per request would be the benchmark
        pass


def per_op(loop: Callable[[int], None], count: int) -> float:
    started = time.perf_counter()
    loop(count)
    return (time.perf_counter() - started) / count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--checks", type=int, default=1_000_000, help="fence checks per row and round")
    parser.add_argument("--evictions", type=int, default=2_000, help="evictions per round")
    parser.add_argument("--report", action="store_true", help="append the table to today's bench/runs/DATE-fence.md")
    args = parser.parse_args()
    logging.getLogger("taintkeeper.fence").disabled = True

    leader = WriteFence(3600.0)  # a renew deadline longer than the run: open throughout
    leader.renewed(time.monotonic())
    without_lease = WriteFence.without_lease()
    stale = write_fence(parse_options([]))
    stale.renewed(time.monotonic() - 60)
    assert leader.permits("x", "y") and without_lease.permits("x", "y") and not stale.permits("x", "y")

    server = ThreadingHTTPServer(("127.0.0.1", 0), NoOpHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{server.server_address[1]}"
    api = client.ApiClient(configuration)
    actions = KubeEvictionActions(api, leader)
    actions.evict(POD)  # the connection is open before timing

    def empty(count: int) -> None:
        for _ in range(count):
            pass

    def checks(fence: WriteFence) -> Callable[[int], None]:
        def loop(count: int) -> None:
            permits = fence.permits
            for _ in range(count):
                permits("pod-deletion", "pod default/web")

        return loop

    def encode_bodies(count: int) -> None:
        for _ in range(count):
            json.dumps(disruption_target_patch(POD.uid, 1_800_000_000.0))

    def evictions(count: int) -> None:
        for _ in range(count):
            actions.evict(POD)

    rows: list[tuple[str, Callable[[int], None], int]] = [
        ("empty loop iteration (overhead in every row)", empty, args.checks),
        ("`permits()`, open: a leader that renewed just now", checks(leader), args.checks),
        ("`permits()`, open: `--leader-elect=false`", checks(without_lease), args.checks),
        ("`permits()`, refused: renewal 60 s old (counted in the metric)", checks(stale), args.checks),
        ("build + JSON-encode the DisruptionTarget patch body", encode_bodies, args.checks // 10),
        (
            "one eviction via `KubeEvictionActions.evict` (PATCH + DELETE, 2 checks) to a local no-op server",
            evictions,
            args.evictions,
        ),
    ]
    times: dict[str, list[float]] = {label: [] for label, _, _ in rows}
    for round_index in range(args.rounds):
        shift = round_index % len(rows)
        for label, loop, count in rows[shift:] + rows[:shift]:
            times[label].append(per_op(loop, count))
    server.shutdown()
    api.close()

    def nanoseconds(seconds: float) -> str:
        return f"{seconds * 1e9:,.0f} ns"

    median = {label: statistics.median(values) for label, values in times.items()}
    open_check, eviction = median[rows[1][0]], median[rows[5][0]]
    lines = [f"| operation | per op, median of {args.rounds} rounds | range over rounds |", "|---|---|---|"]
    lines += [
        f"| {label} | {nanoseconds(median[label])} | {nanoseconds(min(times[label]))} - "
        f"{nanoseconds(max(times[label]))} |"
        for label, _, _ in rows
    ]
    lines.append(f"| the 2 open checks' share of that eviction | {2 * open_check / eviction:.3%} | |")
    lines.append(
        f"| core speed ({CALIBRATION_LOOPS:,}-iteration loop, as in webhook_bench; this VM varies "
        f"0.2-0.6 s) | {cpu_calibration():.2f} s | |"
    )
    table = "\n".join(lines)
    print(table)
    if args.report:
        written = append_run_report(
            "fence",
            f"Write fence check ({time.strftime('%Y-%m-%d')})",
            f"Command: `.venv/bin/python bench/fence_bench.py --rounds {args.rounds} --checks "
            f"{args.checks} --evictions {args.evictions}`\n\n{table}",
        )
        print(f"report appended to {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
