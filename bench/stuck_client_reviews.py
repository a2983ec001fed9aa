"""Reviews timed while 100 stuck connections hold one of our webhooks, then how long it took to close them.

The stuck connections are hack/stuck_clients.py's; the table and verdicts of this part are here too.
"""

from __future__ import annotations

import argparse
import ssl
import statistics
from dataclasses import dataclass

from bench.cpu_calibration import cpu_calibration
from bench.machine_load import settle
from bench.review import mutation_problem
from bench.webhook_servers import SERVERS, Setup, check_mutates
from hack import stuck_clients
from hack.stuck_clients import KINDS, Latencies, stuck_connections, wait_until_closed

TARGET_STUCK_MS = 100.0  # every review beside the stuck connections answered within this
STUCK = {"tcp": 50, "tls": 17, "headers": 17, "body": 16}  # 100 stuck connections, half of them plain TCP
STUCK_REVIEW_TIMEOUT = 5.0  # the apiserver's default timeoutSeconds: a slower review is a failed one


@dataclass(frozen=True)
class StuckResult:
    """One of our webhooks held by 100 stuck connections: how reviews fared, and when the stuck ones closed."""

    server: str
    opened: dict[str, int]  # stuck connections by kind (`refused`: TLS handshakes the server never completed)
    latencies: Latencies | None  # of the reviews answered
    answered: int
    failed: int  # reviews not answered with the patch within STUCK_REVIEW_TIMEOUT
    stopped_early: bool  # gave up after 3 failures in a row
    closed_after: dict[str, list[float]]  # seconds from connect until the server closed it, by kind
    still_open: int  # stuck connections the server had not closed after the wait
    close_wait: float
    calibration: float


def measure_stuck(setup: Setup, name: str, args: argparse.Namespace) -> StuckResult:
    """Start `name`, hold it with 100 stuck connections, time reviews on fresh connections, then wait for closes."""
    settle(args.quiet_wait)
    calibration = cpu_calibration()
    context = ssl.create_default_context(cafile=str(setup.cert_dir / "ca.crt"))
    with SERVERS[name](setup) as url:
        check_mutates(url, setup.body)
        port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        with stuck_connections("127.0.0.1", port, context, STUCK, timeout=STUCK_REVIEW_TIMEOUT, strict=False) as stuck:
            opened: dict[str, int] = {}
            for connection in stuck:
                opened[connection.kind] = opened.get(connection.kind, 0) + 1
            seconds: list[float] = []
            failed = in_a_row = 0
            for _ in range(args.stuck_reviews):
                try:
                    elapsed, status, payload = stuck_clients.post_review(
                        "127.0.0.1", port, context, setup.body, STUCK_REVIEW_TIMEOUT
                    )
                    ok = status == 200 and mutation_problem(payload) is None and elapsed <= STUCK_REVIEW_TIMEOUT
                except (OSError, ssl.SSLError):
                    ok, elapsed = False, STUCK_REVIEW_TIMEOUT
                if ok:
                    seconds.append(elapsed)
                    in_a_row = 0
                else:
                    failed += 1
                    in_a_row += 1
                    if in_a_row == 3:
                        break
            still_open = wait_until_closed(stuck, args.stuck_close_wait)
            closed_after: dict[str, list[float]] = {}
            for connection in stuck:
                if connection.closed_after is not None:
                    closed_after.setdefault(connection.kind, []).append(connection.closed_after)
    return StuckResult(
        name,
        opened,
        Latencies.of(seconds) if seconds else None,
        len(seconds),
        failed,
        in_a_row == 3,
        closed_after,
        len(still_open),
        args.stuck_close_wait,
        calibration,
    )


def stuck_lines(results: list[StuckResult]) -> list[str]:
    """The stuck-client table and its verdict (for ours)."""
    lines = [
        "| server | stuck connections open | reviews answered / failed | review median | p99 | max "
        "| stuck connections closed after (min-max) | still open at the end |",
        "|---|---|---:|---:|---:|---:|---|---:|",
    ]
    for r in results:
        opened = ", ".join(f"{n} {kind}" for kind, n in sorted(r.opened.items(), key=lambda item: _kind_order(item[0])))
        lat = r.latencies
        closed = ", ".join(
            f"{kind} {min(v):.1f}-{max(v):.1f} s"
            for kind, v in sorted(r.closed_after.items(), key=lambda item: _kind_order(item[0]))
        )
        failed = f"{r.failed}{' (stopped after 3 in a row)' if r.stopped_early else ''}"
        lines.append(
            f"| {r.server} | {opened} | {r.answered} / {failed} | "
            + (f"{lat.median_ms:.1f} ms | {lat.p99_ms:.1f} ms | {lat.max_ms:.1f} ms" if lat else "- | - | -")
            + f" | {closed or 'none'} | {r.still_open} (after {r.close_wait:g} s) |"
        )
    return lines


def _kind_order(kind: str) -> int:
    return KINDS.index(kind) if kind in KINDS else len(KINDS)


def stuck_verdicts(results: list[StuckResult], args: argparse.Namespace) -> list[str]:
    lines = []
    for r in results:
        if r.server != "ours":
            continue
        worst = r.latencies.max_ms if r.latencies else float("inf")
        ok = r.failed == 0 and worst <= TARGET_STUCK_MS
        lines.append(
            f"- ours beside 100 stuck connections: {r.answered} reviews answered, {r.failed} failed, "
            f"max {worst:.1f} ms -- target: every review within {TARGET_STUCK_MS:g} ms: "
            f"{'PASS' if ok else 'MISS'}"
        )
        closes = [t for times in r.closed_after.values() for t in times]
        if closes:
            lines.append(
                f"- ours closed every stuck connection after {min(closes):.1f}-{max(closes):.1f} s "
                f"(median {statistics.median(closes):.1f} s; --request-timeout 10 by default); "
                f"{r.still_open} still open after {r.close_wait:g} s"
            )
    return lines
