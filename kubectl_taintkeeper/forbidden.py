"""Which of taintkeeper's roles to bind when the apiserver refuses one of the commands' requests (403):
the roles manifests/base/operator-rbac.yaml and the chart install (docs/operating.md, "Roles for operators")."""

from __future__ import annotations

from kube.errors import FORBIDDEN, describe_error, status_code

VIEWER = "the ClusterRole taintkeeper-viewer"  # status, explain: the cluster-wide reads
FENCER = "the ClusterRole taintkeeper-fencer"  # fence, unfence


def namespace_viewer(namespace: str) -> str:
    """The Role with the leader's Lease and the admission policy's parameter, in the controller's namespace."""
    return f"the Role taintkeeper-viewer in {namespace}"


def explained(error: BaseException, role: str) -> str:
    """The error on one line; a refusal also names the role that grants what was refused."""
    text = " ".join(describe_error(error).split())
    return f"{text} (bind {role})" if status_code(error) == FORBIDDEN else text
