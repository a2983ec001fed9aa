"""The registry a cluster's nodes pull taintkeeper from: one per cluster directory, in DIR/registry, started on
first use and stopped by `hack/local-cluster.sh down DIR` / `kind-down DIR` (its pid file).

Where it listens is where the nodes reach the host: loopback for the local cluster (its nodes' containerd
share the host's network), the gateway of Docker's network `kind` for a kind cluster (the host's address on
the nodes' bridge). Each node's containerd trusts it as kind documents for a local registry
(https://kind.sigs.k8s.io/docs/user/local-registry/): a hosts.toml per registry address in the directory its
CRI `config_path` names, with the registry's CA; containerd reads these at each pull, so no restart.

    hack/local-cluster.sh registry DIR      (python -m hack.cluster_registry DIR): prints the address
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hack.kind_cluster import KindCluster, KindError
from hack.registry import PushedChart, Registry, RegistryError

LOOPBACK = "127.0.0.1"
# Where a kind node's containerd looks for hosts.toml: hack/lib/kind.sh sets config_path to it.
KIND_HOSTS_DIR = "/etc/containerd/certs.d"
KIND_CONTAINERD_CONFIG = "/etc/containerd/config.toml"  # kind applies its containerdConfigPatches to it
KIND_CONFIG_PATH_LINE = f'config_path = "{KIND_HOSTS_DIR}"'


def registry_directory(cluster: Path) -> Path:
    return cluster / "registry"


def address(cluster: Path) -> str:
    """The address DIR's registry listens on (RegistryError when it never started)."""
    try:
        return (registry_directory(cluster) / "address").read_text().strip()
    except FileNotFoundError:
        raise RegistryError(f"{cluster} has no registry (hack/local-cluster.sh registry {cluster})") from None


def local_hosts_dir(cluster: Path) -> Path:
    """The local cluster's nodes' config_path (hack/lib/nodes.sh writes it into each containerd.toml)."""
    return registry_directory(cluster) / "hosts"


def hosts_toml(address: str, ca_file: str) -> str:
    """containerd's hosts.toml for a TLS registry at `address` whose certificate `ca_file` signed. The CA is
    given twice: containerd 1.6 reads no file without a [host] entry, and tries the `server` after the entries,
    where without its own `ca` it would answer a missing digest with a certificate error."""
    return (
        f'server = "https://{address}"\n'
        f'ca = "{ca_file}"\n\n'
        f'[host."https://{address}"]\n'
        '  capabilities = ["pull", "resolve"]\n'
        f'  ca = "{ca_file}"\n'
    )


def ensure(cluster: Path) -> Registry:
    """DIR's registry, started if it is not running, and every node of DIR told to trust it."""
    kind = KindCluster.of(cluster)
    directory = registry_directory(cluster)
    directory.mkdir(parents=True, exist_ok=True)
    with _locked(directory):  # one registry per DIR, whoever asks at once
        registry = Registry.attach(directory)
        if registry is None:
            try:
                listen = LOOPBACK if kind is None else kind.gateway()
            except KindError as error:
                raise RegistryError(str(error)) from error
            registry = Registry(directory, listen).start()
    if kind is None:
        trust_local(cluster, registry.address, registry.ca_file)
    else:
        trust_kind(kind, registry.address, registry.ca_file)
    return registry


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    with open(directory / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def trust_local(cluster: Path, address: str, ca_file: Path) -> None:
    """The hosts.toml the local cluster's nodes read; refused, in one line, for nodes whose containerd does not
    read them (made before the nodes were told of a registry: a new `up` writes their configuration)."""
    hosts_dir = local_hosts_dir(cluster)
    blind = sorted(
        config.parent.name
        for config in (cluster / "nodes").glob("*/containerd.toml")
        if f'config_path = "{hosts_dir}"' not in config.read_text()
    )
    if blind:
        raise RegistryError(
            f"the containerd of node(s) {', '.join(blind)} does not read {hosts_dir} "
            f"(made before nodes were told of a registry): hack/local-cluster.sh down {cluster}, then up it again"
        )
    hosts = hosts_dir / address
    hosts.mkdir(parents=True, exist_ok=True)
    (hosts / "hosts.toml").write_text(hosts_toml(address, str(ca_file)))


def trust_kind(kind: KindCluster, address: str, ca_file: Path) -> None:
    """The hosts.toml and CA in every node; refused, in one line, for nodes whose containerd does not read them
    (a cluster made before hack/lib/kind.sh set config_path) or that cannot be read (not running)."""
    hosts = f"{KIND_HOSTS_DIR}/{address}"
    files = (("ca.crt", ca_file.read_text()), ("hosts.toml", hosts_toml(address, f"{hosts}/ca.crt")))
    nodes = kind.nodes()
    if not nodes:
        raise RegistryError(f"kind cluster {kind.name} has no nodes to tell of the registry (kind get nodes)")
    # Node by node each `docker exec` waits ~0.15 s, and every push asks again: the nodes side by side.
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        configs = dict(
            zip(nodes, pool.map(lambda node: kind.read_file(node, KIND_CONTAINERD_CONFIG), nodes), strict=True)
        )
        blind = sorted(node for node, text in configs.items() if text is None or KIND_CONFIG_PATH_LINE not in text)
        if blind:
            raise RegistryError(
                f"the containerd of kind node(s) {', '.join(blind)} does not read {KIND_HOSTS_DIR} (not running, or "
                f"made before nodes were told of a registry): kind-down the cluster, then kind-up it again"
            )

        def write(node: str) -> str | None:
            for name, text in files:
                failure = kind.write_file(node, f"{hosts}/{name}", text)
                if failure is not None:
                    return f"could not write {hosts}/{name} on kind node {node}: {failure}"
            return None

        failures = [failure for failure in pool.map(write, nodes) if failure is not None]
    if failures:
        raise RegistryError(failures[0])


def publish_chart(cluster: Path, helm: Path, chart: Path) -> PushedChart:
    """`helm package` the chart in `chart` and `helm push` it to DIR's registry: what `helm install oci://...
    --version V` installs."""
    registry = ensure(cluster)
    packages = registry_directory(cluster) / "charts"
    packages.mkdir(exist_ok=True)
    packaged = subprocess.run(
        [str(helm), "package", str(chart), "-d", str(packages)], capture_output=True, text=True, timeout=120
    )
    if packaged.returncode != 0:
        raise RegistryError(f"helm package {chart}: {packaged.stderr.strip()}")
    archive = Path(packaged.stdout.strip().rpartition(": ")[2])  # "Successfully packaged chart and saved it to: P"
    return registry.push_chart(helm, archive)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hack/local-cluster.sh registry", description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path, help="a cluster's directory (up DIR --nodes N, or kind-up DIR)")
    args = parser.parse_args(argv)
    cluster = args.dir.resolve()
    if not cluster.is_dir():
        print(f"registry: error: no such directory: {args.dir}", file=sys.stderr)
        return 1
    try:
        registry = ensure(cluster)
    except RegistryError as error:
        print(f"registry: error: {error}", file=sys.stderr)
        return 1
    print(registry.address)
    return 0


if __name__ == "__main__":
    sys.exit(main())
