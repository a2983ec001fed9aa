"""controller.zones: zone key, exclude-disruption, zone states (upstream TestMonitorNodeHealth), rates, health."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.zones import (
    EXCLUDE_DISRUPTION_LABEL,
    LABEL_FAILURE_DOMAIN_BETA_REGION,
    LABEL_FAILURE_DOMAIN_BETA_ZONE,
    LABEL_TOPOLOGY_REGION,
    LABEL_TOPOLOGY_ZONE,
    ZoneState,
    compute_zone_state,
    eviction_rate,
    excluded_from_disruption,
    zone_health_percent,
    zone_key,
)

UNHEALTHY_THRESHOLD = 0.55  # upstream testUnhealthyThreshold / --unhealthy-zone-threshold default
NORMAL = ZoneState.NORMAL
PARTIAL = ZoneState.PARTIAL_DISRUPTION
FULL = ZoneState.FULL_DISRUPTION


def zone_labels(region, zone, **extra):
    """Both label generations, as upstream's TestMonitorNodeHealth nodes carry."""
    return {
        LABEL_TOPOLOGY_REGION: region,
        LABEL_TOPOLOGY_ZONE: zone,
        LABEL_FAILURE_DOMAIN_BETA_REGION: region,
        LABEL_FAILURE_DOMAIN_BETA_ZONE: zone,
        **extra,
    }


def zone_states(nodes, pass_index):
    """What monitorNodeHealth + handleDisruption compute: group by zone, skip excluded nodes."""
    statuses: dict[str, list[str | None]] = {}
    for labels, *passes in nodes:
        if excluded_from_disruption(labels):
            continue
        statuses.setdefault(zone_key(labels), []).append(passes[pass_index])
    return {key: compute_zone_state(values, UNHEALTHY_THRESHOLD)[2] for key, values in statuses.items()}


Z1 = zone_labels("region1", "zone1")
Z2 = zone_labels("region1", "zone2")
R2Z2 = zone_labels("region2", "zone2")
Z1_EXCLUDED = zone_labels("region1", "zone1", **{EXCLUDE_DISRUPTION_LABEL: ""})
KEY_Z1 = "region1:\x00:zone1"
KEY_Z2 = "region1:\x00:zone2"
KEY_R2Z2 = "region2:\x00:zone2"

# Each node: (labels, Ready status seen on the first pass, Ready status 60 minutes later).
# None = no Ready condition (a node that never posted status, or one whose condition was removed).
MONITOR_NODE_HEALTH_CASES = [  # upstream TestMonitorNodeHealth, same names
    (
        "No Disruption: Node created recently without failure domain labels",
        [({}, "True", "True")],
        {"": NORMAL},
        {"": NORMAL},
    ),
    (
        "No Disruption: Initially both zones down, one comes back",
        [(Z1, "Unknown", "Unknown"), (Z2, "Unknown", "True")],
        {KEY_Z1: FULL, KEY_Z2: FULL},
        {KEY_Z1: FULL, KEY_Z2: NORMAL},
    ),
    (
        "Partial Disruption: Nodes created recently without status conditions",
        [(Z1, None, "Unknown"), (Z1, None, "Unknown"), (Z1, None, "Unknown"), (Z1, None, "True")],
        {KEY_Z1: FULL},
        {KEY_Z1: PARTIAL},
    ),
    (
        "Partial Disruption: one Node failed leading to the number of healthy Nodes to exceed the configured threshold",
        [
            (Z1, "Unknown", "Unknown"),
            (Z1, "Unknown", "Unknown"),
            (Z1, "True", "Unknown"),
            (Z1, "True", "True"),
            (Z1, "True", "True"),
        ],
        {KEY_Z1: NORMAL},
        {KEY_Z1: PARTIAL},
    ),
    (
        "Full Disruption: the zone has less than 2 Nodes down, the last healthy Node has failed",
        [(Z1, "Unknown", "Unknown"), (Z1, "Unknown", "Unknown"), (Z1, "True", "Unknown")],
        {KEY_Z1: NORMAL},
        {KEY_Z1: FULL},
    ),
    (
        "Full Disruption: all the Nodes in one zone are down",
        [(Z1, "Unknown", "Unknown"), (Z2, "True", "True")],
        {KEY_Z1: FULL, KEY_Z2: NORMAL},
        {KEY_Z1: FULL, KEY_Z2: NORMAL},
    ),
    (
        "Full Disruption: all the Nodes in both the zones are down",
        [(Z1, "Unknown", "Unknown"), (R2Z2, "Unknown", "Unknown")],
        {KEY_Z1: FULL, KEY_R2Z2: FULL},
        {KEY_Z1: FULL, KEY_R2Z2: FULL},
    ),
    ("Full Disruption: Ready condition removed from the Node", [(Z1, "True", None)], {KEY_Z1: NORMAL}, {KEY_Z1: FULL}),
    (
        "Full Disruption: the only available Node has the node.kubernetes.io/exclude-disruption label",
        [(Z1, "Unknown", "Unknown"), (Z1_EXCLUDED, "True", "True")],
        {KEY_Z1: FULL},
        {KEY_Z1: FULL},
    ),
]


