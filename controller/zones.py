"""Zones for the node lifecycle controller: zone key, zone state, and the tainting rate per state.

Upstream NodeLifecycleController taints not-ready nodes at a per-zone rate that drops when a
large share of a zone is down, on the theory that a widespread outage is more likely to be a
network partition or a control-plane problem than many nodes dying at once. Everything here
is pure: labels and Ready statuses in, plain values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum

LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"
LABEL_TOPOLOGY_REGION = "topology.kubernetes.io/region"
LABEL_FAILURE_DOMAIN_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
LABEL_FAILURE_DOMAIN_BETA_REGION = "failure-domain.beta.kubernetes.io/region"

# Present with any value (even "" or "false"): the node is left out of its zone's health count.
EXCLUDE_DISRUPTION_LABEL = "node.kubernetes.io/exclude-disruption"

# Upstream requires more than this many not-ready nodes before a zone can be PartialDisruption,
# so a small zone losing one or two nodes keeps the normal rate.
_PARTIAL_DISRUPTION_MIN_NOT_READY = 2


class ZoneState(StrEnum):
    """A zone's state under upstream's names.

    A StrEnum (a `str` and an `Enum`, which ruff's UP042 asks for over `(str, Enum)`): members
    compare equal to upstream's names and format as them in logs and metric labels.
    """

    INITIAL = "Initial"
    NORMAL = "Normal"
    PARTIAL_DISRUPTION = "PartialDisruption"
    FULL_DISRUPTION = "FullDisruption"


def _first_present(labels: Mapping[str, str], *keys: str) -> str:
    for key in keys:
        if key in labels:
            return labels[key]
    return ""


def zone_key(labels: Mapping[str, str] | None) -> str:
    """The identifier of a node's failure zone, upstream `GetZoneKey`; "" for no zone.

    The beta `failure-domain.beta.kubernetes.io/*` labels win over `topology.kubernetes.io/*`,
    as upstream (and the reference, section 2) does: the beta labels are deprecated but still
    on old objects, and keeping upstream's precedence means a node lands in the same zone here
    as in kube-controller-manager. Precedence is by presence, per label: an empty beta label
    still shadows the topology one, and region and zone fall back independently.

    The NUL between region and zone keeps "a:b" + "c" apart from "a" + "b:c".
    """
    if not labels:
        return ""
    zone = _first_present(labels, LABEL_FAILURE_DOMAIN_BETA_ZONE, LABEL_TOPOLOGY_ZONE)
    region = _first_present(labels, LABEL_FAILURE_DOMAIN_BETA_REGION, LABEL_TOPOLOGY_REGION)
    if not region and not zone:
        return ""
    return region + ":\x00:" + zone


def zone_label(zone: str) -> str:
    """The zone key as people read it (`region::zone`): the NUL between region and zone dropped, as
    the metrics' `zone` label writes it."""
    return zone.replace("\x00", "")


def excluded_from_disruption(labels: Mapping[str, str] | None) -> bool:
    """Whether the node is left out of zone health counting (the label's presence, any value).

    Excluded nodes are still monitored and tainted; they only do not vote on the zone state
    (upstream `isNodeExcludedFromDisruptionChecks`; kubernetes#117518 for the common misreading).
    """
    return labels is not None and EXCLUDE_DISRUPTION_LABEL in labels


def compute_zone_state(ready_statuses: Iterable[str | None], unhealthy_threshold: float) -> tuple[int, int, ZoneState]:
    """(ready, not ready, state) of a zone from its nodes' Ready statuses, upstream `ComputeZoneState`.

    Only "True" counts as ready; a missing Ready condition (None), "False", "Unknown" or any
    other value counts as not ready. No ready node and at least one not ready: FullDisruption.
    More than two not ready and a not-ready share >= `unhealthy_threshold`: PartialDisruption.
    Otherwise Normal (an empty zone is Normal too; upstream never computes one).
    Upstream divides in float32; for any realistic zone size the result is the same.
    """
    ready = 0
    not_ready = 0
    for status in ready_statuses:
        if status == "True":
            ready += 1
        else:
            not_ready += 1
    if ready == 0 and not_ready > 0:
        return ready, not_ready, ZoneState.FULL_DISRUPTION
    if not_ready > _PARTIAL_DISRUPTION_MIN_NOT_READY and not_ready / (ready + not_ready) >= unhealthy_threshold:
        return ready, not_ready, ZoneState.PARTIAL_DISRUPTION
    return ready, not_ready, ZoneState.NORMAL


def eviction_rate(
    state: ZoneState,
    zone_size: int,
    *,
    eviction_rate: float,
    secondary_eviction_rate: float,
    large_cluster_threshold: int,
) -> float:
    """Nodes per second the zone's NoExecute tainter may taint in `state` (upstream `setLimiterInZone`).

    Normal (and Initial, whose limiter upstream never swaps) use `eviction_rate`. FullDisruption
    also uses `eviction_rate` (upstream `HealthyQPSFunc`; kubernetes#70501, kubernetes#110114,
    kubernetes#131314): when *every* zone is down the controller stops tainting altogether, but a
    single dead zone is drained at the normal rate. PartialDisruption slows to `secondary_eviction_rate`, and stops
    entirely in a zone of at most `large_cluster_threshold` counted nodes (`ReducedQPSFunc`),
    where a few failures are a large share and more likely a partition than dead machines.
    """
    if state is ZoneState.PARTIAL_DISRUPTION:
        return secondary_eviction_rate if zone_size > large_cluster_threshold else 0.0
    return eviction_rate


def zone_health_percent(ready: int, not_ready: int) -> float:
    """The `node_collector_zone_health` value: percent of counted nodes that are ready.

    An empty zone reads 100, as upstream resets the gauge when a zone has no counted nodes.
    """
    total = ready + not_ready
    if total == 0:
        return 100.0
    return 100 * ready / total
