"""The load generators: wrk and hey command lines, running them, and parsing their output into a LoadResult."""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.bench_error import BenchError


@dataclass(frozen=True)
class LoadResult:
    """One load run: throughput, latency percentiles in ms, and whatever went wrong."""

    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    bad_responses: int  # non-2xx (wrk) or non-200 (hey)
    errors: int  # socket/transport errors
    command: list[str]


_WRK_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def _wrk_ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text)
    if not match:
        raise BenchError(f"unexpected wrk latency {text!r}")
    return float(match.group(1)) * _WRK_UNITS[match.group(2)]


def parse_wrk(output: str, command: list[str]) -> LoadResult:
    """Figures from `wrk --latency` output (its 50%/99% lines, Requests/sec, error lines)."""
    percentiles = dict(re.findall(r"^\s+(\d+)%\s+(\S+)\s*$", output, re.MULTILINE))
    rps = re.search(r"^Requests/sec:\s+([\d.]+)", output, re.MULTILINE)
    total = re.search(r"^\s+(\d+) requests in", output, re.MULTILINE)
    if not (rps and total and "50" in percentiles and "99" in percentiles):
        raise BenchError(f"could not parse wrk output:\n{output}")
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    sockets = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output)
    return LoadResult(
        rps=float(rps.group(1)),
        p50_ms=_wrk_ms(percentiles["50"]),
        p99_ms=_wrk_ms(percentiles["99"]),
        requests=int(total.group(1)),
        bad_responses=int(non2xx.group(1)) if non2xx else 0,
        errors=sum(int(n) for n in sockets.groups()) if sockets else 0,
        command=command,
    )


def parse_hey(output: str, command: list[str]) -> LoadResult:
    """Figures from hey's summary (Requests/sec, latency distribution, status and error lists)."""
    rps = re.search(r"Requests/sec:\s+([\d.]+)", output)
    percentiles = dict(re.findall(r"^\s+(\d+)% in ([\d.]+) secs", output, re.MULTILINE))
    if not (rps and "50" in percentiles and "99" in percentiles):
        raise BenchError(f"could not parse hey output:\n{output}")
    statuses = {int(code): int(n) for code, n in re.findall(r"^\s+\[(\d+)\]\s+(\d+) responses", output, re.MULTILINE)}
    errors_part = output.split("Error distribution:", 1)[1] if "Error distribution:" in output else ""
    errors = sum(int(n) for n in re.findall(r"^\s+\[(\d+)\]\s", errors_part, re.MULTILINE))
    return LoadResult(
        rps=float(rps.group(1)),
        p50_ms=float(percentiles["50"]) * 1e3,
        p99_ms=float(percentiles["99"]) * 1e3,
        requests=sum(statuses.values()),
        bad_responses=sum(n for code, n in statuses.items() if code != 200),
        errors=errors,
        command=command,
    )


def run_tool(command: list[str], timeout: float) -> str:
    """Run wrk or hey to its end; its output, or BenchError when it failed."""
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise BenchError(f"{shlex.join(command)} exited {result.returncode}: {result.stderr.strip()}")
    return result.stdout


def wrk_command(url: str, lua: Path, duration: int, threads: int, connections: int) -> list[str]:
    return ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--latency", "-s", str(lua), url]


def hey_command(url: str, body: Path, duration: int, workers: int, per_worker_qps: int) -> list[str]:
    return [
        "hey",
        "-z",
        f"{duration}s",
        "-c",
        str(workers),
        "-q",
        str(per_worker_qps),
        "-m",
        "POST",
        "-T",
        "application/json",
        "-D",
        str(body),
        url,
    ]


def wrk_lua(body: Path) -> str:
    """wrk script that POSTs the review file as JSON on every request."""
    return (
        'wrk.method = "POST"\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
        f'local file = assert(io.open("{body}", "rb"))\n'
        'wrk.body = file:read("*a")\n'
        "file:close()\n"
    )
