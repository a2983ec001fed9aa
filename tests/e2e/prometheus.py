"""A Prometheus server (Debian's package, installed with the test tools) on the host, scraping the
deployed controller and webhook pods by their pod IPs (the local cluster routes the pod network to
the host) with the shipped scrape jobs (manifests/monitoring/prometheus/taintkeeper-scrape.yaml: over TLS
with a ServiceAccount's token bound to the ClusterRole taintkeeper-metrics-reader), and its query API."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from hack.servers import free_port
from tests.e2e.cluster import wait_for

PROMETHEUS = Path("/usr/bin/prometheus")
SCRAPE_INTERVAL = "2s"


SHIPPED_JOBS = (
    Path(__file__).resolve().parents[2] / "manifests" / "monitoring" / "prometheus" / "taintkeeper-scrape.yaml"
)


def scrape_jobs(token_file: Path, targets: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The shipped scrape jobs with a token of the host's in place of the pod's own, and the replicas' pod IPs
    as static targets in place of their discovery: Debian's Prometheus is built without Kubernetes discovery
    (the relabelling that picks the replicas is checked in tests/unit/manifests/test_scrape_jobs.py)."""
    jobs = yaml.safe_load(SHIPPED_JOBS.read_text())
    for job in jobs:
        job["authorization"]["credentials_file"] = str(token_file)
        del job["kubernetes_sd_configs"], job["relabel_configs"]
        job["static_configs"] = [{"targets": targets[job["job_name"]]}]
    return list(jobs)


class Prometheus:
    def __init__(self, directory: Path, controllers: list[str], webhooks: list[str], token_file: Path) -> None:
        """controllers, webhooks: host:port of each replica's metrics endpoint."""
        self.directory = directory
        self.port = free_port()
        self.targets = len(controllers) + len(webhooks)
        targets = {"taintkeeper-controller": controllers, "taintkeeper-webhook": webhooks}
        config = {
            "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
            "scrape_configs": scrape_jobs(token_file, targets),
        }
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = directory / "prometheus.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Prometheus:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    str(PROMETHEUS),
                    f"--config.file={self.directory / 'prometheus.yml'}",
                    f"--storage.tsdb.path={self.directory / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_for(self._ready, 60, f"Prometheus ready (log: {self.log})", interval=0.5)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)

    def _get(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())

    def _ready(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"prometheus exited with {self.process.returncode}; see {self.log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def targets_up(self) -> bool:
        active = self._get("/api/v1/targets")["data"]["activeTargets"]
        return len(active) == self.targets and all(target["health"] == "up" for target in active)

    def rates_computable(self, window: str) -> bool:
        """Every target scraped at least twice within window: before that a rate() over it returns no
        series at all, which a panel meant to show 0 would read as missing."""
        return len(self.query(f"count_over_time(up[{window}]) >= 2")) == self.targets

    def query(self, expr: str) -> list[tuple[dict[str, str], float]]:
        """An instant query: each series' labels and value (NaN kept as NaN)."""
        answer = self._get("/api/v1/query", query=expr)
        if answer.get("status") != "success":
            raise AssertionError(f"query failed: {expr}: {answer}")
        data = answer["data"]
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        return [(series["metric"], float(series["value"][1])) for series in data["result"]]
