"""Starting, checking and stopping the servers the webhook benchmark loads, and the local cluster kopf needs.

Each server (ours, static, kopf, and the -gthread variants) is a context manager that starts it in
its own process group, waits until it is ready, yields its review URL and stops it again;
`check_mutates` refuses a server that does not answer the review with the expected patch.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.bench_error import BenchError
from bench.review import mutation_problem
from hack.servers import WebhookServer, free_port

ROOT = Path(__file__).resolve().parents[1]
LOCAL_CLUSTER = ROOT / "hack" / "local-cluster.sh"
KOPF_OP = "bench/kopf_op.py"
KOPF_HANDLER_ID = "add-default-tolerations"  # bench/kopf_op.py's HANDLER_ID (not imported: kopf is optional)
READY_TIMEOUT = 90.0

SERVER_NAMES = ("ours", "static", "kopf", "ours-gthread", "static-gthread", "ours-plain")
DEFAULT_SERVERS = ("ours", "static", "kopf")


def worker_class_of(name: str) -> str:
    """The --worker-class a server runs with: gthread for the `-gthread` variants, else the default."""
    return "gthread" if name.endswith("-gthread") else "gevent"


def fast_paths_of(name: str) -> str:
    """The --fast-paths a server runs with: off for `ours-plain`, else the default (on)."""
    return "false" if name == "ours-plain" else "true"


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
            self.process = subprocess.Popen(
                self.command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
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
    server = WebhookServer(
        setup.cert_dir,
        setup.work / f"{name}.log",
        workers=setup.workers,
        threads=setup.threads,
        env={**setup.base_env(), "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)},
        extra_args=("--worker-class", worker_class_of(name), "--fast-paths", fast_paths_of(name)),
    )
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
    setup.commands[name] = (
        f"TAINTKEEPER_BIND=127.0.0.1:$PORT {shown} "
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
    env = {
        **setup.base_env(),
        "KUBECONFIG": str(setup.kubeconfig),
        "BENCH_KOPF_PORT": str(port),
        "BENCH_KOPF_CERT": str(setup.cert_dir / "tls.crt"),
        "BENCH_KOPF_KEY": str(setup.cert_dir / "tls.key"),
    }
    command = [sys.executable, "-m", "kopf", "run", "--standalone", "-A", KOPF_OP]
    setup.commands["kopf"] = (
        "KUBECONFIG=$CLUSTER/kubeconfig BENCH_KOPF_PORT=$PORT BENCH_KOPF_CERT=$CERTS/tls.crt "
        f"BENCH_KOPF_KEY=$CERTS/tls.key kopf run --standalone -A {KOPF_OP}"
    )
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
    "ours": serve_ours,
    "static": serve_static,
    "kopf": serve_kopf,
    "ours-gthread": functools.partial(serve_ours, name="ours-gthread"),
    "static-gthread": functools.partial(serve_static, name="static-gthread"),
    "ours-plain": functools.partial(serve_ours, name="ours-plain"),
}


@contextlib.contextmanager
def local_cluster(directory: Path) -> Iterator[Path]:
    """kube-apiserver + etcd via hack/local-cluster.sh; always brought down again."""
    try:
        result = subprocess.run(
            ["bash", str(LOCAL_CLUSTER), "up", str(directory)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=45 * 60,
            check=False,
        )
        if result.returncode != 0:
            raise BenchError(f"local cluster did not start: {result.stderr.strip()}")
        yield Path(result.stdout.strip().splitlines()[-1])
    finally:
        subprocess.run(
            ["bash", str(LOCAL_CLUSTER), "down", str(directory)],
            cwd=ROOT,
            capture_output=True,
            timeout=120,
            check=False,
        )
