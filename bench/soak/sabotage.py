"""What a sabotaged soak does to taintkeeper partway through (bench/chaos.py --sabotage): something no
fault explains, which the judge must fail with the invariant named.

- `controller-scaled-to-0`: the controller's Deployment scaled to 0 (I10: no replica leads, by no fault);
- `webhook-stopped`: the webhook's Deployment scaled to 0, its configuration failing open as shipped
  (I6: pods admitted without the defaults while no fault accounts for the webhook's absence).
"""

from __future__ import annotations

import logging
import threading
import time

from kubernetes.client import ApiClient

from kube.request import request_json

NAMESPACE = "taintkeeper-system"
# Each sabotage: the Deployment scaled to 0, and the invariant the judge must name.
SABOTAGES = {
    "controller-scaled-to-0": ("taintkeeper-controller", "I10"),
    "webhook-stopped": ("taintkeeper-webhook", "I6"),
}
CALL_TIMEOUT = (3, 10)
log = logging.getLogger("chaos.sabotage")


def scale_to_zero(api_client: ApiClient, deployment: str) -> None:
    request_json(
        api_client,
        "PATCH",
        f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{deployment}/scale",
        body={"spec": {"replicas": 0}},
        content_type="application/merge-patch+json",
        timeout=CALL_TIMEOUT,
    )


def sabotage_after(api_client: ApiClient, kind: str, delay: float, stop: threading.Event) -> None:
    """At `delay` seconds from now (unless stopped first), the sabotage; tried again each second while the
    apiserver does not answer (a fault may have it down)."""
    deployment, _ = SABOTAGES[kind]
    if stop.wait(delay):
        return
    while not stop.is_set():
        try:
            scale_to_zero(api_client, deployment)
        except Exception as error:  # the apiserver may be down: the sabotage waits for it
            log.info("sabotage %s not yet done: %s", kind, error)
            stop.wait(1.0)
            continue
        log.info("sabotage %s: %s scaled to 0 at %.3f", kind, deployment, time.time())
        return
