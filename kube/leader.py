"""Leader election on a `coordination.k8s.io/v1` Lease, with the semantics of client-go's leaderelection.

Why not the Python client's own: its `run()` returns after losing the lease (no new campaign) and
it compares naive local times. Here:

* A stand-by never compares the holder's `renewTime` with its own clock (clocks skew): it notes,
  on its own monotonic clock, when it last saw the Lease record change, and takes over only after
  `lease_duration` without a change.
* Every write carries the resourceVersion that was read, so of two racing replicas exactly one wins.
* The leader steps down (`on_stopped_leading`) as soon as no renewal has succeeded for
  `renew_deadline`, which is shorter than `lease_duration`: it stops acting before anyone else
  may start. It then campaigns again; `run()` returns only when asked to stop.
* On stop it releases the Lease (empty holder, 1 s duration), so a stand-by takes over within
  one retry period instead of waiting out the lease.
* It keeps the write fence (kube/fence.py) up to date: open from each successful acquire or
  renewal for `renew_deadline`, closed when it steps down or releases.
* Each acquire or renewal can publish the holder's state in the Lease's annotations (`annotations`),
  riding on the write it makes anyway: whoever may read the Lease sees it, with no request of its own.
"""

from __future__ import annotations

import copy
import logging
import math
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kube.errors import describe_error, is_conflict, is_not_found, status_body
from kube.fence import WriteFence
from kube.request import request_json
from kube.timestamps import format_micro_time

Json = dict[str, Any]

logger = logging.getLogger("taintkeeper.leader")

# Campaign attempts wait retry_period plus up to this fraction, so replicas started together spread out.
CAMPAIGN_JITTER = 0.2
_LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


