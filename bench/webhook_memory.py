"""The webhook's memory: its gunicorn master and workers on this host, after a burst of reviews.

For each process, from /proc/PID/smaps_rollup: RSS (counts every shared page in every process), PSS
(each shared page divided among the processes sharing it: the sum is what the pod costs) and USS
(its private pages). Master and workers share what was loaded before the fork (webhook/gunicorn_conf.py
preloads the app and freezes the collector), so the sum of RSS overstates the pod; the sum of PSS is
close to what a container's cgroup charges.

    .venv/bin/python bench/webhook_memory.py [--workers 2] [--reviews 2000] [--kubeconfig FILE]

With --kubeconfig the namespace cache is on (its watch need not connect); without, it is off.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hack.servers import WebhookServer, make_certs  # noqa: E402

REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "bench",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "default",
        "operation": "CREATE",
        "object": {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        },
    },
}


def rollup(pid: int) -> dict[str, float]:
    """smaps_rollup's fields in MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, value = line.split(":", 1)
        fields[key] = int(value.split()[0]) / 1024
    return fields


def children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False).stdout
    return [int(child) for child in found.split()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reviews", type=int, default=2000)
    parser.add_argument("--kubeconfig", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="webhook-memory-") as scratch:
        directory = Path(scratch)
        make_certs(directory)
        server = WebhookServer(
            directory, directory / "webhook.log", workers=args.workers, kubeconfig=args.kubeconfig
        ).start()
        try:
            body = json.dumps(REVIEW).encode()
            context = server.ssl_context()
            for _ in range(args.reviews):
                request = urllib.request.Request(server.url, data=body, headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, context=context, timeout=10) as response:
                    response.read()
            assert server.process is not None
            master = server.process.pid
            rows = [("master", rollup(master))] + [
                (f"worker {n + 1}", rollup(pid)) for n, pid in enumerate(children(master))
            ]
        finally:
            server.stop()
    print(
        f"webhook memory: {args.workers} gevent workers, namespace cache "
        f"{'on' if args.kubeconfig else 'off'}, after {args.reviews:,} reviews (MiB)\n"
    )
    print("| process | RSS | PSS | USS |\n|---|---|---|---|")
    totals = [0.0, 0.0, 0.0]
    for name, fields in rows:
        values = [fields["Rss"], fields["Pss"], fields["Private_Clean"] + fields["Private_Dirty"]]
        totals = [total + value for total, value in zip(totals, values, strict=True)]
        print(f"| {name} | {values[0]:.1f} | {values[1]:.1f} | {values[2]:.1f} |")
    print(f"| **all** | {totals[0]:.1f} | **{totals[1]:.1f}** | {totals[2]:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
