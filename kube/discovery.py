"""A dynamic client whose discovery is the server's own.

The client library caches discovery in a file under the temporary directory named by the server's
address alone, and keeps it across processes: a local cluster started later on the same port (a 1.20
run after a 1.37 one) would be told the other version's kinds - policy/v1 served where it is not, so
an apply gets a bare 404. Each client here gets a cache of its own, removed at exit.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from kubernetes import client
from kubernetes.dynamic import DynamicClient


def dynamic_client(api_client: client.ApiClient) -> DynamicClient:
    directory = tempfile.mkdtemp(prefix="taintkeeper-discovery-")
    atexit.register(shutil.rmtree, directory, True)
    return DynamicClient(api_client, cache_file=str(Path(directory) / "discovery.json"))
