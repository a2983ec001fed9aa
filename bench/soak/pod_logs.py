"""Copies of taintkeeper's pods' logs, kept through a soak: the kubelet removes a pod's log files
with the pod (a webhook replica deleted, a controller evicted), and the checker's findings may need
them afterwards. Every few seconds each log file under the nodes' /var/log/pods whose pod is in
the namespace is copied to DIR/chaos/pod-logs/ when it has grown; a copy outlives its original."""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path

log = logging.getLogger("chaos.pod-logs")


def copy_new(nodes_dir: Path, namespace: str, dest: Path) -> int:
    """One pass; returns how many files were copied."""
    copied = 0
    for source in nodes_dir.glob(f"*/host/var/log/pods/{namespace}_*/*/*.log"):
        pod_dir, container = source.parent.parent.name, source.parent.name
        target = dest / pod_dir / container / source.name
        try:
            size = source.stat().st_size
            if target.exists() and target.stat().st_size >= size:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            copied += 1
        except OSError as error:  # rotated or removed between the glob and the copy: the next pass
            log.debug("could not copy %s: %s", source, error)
    return copied


def keep_pod_logs(nodes_dir: Path, namespace: str, dest: Path, stop: threading.Event, every: float = 5.0) -> None:
    while True:
        copy_new(nodes_dir, namespace, dest)
        if stop.wait(every):
            copy_new(nodes_dir, namespace, dest)
            return
