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
  gthread worker class (--worker-class gthread), the setup the webhook had before.

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
go to stdout and, with the environment and exact commands, to bench/REPORT.md (its other
benchmarks' sections are kept).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.metadata
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script, bench/ and hack/ are not installed packages
    sys.path.insert(0, str(ROOT))

from bench.review import mutation_problem, review_bytes  # noqa: E402
from hack import stuck_clients  # noqa: E402
from hack.servers import WebhookServer, free_port, make_certs  # noqa: E402
from hack.stuck_clients import KINDS, Latencies, stuck_connections, wait_until_closed  # noqa: E402

REPORT_PATH = ROOT / "bench" / "REPORT.md"
LOCAL_CLUSTER = ROOT / "hack" / "local-cluster.sh"
KOPF_OP = "bench/kopf_op.py"
KOPF_HANDLER_ID = "add-default-tolerations"  # bench/kopf_op.py's HANDLER_ID (not imported: kopf is optional)

TARGET_P99_FACTOR = 1.2  # ours' p99 at the fixed rate at most this times the static app's
TARGET_RATE = 500
TARGET_STATIC_SHARE = 0.90
TARGET_KOPF_FACTOR = 3.8
TARGET_STUCK_MS = 100.0  # every review beside the stuck connections answered within this
STUCK = {"tcp": 50, "tls": 17, "headers": 17, "body": 16}  # 100 stuck connections, half of them plain TCP
STUCK_REVIEW_TIMEOUT = 5.0  # the apiserver's default timeoutSeconds: a slower review is a failed one
RATE_TOLERANCE = 0.95  # the fixed-rate run counts only if it reached 95% of the asked rate
READY_TIMEOUT = 90.0
QUIET_CORES = 0.25  # other processes' CPU (in cores) below which the machine counts as quiet

SERVER_NAMES = ("ours", "static", "kopf", "ours-gthread", "static-gthread")
DEFAULT_SERVERS = ("ours", "static", "kopf")


def worker_class_of(name: str) -> str:
    """The --worker-class a server runs with: gthread for the `-gthread` variants, else the default."""
    return "gthread" if name.endswith("-gthread") else "gevent"


class BenchError(RuntimeError):
    """The benchmark cannot produce honest figures; the message says why."""


# --- load generators ----------------------------------------------------------------------


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
        rps=float(rps.group(1)), p50_ms=_wrk_ms(percentiles["50"]), p99_ms=_wrk_ms(percentiles["99"]),
        requests=int(total.group(1)), bad_responses=int(non2xx.group(1)) if non2xx else 0,
        errors=sum(int(n) for n in sockets.groups()) if sockets else 0, command=command,
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
        rps=float(rps.group(1)), p50_ms=float(percentiles["50"]) * 1e3, p99_ms=float(percentiles["99"]) * 1e3,
        requests=sum(statuses.values()), bad_responses=sum(n for code, n in statuses.items() if code != 200),
        errors=errors, command=command,
    )


def _run_tool(command: list[str], timeout: float) -> str:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise BenchError(f"{shlex.join(command)} exited {result.returncode}: {result.stderr.strip()}")
    return result.stdout


def wrk_command(url: str, lua: Path, duration: int, threads: int, connections: int) -> list[str]:
    return ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--latency", "-s", str(lua), url]


def hey_command(url: str, body: Path, duration: int, workers: int, per_worker_qps: int) -> list[str]:
    return ["hey", "-z", f"{duration}s", "-c", str(workers), "-q", str(per_worker_qps), "-m", "POST",
            "-T", "application/json", "-D", str(body), url]


def wrk_lua(body: Path) -> str:
    """wrk script that POSTs the review file as JSON on every request."""
    return (
        'wrk.method = "POST"\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
        f'local file = assert(io.open("{body}", "rb"))\n'
        "wrk.body = file:read(\"*a\")\n"
        "file:close()\n"
    )


# --- servers ------------------------------------------------------------------------------


