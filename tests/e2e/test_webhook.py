"""The webhook in a real cluster: kube-apiserver calls it through the Service with the caBundle
that `python -m certs sync` wrote. Each assertion reads the create call's answer, which is the pod
exactly as admission left it (the controller's later backfill cannot blur the result)."""

from __future__ import annotations

import pytest

from tests.e2e.cluster import NOT_READY, SKIP_LABEL, UNREACHABLE, E2ECluster, default_tolerations, toleration

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("webhook_ready")]


def test_a_pod_gets_the_default_tolerations(e2e: E2ECluster, namespace: str):
    pod = e2e.create_pod(namespace, "plain")
    assert pod["spec"]["tolerations"] == default_tolerations(300)


def test_a_pod_keeps_its_own_unreachable_toleration_and_gets_only_the_missing_one(e2e: E2ECluster, namespace: str):
    own = toleration(UNREACHABLE, 10)
    pod = e2e.create_pod(namespace, "own-unreachable", tolerations=[own])
    assert pod["spec"]["tolerations"] == [own, toleration(NOT_READY, 300)]


def test_a_pod_tolerating_both_keys_is_left_alone(e2e: E2ECluster, namespace: str):
    own = [toleration(UNREACHABLE), toleration(NOT_READY, 42)]
    pod = e2e.create_pod(namespace, "tolerates-both", tolerations=own)
    assert pod["spec"]["tolerations"] == own


def test_a_pod_labelled_skip_gets_nothing_so_the_built_in_plugin_is_really_off(e2e: E2ECluster, namespace: str):
    # The webhook's objectSelector leaves this pod out; the built-in plugin, if it were still
    # enabled, would add the very same tolerations.
    pod = e2e.create_pod(namespace, "skipped", labels={SKIP_LABEL: "true"})
    assert not pod["spec"].get("tolerations")