def default_identity() -> str:
    """hostname_<uuid4 hex>, as kube-controller-manager does: unique even when pods share a hostname."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex}"


def micro_time(moment: datetime) -> str:
    """A MicroTime as the API requires it: always six fractional digits, UTC, `Z`."""
    return format_micro_time(moment.timestamp())


def merged_annotations(metadata: Json, changes: Mapping[str, str | None]) -> Json:
    """`metadata` with `changes` merged into its annotations as a JSON merge patch would: None removes
    the key. Without annotations before or after, metadata has no `annotations` field."""
    annotations = {**(metadata.get("annotations") or {}), **changes}
    kept = {key: value for key, value in annotations.items() if value is not None}
    rest = {key: value for key, value in metadata.items() if key != "annotations"}
    return {**rest, "annotations": kept} if kept else rest


@dataclass(frozen=True)
class LeaderElectionConfig:
    lease_name: str
    lease_namespace: str
    identity: str
    lease_duration: float = 15
    renew_deadline: float = 10
    retry_period: float = 2

    def __post_init__(self) -> None:
        # The same checks as client-go's NewLeaderElector, phrased with the controller's flags.
        if not self.lease_name or not self.lease_namespace:
            raise ValueError("--leader-elect-resource-name and --leader-elect-resource-namespace must not be empty")
        if not self.identity:
            raise ValueError("the leader election identity must not be empty")
        if min(self.lease_duration, self.renew_deadline, self.retry_period) <= 0:
            raise ValueError(
                "--leader-elect-lease-duration, --leader-elect-renew-deadline and "
                "--leader-elect-retry-period must be greater than zero"
            )
        if self.lease_duration <= self.renew_deadline:
            raise ValueError(
                f"--leader-elect-lease-duration ({self.lease_duration:g}s) must be greater than "
                f"--leader-elect-renew-deadline ({self.renew_deadline:g}s)"
            )
        if self.renew_deadline <= 1.2 * self.retry_period:
            raise ValueError(
                f"--leader-elect-renew-deadline ({self.renew_deadline:g}s) must be greater than "
                f"1.2 x --leader-elect-retry-period ({self.retry_period:g}s)"
            )

    @property
    def lease_duration_seconds(self) -> int:
        """The Lease field is whole seconds; round up so stand-bys never wait less than configured."""
        return max(1, math.ceil(self.lease_duration))


class LeaseConflict(Exception):
    """HTTP 409: the Lease changed since it was read (or, on create, it already exists)."""


class LeaseApi(Protocol):
    """What the elector needs from the API; `LeaseClient` is the real one."""

    def get(self, name: str, namespace: str) -> Json | None: ...

    def create(self, body: Json) -> Json: ...

    def replace(self, body: Json) -> Json: ...


def lease_request_timeout(retry_period: float) -> tuple[float, float]:
    """(connect, read) seconds for one Lease call: no longer than a retry period, so a hung
    apiserver delays the step-down past the renew deadline by at most one retry period."""
    return (min(2.0, retry_period), retry_period)


class LeaseClient:
    """The elector's only I/O: GET, POST and PUT of one Lease as raw JSON.

    It uses its own connection pool (a Lease renewal never queues behind informer traffic) with
    urllib3's retries off: they would retry a timed-out GET or PUT up to three times and multiply
    the stall. Requests are sent without the client's pydantic models, which re-serialise a
    MicroTime whose microseconds are zero as `...:05+00:00` - rejected by the apiserver (400).
    """

    def __init__(self, api_client: client.ApiClient, *, retry_period: float = 2.0) -> None:
        configuration = copy.deepcopy(api_client.configuration)
        configuration.retries = False
        self._api_client = client.ApiClient(configuration)
        self._api_client.user_agent = api_client.user_agent  # the audit log names the replica renewing
        self.request_timeout = lease_request_timeout(retry_period)

    def close(self) -> None:
        self._api_client.close()

    def get(self, name: str, namespace: str) -> Json | None:
        """The Lease, or None if it does not exist."""
        try:
            return self._request("GET", _LEASE_PATH + "/{name}", {"namespace": namespace, "name": name})
        except ApiException as error:
            if is_not_found(error):
                return None
            raise

    def create(self, body: Json) -> Json:
        """POST; LeaseConflict if the Lease already exists."""
        return self._request("POST", _LEASE_PATH, {"namespace": body["metadata"]["namespace"]}, body)

    def replace(self, body: Json) -> Json:
        """PUT with the body's metadata.resourceVersion; LeaseConflict if the Lease changed since."""
        metadata = body["metadata"]
        if not metadata.get("resourceVersion"):
            raise ValueError("replace needs metadata.resourceVersion (optimistic concurrency)")
        return self._request(
            "PUT", _LEASE_PATH + "/{name}", {"namespace": metadata["namespace"], "name": metadata["name"]}, body
        )

    def _request(self, method: str, path: str, path_params: dict[str, str], body: Json | None = None) -> Json:
        try:
            lease: Json = request_json(
                self._api_client, method, path, path_params=path_params, body=body, timeout=self.request_timeout
            )
        except ApiException as error:
            if is_conflict(error):
                raise LeaseConflict(str(status_body(error).get("message") or "conflict")) from None
            raise
        return lease


