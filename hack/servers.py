"""Start taintkeeper's processes on loopback for the tests, the demo and the benchmarks.

Each server runs as a real subprocess (gunicorn over TLS for the webhook) and is waited for
through its own readiness endpoint, never with a fixed sleep.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from hack.wait import wait_for

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def make_certs(
    out_dir: Path,
    service: str = "taintkeeper-webhook",
    namespace: str = "taintkeeper-system",
    ips: Sequence[str] = ("127.0.0.1",),
) -> str:
    """CA + serving pair valid for `ips`, localhost and the Service names; returns the base64 caBundle."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "certs",
            "--service",
            service,
            "--namespace",
            namespace,
            "--out-dir",
            str(out_dir),
            *(arg for ip in ips for arg in ("--ip", ip)),
            "--dns-name",
            "localhost",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"certs failed: {result.stderr.strip()}")
    return result.stdout.strip()


class WebhookServer:
    """`python -m webhook` on 127.0.0.1:<port> with the certificates in `cert_dir`.

    With `kubeconfig` the webhook watches namespaces through it (per-namespace seconds, the skip
    label); without, its namespace cache is off and the cluster defaults apply everywhere.
    """

    def __init__(
        self,
        cert_dir: Path,
        log_path: Path,
        *,
        port: int | None = None,
        workers: int = 1,
        threads: int = 4,
        extra_args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        kubeconfig: Path | None = None,
    ) -> None:
        self.cert_dir = cert_dir
        self.port = port or free_port()
        self.log_path = log_path
        cache_args = ("--kubeconfig", str(kubeconfig)) if kubeconfig is not None else ("--namespace-cache", "false")
        self.args = [
            sys.executable,
            "-m",
            "webhook",
            "--bind",
            f"127.0.0.1:{self.port}",
            "--cert-file",
            str(cert_dir / "tls.crt"),
            "--key-file",
            str(cert_dir / "tls.key"),
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            *cache_args,
            *extra_args,
        ]
        self.env = {**os.environ, **(env or {})}
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/mutate"

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.cert_dir / "ca.crt"))

    def start(self, timeout: float = 30) -> WebhookServer:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.args, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"webhook exited with {self.process.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(
                    f"https://127.0.0.1:{self.port}/readyz", context=self.ssl_context(), timeout=1
                ) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"webhook not ready after {timeout}s; see {self.log_path}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> WebhookServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ControllerProcess:
    """`python -m controller` against a kubeconfig, with /readyz, /metrics (its plain `--port`, on loopback)
    and its log at hand."""

    def __init__(self, kubeconfig: Path, log_path: Path, *args: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.log_path = log_path
        self.args = [
            sys.executable,
            "-m",
            "controller",
            "--kubeconfig",
            str(kubeconfig),
            "--bind-address",
            "127.0.0.1",
            "--port",
            str(self.port),
            # several run side by side on one host; `args` may name a port of their own (the last one counts)
            "--secure-port=0",
            *args,
        ]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> ControllerProcess:
        """Start and wait until its caches have synced (/readyz answers 200)."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"controller exited with {self.process.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"controller not ready after {timeout}s; see {self.log_path}")

    def metric(self, name: str) -> float:
        """The value of an unlabelled metric from /metrics (0 when absent)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as response:
            for line in response.read().decode().splitlines():
                if line.startswith(f"{name} "):
                    return float(line.split()[1])
        return 0.0

    def wait_for_metric(self, name: str, value: float, timeout: float = 10) -> None:
        """Wait until `name` reads `value`: a counter moves after the API call it counts has answered, so a
        test that saw the call's effect in the apiserver may read it a moment too early."""
        wait_for(lambda: self.metric(name) == value, timeout, f"{name} == {value}", interval=0.1)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def terminate(self, timeout: float = 30) -> int | None:
        """SIGTERM (the controller releases its lease) and wait."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        """SIGKILL, as a crashed process dies: nothing is released."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def __enter__(self) -> ControllerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()
