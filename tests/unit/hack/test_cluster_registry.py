"""hack/cluster_registry.py tells a cluster's nodes of its registry through the hosts directory their containerd
reads (hack/lib/nodes.sh, or kind's containerdConfigPatch, sets config_path to it): nodes whose containerd was
configured without it would fail every pull, so the registry refuses them first, naming them. A kind cluster's
nodes are a dict here (their `docker exec` is hack/kind_cluster.py's, run live by tests/e2e on kind)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pytest

from hack import cluster_registry
from hack.kind_cluster import KindCluster
from hack.registry import RegistryError

ADDRESS = "127.0.0.1:40000"


class Case(NamedTuple):
    name: str
    reads_hosts: dict[str, bool]  # node -> its containerd.toml names the cluster's hosts directory
    refused: list[str]  # the nodes the error names; empty: trusted


CASES = [
    Case("no nodes (a control plane only): the hosts file is written", {}, []),
    Case("every node reads the hosts directory", {"node-1": True, "node-2": True}, []),
    Case("a node configured before the registry is named", {"node-1": True, "node-2": False}, ["node-2"]),
    Case("every such node is named", {"node-1": False, "node-2": False}, ["node-1", "node-2"]),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_nodes_are_told_of_the_registry_or_named_when_they_cannot_be(case: Case, tmp_path: Path):
    hosts_dir = cluster_registry.local_hosts_dir(tmp_path)
    for node, reads in case.reads_hosts.items():
        (tmp_path / "nodes" / node).mkdir(parents=True)
        line = f'    config_path = "{hosts_dir}"\n' if reads else ""
        (tmp_path / "nodes" / node / "containerd.toml").write_text(f"version = 2\n{line}")
    ca_file = tmp_path / "registry" / "certs" / "ca.crt"
    written = hosts_dir / ADDRESS / "hosts.toml"
    if case.refused:
        with pytest.raises(RegistryError, match=r"down .* then up it again") as raised:
            cluster_registry.trust_local(tmp_path, ADDRESS, ca_file)
        assert f"node(s) {', '.join(case.refused)} " in str(raised.value)
        assert not written.exists()
        return
    cluster_registry.trust_local(tmp_path, ADDRESS, ca_file)
    text = written.read_text()
    assert f'server = "https://{ADDRESS}"' in text and f'[host."https://{ADDRESS}"]' in text
    assert text.count(f'ca = "{ca_file}"') == 2  # the server's and the host's: containerd 1.6 asks both


def test_the_nodes_containerd_configuration_names_the_hosts_directory_trust_local_writes():
    """hack/lib/nodes.sh's containerd.toml and this module agree on the directory."""
    nodes_sh = (Path(__file__).resolve().parents[3] / "hack" / "lib" / "nodes.sh").read_text()
    assert 'config_path = "$dir/registry/hosts"' in nodes_sh
    assert cluster_registry.local_hosts_dir(Path("/DIR")) == Path("/DIR/registry/hosts")


@dataclass(frozen=True)
class RecordedKind(KindCluster):
    """A kind cluster whose nodes are a dict: what each node's containerd config says (None: not running),
    and the files written into each."""

    configs: dict[str, str | None] = field(default_factory=dict)
    written: dict[str, dict[str, str]] = field(default_factory=dict)
    failing: frozenset[str] = frozenset()  # nodes where a write fails

    def nodes(self) -> list[str]:
        return sorted(self.configs)

    def read_file(self, node: str, path: str) -> str | None:
        assert path == cluster_registry.KIND_CONTAINERD_CONFIG
        return self.configs[node]

    def write_file(self, node: str, path: str, text: str) -> str | None:
        if node in self.failing:
            return "read-only file system"
        self.written.setdefault(node, {})[path] = text
        return None


READS = f"version = 2\n  {cluster_registry.KIND_CONFIG_PATH_LINE}\n"
KIND_ADDRESS = "172.18.0.1:40000"
KIND_CASES = [
    # name, configs, failing, the error's words (empty: every node trusts it)
    ("every node gets the CA and the hosts.toml naming it", {"kind-worker": READS, "kind-worker2": READS}, (), ""),
    (
        "nodes made before the registry are named, and nothing is written",
        {"kind-worker": READS, "kind-worker2": "version = 2\n", "kind-worker3": None},
        (),
        "kind node(s) kind-worker2, kind-worker3 does not read",
    ),
    ("a node that cannot be written is named", {"kind-worker": READS}, ("kind-worker",), "on kind node kind-worker:"),
    ("a cluster kind lists no nodes of is refused", {}, (), "kind cluster kind has no nodes"),
]


@pytest.mark.parametrize(("configs", "failing", "error"), [c[1:] for c in KIND_CASES], ids=[c[0] for c in KIND_CASES])
def test_kind_nodes_are_told_of_the_registry_or_named_when_they_cannot_be(
    configs: dict[str, str | None], failing: tuple[str, ...], error: str, tmp_path: Path
):
    kind = RecordedKind("kind", "/bin/kind", "", configs=configs, failing=frozenset(failing))
    ca_file = tmp_path / "ca.crt"
    ca_file.write_text("-----BEGIN CERTIFICATE-----\n")
    hosts = f"{cluster_registry.KIND_HOSTS_DIR}/{KIND_ADDRESS}"
    if error:
        with pytest.raises(RegistryError, match=re.escape(error)):
            cluster_registry.trust_kind(kind, KIND_ADDRESS, ca_file)
        if not failing:
            assert kind.written == {}
        return
    cluster_registry.trust_kind(kind, KIND_ADDRESS, ca_file)
    assert kind.written == {
        node: {
            f"{hosts}/ca.crt": "-----BEGIN CERTIFICATE-----\n",
            f"{hosts}/hosts.toml": cluster_registry.hosts_toml(KIND_ADDRESS, f"{hosts}/ca.crt"),
        }
        for node in configs
    }
