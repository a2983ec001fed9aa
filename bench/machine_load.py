"""How busy the rest of the machine is: CPU used by processes the webhook benchmark did not start.

From /proc/stat minus this process's and its reaped children's CPU time; `settle` waits for the
machine to go quiet before a server is measured.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

QUIET_CORES = 0.25  # other processes' CPU (in cores) below which the machine counts as quiet


def machine_busy_seconds() -> float:
    """CPU-seconds spent in user/nice/system on all CPUs since boot (irq/softirq/steal left out)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system = (int(value) for value in fields[:3])
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """CPU-seconds of this process and every descendant reaped so far (servers, wrk, hey)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


class OtherLoad:
    """CPU used by processes this run did not start, averaged in cores over a window.

    Other people's processes on a 2-core machine move the figures a lot, so each run says how
    busy the rest of the machine was while it ran. Includes the idle local cluster kopf needs.
    """

    def __init__(self) -> None:
        self.wall = time.monotonic()
        self.busy = machine_busy_seconds()
        self.own = own_cpu_seconds()

    def cores(self) -> float:
        elapsed = time.monotonic() - self.wall
        other = (machine_busy_seconds() - self.busy) - (own_cpu_seconds() - self.own)
        return max(other, 0.0) / elapsed if elapsed > 0 else 0.0


def wait_for_quiet(limit: float) -> tuple[float, float]:
    """Wait (up to `limit` s) until the rest of the machine uses < QUIET_CORES; (seconds waited, last load)."""
    started = time.monotonic()
    while True:
        window = OtherLoad()
        time.sleep(1.0)  # the sampling window of the load reading
        load = window.cores()
        waited = time.monotonic() - started
        if load < QUIET_CORES or waited >= limit:
            return waited, load


def settle(limit: float) -> float:
    """wait_for_quiet, saying so when the machine did not go quiet; the last second's load, in cores."""
    waited, load = wait_for_quiet(limit)
    if load >= QUIET_CORES:
        print(f"  other processes still use {load:.2f} cores after {waited:.0f}s; measuring anyway", flush=True)
    return load
