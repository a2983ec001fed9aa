"""The Docker engine kind's nodes run in (hack/local-cluster.sh docker-up/docker-down, hack/lib/docker.sh),
started by the project where none answers: a privileged container runs on this host (whose bounding set
lacks CAP_SYS_RESOURCE: through hack/runc_capfilter.py), real nodes are refused beside it, and the host's
networking is the same after `docker-down` as before `docker-up`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hack.runc_capfilter import own_missing_capabilities

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "local-cluster.sh"
SYSCTLS = (
    "net/ipv4/ip_forward",
    "net/bridge/bridge-nf-call-iptables",
    "net/bridge/bridge-nf-call-ip6tables",
    "net/ipv4/conf/all/route_localnet",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
)
BUSYBOX = "taintkeeper.local/busybox-docker:test"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="starts dockerd: runs as root")


def script(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)


def host_networking() -> dict[str, object]:
    """What dockerd and kind's nodes may change on the host, counters left out."""
    state: dict[str, object] = {}
    for family in ("iptables", "ip6tables"):
        saved = subprocess.run([f"{family}-save"], capture_output=True, text=True, check=False).stdout
        state[family] = sorted(
            re.sub(r" \[\d+:\d+\]$", "", line) for line in saved.splitlines() if line and not line.startswith("#")
        )
    for key in SYSCTLS:
        path = Path("/proc/sys") / key
        state[key] = path.read_text().strip() if path.exists() else None
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    state["links"] = sorted(line.split(": ")[1].split("@")[0] for line in links.splitlines())
    state["routes"] = subprocess.run(["ip", "route", "show"], capture_output=True, text=True, check=True).stdout
    state["/lib/modules"] = Path("/lib/modules").exists()
    state["/etc/docker/key.json"] = Path("/etc/docker/key.json").exists()
    return state


@dataclass
class Engine:
    directory: Path
    docker_host: str
    before: dict[str, object]
    said: str  # what docker-up wrote to stderr

    def docker(self, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        env = {**os.environ, "DOCKER_HOST": self.docker_host}
        return subprocess.run(["docker", *args], input=stdin, capture_output=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, node_packages: None) -> Iterator[Engine]:
    if shutil.which("docker") and subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0:
        pytest.skip("a Docker engine of the machine's answers: docker-up uses it, and starts none to check")
    directory = tmp_path_factory.mktemp("docker-engine")
    before = host_networking()
    started = script("docker-up", str(directory))
    assert started.returncode == 0, started.stderr[-4000:]
    line = started.stdout.strip().splitlines()[-1]
    assert line.startswith("DOCKER_HOST=unix://"), started.stdout
    yield Engine(directory, line.split("=", 1)[1], before, started.stderr)
    script("docker-down", str(directory))


def test_docker_up_says_in_one_line_which_capabilities_the_runtime_withholds(engine: Engine):
    missing = " ".join(own_missing_capabilities())
    runtime = engine.docker("info", "--format", "{{.DefaultRuntime}}").stdout.decode().strip()
    said = [line for line in engine.said.splitlines() if "capability bounding set lacks" in line]
    if missing:
        assert runtime == "taintkeeper-runc"
        assert len(said) == 1 and f"lacks {missing}:" in said[0], engine.said
    else:
        assert (runtime, said) == ("runc", [])


def test_a_privileged_container_runs_as_kind_starts_its_nodes(engine: Engine, tmp_path: Path):
    rootfs = tmp_path / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    shutil.copy2("/bin/busybox", rootfs / "bin" / "busybox")
    archive = subprocess.run(["tar", "-C", str(rootfs), "-c", "bin"], capture_output=True, check=True).stdout
    imported = engine.docker("import", "-", BUSYBOX, stdin=archive)
    assert imported.returncode == 0, imported.stderr
    ran = engine.docker(
        "run",
        "--rm",
        "--privileged",
        "--security-opt",
        "seccomp=unconfined",
        "--cgroupns=private",
        BUSYBOX,
        "/bin/busybox",
        "sh",
        "-c",
        "grep CapBnd /proc/self/status",
    )
    assert ran.returncode == 0, ran.stderr.decode()
    # what Docker grants a privileged container (every capability it knows), less what the host cannot grant
    bounding = int(ran.stdout.decode().split()[1], 16)
    status = Path("/proc/self/status").read_text()
    host_bounding = int(next(line.split()[1] for line in status.splitlines() if line.startswith("CapBnd:")), 16)
    assert bounding & ~host_bounding == 0, f"{bounding:x} holds what the host lacks ({host_bounding:x})"
    assert bounding >> 21 & 1 and bounding >> 12 & 1, f"{bounding:x}: no CAP_SYS_ADMIN or CAP_NET_ADMIN"
    executed = engine.docker("run", "-d", "--privileged", BUSYBOX, "/bin/busybox", "sleep", "60")
    assert executed.returncode == 0, executed.stderr.decode()
    container = executed.stdout.decode().strip()
    try:
        inside = engine.docker("exec", "--privileged", container, "/bin/busybox", "true")
        assert inside.returncode == 0, inside.stderr.decode()  # kind runs every later step as a privileged exec
    finally:  # each import is a new image: the engine's data root (under the cache) would keep every run's
        engine.docker("rm", "-f", container)
        engine.docker("image", "rm", BUSYBOX)


def test_a_second_docker_up_answers_with_the_running_engine(engine: Engine):
    pid = (engine.directory / "docker" / "dockerd.pid").read_text()
    again = script("docker-up", str(engine.directory))
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().splitlines()[-1] == f"DOCKER_HOST={engine.docker_host}"
    assert (engine.directory / "docker" / "dockerd.pid").read_text() == pid


def test_real_nodes_are_refused_while_the_engine_runs(engine: Engine, tmp_path: Path):
    refused = script("up", str(tmp_path / "cluster"), "--nodes", "1", timeout=300)
    assert refused.returncode != 0
    assert f"{engine.directory} runs the project's Docker engine" in refused.stderr
    assert not list(tmp_path.glob("cluster/nodes/*"))


# Last in this file: it stops the engine the tests above share.
def test_docker_down_puts_the_hosts_networking_back_as_it_was(engine: Engine):
    stopped = script("docker-down", str(engine.directory))
    assert stopped.returncode == 0, stopped.stderr
    assert not (engine.directory / "docker" / "dockerd.pid").exists()
    assert host_networking() == engine.before
    again = script("docker-down", str(engine.directory))
    assert again.returncode == 0 and "nothing to stop" in again.stderr