@pytest.mark.parametrize(
    ("nodes", "initial", "following"),
    [c[1:] for c in MONITOR_NODE_HEALTH_CASES],
    ids=[c[0] for c in MONITOR_NODE_HEALTH_CASES],
)
def test_zone_state_transitions(nodes, initial, following):
    assert zone_states(nodes, 0) == initial
    assert zone_states(nodes, 1) == following


COUNT_CASES = [
    ("only True counts as ready", ["True", "False", "Unknown", None], (1, 3, PARTIAL)),
    ("an unexpected status counts as not ready", ["True", "Maybe"], (1, 1, NORMAL)),
    ("an empty zone is Normal", [], (0, 0, NORMAL)),
    ("two down of two is Full, not Partial", ["False", "Unknown"], (0, 2, FULL)),
    ("two down of three stays Normal (more than two needed)", ["False", "False", "True"], (1, 2, NORMAL)),
    ("exactly the threshold share is Partial", ["False"] * 11 + ["True"] * 9, (9, 11, PARTIAL)),
    ("just under the threshold share is Normal", ["False"] * 10 + ["True"] * 9, (9, 10, NORMAL)),
]


@pytest.mark.parametrize(("statuses", "expected"), [c[1:] for c in COUNT_CASES], ids=[c[0] for c in COUNT_CASES])
def test_compute_zone_state(statuses, expected):
    assert compute_zone_state(statuses, UNHEALTHY_THRESHOLD) == expected


def test_compute_zone_state_accepts_any_iterable():
    assert compute_zone_state(iter(["False"] * 3), UNHEALTHY_THRESHOLD) == (0, 3, FULL)


@given(st.lists(st.sampled_from(["True", "False", "Unknown", None])), st.floats(0.0, 1.0))
def test_zone_state_counts_every_status_once_and_full_means_none_ready(statuses, threshold):
    ready, not_ready, state = compute_zone_state(statuses, threshold)
    assert ready + not_ready == len(statuses)
    assert ready == statuses.count("True")
    assert (state is FULL) == (ready == 0 and not_ready > 0)
    if state is PARTIAL:
        assert not_ready > 2 and not_ready / len(statuses) >= threshold


ZONE_KEY_CASES = [
    ("no labels", {}, ""),
    ("null labels", None, ""),
    ("unrelated labels only", {"kubernetes.io/hostname": "n1"}, ""),
    ("zone only", {LABEL_TOPOLOGY_ZONE: "zone1"}, ":\x00:zone1"),
    ("region only", {LABEL_TOPOLOGY_REGION: "region1"}, "region1:\x00:"),
    ("region and zone", {LABEL_TOPOLOGY_REGION: "region1", LABEL_TOPOLOGY_ZONE: "zone1"}, "region1:\x00:zone1"),
    (
        "beta labels only",
        {LABEL_FAILURE_DOMAIN_BETA_REGION: "region1", LABEL_FAILURE_DOMAIN_BETA_ZONE: "zone1"},
        "region1:\x00:zone1",
    ),
    (
        "beta labels win over topology labels (upstream GetZoneKey)",
        {
            LABEL_FAILURE_DOMAIN_BETA_REGION: "beta-r",
            LABEL_FAILURE_DOMAIN_BETA_ZONE: "beta-z",
            LABEL_TOPOLOGY_REGION: "topo-r",
            LABEL_TOPOLOGY_ZONE: "topo-z",
        },
        "beta-r:\x00:beta-z",
    ),
    (
        "region and zone fall back independently",
        {LABEL_FAILURE_DOMAIN_BETA_ZONE: "beta-z", LABEL_TOPOLOGY_REGION: "topo-r", LABEL_TOPOLOGY_ZONE: "topo-z"},
        "topo-r:\x00:beta-z",
    ),
    (
        "an empty beta label still shadows the topology label (presence, as upstream)",
        {LABEL_FAILURE_DOMAIN_BETA_ZONE: "", LABEL_TOPOLOGY_ZONE: "topo-z"},
        "",
    ),
    (
        "a colon in the region cannot collide with another zone",
        {LABEL_TOPOLOGY_REGION: "a:b", LABEL_TOPOLOGY_ZONE: "c"},
        "a:b:\x00:c",
    ),
]