class LeaderElector:
    """Campaigns for the Lease, renews it while leading, steps down and campaigns again on loss.

    `on_started_leading` and `on_stopped_leading` run on the thread calling `run()` and must return
    quickly (start or stop workers, don't do the work): renewal waits for them. Every successful
    on_started_leading is followed by exactly one on_stopped_leading. An exception from either ends
    `run()`; if on_started_leading raised, the Lease is released first and on_stopped_leading is not called.

    `fence`: the write fence the API edges ask (made here if not given); it must use the same
    monotonic clock and close at `config.renew_deadline`.

    `annotations`: called before each acquire or renewal write; what it returns is merged into the
    Lease's annotations (None removes a key, so a new holder can withdraw what the previous one
    published). It runs on the elector's thread and must return quickly and not raise. release()
    leaves the annotations as they are.
    """

    def __init__(
        self,
        config: LeaderElectionConfig,
        lease_client: LeaseApi,
        on_started_leading: Callable[[], None],
        on_stopped_leading: Callable[[], None],
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        jitter: Callable[[], float] = random.random,
        fence: WriteFence | None = None,
        annotations: Callable[[], Mapping[str, str | None]] = lambda: {},
    ) -> None:
        if fence is not None and fence.renew_deadline != config.renew_deadline:
            raise ValueError(
                f"the write fence closes after {fence.renew_deadline:g}s, the lease's renew deadline "
                f"is {config.renew_deadline:g}s"
            )
        self.fence = fence if fence is not None else WriteFence(config.renew_deadline, monotonic=monotonic)
        self._config = config
        self._client = lease_client
        self._on_started_leading = on_started_leading
        self._on_stopped_leading = on_stopped_leading
        self._monotonic = monotonic
        self._wall_clock = wall_clock
        self._jitter = jitter
        self._annotations = annotations
        self._lock = threading.Lock()  # guards what other threads read: _leading, _observed_holder
        self._leading = False
        self._observed_holder = ""
        # The Lease's spec as last seen, and when (our monotonic clock) it was last seen to change.
        self._observed_spec: Json | None = None
        self._observed_time = 0.0
        self._lease: Json | None = None  # last Lease read or written: its resourceVersion is the one to write with
        self._last_renewal = 0.0  # start of the last successful acquire/renew attempt (monotonic)

    @property
    def is_leader(self) -> bool:
        with self._lock:
            return self._leading

    @property
    def leader_identity(self) -> str:
        """The holder of the Lease as last observed ("" if released or never seen)."""
        with self._lock:
            return self._observed_holder

    @property
    def _name(self) -> str:
        return f"{self._config.lease_namespace}/{self._config.lease_name}"

    def run(self, stop: threading.Event) -> None:
        """Campaign, lead, step down, campaign again... until `stop` is set; then release the
        Lease if held and call on_stopped_leading."""
        logger.info("campaigning for lease %s as %s", self._name, self._config.identity)
        try:
            while not stop.is_set():
                stop.wait(self.tick())
        finally:
            if self.is_leader:
                self._set_leading(False)
                self._release_when_drained()
                self._on_stopped_leading()

    def tick(self) -> float:
        """One round of `run()`: try to acquire or renew, start or stop leading accordingly.
        Returns the seconds to wait before the next round."""
        if not self.is_leader:
            return self._campaign_round()
        return self._renew_round()

    def _campaign_round(self) -> float:
        attempt_start = self._monotonic()
        if self.try_acquire_or_renew():
            self._renewed(attempt_start)
            self._set_leading(True)
            logger.info("became leader of lease %s as %s", self._name, self._config.identity)
            try:
                self._on_started_leading()
            except BaseException:
                logger.exception("on_started_leading failed; releasing lease %s", self._name)
                self._set_leading(False)
                self._release_when_drained()
                raise
            return self._config.retry_period
        return self._config.retry_period * (1 + CAMPAIGN_JITTER * self._jitter())

    def _renew_round(self) -> float:
        deadline = self._last_renewal + self._config.renew_deadline
        attempt_start = self._monotonic()
        if attempt_start < deadline and self.try_acquire_or_renew(deadline=deadline):
            self._renewed(attempt_start)
            return self._config.retry_period
        taken_by = self.leader_identity if self.leader_identity not in ("", self._config.identity) else ""
        now = self._monotonic()
        if taken_by or now >= deadline:
            # Stop acting before a stand-by may start: it waits lease_duration > renew_deadline.
            self._set_leading(False)
            reason = f"lease now held by {taken_by}" if taken_by else f"not renewed for {now - self._last_renewal:.1f}s"
            logger.warning("lost leadership of lease %s (%s)", self._name, reason)
            self._on_stopped_leading()
            return self._config.retry_period * (1 + CAMPAIGN_JITTER * self._jitter())
        return min(self._config.retry_period, deadline - now)

    def try_acquire_or_renew(self, deadline: float | None = None) -> bool:
        """client-go's tryAcquireOrRenew: True if we hold the Lease after this call. API errors
        are logged and count as not acquired. With `deadline` (monotonic), nothing is written
        once it has passed (a renewal that late must not extend a leadership already given up)."""
        config = self._config
        attempt_start = self._monotonic()
        now = micro_time(self._wall_clock())
        try:
            lease = self._client.get(config.lease_name, config.lease_namespace)
        except Exception as error:
            logger.warning("could not read lease %s: %s", self._name, describe_error(error))
            return False
        if lease is None:
            body: Json = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": merged_annotations(
                    {"name": config.lease_name, "namespace": config.lease_namespace}, self._annotations()
                ),
                "spec": {
                    "holderIdentity": config.identity,
                    "leaseDurationSeconds": config.lease_duration_seconds,
                    "acquireTime": now,
                    "renewTime": now,
                    "leaseTransitions": 0,
                },
            }
            return self._write(self._client.create, body, "create")
        self._observe(lease)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        ours = holder == config.identity
        if holder and not ours and self._observed_time + config.lease_duration > attempt_start:
            return False  # held by another and, by our own clock, renewed less than lease_duration ago
        if deadline is not None and self._monotonic() >= deadline:
            return False
        body = copy.deepcopy(lease)
        body["metadata"] = merged_annotations(body.get("metadata") or {}, self._annotations())
        body["spec"] = {
            **spec,
            "holderIdentity": config.identity,
            "leaseDurationSeconds": config.lease_duration_seconds,
            "acquireTime": spec.get("acquireTime") if ours and spec.get("acquireTime") else now,
            "renewTime": now,
            "leaseTransitions": int(spec.get("leaseTransitions") or 0) + (0 if ours else 1),
        }
        return self._write(self._client.replace, body, "update")

    def _release_when_drained(self) -> bool:
        """Release the Lease once every write the fence let through has its answer (it is closed by now): a
        stand-by takes a released Lease at once, and a write still on its way would land after. Writes still
        unanswered after the renew deadline: the Lease is left to expire (a stand-by then waits out the lease
        duration, as after a crash)."""
        if not self.fence.drain(self._config.renew_deadline):
            logger.warning(
                "writes still unanswered %gs after stepping down; not releasing lease %s: it expires",
                self._config.renew_deadline,
                self._name,
            )
            return False
        return self.release()

    def release(self) -> bool:
        """Give the Lease up (client-go ReleaseOnCancel): empty holder, 1 s duration, so a stand-by
        takes it at its next attempt. Written with the resourceVersion last seen: if someone else has
        written since, the Lease is no longer ours and is left alone. `run()` calls this on stop;
        like `tick()` and `try_acquire_or_renew()`, call it only from the thread that runs the elector."""
        if self._lease is None or (self._observed_holder != self._config.identity):
            return True
        now = micro_time(self._wall_clock())
        body = copy.deepcopy(self._lease)
        body["spec"] = {
            **(body.get("spec") or {}),
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "acquireTime": now,
            "renewTime": now,
        }
        try:
            self._observe(self._client.replace(body))
        except LeaseConflict:
            logger.info("lease %s changed since our last renewal; not releasing it", self._name)
            return False
        except Exception as error:
            logger.warning("could not release lease %s: %s", self._name, describe_error(error))
            return False
        logger.info("released lease %s", self._name)
        return True

    def _write(self, write: Callable[[Json], Json], body: Json, verb: str) -> bool:
        try:
            written = write(body)
        except LeaseConflict as conflict:
            logger.info("lost the race to %s lease %s: %s", verb, self._name, describe_error(conflict))
            return False
        except Exception as error:
            logger.warning("could not %s lease %s: %s", verb, self._name, describe_error(error))
            return False
        self._observe(written)
        return True

    def _observe(self, lease: Json) -> None:
        """Remember the Lease; restart the expiry clock whenever its spec changed (a renewal)."""
        self._lease = lease
        spec = lease.get("spec") or {}
        if spec == self._observed_spec:
            return
        self._observed_spec = spec
        self._observed_time = self._monotonic()
        holder = spec.get("holderIdentity") or ""
        with self._lock:
            previous, self._observed_holder = self._observed_holder, holder
        if holder and holder != previous and holder != self._config.identity:
            logger.info("new leader observed: %s (lease %s)", holder, self._name)

    def _renewed(self, attempt_start: float) -> None:
        self._last_renewal = attempt_start
        self.fence.renewed(attempt_start, term=self._held_term())

    def _held_term(self) -> str | None:
        """The term this replica holds: the acquireTime of the Lease it just wrote (kube/acting_term.py)."""
        spec = (self._lease or {}).get("spec") or {}
        acquired = spec.get("acquireTime")
        return str(acquired) if acquired else None

    def _set_leading(self, leading: bool) -> None:
        if not leading:
            self.fence.close()  # before on_stopped_leading: workers still running write nothing more
        with self._lock:
            self._leading = leading
