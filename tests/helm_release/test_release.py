"""taintkeeper as an operator's Helm release on the complete local cluster: installed, upgraded to another
build and rolled back, each under load with a node failure's countdown running and each followed by `helm
test`, then uninstalled.

The tests run in this file's order, each on what the last one left (one release through its life). The
judge is kube-apiserver's audit log (tests/helm_release/judge.py): every pod created while the release
changed got the default tolerations (from the webhook, or from the backfill within BACKFILL_BOUND of its
creation or of the end of a leaderless moment), no creation failed, the countdown's pod was deleted once,
at its deadline, and no process of the old build wrote anything after the new build's controller took the
Lease. Each test prints its figures and appends them to DIR/release-report.json.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from typing import Any

import pytest
from kubernetes import client

from bench.soak.audit import AuditRecord, read_files, rotated_files
from hack.deploy import kubectl
from hack.servers import free_port
from hack.wait import WaitTimeout
from kube.timestamps import parse_time
from tests.e2e import helm_install
from tests.e2e.cluster import SYSTEM_NAMESPACE, UNREACHABLE, default_tolerations, toleration, wait_for
from tests.e2e.helm_install import RELEASE
from tests.helm_release import judge
from tests.helm_release.conftest import CURRENT_TAG, NEXT_TAG, ReleaseCluster
from tests.helm_release.load import Creation, PodLoad

pytestmark = [pytest.mark.release, pytest.mark.timeout(1200)]

COUNTDOWN = 75  # seconds the countdown's pod tolerates `unreachable`: the roll happens within them
BACKFILL_BOUND = 10.0  # as the chaos soak's I6 (bench/soak/config.py)
EARLY = 1.5  # a taint's timeAdded has whole seconds, and the apiserver's clock is the controller's
LATE = 10.0  # the monitor's period, the eviction's queue and the DELETE, on 2 busy cores
DEPLOYMENTS = ("taintkeeper-webhook", "taintkeeper-controller")
LABELS = "app.kubernetes.io/managed-by=Helm"


def helm(release: ReleaseCluster, *args: str, timeout: float = 900) -> float:
    """Run helm against the cluster; the seconds it took. A failure fails the test with helm's words."""
    started = time.monotonic()
    result = subprocess.run(release.helm_args(*args), capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-3000:]}"
    return time.monotonic() - started


def helm_test(release: ReleaseCluster) -> float:
    """`helm test`: the chart's test hook (charts/taintkeeper/templates/tests/) finds a dry-run pod given the
    default tolerations and the controller's Lease held; the seconds it took (helm's words on failure)."""
    return helm(release, "test", RELEASE, "--logs", "--timeout", "5m", timeout=400)  # --logs: as a user runs it


def report(release: ReleaseCluster, figures: dict[str, Any]) -> None:
    print(json.dumps(figures, indent=2))
    path = release.directory / "release-report.json"
    previous = json.loads(path.read_text()) if path.exists() else []
    path.write_text(json.dumps([*previous, figures], indent=2))


def audit(release: ReleaseCluster) -> list[AuditRecord]:
    return read_files(rotated_files(release.audit_log)).records


def deployment_images(release: ReleaseCluster) -> dict[str, set[str]]:
    """The images the running (not terminating) pods of each Deployment run."""
    found: dict[str, set[str]] = {name: set() for name in DEPLOYMENTS}
    pods = release.e2e.raw(release.e2e.core.list_namespaced_pod, SYSTEM_NAMESPACE)["items"]
    for pod in pods:
        owner = pod["metadata"].get("generateName", "").rsplit("-", 2)[0]
        if owner in found and not pod["metadata"].get("deletionTimestamp"):
            found[owner] |= {c["image"] for c in pod["spec"]["containers"]}
    return found


def rolled_to(release: ReleaseCluster, tag: str) -> bool:
    """Every Deployment's pods run that build, as pushed to the registry (by digest)."""
    return all(images == {release.images[tag].reference} for images in deployment_images(release).values())


def dry_run_mutated(release: ReleaseCluster) -> bool:
    pod = release.e2e.create_pod("default", "webhook-probe", dry_run=True)
    return pod["spec"].get("tolerations") == default_tolerations()


def helm_refused(release: ReleaseCluster, *args: str) -> str:
    """Run helm expecting a refusal: its last line of stderr (the test fails if helm succeeded)."""
    result = subprocess.run(release.helm_args(*args), capture_output=True, text=True, timeout=300)
    assert result.returncode != 0, f"helm {' '.join(args)} succeeded:\n{result.stdout[-2000:]}"
    return result.stderr.strip().splitlines()[-1]


