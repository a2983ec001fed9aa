"""hack/cluster_registry.py tells the local cluster's nodes of its registry through the hosts directory their
containerd reads (hack/lib/nodes.sh sets config_path to it): nodes whose containerd was configured without it
would fail every pull, so the registry refuses them first, naming them."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from hack import cluster_registry
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
