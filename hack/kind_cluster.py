"""A kind cluster made by `hack/local-cluster.sh kind-up DIR`, as DIR/kind.env records it: its nodes, and
an image loaded into them the way kind's users do (`kind load image-archive`), where not already there."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class KindCluster:
    name: str
    kind: str  # kind's path (built from its module: hack/lib/build.sh)
    docker_host: str  # the engine its nodes run in; empty: the caller's default

    @classmethod
    def of(cls, directory: Path) -> KindCluster | None:
        """DIR's kind cluster, or None when DIR holds none (a local cluster's directory)."""
        try:
            lines = (directory / "kind.env").read_text().splitlines()
        except FileNotFoundError:
            return None
        values = dict(line.partition("=")[::2] for line in lines if "=" in line)
        return cls(values["KIND_CLUSTER"], values["KIND_BIN"], values.get("DOCKER_HOST", ""))

    def _run(self, argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ)
        if self.docker_host:
            env["DOCKER_HOST"] = self.docker_host
        else:
            env.pop("DOCKER_HOST", None)
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, env=env)

    def nodes(self) -> list[str]:
        listed = self._run([self.kind, "get", "nodes", "--name", self.name], timeout=60)
        return sorted(listed.stdout.split()) if listed.returncode == 0 else []

    def holds(self, node: str, reference: str, digest: str) -> bool:
        listed = self._run(["docker", "exec", node, "ctr", "-n", "k8s.io", "images", "ls"], timeout=60)
        return any(line.split()[:1] == [reference] and digest in line for line in listed.stdout.splitlines())

    def load(self, archive: Path, nodes: list[str]) -> str | None:
        """`kind load image-archive` into those nodes; None when done, else kind's last line."""
        loaded = self._run(
            [self.kind, "load", "image-archive", str(archive), "--name", self.name, "--nodes", ",".join(nodes)]
        )
        if loaded.returncode == 0:
            return None
        return (loaded.stderr.strip().splitlines() or [f"exit {loaded.returncode}"])[-1]