def post_review(url: str, body: bytes, timeout: float = 5.0) -> tuple[int, bytes]:
    """POST the review without verifying the certificate (as wrk and hey do); (status, body)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def check_mutates(url: str, body: bytes) -> None:
    """Refuse to measure a server that does not answer the review with the expected patch."""
    status, reply = post_review(url, body)
    problem = f"HTTP {status}: {reply[:300]!r}" if status != 200 else mutation_problem(reply)
    if problem:
        raise BenchError(f"{url} did not mutate the review: {problem}")


class ServerProcess:
    """A server in its own process group, killed as a group; ready when `ready()` says so."""

    def __init__(self, command: list[str], env: dict[str, str], log_path: Path) -> None:
        self.command = command
        self.env = env
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, ready: Callable[[], bool], timeout: float = READY_TIMEOUT) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.command, cwd=ROOT, env=self.env, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BenchError(f"{self.command[0]} exited with {self.process.returncode}; see {self.log_path}")
            if ready():
                return
            time.sleep(0.1)  # poll interval of the readiness probe, not a guess at start-up time
        raise BenchError(f"not ready after {timeout:.0f}s: {shlex.join(self.command)}; see {self.log_path}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def _answers(probe: Callable[[], bool]) -> Callable[[], bool]:
    """A readiness check that treats connection failures as 'not yet'."""

    def ready() -> bool:
        try:
            return probe()
        except (OSError, ssl.SSLError):
            return False

    return ready


@dataclass
class Setup:
    """Everything the servers and load runs share."""

    work: Path
    cert_dir: Path
    body_path: Path
    body: bytes
    lua_path: Path
    workers: int
    threads: int
    kubeconfig: Path | None
    commands: dict[str, str] = field(default_factory=dict)  # server name -> how it was started

    def base_env(self) -> dict[str, str]:
        """The caller's environment without TAINTKEEPER_* settings, so both gunicorn apps get only ours."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("TAINTKEEPER_")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
        return env