@pytest.mark.parametrize(("labels", "expected"), [c[1:] for c in ZONE_KEY_CASES], ids=[c[0] for c in ZONE_KEY_CASES])
def test_zone_key(labels, expected):
    assert zone_key(labels) == expected


def labels_of(node):
    return (node.get("metadata") or {}).get("labels")


EXCLUDED_CASES = [  # upstream Test_isNodeExcludedFromDisruptionChecks, plus presence-not-value
    ("empty labels are not excluded", {"metadata": {"labels": {}}}, False),
    ("a node named like a master without the label is not excluded", {"metadata": {"name": "master-abc"}}, False),
    ("the label present with an empty value excludes", {"metadata": {"labels": {EXCLUDE_DISRUPTION_LABEL: ""}}}, True),
    (
        "the label excludes whatever its value, even false",
        {"metadata": {"labels": {EXCLUDE_DISRUPTION_LABEL: "false"}}},
        True,
    ),
]


@pytest.mark.parametrize(("node", "expected"), [c[1:] for c in EXCLUDED_CASES], ids=[c[0] for c in EXCLUDED_CASES])
def test_excluded_from_disruption(node, expected):
    assert excluded_from_disruption(labels_of(node)) is expected


RATES = {"eviction_rate": 0.1, "secondary_eviction_rate": 0.01, "large_cluster_threshold": 50}
RATE_CASES = [
    ("Normal uses the eviction rate", NORMAL, 10, 0.1),
    ("Initial uses the eviction rate (upstream never swaps its limiter)", ZoneState.INITIAL, 10, 0.1),
    ("FullDisruption uses the eviction rate (upstream HealthyQPSFunc)", FULL, 10, 0.1),
    ("PartialDisruption in a large zone uses the secondary rate", PARTIAL, 51, 0.01),
    ("PartialDisruption in a zone exactly at the threshold stops tainting", PARTIAL, 50, 0.0),
    ("PartialDisruption in a small zone stops tainting", PARTIAL, 3, 0.0),
]


@pytest.mark.parametrize(
    ("state", "zone_size", "expected"), [c[1:] for c in RATE_CASES], ids=[c[0] for c in RATE_CASES]
)
def test_eviction_rate(state, zone_size, expected):
    assert eviction_rate(state, zone_size, **RATES) == expected


HEALTH_CASES = [
    ("an empty zone reads 100 (upstream reset)", 0, 0, 100.0),
    ("all ready", 3, 0, 100.0),
    ("none ready", 0, 3, 0.0),
    ("one of four ready", 1, 3, 25.0),
    ("two of three ready", 2, 1, 200 / 3),
]


@pytest.mark.parametrize(
    ("ready", "not_ready", "expected"), [c[1:] for c in HEALTH_CASES], ids=[c[0] for c in HEALTH_CASES]
)
def test_zone_health_percent(ready, not_ready, expected):
    assert zone_health_percent(ready, not_ready) == pytest.approx(expected)


def test_zone_state_values_are_upstream_names():
    assert [s.value for s in ZoneState] == ["Initial", "Normal", "PartialDisruption", "FullDisruption"]
    assert ZoneState("PartialDisruption") is PARTIAL
    assert PARTIAL == "PartialDisruption" and f"{PARTIAL}" == "PartialDisruption" and isinstance(PARTIAL, str)
