"""controller/objects.py `last_stamped`: when the apiserver last recorded a write, read off managedFields."""

from __future__ import annotations

import pytest

from controller.objects import last_stamped, lease_view, node_view

KUBELET_137 = [
    {
        "manager": "kubelet",
        "operation": "Update",
        "time": "2026-11-27T03:14:56Z",
        "fieldsV1": {"f:metadata": {"f:labels": {}}},
    },
    {
        "manager": "kubelet",
        "operation": "Update",
        "subresource": "status",
        "time": "2026-11-27T03:14:58Z",
        "fieldsV1": {"f:status": {"f:conditions": {}}},
    },
    {
        "manager": "taintkeeper-controller",
        "operation": "Update",
        "time": "2026-11-27T03:15:30Z",
        "fieldsV1": {"f:spec": {"f:taints": {}}},
    },
]
# Before 1.22 an entry names no subresource: the kubelet's one entry holds its status writes too.
KUBELET_120 = [
    {
        "manager": "kubelet",
        "operation": "Update",
        "time": "2021-01-13T10:00:07Z",
        "fieldsV1": {"f:metadata": {"f:labels": {}}, "f:status": {"f:conditions": {}}},
    },
    {
        "manager": "taintkeeper-controller",
        "operation": "Update",
        "time": "2021-01-13T10:00:30Z",
        "fieldsV1": {"f:spec": {"f:taints": {}}},
    },
]

CASES = [
    ("1.37: the status writes' own entry", KUBELET_137, "status", "2026-11-27T03:14:58Z"),
    ("1.37: any write at all", KUBELET_137, None, "2026-11-27T03:15:30Z"),
    ("1.20: the entry that manages status fields", KUBELET_120, "status", "2021-01-13T10:00:07Z"),
    ("no managedFields (an object created with no field to manage)", [], "status", ""),
]


@pytest.mark.parametrize(("fields", "subresource", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_last_stamp_of_a_subresource_is_read_from_its_managed_fields(fields, subresource, expected):
    assert last_stamped({"managedFields": fields}, subresource) == expected


def test_the_views_carry_the_stamps_a_new_leader_dates_a_silence_by():
    node = node_view({"metadata": {"name": "n1", "managedFields": KUBELET_137}})
    lease = lease_view(
        {
            "metadata": {"name": "n1", "managedFields": [KUBELET_137[0]]},
            "spec": {"renewTime": "2026-11-27T03:14:56.000000Z"},
        }
    )
    assert (node.status_stamped, lease.stamped) == ("2026-11-27T03:14:58Z", "2026-11-27T03:14:56Z")
