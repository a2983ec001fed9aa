"""The Environment lines of the webhook benchmark's report: CPUs and core speed, OS, and the software's versions."""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import os
import platform
import ssl
import subprocess
from pathlib import Path

from bench.cpu_calibration import CALIBRATION_LOOPS


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _debian_version(package: str) -> str:
    result = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True, check=False)
    return result.stdout.strip() if result.returncode == 0 else "unknown"


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def environment_lines(args: argparse.Namespace, calibration: float) -> list[str]:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [
        f"- CPUs: {os.cpu_count()} (usable by this process: {usable}), {_cpu_model()}",
        f"- core speed: a {CALIBRATION_LOOPS:,}-iteration pure-Python `total += i` loop took {calibration:.2f} s "
        "(best of 3, before the runs)",
        f"- OS: {platform.platform()}",
        f"- Python {platform.python_version()}, {ssl.OPENSSL_VERSION}",
        f"- flask {_version('flask')}, werkzeug {_version('werkzeug')}, gunicorn {_version('gunicorn')}, "
        f"kopf {_version('kopf')}, aiohttp {_version('aiohttp')}",
        f"- wrk {_debian_version('wrk')}, hey {_debian_version('hey')} (Debian packages)",
        "- TLS: ECDSA P-256 serving certificate from `python -m certs` (hack/servers.py `make_certs`)",
        f"- servers: ours and static with {args.workers} gunicorn workers of the gevent class (the default; "
        f"the -gthread variants: gthread, {args.threads} threads each); kopf is a single asyncio process",
        f"- gevent {_version('gevent')}, orjson {_version('orjson')}, gunicorn-h1c {_version('gunicorn-h1c')}",
        "- kopf's cluster: kube-apiserver 1.20.2 + etcd from hack/local-cluster.sh, idle and running during "
        "all three servers' runs",
    ]
