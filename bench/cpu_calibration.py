"""The core-speed calibration: a fixed pure-Python loop, timed.

This VM's core speed varies over time, so the benchmarks (bench/webhook_bench.py,
bench/eviction_bench.py, bench/monitor_bench.py, bench/fence_bench.py) time this loop beside
their figures: a slower loop means slower figures, and readers can compare with their machine.
"""

from __future__ import annotations

import time

CALIBRATION_LOOPS = 2_000_000


def cpu_calibration() -> float:
    """Seconds for a fixed pure-Python loop: lets readers compare this machine's core speed with theirs."""
    started = time.perf_counter()
    total = 0
    for i in range(CALIBRATION_LOOPS):
        total += i
    return time.perf_counter() - started
