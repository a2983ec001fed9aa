"""The User-Agent each taintkeeper process sends: `COMPONENT/VERSION (POD_NAME)`.

The apiserver's audit log records every request's User-Agent, so a write there names the process
and the replica (pod) that made it. POD_NAME comes from the downward API (the manifests set it from
`metadata.name`); outside a pod the hostname stands in.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import socket
from collections.abc import Mapping

CONTROLLER = "taintkeeper-controller"
WEBHOOK = "taintkeeper-webhook"
CERTS = "taintkeeper-certs"
EXPLAIN = "taintkeeper-explain"  # `python -m controller explain` and `kubectl taintkeeper explain`
STATUS = "taintkeeper-status"  # `python -m controller status` and `kubectl taintkeeper status`
FENCE = "taintkeeper-fence"  # `python -m controller fence|unfence` and `kubectl taintkeeper fence|unfence`
RELEASE_CHECK = "taintkeeper-release-check"  # `helm test`: python -m kubectl_taintkeeper.release_check

POD_NAME_ENV = "POD_NAME"
UNKNOWN_VERSION = "0.0.0"  # run from a source tree that was never installed


@functools.cache
def package_version() -> str:
    try:
        return importlib.metadata.version("taintkeeper")
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN_VERSION


def user_agent(component: str, environ: Mapping[str, str] | None = None) -> str:
    """`component/version (pod)`; `environ` defaults to the process environment."""
    pod_name = (os.environ if environ is None else environ).get(POD_NAME_ENV) or socket.gethostname()
    return f"{component}/{package_version()} ({pod_name})"