@contextlib.contextmanager
def serve_ours(setup: Setup, name: str = "ours") -> Iterator[str]:
    """taintkeeper's webhook via hack/servers.py (`python -m webhook`), ready once /readyz answers."""
    metrics_dir = setup.work / f"metrics-{name}"
    metrics_dir.mkdir(exist_ok=True)  # prometheus_client needs it to exist wherever metrics are first imported
    server = WebhookServer(setup.cert_dir, setup.work / f"{name}.log", workers=setup.workers, threads=setup.threads,
                           env={**setup.base_env(), "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)},
                           extra_args=("--worker-class", worker_class_of(name)))
    server.env = {k: v for k, v in server.env.items() if not k.startswith("TAINTKEEPER_")}
    shown = ["python", *server.args[1:]]
    shown[shown.index("--bind") + 1] = "127.0.0.1:$PORT"
    setup.commands[name] = " ".join(shown).replace(str(setup.cert_dir), "$CERTS")
    try:
        server.start(timeout=READY_TIMEOUT)
        yield server.url
    finally:
        server.stop()


@contextlib.contextmanager
def serve_static(setup: Setup, name: str = "static") -> Iterator[str]:
    """The constant-reply Flask app under the webhook's own gunicorn config and TAINTKEEPER_* settings."""
    port = free_port()
    settings = {
        "TAINTKEEPER_BIND": f"127.0.0.1:{port}",
        "TAINTKEEPER_CERT_FILE": str(setup.cert_dir / "tls.crt"),
        "TAINTKEEPER_KEY_FILE": str(setup.cert_dir / "tls.key"),
        "TAINTKEEPER_WORKERS": str(setup.workers),
        "TAINTKEEPER_THREADS": str(setup.threads),
        "TAINTKEEPER_WORKER_CLASS": worker_class_of(name),
    }
    command = [sys.executable, "-m", "gunicorn", "-c", "python:webhook.gunicorn_conf", "bench.static_app:create_app()"]
    metrics_dir = setup.work / f"metrics-{name}"
    metrics_dir.mkdir(exist_ok=True)
    env = {**setup.base_env(), **settings, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    shown = " ".join(f"{k}={v}" for k, v in settings.items() if k != "TAINTKEEPER_BIND")
    setup.commands[name] = (f"TAINTKEEPER_BIND=127.0.0.1:$PORT {shown} "
                            f"gunicorn -c python:webhook.gunicorn_conf 'bench.static_app:create_app()'"
                            ).replace(str(setup.cert_dir), "$CERTS")
    server = ServerProcess(command, env, setup.work / f"{name}.log")
    readyz = f"https://127.0.0.1:{port}/readyz"
    context = ssl.create_default_context(cafile=str(setup.cert_dir / "ca.crt"))

    def probe() -> bool:
        with urllib.request.urlopen(readyz, context=context, timeout=1) as response:
            return response.status == 200

    try:
        server.start(_answers(probe))
        yield f"https://127.0.0.1:{port}/mutate"
    finally:
        server.stop()


@contextlib.contextmanager
def serve_kopf(setup: Setup) -> Iterator[str]:
    """kopf standalone against the local cluster; ready once its handler answers the review with a patch."""
    if setup.kubeconfig is None:
        raise BenchError("kopf needs a cluster, but none was started")
    port = free_port()
    env = {**setup.base_env(), "KUBECONFIG": str(setup.kubeconfig), "BENCH_KOPF_PORT": str(port),
           "BENCH_KOPF_CERT": str(setup.cert_dir / "tls.crt"), "BENCH_KOPF_KEY": str(setup.cert_dir / "tls.key")}
    command = [sys.executable, "-m", "kopf", "run", "--standalone", "-A", KOPF_OP]
    setup.commands["kopf"] = ("KUBECONFIG=$CLUSTER/kubeconfig BENCH_KOPF_PORT=$PORT BENCH_KOPF_CERT=$CERTS/tls.crt "
                              f"BENCH_KOPF_KEY=$CERTS/tls.key kopf run --standalone -A {KOPF_OP}")
    server = ServerProcess(command, env, setup.work / "kopf.log")
    url = f"https://127.0.0.1:{port}/{KOPF_HANDLER_ID}"

    def probe() -> bool:
        status, reply = post_review(url, setup.body, timeout=2)
        return status == 200 and mutation_problem(reply) is None

    try:
        server.start(_answers(probe))
        yield url
    finally:
        server.stop()


SERVERS: dict[str, Callable[[Setup], contextlib.AbstractContextManager[str]]] = {
    "ours": serve_ours, "static": serve_static, "kopf": serve_kopf,
    "ours-gthread": functools.partial(serve_ours, name="ours-gthread"),
    "static-gthread": functools.partial(serve_static, name="static-gthread"),
}


# --- the local cluster kopf needs ---------------------------------------------------------


@contextlib.contextmanager
def local_cluster(directory: Path) -> Iterator[Path]:
    """kube-apiserver + etcd via hack/local-cluster.sh; always brought down again."""
    try:
        result = subprocess.run(["bash", str(LOCAL_CLUSTER), "up", str(directory)], cwd=ROOT, capture_output=True,
                                text=True, timeout=45 * 60, check=False)
        if result.returncode != 0:
            raise BenchError(f"local cluster did not start: {result.stderr.strip()}")
        yield Path(result.stdout.strip().splitlines()[-1])
    finally:
        subprocess.run(["bash", str(LOCAL_CLUSTER), "down", str(directory)], cwd=ROOT, capture_output=True,
                       timeout=120, check=False)


# --- the rest of the machine -------------------------------------------------------------


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


# --- measuring ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Measurement:
    """One server in one round."""

    server: str
    round: int
    peak: LoadResult
    fixed: LoadResult
    log_lines: list[str]  # Traceback/ERROR/CRITICAL lines from the server's log
    other_cores: float  # CPU of other processes during the run, in cores
    quiet_before: float  # the same, in the last second before the server started
    calibration: float  # seconds for the calibration loop just before the server started


_GUNICORN_PREFIX = re.compile(r"^\[[^\]]+\] \[\d+\] ")
_SEVERE = re.compile(r"\b(ERROR|CRITICAL)\b")


def log_problems(log_path: Path, since: int) -> list[str]:
    """What went wrong in a server's log after byte offset `since`: one line per traceback or ERROR line.

    A traceback is summarised by the exception line that ends it. The logs are temporary, so
    these lines are what the report keeps of them.
    """
    if not log_path.exists():
        return []
    with log_path.open("rb") as log:
        log.seek(since)
        lines = log.read().decode(errors="replace").splitlines()
    problems: list[str] = []
    in_traceback = False
    for line in lines:
        if line.startswith("Traceback"):
            in_traceback = True
        elif in_traceback and line and not line[0].isspace():
            problems.append(line.strip())
            in_traceback = False
        elif not in_traceback and _SEVERE.search(line):
            problems.append(_GUNICORN_PREFIX.sub("", line.strip()))
    if in_traceback:
        problems.append("(traceback cut off at the end of the log)")
    return problems


def log_size(log_path: Path) -> int:
    """Where a server's log ends now: log_problems(log_path, since=this) reads only what comes after."""
    return log_path.stat().st_size if log_path.exists() else 0


def warm_up(setup: Setup, url: str, args: argparse.Namespace) -> None:
    """--warmup seconds of unrecorded wrk load, with the measurement's settings."""
    if args.warmup > 0:
        _run_tool(wrk_command(url, setup.lua_path, args.warmup, args.wrk_threads, args.connections), args.warmup + 60)


def run_wrk(setup: Setup, url: str, seconds: int, args: argparse.Namespace) -> LoadResult:
    """wrk at full speed for `seconds` with --wrk-threads, --connections and the review body."""
    command = wrk_command(url, setup.lua_path, seconds, args.wrk_threads, args.connections)
    return parse_wrk(_run_tool(command, seconds + 60), command)


def measure(setup: Setup, name: str, round_no: int, args: argparse.Namespace) -> Measurement:
    """Start one server, check its mutation, warm it up, run wrk then hey, check it again, stop it."""
    log_path = setup.work / f"{name}.log"
    offset = log_size(log_path)
    per_worker = args.rate // args.rate_workers
    quiet_before = settle(args.quiet_wait)
    calibration = cpu_calibration()
    other = OtherLoad()
    with SERVERS[name](setup) as url:
        check_mutates(url, setup.body)
        warm_up(setup, url, args)
        peak = run_wrk(setup, url, args.duration, args)
        command = hey_command(url, setup.body_path, args.duration, args.rate_workers, per_worker)
        fixed = parse_hey(_run_tool(command, args.duration + 60), command)
        check_mutates(url, setup.body)
    return Measurement(name, round_no, peak, fixed, log_problems(log_path, offset), other.cores(),
                       quiet_before, calibration)


@dataclass(frozen=True)
class Summary:
    """Medians across rounds for one server, and the problem counts summed over them."""

    server: str
    peak_rps: float
    peak_p50: float
    peak_p99: float
    fixed_p50: float
    fixed_p99: float
    fixed_rps: float
    bad_responses: int
    errors: int
    log_problems: int
    other_cores: float
    rounds: int


def summarise(name: str, runs: list[Measurement]) -> Summary:
    def med(values: list[float]) -> float:
        return statistics.median(values)

    return Summary(
        server=name,
        peak_rps=med([r.peak.rps for r in runs]), peak_p50=med([r.peak.p50_ms for r in runs]),
        peak_p99=med([r.peak.p99_ms for r in runs]), fixed_p50=med([r.fixed.p50_ms for r in runs]),
        fixed_p99=med([r.fixed.p99_ms for r in runs]), fixed_rps=med([r.fixed.rps for r in runs]),
        bad_responses=sum(r.peak.bad_responses + r.fixed.bad_responses for r in runs),
        errors=sum(r.peak.errors + r.fixed.errors for r in runs),
        log_problems=sum(len(r.log_lines) for r in runs), other_cores=med([r.other_cores for r in runs]),
        rounds=len(runs),
    )


def ratios_within(values: dict[tuple[int, str], float], top: str, bottom: str) -> list[float]:
    """top/bottom within each group (a round, or a cycle of paired slices), keyed (group, server), in group order.

    A group in which either server has no figure is left out.
    """
    groups = sorted({group for group, _ in values})
    return [values[g, top] / values[g, bottom] for g in groups if (g, top) in values and (g, bottom) in values]


# --- paired slices ------------------------------------------------------------------------
#
# Consecutive 10 s runs of one server after the other pick up this VM's drift (its core speed
# swings by +-40 % from second to second), so the ratio of two servers' medians wanders between
# sessions. Here every server runs at once, idle but for its own short wrk slice, and each cycle
# loads each server in turn: the ratio within a cycle compares servers under the same conditions.

PAIRED_RATIOS = (("ours", "static"), ("ours", "kopf"), ("ours-gthread", "static-gthread"))


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
    found = [PairedRatio(top, bottom, cycle_ratios(slices, top, bottom))
             for top, bottom in ratio_pairs({s.server for s in slices})]
    return [ratio for ratio in found if ratio.ratios]


def run_slices(setup: Setup, urls: dict[str, str], args: argparse.Namespace) -> list[Slice]:
    """--paired-slices cycles of one --slice-seconds wrk run per server, the order alternating per cycle."""
    slices: list[Slice] = []
    for cycle in range(1, args.paired_slices + 1):
        slices += [Slice(cycle, name, run_wrk(setup, urls[name], args.slice_seconds, args))
                   for name in slice_order(list(urls), cycle)]
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


# --- stuck clients ------------------------------------------------------------------------


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
                    elapsed, status, payload = stuck_clients.post_review("127.0.0.1", port, context, setup.body,
                                                                         STUCK_REVIEW_TIMEOUT)
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
    return StuckResult(name, opened, Latencies.of(seconds) if seconds else None, len(seconds), failed, in_a_row == 3,
                       closed_after, len(still_open), args.stuck_close_wait, calibration)


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
        closed = ", ".join(f"{kind} {min(v):.1f}-{max(v):.1f} s" for kind, v in
                           sorted(r.closed_after.items(), key=lambda item: _kind_order(item[0])))
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
        lines.append(f"- ours beside 100 stuck connections: {r.answered} reviews answered, {r.failed} failed, "
                     f"max {worst:.1f} ms -- target: every review within {TARGET_STUCK_MS:g} ms: "
                     f"{'PASS' if ok else 'MISS'}")
        closes = [t for times in r.closed_after.values() for t in times]
        if closes:
            lines.append(f"- ours closed every stuck connection after {min(closes):.1f}-{max(closes):.1f} s "
                         f"(median {statistics.median(closes):.1f} s; --request-timeout 10 by default); "
                         f"{r.still_open} still open after {r.close_wait:g} s")
    return lines


# --- reporting ----------------------------------------------------------------------------


def server_labels(workers: int, threads: int) -> dict[str, str]:
    return {
        "ours": f"taintkeeper webhook (gunicorn gevent, {workers} workers)",
        "static": f"static Flask app (same gunicorn, gevent, {workers} workers)",
        "kopf": "kopf admission webhook (1 asyncio process)",
        "ours-gthread": f"taintkeeper webhook on gthread ({workers}x{threads})",
        "static-gthread": f"static Flask app on gthread ({workers}x{threads})",
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


def per_round_ratios(runs: list[Measurement], top: str, bottom: str, figure: str = "peak_rps") -> list[float]:
    """top/bottom peak throughput (or fixed-rate p99) within each round, to show how much the ratio of medians moves."""
    def value(r: Measurement) -> float:
        return r.peak.rps if figure == "peak_rps" else r.fixed.p99_ms

    return ratios_within({(r.round, r.server): value(r) for r in runs}, top, bottom)


def mark(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def throughput_verdict(top: Summary, bottom: Summary, runs: list[Measurement], target: float, target_text: str,
                       paired: PairedRatio | None) -> str:
    """top/bottom peak throughput against `target`: from the paired slices' median when given, else the rounds'.

    The rounds' ratio of medians and per-round ratios are shown either way.
    """
    share = top.peak_rps / bottom.peak_rps
    each = ", ".join(f"{ratio:.2f}x" for ratio in per_round_ratios(runs, top.server, bottom.server))
    rounds = f"{share:.2f}x ({top.peak_rps:,.0f} / {bottom.peak_rps:,.0f} req/s; per round {each})"
    name = f"{top.server}/{bottom.server} throughput"
    if paired is None:
        return f"- {name}: {rounds} -- target >= {target_text}: {mark(share >= target)}"
    return (f"- {name}, from the paired slices: {paired.median:.2f}x (median of {len(paired.ratios)} per-cycle "
            f"ratios, {paired.low:.2f}-{paired.high:.2f}x); rounds: {rounds} -- target >= {target_text}, "
            f"on the paired median: {mark(paired.median >= target)}")


def verdict_lines(summaries: dict[str, Summary], runs: list[Measurement], args: argparse.Namespace,
                  paired: list[PairedRatio] | None = None) -> list[str]:
    """The ratios (of medians, with the per-round ratios; throughput from the paired slices if they ran) and
    PASS/MISS against each target."""
    ours = summaries.get("ours")
    static = summaries.get("static")
    kopf = summaries.get("kopf")
    by_pair = {(r.top, r.bottom): r for r in paired or []}

    lines = []
    if ours and static:
        rate_ok = all(s.fixed_rps >= RATE_TOLERANCE * args.rate and s.bad_responses == 0 and s.errors == 0
                      for s in (ours, static))
        factor = ours.fixed_p99 / static.fixed_p99
        each = ", ".join(f"{ratio:.2f}x" for ratio in per_round_ratios(runs, "ours", "static", "fixed_p99"))
        lines.append(
            f"- ours/static p99 at {args.rate} req/s: {factor:.2f}x ({ours.fixed_p99:.2f} / {static.fixed_p99:.2f} ms; "
            f"per round {each}; achieved {ours.fixed_rps:.1f} / {static.fixed_rps:.1f} req/s, "
            f"{ours.bad_responses} non-2xx, {ours.errors} errors) -- target <= {TARGET_P99_FACTOR:g}x at "
            f"{TARGET_RATE} req/s: {mark(factor <= TARGET_P99_FACTOR and rate_ok)}"
        )
        lines.append(throughput_verdict(ours, static, runs, TARGET_STATIC_SHARE, f"{TARGET_STATIC_SHARE:.2f}x",
                                        by_pair.get(("ours", "static"))))
    if ours and kopf:
        lines.append(throughput_verdict(ours, kopf, runs, TARGET_KOPF_FACTOR, f"{TARGET_KOPF_FACTOR:g}x",
                                        by_pair.get(("ours", "kopf"))))
    for top, bottom in (("ours-gthread", "static-gthread"), ("ours", "ours-gthread"), ("ours-gthread", "kopf")):
        if top in summaries and bottom in summaries:
            a, b = summaries[top], summaries[bottom]
            lines.append(f"- (choosing the worker class) {top}/{bottom}: throughput {a.peak_rps / b.peak_rps:.2f}x "
                         f"({a.peak_rps:,.0f} / {b.peak_rps:,.0f} req/s), p99 at {args.rate} req/s "
                         f"{a.fixed_p99 / b.fixed_p99:.2f}x ({a.fixed_p99:.2f} / {b.fixed_p99:.2f} ms)")
    busiest = max((s.other_cores for s in summaries.values()), default=0.0)
    if busiest >= QUIET_CORES:
        lines.append(f"- WARNING: processes outside this benchmark used up to {busiest:.2f} cores (median per server) "
                     f"of the machine's {os.cpu_count()} while it ran; all figures are depressed and noisy")
    if args.rate != TARGET_RATE:
        lines.append(f"- note: the fixed-rate run used {args.rate} req/s, not the target's {TARGET_RATE} req/s")
    return lines


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


def cycle_line(slices: list[Slice], cycle: int, cycles: int) -> str:
    """Progress line of one cycle: each server's req/s in the order they ran, and the cycle's ratios."""
    this = [s for s in slices if s.cycle == cycle]
    rates = ", ".join(f"{s.server} {s.peak.rps:,.0f}" for s in this)
    ratios = ", ".join(f"{r.top}/{r.bottom} {r.median:.2f}x" for r in paired_ratios(this))
    return f"paired cycle {cycle}/{cycles}: {rates} req/s" + (f" | {ratios}" if ratios else "")


def paired_table(slices: list[Slice]) -> str:
    """Per server, its slices' median req/s and range; per ratio, the median of the per-cycle ratios and range."""
    lines = ["| server | median req/s over slices | min-max req/s | slices | non-2xx / errors |",
             "|---|---:|---:|---:|---:|"]
    for name in dict.fromkeys(s.server for s in slices):  # in the order of the first cycle
        loads = [s.peak for s in slices if s.server == name]
        rates = [load.rps for load in loads]
        lines.append(f"| {name} | {statistics.median(rates):,.0f} | {min(rates):,.0f}-{max(rates):,.0f} | "
                     f"{len(loads)} | {sum(load.bad_responses for load in loads)} / "
                     f"{sum(load.errors for load in loads)} |")
    lines += ["", "| ratio | median of per-cycle ratios | min-max | cycles |", "|---|---:|---:|---:|"]
    lines += [f"| {r.top}/{r.bottom} | {r.median:.2f}x | {r.low:.2f}-{r.high:.2f}x | {len(r.ratios)} |"
              for r in paired_ratios(slices)]
    return "\n".join(lines)


def cycles_table(slices: list[Slice]) -> str:
    """One row per cycle: the order the servers ran in, each one's req/s, and the cycle's ratios."""
    servers = list(dict.fromkeys(s.server for s in slices))
    pairs = ratio_pairs(servers)
    lines = ["| cycle | order | " + " | ".join(f"{name} req/s" for name in servers) + "".join(
                 f" | {top}/{bottom}" for top, bottom in pairs) + " |",
             "|---:|---|" + "---:|" * (len(servers) + len(pairs))]
    for cycle in sorted({s.cycle for s in slices}):
        this = [s for s in slices if s.cycle == cycle]
        rates = {s.server: f"{s.peak.rps:,.0f}" for s in this}
        ratios = {(r.top, r.bottom): f"{r.median:.2f}x" for r in paired_ratios(this)}  # one ratio per pair here
        cells = [*(rates.get(name, "-") for name in servers), *(ratios.get(pair, "-") for pair in pairs)]
        lines.append(f"| {cycle} | {', '.join(s.server for s in this)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


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
        + ", ".join(f"{name} {len(lines)}" for name, lines in paired.log_lines.items()) + ".",
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
    lines = ["## Server log problems", "", "| server | times | problem (traceback's last line or ERROR line) |",
             "|---|---:|---|"]
    for (server, problem), times in sorted(counts.items(), key=lambda item: (item[0][0], -item[1])):
        lines.append(f"| {server} | {times} | `{problem[:300].replace('|', '/')}` |")
    return [*lines, ""]


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _debian_version(package: str) -> str:
    result = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True,
                            check=False)
    return result.stdout.strip() if result.returncode == 0 else "unknown"


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


CALIBRATION_LOOPS = 2_000_000


def cpu_calibration() -> float:
    """Seconds for a fixed pure-Python loop: lets readers compare this machine's core speed with theirs."""
    started = time.perf_counter()
    total = 0
    for i in range(CALIBRATION_LOOPS):
        total += i
    return time.perf_counter() - started


def environment_lines(args: argparse.Namespace, calibration: float) -> list[str]:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [
        f"- CPUs: {os.cpu_count()} (usable by this process: {usable}), {_cpu_model()}",
        f"- core speed: a {CALIBRATION_LOOPS:,}-iteration pure-Python `total += i` loop took {calibration:.2f} s "
        "(best of 3, before the runs)",
        f"- OS: {platform.platform()}",
        f"- Python {platform.python_version()}, {ssl.OPENSSL_VERSION}",
        f"- flask {_version('flask')}, werkzeug {_version('werkzeug')}, gunicorn {_version('gunicorn')}, "
        f"kopf {_version('kopf')}, aiohttp {_version('aiohttp')}",
        f"- wrk {_debian_version('wrk')}, hey {_debian_version('hey')} (Debian packages)",
        "- TLS: ECDSA P-256 serving certificate from `python -m certs` (hack/servers.py `make_certs`)",
        f"- servers: ours and static with {args.workers} gunicorn workers of the gevent class (the default; "
        f"the -gthread variants: gthread, {args.threads} threads each); kopf is a single asyncio process",
        f"- gevent {_version('gevent')}, orjson {_version('orjson')}, gunicorn-h1c {_version('gunicorn-h1c')}",
        "- kopf's cluster: kube-apiserver 1.20.2 + etcd from hack/local-cluster.sh, idle and running during "
        "all three servers' runs",
    ]


def command_lines(setup: Setup, args: argparse.Namespace, paired: bool = False) -> list[str]:
    sample_url = "https://127.0.0.1:$PORT/mutate"
    per_worker = args.rate // args.rate_workers
    lua = setup.lua_path.read_text().replace(str(setup.body_path), "review.json")
    warmup = wrk_command(sample_url, Path("post.lua"), args.warmup, args.wrk_threads, args.connections)
    peak = wrk_command(sample_url, Path("post.lua"), args.duration, args.wrk_threads, args.connections)
    fixed = hey_command(sample_url, Path("review.json"), args.duration, args.rate_workers, per_worker)
    lines = ["Servers (one at a time, started fresh for each server and round; `$CERTS` holds ca.crt/tls.crt/tls.key):",
             ""]
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
    """What comes before this benchmark's part: the report's table of today's figures (kept as it is)."""
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
    ours = ("## Paired slices", "## Every round", "## Server log problems", "## Environment", "## Exact commands",
            "## Stuck clients")
    for match in re.finditer(r"^## .*$", text, re.MULTILINE):  # a report written before the end marker existed
        if not match.group(0).startswith(ours):
            return text[match.start():]
    return ""


def write_report(path: Path, setup: Setup, args: argparse.Namespace, runs: list[Measurement], table: str,
                 verdicts: list[str], calibration: float, stuck: list[StuckResult],
                 paired: PairedRun | None = None) -> None:
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    before, kept = current_state(path), other_sections(path)
    stuck_part = [] if not stuck else [
        "## Stuck clients",
        "",
        f"Each of our webhooks, started fresh with its defaults (--request-timeout 10), while 100 stuck connections "
        f"are open ({', '.join(f'{n} {kind}' for kind, n in STUCK.items())}; hack/stuck_clients.py: `tcp` never "
        "sends a TLS ClientHello, `tls` completes the handshake and sends nothing, `headers` sends part of the "
        "request headers, `body` complete headers and part of the body): "
        f"up to {args.stuck_reviews} reviews, one after another, each on a fresh TLS connection (handshake "
        f"included), each failed if not answered with the patch within {STUCK_REVIEW_TIMEOUT:g} s; then the time "
        "from each stuck connection's connect until the server closed it. `refused`: a TLS connection whose "
        "handshake the server never completed (opened as plain TCP once the first one timed out).",
        "",
        *stuck_lines(stuck),
        "",
        *stuck_verdicts(stuck, args),
        "",
        "`core speed` before the stuck-client runs: " + ", ".join(f"{r.server} {r.calibration:.2f} s" for r in stuck),
        "",
    ]
    text = "\n".join([
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
    ])
    # Under the current state's "# History": every heading one level down.
    text = re.sub(r"^(#+) ", r"#\1 ", text, flags=re.MULTILINE)
    path.write_text(before + REPORT_START + "\n" + text + ("\n" + kept if kept else ""))


# --- main ---------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/webhook_bench.py", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds; medians are reported (%(default)s)")
    parser.add_argument("--duration", type=int, default=10, help="seconds per load run (%(default)s)")
    parser.add_argument("--warmup", type=int, default=2, help="seconds of unrecorded wrk load first (%(default)s)")
    parser.add_argument("--servers", default=",".join(DEFAULT_SERVERS),
                        help=f"comma-separated subset of {','.join(SERVER_NAMES)} (%(default)s)")
    parser.add_argument("--stuck-reviews", type=int, default=200,
                        help="reviews timed beside 100 stuck connections, per webhook; 0 skips that part (%(default)s)")
    parser.add_argument("--stuck-close-wait", type=float, default=30.0,
                        help="seconds to wait for the server to close the stuck connections (%(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers for ours and static (%(default)s)")
    parser.add_argument("--threads", type=int, default=8, help="gthread threads per worker (%(default)s)")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections (%(default)s)")
    parser.add_argument("--wrk-threads", type=int, default=2, help="wrk threads (%(default)s)")
    parser.add_argument("--rate", type=int, default=TARGET_RATE, help="fixed rate for hey, req/s (%(default)s)")
    parser.add_argument("--rate-workers", type=int, default=10, help="hey workers sharing the rate (%(default)s)")
    parser.add_argument("--quiet-wait", type=float, default=120,
                        help="seconds to wait for other processes to go quiet before each server (%(default)s)")
    parser.add_argument("--paired-slices", type=int, default=12,
                        help="after the rounds, cycles of short wrk slices with every server running at once, the "
                             "order alternating; the throughput verdicts come from them; 0 skips them (%(default)s)")
    parser.add_argument("--slice-seconds", type=int, default=3, help="seconds per paired slice (%(default)s)")
    parser.add_argument("--kubeconfig", type=Path, help="use this cluster for kopf instead of starting one")
    parser.add_argument("--report", type=Path, default=REPORT_PATH, help="where to write the report (%(default)s)")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.servers.split(",") if name.strip()]
    unknown = sorted(set(names) - set(SERVER_NAMES))
    if unknown or not names:
        parser.error(f"--servers takes names from {','.join(SERVER_NAMES)}, got {args.servers!r}")
    args.server_names = [name for name in SERVER_NAMES if name in names]
    for option in ("stuck_reviews", "paired_slices"):
        if getattr(args, option) < 0:
            parser.error(f"--{option.replace('_', '-')} must be >= 0")
    for option in ("rounds", "duration", "slice_seconds", "workers", "threads", "connections", "wrk_threads", "rate",
                   "rate_workers"):
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
                print(f"  peak {result.peak.rps:,.0f} req/s p50 {result.peak.p50_ms:.2f} ms "
                      f"p99 {result.peak.p99_ms:.2f} ms | @{args.rate}: {result.fixed.rps:.1f} req/s "
                      f"p50 {result.fixed.p50_ms:.2f} ms p99 {result.fixed.p99_ms:.2f} ms | non-2xx "
                      f"{result.peak.bad_responses + result.fixed.bad_responses} errors "
                      f"{result.peak.errors + result.fixed.errors} log errors {len(result.log_lines)} | other CPU "
                      f"{result.other_cores:.2f} cores | core speed {result.calibration:.2f} s", flush=True)

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
