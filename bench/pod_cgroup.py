"""A pod's CPU time and memory as its cgroup on this host counts them (the local cluster's kubelets
run on this host), for benchmarks that measure deployed pods.

cgroup v1 (cpuacct.usage, memory.usage_in_bytes less inactive file) and v2 (cpu.stat usage_usec,
memory.current less inactive_file); the working set is what the kubelet reports and evicts by.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


class PodCgroupError(RuntimeError):
    """The pod's cgroup is not on this host."""


@dataclass(frozen=True)
class PodCgroup:
    uid: str
    cpu: Path  # the directory with the CPU accounting
    memory: Path
    v2: bool

    def cpu_seconds(self) -> float:
        if self.v2:
            stat = _stat(self.cpu / "cpu.stat")
            return stat["usage_usec"] / 1e6
        return int((self.cpu / "cpuacct.usage").read_text()) / 1e9

    def working_set_mib(self) -> float:
        if self.v2:
            usage = int((self.memory / "memory.current").read_text())
            inactive = _stat(self.memory / "memory.stat")["inactive_file"]
        else:
            usage = int((self.memory / "memory.usage_in_bytes").read_text())
            inactive = _stat(self.memory / "memory.stat")["total_inactive_file"]
        return max(usage - inactive, 0) / 2**20


def _stat(path: Path) -> dict[str, int]:
    return {key: int(value) for key, value in (line.split() for line in path.read_text().splitlines())}


def _find(controller: str, uid: str) -> Path | None:
    """The pod's directory under one hierarchy: .../kubepods[/<qos>]/pod<uid> (systemd names use _)."""
    names = {f"pod{uid}", f"pod{uid.replace('-', '_')}"}
    base = ROOT / controller if controller else ROOT
    for depth in range(1, 6):
        for found in glob.glob(str(base / "/".join(["*"] * depth))):
            if Path(found).name in names or Path(found).name.removesuffix(".slice").split("-")[-1] in names:
                return Path(found)
    return None


def pod_cgroup(uid: str) -> PodCgroup:
    if (ROOT / "cgroup.controllers").exists():
        found = _find("", uid)
        if found is None:
            raise PodCgroupError(f"no cgroup of pod {uid} under {ROOT}")
        return PodCgroup(uid, found, found, v2=True)
    cpu, memory = _find("cpuacct", uid), _find("memory", uid)
    if cpu is None or memory is None:
        raise PodCgroupError(f"no cgroup of pod {uid} under {ROOT}/cpuacct and {ROOT}/memory")
    return PodCgroup(uid, cpu, memory, v2=False)
