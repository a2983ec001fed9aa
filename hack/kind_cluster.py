"""A kind cluster made by `hack/local-cluster.sh kind-up DIR`, as DIR/kind.env records it: its nodes, and
the address they reach the host by (its network's gateway: the cluster's registry listens there), files read from
and written into them (the registry's hosts.toml), and an image loaded into them the way kind's users do
(`kind load image-archive`, for `deploy --side-load`), where not already there."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

NETWORK = "kind"  # the Docker network kind puts every cluster's nodes on


class KindError(RuntimeError):
    """What the kind cluster or its engine refused (one line)."""


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

    def _run(
        self, argv: list[str], timeout: float = 300, input_text: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ)
        if self.docker_host:
            env["DOCKER_HOST"] = self.docker_host
        else:
            env.pop("DOCKER_HOST", None)
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, env=env, input=input_text
        )

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

    def write_file(self, node: str, path: str, text: str) -> str | None:
        """Write `text` to `path` inside a node container (its directory made); None when done, else why."""
        directory = path.rpartition("/")[0]
        written = self._run(
            ["docker", "exec", "-i", node, "sh", "-c", f'mkdir -p "{directory}" && cat > "{path}"'], input_text=text
        )
        if written.returncode == 0:
            return None
        return (written.stderr.strip().splitlines() or [f"exit {written.returncode}"])[-1]

    def read_file(self, node: str, path: str) -> str | None:
        """A file inside a node container; None when it cannot be read (no such file, the node not running)."""
        read = self._run(["docker", "exec", node, "cat", path], timeout=60)
        return read.stdout if read.returncode == 0 else None

    def gateway(self) -> str:
        """The host's IPv4 address on Docker's network `kind`: where the nodes reach a server on the host."""
        inspected = self._run(
            ["docker", "network", "inspect", NETWORK, "-f", "{{range .IPAM.Config}}{{.Gateway}} {{end}}"], timeout=60
        )
        addresses = [address for address in inspected.stdout.split() if "." in address]
        if inspected.returncode != 0 or not addresses:
            said = inspected.stderr.strip() or inspected.stdout.strip()
            raise KindError(f"Docker's network {NETWORK} has no IPv4 gateway: {said}")
        return addresses[0]
