"""`python -m kubectl_taintkeeper.release_check`: what `helm test` runs (charts/taintkeeper/templates/tests/).

Two checks of an installed taintkeeper, each one line, exit 1 when one fails:

- admission: a pod created now (`dryRun=All`: the apiserver admits it, mutating webhooks and policies
  included, and stores nothing) in a namespace taintkeeper covers gets the not-ready and unreachable
  NoExecute tolerations with the configured seconds;
- the controller: its Lease has a holder that renewed it within the Lease's duration.

The judgements are pure (`toleration_problems`, `lease_problems`); `main` makes the two requests.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from kube.client import ClientConfigError, make_api_client
from kube.errors import describe_error
from kube.identity import RELEASE_CHECK
from kube.request import request_json
from kube.timestamps import parse_time
from plumbing.arguments import OneLineErrorParser
from shared.taints import NOT_READY, UNREACHABLE

REQUEST_TIMEOUT = 10.0
NO_EXECUTE = "NoExecute"


def probe_pod(image: str) -> dict[str, Any]:
    """A pod that asks for no tolerations and meets the restricted Pod Security Standard (a dry run is
    admitted as a creation is, Pod Security included); never run, so its image is never pulled. Named by
    the apiserver, so no pod of the namespace is in its way."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "taintkeeper-release-check-",
            "labels": {"app.kubernetes.io/name": "taintkeeper-release-check"},
        },
        "spec": {
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "probe",
                    "image": image,
                    "command": ["python", "-c", "pass"],
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    }


def toleration_problems(pod: Mapping[str, Any], *, not_ready: int, unreachable: int) -> list[str]:
    """What is wrong with the pod's not-ready and unreachable NoExecute tolerations; [] when both are there
    with these seconds."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    problems = []
    for key, seconds in ((NOT_READY, not_ready), (UNREACHABLE, unreachable)):
        found = [t for t in tolerations if t.get("key") == key and t.get("effect") == NO_EXECUTE]
        if not found:
            problems.append(f"no {key}:{NO_EXECUTE} toleration (want tolerationSeconds {seconds})")
            continue
        got = found[0].get("tolerationSeconds")
        if got != seconds:
            problems.append(f"{key}:{NO_EXECUTE} tolerationSeconds {'unset' if got is None else got}, want {seconds}")
    return problems


def lease_problems(lease: Mapping[str, Any], *, now: float) -> list[str]:
    """What keeps the Lease from having a live holder; [] when its holder renewed it within its duration."""
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity")
    if not holder:
        return ["the Lease has no holder"]
    renewed = parse_time(spec.get("renewTime"))
    if renewed is None:
        return [f"the Lease's holder {holder} never renewed it"]
    duration = spec.get("leaseDurationSeconds") or 15
    age = now - renewed
    if age > duration:
        return [f"the Lease's holder {holder} last renewed it {age:.1f} s ago, more than its {duration} s duration"]
    return []


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="release_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: the in-cluster config)")
    parser.add_argument("--lease-namespace", required=True, help="namespace of the controller's Lease")
    parser.add_argument("--lease-name", default="taintkeeper-controller", help="its name (default %(default)s)")
    parser.add_argument("--pod-namespace", required=True, help="a namespace taintkeeper gives pods tolerations in")
    parser.add_argument("--image", required=True, help="the dry-run pod's image (never pulled)")
    parser.add_argument("--not-ready-seconds", type=int, required=True, help="the configured not-ready seconds")
    parser.add_argument("--unreachable-seconds", type=int, required=True, help="the configured unreachable seconds")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        api = make_api_client(args.kubeconfig, component=RELEASE_CHECK)
    except ClientConfigError as error:
        print(f"release_check: error: {error}", file=sys.stderr)
        return 1
    failed = False
    pods = f"/api/v1/namespaces/{quote(args.pod_namespace, safe='')}/pods"
    try:
        pod = request_json(
            api,
            "POST",
            pods,
            query=[("dryRun", "All")],
            body=probe_pod(args.image),
            timeout=REQUEST_TIMEOUT,
        )
        problems = toleration_problems(pod, not_ready=args.not_ready_seconds, unreachable=args.unreachable_seconds)
    except Exception as error:  # any failure is this check's answer, in one line
        problems = [f"cannot create a dry-run pod in {args.pod_namespace}: {describe_error(error)}"]
    failed |= bool(problems)
    print(
        f"admission: {'; '.join(problems)}"
        if problems
        else f"admission: ok: a pod in {args.pod_namespace} gets not-ready {args.not_ready_seconds} s, "
        f"unreachable {args.unreachable_seconds} s"
    )
    lease_path = (
        f"/apis/coordination.k8s.io/v1/namespaces/{quote(args.lease_namespace, safe='')}"
        f"/leases/{quote(args.lease_name, safe='')}"
    )
    try:
        lease = request_json(api, "GET", lease_path, timeout=REQUEST_TIMEOUT)
        problems = lease_problems(lease, now=time.time())
    except Exception as error:
        problems = [f"cannot read the Lease {args.lease_namespace}/{args.lease_name}: {describe_error(error)}"]
    failed |= bool(problems)
    print(
        f"controller: {'; '.join(problems)}"
        if problems
        else f"controller: ok: {lease['spec']['holderIdentity']} holds {args.lease_namespace}/{args.lease_name}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