def namespace_gone(release: ReleaseCluster) -> bool:
    try:
        release.e2e.core.read_namespace(SYSTEM_NAMESPACE)
    except client.ApiException as error:
        return error.status == 404
    return False


def nothing_installed(release: ReleaseCluster) -> None:
    listed = subprocess.run(
        release.helm_args("list", "--all", "-o", "json"), capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(listed.stdout) == [], listed.stdout
    assert leftovers(release) == []
    assert namespace_gone(release), f"{SYSTEM_NAMESPACE} made by a refused install"


def test_helm_install_from_a_registry_that_is_down_or_without_the_version_installs_nothing(
    release_cluster: ReleaseCluster,
):
    """Before the release's install: helm says why in one line and creates nothing."""
    release = release_cluster
    reference = release.chart[0]  # oci://ADDRESS/charts/taintkeeper; then --version V and the rest
    address = reference.removeprefix("oci://").partition("/")[0]
    down = reference.replace(address, f"127.0.0.1:{free_port()}")  # nothing listens there
    said = helm_refused(release, "install", RELEASE, down, *release.chart[1:], "--create-namespace")
    assert "connection refused" in said, said
    nothing_installed(release)
    missing = [*release.chart[:2], "9.9.9", *release.chart[3:]]
    said = helm_refused(release, "install", RELEASE, *missing, "--create-namespace", "-f", str(release.values))
    assert "9.9.9" in said and "not found" in said, said
    nothing_installed(release)


def test_an_image_digest_the_registry_does_not_hold_is_named_by_the_kubelet_and_uninstalls_clean(
    release_cluster: ReleaseCluster,
):
    """The chart installs (helm cannot know); nothing of it runs, the kubelet's events name the digest as not
    found (the certificate Job's pod and the controller's try to pull it; the webhook's wait for the Secret that
    Job would make); uninstalled (its pre-delete hook would need the image) it leaves nothing."""
    release = release_cluster
    e2e = release.e2e
    wrong = "sha256:" + "0" * 64
    helm(
        release,
        *("install", RELEASE, *release.chart, "--create-namespace", "-f", str(release.values)),
        *("--set", f"image.digest={wrong}"),
    )
    try:

        def kubelet_said() -> list[str] | None:
            events = e2e.raw(e2e.core.list_namespaced_event, SYSTEM_NAMESPACE)["items"]
            said = [e["message"] for e in events if e.get("reason") == "Failed" and wrong in e.get("message", "")]
            return [message for message in said if "not found" in message] or None

        said = wait_for(kubelet_said, 180, "the kubelet saying why the image cannot be pulled", interval=1)
        print(said[0])
        pods = e2e.raw(e2e.core.list_namespaced_pod, SYSTEM_NAMESPACE)["items"]
        states = {
            pod["metadata"]["name"]: next(iter((status.get("state") or {}).keys()), None)
            for pod in pods
            for status in pod["status"].get("containerStatuses") or ()
        }
        assert "running" not in states.values(), states  # (a pod's ErrImagePull comes and goes with its retries)
    finally:
        helm(release, "uninstall", RELEASE, "--no-hooks", "--wait", "--timeout", "5m")
        e2e.core.delete_namespace(SYSTEM_NAMESPACE)
        # Whatever happened above: the next test installs into a namespace of this name.
        wait_for(lambda: namespace_gone(release), 300, f"namespace {SYSTEM_NAMESPACE} deleted", interval=1)
    wait_for(lambda: leftovers(release) == [], 300, "nothing of the release left", interval=1)


def test_helm_install_brings_taintkeeper_up_and_the_webhook_answers(release_cluster: ReleaseCluster):
    release = release_cluster
    started = time.monotonic()
    seconds = helm(
        release,
        *("install", RELEASE, *release.chart, "--create-namespace", "-f", str(release.values)),
        *("--wait", "--timeout", "10m"),
    )
    helm_install.label_namespace(release.e2e.kubeconfig)  # as the notes say for a namespace Helm made
    wait_for(lambda: dry_run_mutated(release), 120, "a dry-run pod mutated by the webhook", interval=0.5)
    mutating_after = time.monotonic() - started
    holder = wait_for(
        lambda: release.e2e.raw(
            client.CoordinationV1Api(release.e2e.api_client).read_namespaced_lease, *reversed(judge.LEASE)
        )["spec"].get("holderIdentity"),
        60,
        "a controller holding the Lease",
    )
    assert rolled_to(release, CURRENT_TAG), deployment_images(release)
    test_seconds = helm_test(release)
    report(
        release,
        {
            "step": "install",
            "helm_install_wait_seconds": round(seconds, 1),
            "helm_test_seconds": round(test_seconds, 1),
            "first_pod_mutated_after_seconds": round(mutating_after, 1),
            "lease_holder": holder,
        },
    )


def roll_under_load(
    release: ReleaseCluster, namespace: str, action: list[str], step: str, from_tag: str, to_tag: str
) -> None:
    """`helm ACTION --wait` while pods are created at 2/s and a dead node's pod counts down; then judge."""
    e2e = release.e2e
    old, new = release.versions[from_tag], release.versions[to_tag]
    assert rolled_to(release, from_tag), f"not on {from_tag} before the {step}: {deployment_images(release)}"
    e2e.create_pod(namespace, "countdown", node=e2e.victim, tolerations=[toleration(UNREACHABLE, COUNTDOWN)])
    wait_for(lambda: e2e.pod_phase(namespace, "countdown") == "Running", 180, "the countdown's pod Running")
    wait_for(lambda: e2e.ready(e2e.victim) == "True", 60, f"{e2e.victim} Ready")
    load = PodLoad(e2e.kubeconfig, namespace, e2e.provider.pod_image).start()
    creations: list[Creation] = []
    try:
        wait_for(lambda: len(load) >= 10, 60, "the load under way", interval=0.2)
        e2e.provider.stop_node(e2e.victim)
        taint = wait_for(lambda: e2e.taint(e2e.victim, UNREACHABLE, "NoExecute"), 120, "unreachable:NoExecute")
        tainted_at = parse_time(taint.get("timeAdded"))
        assert tainted_at is not None, taint
        deadline = tainted_at + COUNTDOWN
        roll_started = time.time()
        roll_seconds = helm(release, *action, "--wait", "--timeout", "10m")
        wait_for(lambda: rolled_to(release, to_tag), 120, f"every replica on {to_tag}", interval=1)
        wait_for(lambda: e2e.evicted(namespace, "countdown"), COUNTDOWN + 60, "the countdown's pod deleted")
        after_roll = len(load)
        wait_for(lambda: len(load) >= after_roll + 20, 60, "the load going on after the roll", interval=0.2)
    finally:
        creations = load.stop()
        if not e2e.provider.node_running(e2e.victim):
            e2e.provider.start_node(e2e.victim)
        wait_for(
            lambda: e2e.ready(e2e.victim) == "True" and not e2e.lifecycle_taints(e2e.victim),
            300,
            f"{e2e.victim} Ready and untainted again",
            interval=2,
        )
    ended = time.time()

    def all_tolerated() -> bool:
        pods = e2e.raw(e2e.core.list_namespaced_pod, namespace, label_selector="taintkeeper-e2e=load")["items"]
        return all(pod["spec"].get("tolerations") == default_tolerations() for pod in pods)

    with contextlib.suppress(WaitTimeout):  # what is missing is judged below, from the audit log
        wait_for(all_tolerated, BACKFILL_BOUND + 30, "every load pod tolerating node failures", interval=1)
    records = audit(release)
    began = min(c.sent for c in creations)

    failed = [c for c in creations if c.code != 201]
    assert failed == [], f"{len(failed)} pod creations failed during the {step}: {failed[:5]}"
    admitted = judge.admissions(records, namespace)
    missing = sorted({c.name for c in creations} - set(admitted))
    assert missing == [], f"created (201) but not in the audit log: {missing[:5]}"
    holdings = judge.lease_holdings(records)
    stretches = judge.leaderless(holdings, began, ended)
    late_backfills = []
    backfill_delays = []
    for creation in creations:
        seen = admitted[creation.name]
        if seen.by_webhook:
            continue
        limit = judge.backfill_limit(seen.created, stretches, BACKFILL_BOUND)
        if seen.backfilled is None or seen.backfilled > limit:
            late_backfills.append((creation.name, seen.created, seen.backfilled, limit))
        else:
            backfill_delays.append(seen.backfilled - seen.created)
    assert late_backfills == [], f"not given the default tolerations in time: {late_backfills[:5]}"

    deleted = judge.deletions(records, namespace, "countdown")
    assert len(deleted) == 1, f"the countdown's pod deleted {len(deleted)} times: {deleted}"
    (deletion,) = deleted
    deleted_by = judge.agent(deletion)
    assert deleted_by is not None and deleted_by.component == "taintkeeper-controller", deletion.user_agent
    off_by = deletion.completed - deadline
    assert -EARLY <= off_by <= LATE, f"deleted {off_by:+.1f}s from its deadline"

    took_over = judge.takeover(holdings, new, roll_started)
    assert took_over is not None, f"no controller of {new} took the Lease after the {step} began"
    writes = judge.writes_around(records, began, ended, took_over, old)
    late_writes = [(r.verb, r.resource, r.name, r.user_agent) for r in writes.late]
    assert late_writes == [], f"{old} wrote after {new} took the Lease: {late_writes[:5]}"
    test_seconds = helm_test(release)
    report(
        release,
        {
            "step": step,
            "from": old,
            "to": new,
            f"helm_{step}_wait_seconds": round(roll_seconds, 1),
            "helm_test_seconds": round(test_seconds, 1),
            "pods_created": len(creations),
            "mutated_by_webhook": sum(admitted[c.name].by_webhook for c in creations),
            "backfilled": len(backfill_delays),
            "backfill_slowest_seconds": round(max(backfill_delays, default=0.0), 2),
            "failed": len(failed),
            "slowest_creation_seconds": round(max(c.seconds for c in creations), 2),
            "leaderless_seconds": round(sum(end - start for start, end in stretches), 1),
            "countdown_deleted_vs_deadline_seconds": round(off_by, 2),
            "countdown_deleted_by": f"{deleted_by.version} ({deleted_by.pod})",
            "takeover_after_roll_began_seconds": round(took_over - roll_started, 1),
            "deadline_after_roll_began_seconds": round(deadline - roll_started, 1),
            "writes_before_takeover": dict(writes.before),
            "writes_after_takeover": dict(writes.after),
        },
    )


def test_helm_upgrade_to_another_build_under_load_loses_nothing(release_cluster: ReleaseCluster, load_namespace: str):
    release = release_cluster
    action = [
        *("upgrade", RELEASE, *release.chart, "-f", str(release.values)),
        *("--set", f"image.tag={NEXT_TAG}", "--set", f"image.digest={release.images[NEXT_TAG].digest}"),
    ]
    roll_under_load(release, load_namespace, action, "upgrade", CURRENT_TAG, NEXT_TAG)


def test_helm_rollback_under_load_loses_nothing(release_cluster: ReleaseCluster, load_namespace: str):
    roll_under_load(release_cluster, load_namespace, ["rollback", RELEASE, "1"], "rollback", NEXT_TAG, CURRENT_TAG)


def leftovers(release: ReleaseCluster) -> list[str]:
    """Every object of any listable kind that says it is taintkeeper's or this release's."""
    run = [kubectl(), "--kubeconfig", str(release.e2e.kubeconfig)]
    kinds = subprocess.run(
        [*run, "api-resources", "--verbs=list", "-o", "name"], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split()
    kinds = [kind for kind in kinds if kind not in ("events", "events.events.k8s.io")]
    found = []
    for selector in ("app.kubernetes.io/name=taintkeeper", "app.kubernetes.io/part-of=taintkeeper", LABELS):
        listed = subprocess.run(
            [*run, "get", ",".join(kinds), "-A", "-l", selector, "-o", "json"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        for item in json.loads(listed.stdout)["items"]:
            annotations = item["metadata"].get("annotations") or {}
            if selector == LABELS and annotations.get("meta.helm.sh/release-name") != RELEASE:
                continue
            found.append(f"{item['kind']} {item['metadata'].get('namespace', '')}/{item['metadata']['name']}")
    return sorted(set(found))


def test_helm_uninstall_removes_the_webhook_first_and_leaves_nothing_behind(
    release_cluster: ReleaseCluster, load_namespace: str
):
    release = release_cluster
    e2e = release.e2e
    configuration = e2e.raw(
        client.AdmissionregistrationV1Api(e2e.api_client).read_mutating_webhook_configuration, "taintkeeper"
    )
    timeout_seconds = max(w.get("timeoutSeconds", 10) for w in configuration["webhooks"])
    load = PodLoad(e2e.kubeconfig, load_namespace, e2e.provider.pod_image).start()
    try:
        wait_for(lambda: len(load) >= 10, 60, "the load under way", interval=0.2)
        began = time.time()
        seconds = helm(release, "uninstall", RELEASE, "--wait", "--timeout", "5m")
        # The namespace is the operator's (--create-namespace): with it go the Lease, the Secret and the events
        # taintkeeper wrote there itself (docs/operating.md, "Upgrading").
        e2e.core.delete_namespace(SYSTEM_NAMESPACE)
        wait_for(lambda: namespace_gone(release), 300, f"namespace {SYSTEM_NAMESPACE} deleted", interval=1)
        gone_after = time.time() - began
        after = len(load)
        wait_for(lambda: len(load) >= after + 10, 60, "the load going on after the uninstall", interval=0.2)
    finally:
        creations = load.stop()
    failed = [c for c in creations if c.code != 201]
    assert failed == [], f"{len(failed)} pod creations failed during the uninstall: {failed[:5]}"
    slow = [c for c in creations if c.seconds >= timeout_seconds]
    assert slow == [], f"creations that waited out the webhook's {timeout_seconds}s: {slow[:5]}"

    # The pre-delete hook deletes the configuration (charts/taintkeeper/templates/uninstall-hook.yaml), then
    # Helm deletes the rest; Helm's own DELETE of the configuration comes last and finds it gone.
    deletes = [r for r in audit(release) if r.verb == "delete" and r.received >= began]
    configuration_deleted = [
        r for r in deletes if r.resource == "mutatingwebhookconfigurations" and r.name == "taintkeeper" and r.succeeded
    ]
    assert configuration_deleted, "nobody deleted the MutatingWebhookConfiguration"
    deployments = [r for r in deletes if r.resource == "deployments" and r.user_agent.startswith("Helm/")]
    assert deployments, "helm never deleted the Deployments"
    assert configuration_deleted[0].completed <= min(r.received for r in deployments), (
        "the webhook's pods were deleted before its configuration"
    )
    deleted_by = configuration_deleted[0].user_agent
    listed = subprocess.run(
        [*release.helm_args("list", "--all", "-o", "json")], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(listed.stdout) == [], listed.stdout
    assert leftovers(release) == []
    report(
        release,
        {
            "step": "uninstall",
            "helm_uninstall_wait_seconds": round(seconds, 1),
            "namespace_gone_after_seconds": round(gone_after, 1),
            "pods_created": len(creations),
            "failed": len(failed),
            "slowest_creation_seconds": round(max(c.seconds for c in creations), 2),
            "objects_deleted": len([r for r in deletes if r.succeeded]),
            "configuration_deleted_by": deleted_by,
            "configuration_deleted_before_the_deployments_seconds": round(
                min(r.received for r in deployments) - configuration_deleted[0].completed, 2
            ),
        },
    )


def test_helm_install_with_admission_mode_auto_on_1_37_runs_the_policy_and_uninstalls_clean(
    release_cluster: ReleaseCluster,
):
    """admission.mode=auto: Helm asks the cluster what it serves; 1.37 serves MutatingAdmissionPolicy, so
    kube-apiserver gives the pods their tolerations and no webhook is installed. After the webhook
    release's uninstall above, on the same cluster."""
    release = release_cluster
    e2e = release.e2e
    helm(
        release,
        *("install", RELEASE, *release.chart, "--create-namespace", "-f", str(release.values)),
        *("--set", "admission.mode=auto", "--wait", "--timeout", "10m"),
    )
    try:
        wait_for(lambda: dry_run_mutated(release), 60, "a dry-run pod given its tolerations by the policy")
        admission = client.AdmissionregistrationV1Api(e2e.api_client)
        policies = [p["metadata"]["name"] for p in e2e.raw(admission.list_mutating_admission_policy)["items"]]
        assert policies == ["taintkeeper-default-tolerations"], policies
        assert e2e.raw(admission.list_mutating_webhook_configuration)["items"] == []
        pods = e2e.raw(e2e.core.list_namespaced_pod, SYSTEM_NAMESPACE)["items"]
        assert not [p for p in pods if p["metadata"]["name"].startswith("taintkeeper-webhook")]
        wait_for(
            lambda: e2e.raw(client.CoordinationV1Api(e2e.api_client).read_namespaced_lease, *reversed(judge.LEASE))[
                "spec"
            ].get("holderIdentity"),
            60,
            "a controller holding the Lease",
        )
    finally:
        helm(release, "uninstall", RELEASE, "--wait", "--timeout", "5m")
        e2e.core.delete_namespace(SYSTEM_NAMESPACE)
    wait_for(lambda: leftovers(release) == [], 300, "nothing of the release left", interval=1)
