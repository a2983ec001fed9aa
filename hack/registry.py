"""The OCI registry taintkeeper is released to on this machine: started by the project, on loopback with TLS.

The registry and crane are built from Go modules (`hack/local-cluster.sh build-registry`: go-containerregistry's
registry served by hack/upstream/registry/main.go) and cached; the certificate is a CA and a serving pair for
127.0.0.1 made by `python -m certs`. An image goes in by its OCI archive (hack/image.py), pinned by the digest
the registry answers; a chart by `helm push`. Clients trust the registry through its CA (`ca_file`): crane and
Helm here, the nodes' containerd where they pull from it.

    with Registry(directory) as registry:
        pushed = registry.push_image(archive, "taintkeeper")      # -> 127.0.0.1:PORT/taintkeeper@sha256:...
        chart = registry.push_chart(helm, "charts/taintkeeper-0.1.0.tgz")  # -> oci://127.0.0.1:PORT/charts/...
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hack.servers import make_certs
from hack.wait import WaitTimeout, wait_for

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "hack" / "local-cluster.sh"
CHARTS = "charts"  # the repository path charts are pushed under: oci://ADDRESS/charts/NAME
START_TIMEOUT = 30.0
PUSH_TIMEOUT = 600.0


class RegistryError(RuntimeError):
    """A registry that would not build or start, or a push or pull it refused: the message says which, in one line."""


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def built_tools() -> Path:
    """The directory holding `registry` and `crane`, built once per machine."""
    result = subprocess.run(["bash", str(SCRIPT), "build-registry"], capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        raise RegistryError(f"hack/local-cluster.sh build-registry failed: {_last_line(result.stderr)}")
    return Path(_last_line(result.stdout))


def _exited(pid: int) -> bool:
    """The process is gone, or a zombie (exited; its parent, maybe this process, has not reaped it yet)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # ours (started by another Registry object of this process): reap it
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def built_helm() -> Path:
    """helm's path (`hack/local-cluster.sh build-helm`: built from its Go module once per machine)."""
    result = subprocess.run(["bash", str(SCRIPT), "build-helm"], capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        raise RegistryError(f"hack/local-cluster.sh build-helm failed: {_last_line(result.stderr)}")
    return Path(_last_line(result.stdout))


@dataclass(frozen=True)
class PushedImage:
    reference: str  # ADDRESS/REPOSITORY@sha256:...: what a Deployment pins
    tag_reference: str  # ADDRESS/REPOSITORY:TAG
    digest: str  # sha256:...

    @property
    def repository(self) -> str:
        """ADDRESS/REPOSITORY: what a chart's image.repository or a kustomization's newName takes."""
        return self.reference.partition("@")[0]


@dataclass(frozen=True)
class PushedChart:
    reference: str  # oci://ADDRESS/charts/NAME: what `helm install` takes, with --version
    version: str
    digest: str  # sha256:... of the chart's manifest, as `helm push` reports it


class Registry:
    """One registry process: its blobs and certificates under `directory`, listening on `listen` (an IP of this
    host: loopback, or the address a kind network's nodes reach the host by). Its pid and address are kept in
    `directory`, so a later process attaches to it (`attach`) and `hack/local-cluster.sh down` stops it."""

    def __init__(self, directory: Path, listen: str = "127.0.0.1") -> None:
        self.directory = directory
        self.listen = listen
        self.tools = built_tools()
        self.ca_file = directory / "certs" / "ca.crt"
        self.address = ""  # LISTEN:PORT once started
        self._process: subprocess.Popen[bytes] | None = None

    @classmethod
    def attach(cls, directory: Path) -> Registry | None:
        """The registry already serving from `directory`, or None when none is (never started, or stopped)."""
        try:
            pid = int((directory / "pid").read_text())
            address = (directory / "address").read_text().strip()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (FileNotFoundError, ValueError):
            return None
        if str(directory / "blobs").encode() not in cmdline or not address:
            return None  # the pid is now another process's
        attached = cls(directory, address.rpartition(":")[0])
        attached.address = address
        return attached

    def start(self) -> Registry:
        certs = self.directory / "certs"
        certs.mkdir(parents=True, exist_ok=True)
        make_certs(certs, service="registry", namespace="local", ips=sorted({"127.0.0.1", self.listen}))
        ready = self.directory / "address"
        ready.unlink(missing_ok=True)
        log = (self.directory / "registry.log").open("ab")
        self._process = subprocess.Popen(
            [
                str(self.tools / "registry"),
                f"--address={self.listen}:0",
                f"--disk={self.directory / 'blobs'}",
                f"--cert={certs / 'tls.crt'}",
                f"--key={certs / 'tls.key'}",
                f"--ready-file={ready}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives its starter (hack/deploy.py): stopped by `down` through its pid file
        )
        log.close()
        (self.directory / "pid").write_text(f"{self._process.pid}\n")

        def started() -> str | None:
            if self._process is not None and self._process.poll() is not None:
                raise RegistryError(
                    f"the registry exited with {self._process.returncode}: see {self.directory}/registry.log"
                )
            text = ready.read_text().strip() if ready.exists() else ""
            return text or None

        self.address = wait_for(started, START_TIMEOUT, "the registry to listen", interval=0.05)
        return self

    def stop(self) -> None:
        """SIGTERM (then SIGKILL after 10 s) to the registry this object started or attached to, if it runs; an
        attached one's pid file goes with it."""
        if self._process is not None:
            if self._process.poll() is None:
                os.killpg(self._process.pid, signal.SIGTERM)
                try:
                    self._process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(self._process.pid, signal.SIGKILL)
                    self._process.wait()
            (self.directory / "pid").unlink(missing_ok=True)
            return
        if Registry.attach(self.directory) is None:
            return
        pid = int((self.directory / "pid").read_text())
        for sent in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, sent)
            try:
                wait_for(lambda: _exited(pid) or None, 10, "the registry to stop", interval=0.05)
                break
            except WaitTimeout:
                continue
        (self.directory / "pid").unlink(missing_ok=True)

    def __enter__(self) -> Registry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _client_env(self) -> dict[str, str]:
        """crane is a Go program: it trusts the registry's CA through SSL_CERT_FILE."""
        return {**os.environ, "SSL_CERT_FILE": str(self.ca_file)}

    def crane(self, *args: str, timeout: float = PUSH_TIMEOUT) -> str:
        """Run crane against this registry; its output, or RegistryError with crane's own last line."""
        result = subprocess.run(
            [str(self.tools / "crane"), *args], capture_output=True, text=True, timeout=timeout, env=self._client_env()
        )
        if result.returncode != 0:
            raise RegistryError(f"crane {args[0]}: {_last_line(result.stderr)}")
        return result.stdout.strip()

    def push_image(self, archive: Path, repository: str, tag: str) -> PushedImage:
        """Push an OCI archive (hack/image.py's) as ADDRESS/REPOSITORY:TAG; the reference pinned by its digest."""
        tag_reference = f"{self.address}/{repository}:{tag}"
        with tempfile.TemporaryDirectory(prefix="oci-layout-") as layout:
            with tarfile.open(archive) as tar:
                tar.extractall(layout, filter="data")
            self.crane("push", layout, tag_reference)
        digest = self.crane("digest", tag_reference, timeout=60)
        return PushedImage(f"{self.address}/{repository}@{digest}", tag_reference, digest)

    def push_chart(self, helm: Path, packaged: Path) -> PushedChart:
        """`helm push` a packaged chart (NAME-VERSION.tgz) under oci://ADDRESS/charts."""
        result = subprocess.run(
            [str(helm), "push", str(packaged), f"oci://{self.address}/{CHARTS}", "--ca-file", str(self.ca_file)],
            capture_output=True,
            text=True,
            timeout=PUSH_TIMEOUT,
        )
        if result.returncode != 0:
            raise RegistryError(f"helm push: {_last_line(result.stderr)}")
        said = dict(
            (key.strip(), value.strip())
            for key, sep, value in (line.partition(": ") for line in (result.stdout + result.stderr).splitlines())
            if sep
        )
        pushed = said.get("Pushed", "")  # ADDRESS/charts/NAME:VERSION
        repository, _, version = pushed.rpartition(":")
        if not repository or "Digest" not in said:
            raise RegistryError(f"helm push said neither what it pushed nor its digest: {_last_line(result.stderr)}")
        return PushedChart(f"oci://{repository}", version, said["Digest"])
