"""The simulator's pod watch (see hack/simulator.py): bound pods across namespaces, listed in pages
and then watched, to learn which ones are Terminating and when their grace period ends."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from typing import Any

from kubernetes.watch.watch import iter_resp_lines

from hack.simulator_base import SimulatorBase
from hack.simulator_state import Json, _TerminatingPod
from kube.errors import describe_error
from kube.timestamps import parse_time

log = logging.getLogger("simulator")

# Bound pods only: unscheduled pods are deleted at once by the apiserver and no kubelet owns them.
BOUND_PODS = "spec.nodeName!="
WATCH_SECONDS = 60
LIST_PAGE_SIZE = 500  # pods per page of the relist (an informer's page)


class PodWatch(SimulatorBase):
    """The list+watch loop of the pod-watch thread; what it learns is in `_terminating`."""

    def _watch_loop(self) -> None:
        """List, then watch bound pods across namespaces, to learn which ones are Terminating."""
        resource_version: str | None = None
        while not self._stopping.is_set():
            try:
                if resource_version is None:
                    resource_version = self._relist()
                resource_version = self._watch(resource_version)
            except Exception as error:
                if self._stopping.is_set():
                    break
                # Seen, not hidden: until the relist ends, no Terminating pod is finished.
                log.warning("pod watch failed, listing again: %s", describe_error(error))
                resource_version = None
                self._pods_listed.clear()
                self._stopping.wait(1.0)
            finally:
                self._thread_cpu["pod-watch"] = time.thread_time()

    def _relist(self) -> str:
        """List the bound pods in pages, as an informer does: in one response the apiserver reads,
        decodes and encodes every pod of the cluster at once. Only the Terminating ones are kept."""
        pods: list[Json] = []
        started = time.monotonic()
        query = [("fieldSelector", BOUND_PODS), ("limit", str(LIST_PAGE_SIZE))]
        while True:
            listed = self._request("GET", "/api/v1/pods", query=query)
            pods.extend(pod for pod in listed.get("items") or () if pod["metadata"].get("deletionTimestamp"))
            continue_token = listed["metadata"].get("continue")
            if not continue_token:
                break
            query = [("fieldSelector", BOUND_PODS), ("limit", str(LIST_PAGE_SIZE)), ("continue", continue_token)]
        with self._wakeup:
            previous = self._terminating
            self._terminating = {}
            for pod in pods:
                self._observe(pod, previous)
            self._wakeup.notify_all()
        self._pods_listed.set()
        log.info("listed the bound pods in %.1fs: %d Terminating", time.monotonic() - started, len(pods))
        return str(listed["metadata"]["resourceVersion"])

    def _watch(self, resource_version: str) -> str | None:
        """One watch request until the server ends it; the resourceVersion to go on from, or None
        when it is too old (410 Gone) and a relist is needed."""
        query = [
            ("fieldSelector", BOUND_PODS),
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(WATCH_SECONDS)),
        ]
        response = self._request("GET", "/api/v1/pods", query=query, stream=True, timeout=(5, WATCH_SECONDS + 15))
        with self._lock:
            self._watch_response = response
        if self._stopping.is_set():  # stop() came before the response was published: it won't unblock it
            response.close()
            return resource_version
        completed = False
        try:
            for line in iter_resp_lines(response):
                event = json.loads(line)
                pod = event["object"]
                if event["type"] == "ERROR":
                    if pod.get("code") == 410:
                        return None
                    raise RuntimeError(f"watch error: {pod.get('message')}")
                resource_version = pod["metadata"].get("resourceVersion") or resource_version
                if event["type"] == "DELETED":
                    with self._lock:
                        self._terminating.pop((pod["metadata"]["namespace"], pod["metadata"]["name"]), None)
                elif event["type"] != "BOOKMARK":
                    with self._wakeup:
                        self._observe(pod, self._terminating)
                        self._wakeup.notify_all()
            completed = True
            return resource_version
        finally:
            with self._lock:
                self._watch_response = None
            if completed:
                response.release_conn()
            else:
                response.close()

    def _observe(self, pod: Json, known: dict[tuple[str, str], _TerminatingPod]) -> None:
        """Track a pod that has a deletionTimestamp (lock held); `known` keeps claims across relists."""
        metadata = pod["metadata"]
        key = (metadata["namespace"], metadata["name"])
        deletion = metadata.get("deletionTimestamp")
        if not deletion:
            self._terminating.pop(key, None)
            return
        existing = known.get(key)
        if existing is not None and existing.uid == metadata["uid"]:
            existing.deadline = parse_time(deletion) or 0.0  # a second delete may have shortened the grace period
            self._terminating[key] = existing
            return
        self._terminating[key] = _TerminatingPod(
            namespace=key[0],
            name=key[1],
            uid=metadata["uid"],
            node=pod["spec"].get("nodeName") or "",
            deadline=parse_time(deletion) or 0.0,
        )


def _unblock(response: Any) -> None:
    """Wake a thread blocked reading a watch stream: shut the socket down under it."""
    try:
        response.shutdown()
    except Exception:  # already closed, or an urllib3 without shutdown()
        with contextlib.suppress(Exception):
            response.close()
