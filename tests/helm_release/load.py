"""Pods created at a steady rate while a release changes: what each creation got from the apiserver.

The pods carry a scheduling gate, so they are never scheduled and cost the nodes nothing; they exist
only to go through admission (the webhook) and to be seen by the controller (the backfill). Each
creation is kept with its answer: the status code, how long it took, and whether the pod came back
with the default tolerations already (the webhook's work) or without (left to the backfill).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config

from tests.e2e.cluster import default_tolerations

GATE = "taintkeeper.io/e2e-hold"  # never removed: the pods are never scheduled


@dataclass(frozen=True)
class Creation:
    name: str
    sent: float  # epoch seconds
    seconds: float  # until the apiserver answered
    code: int  # 201, or the error's status (0: no answer)
    mutated: bool  # answered with the default tolerations
    error: str = ""


class PodLoad:
    """`rate` pod creations per second into `namespace`, from a thread of its own, until `stop()`."""

    def __init__(self, kubeconfig: Path, namespace: str, image: str, rate: float = 2.0, prefix: str = "load") -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.image = image
        self.rate = rate
        self.prefix = prefix
        self.creations: list[Creation] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> PodLoad:
        self._thread = threading.Thread(target=self._run, name=f"pod-load-{self.prefix}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[Creation]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)
        return list(self.creations)

    def __len__(self) -> int:
        return len(self.creations)

    def _body(self, name: str) -> dict:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"taintkeeper-e2e": "load"}},
            "spec": {
                "schedulingGates": [{"name": GATE}],
                "containers": [{"name": "pause", "image": self.image, "imagePullPolicy": "IfNotPresent"}],
                "terminationGracePeriodSeconds": 1,
            },
        }

    def _run(self) -> None:
        with config.new_client_from_config(config_file=str(self.kubeconfig)) as api_client:
            # Raw: the answer as sent (the generated model would drop nothing here, but costs a decode per pod).
            create: Any = client.CoreV1Api(api_client).create_namespaced_pod
            started = time.monotonic()
            number = 0
            while not self._stop.is_set():
                name = f"{self.prefix}-{number:05d}"
                sent, clock = time.time(), time.monotonic()
                try:
                    response = create(self.namespace, self._body(name), _preload_content=False, _request_timeout=30)
                    tolerations = json.loads(response.data)["spec"].get("tolerations") or []
                    creation = Creation(
                        name, sent, time.monotonic() - clock, response.status, tolerations == default_tolerations()
                    )
                except client.ApiException as error:
                    creation = Creation(
                        name, sent, time.monotonic() - clock, error.status or 0, False, str(error.reason)
                    )
                except Exception as error:  # no answer at all (connection refused, timeout): a failed creation
                    creation = Creation(name, sent, time.monotonic() - clock, 0, False, " ".join(str(error).split()))
                self.creations.append(creation)
                number += 1
                self._stop.wait(max(0.0, started + number / self.rate - time.monotonic()))
