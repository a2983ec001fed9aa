"""A containerd of the project's own, beside any other on the host: started on the caller's config (its own
root, state and socket), waited for until `ctr version` answers, and stopped (SIGTERM, then SIGKILL) however
the block ends. The kind node image's preload, its test, and the image's own test run one each."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path


class ContainerdError(RuntimeError):
    """The containerd did not answer: the message ends with its log's tail."""


@contextlib.contextmanager
def running(config: Path, socket: str, log: Path, prefix: Sequence[str] = (), timeout: float = 30) -> Iterator[None]:
    """`prefix` goes before the command (e.g. `unshare --mount`: the daemon's mounts stay out of the host's)."""
    with open(log, "wb") as out:
        daemon = subprocess.Popen(
            [*prefix, "containerd", "--config", str(config)], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + timeout
        while subprocess.run(["ctr", "--address", socket, "version"], capture_output=True).returncode != 0:
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise ContainerdError(f"containerd did not answer on {socket} (log {log}):\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()


def write_plain_config(directory: Path) -> tuple[Path, str]:
    """A config for a containerd that only pulls, imports and runs (no CRI, no debug or metrics listener), its
    root and state under `directory`; the config's path and its socket's. `directory` must be short: a unix
    socket's path has at most 104 bytes."""
    socket = f"{directory}/containerd.sock"
    config = directory / "config.toml"
    config.write_text(
        "\n".join(
            [
                "version = 2",
                f'root = "{directory}/root"',
                f'state = "{directory}/state"',
                'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
                "[grpc]",
                f'  address = "{socket}"',
                "[ttrpc]",
                f'  address = "{socket}.ttrpc"',
                "[debug]",
                '  address = ""',
                "[metrics]",
                '  address = ""',
                "",
            ]
        )
    )
    return config, socket
