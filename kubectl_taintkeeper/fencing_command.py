"""`python -m controller fence NODE` / `unfence NODE` (and `kubectl taintkeeper fence|unfence NODE`):
the runbook of a dead node's stuck pods as one safe step.

`fence` refuses (one line, exit 1) unless the node's Ready condition has not been True for at least
--min-down (default 5m); prints what will happen (kubectl_taintkeeper/fencing_plan.py: the pods that will be
force deleted, with their owners, and the volume attachments); asks for confirmation on a terminal, or
takes --yes (without a terminal and without --yes it refuses: exit 2); then puts on the
`node.kubernetes.io/out-of-service` taint and the annotations saying who fenced the node and when,
in one JSON patch that tests the node's resourceVersion, so a concurrent change of its taints is
never lost (a conflict is re-read, re-checked and retried). taintkeeper's controller (the
`out-of-service` handling) then does the deleting. `unfence` removes the taint and the annotations
the same way. Whether the node may be fenced, and the patches, are controller/fencing.py's.

Reads: the node (GET), its pods (LIST by spec.nodeName), the VolumeAttachments (LIST). Writes: one
PATCH of the node. An API error is one line and exit 1; a kubeconfig that does not load, exit 2.
"""

from __future__ import annotations

import argparse
import getpass
import os
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any, Protocol
from urllib.parse import quote

from controller.describe import taint_text
from controller.fencing import (
    CONFIRMED_AT_ANNOTATION,
    DEFAULT_MIN_DOWN,
    FENCED_AT_ANNOTATION,
    FENCED_BY_ANNOTATION,
    FencePatch,
    fence_patch,
    fence_refusal,
    fenced_text,
    is_out_of_service,
    node_annotations,
    out_of_service_taint,
    ready_condition,
    unfence_patch,
)
from kube.client import (
    JSON_PATCH,
    LIST_REQUEST_TIMEOUT,
    REQUEST_TIMEOUT,
    ClientConfigError,
    kubeconfig_user,
    make_api_client,
)
from kube.errors import describe_error, is_conflict, is_invalid, is_not_found
from kube.identity import FENCE
from kube.request import request_json
from kubectl_taintkeeper.fencing_plan import fence_plan, render_plan
from kubectl_taintkeeper.forbidden import FENCER, explained
from plumbing.arguments import OneLineErrorParser
from plumbing.durations import parse_duration

Json = dict[str, Any]

COMMANDS = ("fence", "unfence")
ATTEMPTS = 5  # a node that changed between the read and the patch is re-read and patched again, this often
VOLUME_ATTACHMENTS_PATH = "/apis/storage.k8s.io/v1/volumeattachments"
KUBECONFIG_HELP = "kubeconfig file (default: the in-cluster config, else $KUBECONFIG, else ~/.kube/config)"
DESCRIPTIONS = {
    "fence": "Declare a dead node's machine off (taint node.kubernetes.io/out-of-service): taintkeeper's controller "
    "then force deletes its pods and detaches its volumes, so StatefulSets start them elsewhere.",
    "unfence": "Remove the node.kubernetes.io/out-of-service taint and the fencing annotations from a node.",
}


@dataclass(frozen=True)
class FenceRequest:
    command: str  # "fence" or "unfence"
    node: str
    kubeconfig: str | None  # None: the in-cluster config, else $KUBECONFIG or ~/.kube/config
    min_down: float = DEFAULT_MIN_DOWN
    yes: bool = False


def add_arguments(
    parser: argparse.ArgumentParser,
    command: str,
    kubeconfig_default: Any = None,
    kubeconfig_help: str = KUBECONFIG_HELP,
) -> None:
    """`command`'s flags. `kubeconfig_default` is argparse.SUPPRESS where an enclosing parser takes --kubeconfig."""
    parser.add_argument("name", metavar="NODE")
    parser.add_argument("--kubeconfig", default=kubeconfig_default, help=kubeconfig_help)
    if command == "fence":
        parser.add_argument(
            "--min-down",
            default="5m",
            metavar="DURATION",
            help="refuse unless the node's Ready condition has not been True for at least this long "
            "(a Go duration; default 5m)",
        )
        parser.add_argument(
            "-y", "--yes", action="store_true", help="fence without asking (needed when stdin is not a terminal)"
        )


def request_from(
    args: argparse.Namespace, parser: argparse.ArgumentParser, command: str, kubeconfig: str | None = None
) -> FenceRequest:
    """The request parsed flags ask for; a bad --min-down ends with one line and exit 2. `kubeconfig`
    stands in when --kubeconfig is absent."""
    min_down = DEFAULT_MIN_DOWN
    if command == "fence":
        try:
            min_down = parse_duration(args.min_down)
        except ValueError as error:
            parser.error(f"--min-down: {error}")
        if min_down < 0:
            parser.error("--min-down must not be negative")
    return FenceRequest(
        command=command,
        node=args.name,
        kubeconfig=getattr(args, "kubeconfig", None) or kubeconfig,
        min_down=min_down,
        yes=bool(getattr(args, "yes", False)),
    )


def parse_args(command: str, argv: list[str]) -> FenceRequest:
    parser = OneLineErrorParser(
        prog=f"python -m controller {command}", allow_abbrev=False, description=DESCRIPTIONS[command]
    )
    add_arguments(parser, command)
    return request_from(parser.parse_args(argv), parser, command)


# --- the calls ---------------------------------------------------------------------------------------


class FenceApi(Protocol):
    """The requests the commands make; `ApiCalls` is the real one. Each raises the client's ApiException."""

    def get_json(self, path: str, query: list[tuple[str, str]]) -> Json: ...

    def patch_json(self, path: str, ops: Sequence[dict[str, Any]]) -> Json: ...


class ApiCalls:
    def __init__(self, api: Any) -> None:
        self._api = api

    def get_json(self, path: str, query: list[tuple[str, str]]) -> Json:
        answer: Json = request_json(self._api, "GET", path, query=query, timeout=LIST_REQUEST_TIMEOUT)
        return answer

    def patch_json(self, path: str, ops: Sequence[dict[str, Any]]) -> Json:
        answer: Json = request_json(
            self._api, "PATCH", path, body=list(ops), content_type=JSON_PATCH, timeout=REQUEST_TIMEOUT
        )
        return answer


def node_path(name: str) -> str:
    return f"/api/v1/nodes/{quote(name, safe='')}"


def pods_query(name: str) -> list[tuple[str, str]]:
    return [("fieldSelector", f"spec.nodeName={name}")]


def read_node(api: FenceApi, name: str) -> Json | None:
    try:
        return api.get_json(node_path(name), [])
    except Exception as error:
        if is_not_found(error):
            return None
        raise


def read_attachments(api: FenceApi) -> tuple[list[Json], str]:
    """The VolumeAttachments, or why they could not be read: only shown, so a user who may not list
    them can still fence (the controller deletes them either way)."""
    try:
        return api.get_json(VOLUME_ATTACHMENTS_PATH, []).get("items") or [], ""
    except Exception as error:
        return [], one_line(error)


def _read_node_or_say(api: FenceApi, name: str, prefix: str, terminal: Terminal) -> Json | None:
    """The node, or None once `terminal.err` says why not: it cannot be read, or it is not found."""
    try:
        node = read_node(api, name)
    except Exception as error:
        print(f"{prefix} cannot read node {name}: {explained(error, FENCER)}", file=terminal.err)
        return None
    if node is None:
        print(f"{prefix} node {name} not found", file=terminal.err)
    return node


def fencer(kubeconfig: str | None, environ: dict[str, str] | None = None) -> str:
    """Who fences: `USER@HOST`, and the kubeconfig's user when there is one (`alice@laptop as admin`)."""
    environ = dict(os.environ) if environ is None else environ
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name and no $USER: a container without a passwd entry
        user = environ.get("USER") or "unknown"
    kube_user = kubeconfig_user(kubeconfig)
    return f"{user}@{socket.gethostname()}" + (f" as {kube_user}" if kube_user else "")


def one_line(error: BaseException) -> str:
    return " ".join(describe_error(error).split())


@dataclass
class Terminal:
    """Where the commands talk: stdout, stderr, and stdin for the question."""

    out: IO[str]
    err: IO[str]
    stdin: IO[str]

    def confirmed(self, question: str) -> bool:
        self.out.write(f"{question} [y/N] ")
        self.out.flush()
        return self.stdin.readline().strip().lower() in ("y", "yes")


# --- fence ---------------------------------------------------------------------------------------------


def fence(
    request: FenceRequest, api: FenceApi, terminal: Terminal, who: str, now: Callable[[], float] = time.time
) -> int:
    name, say = request.node, terminal.out
    prefix = "fence: error:"
    if not request.yes and not terminal.stdin.isatty():
        print(
            f"{prefix} stdin is not a terminal, so nobody can confirm: pass --yes to fence node {name} without asking",
            file=terminal.err,
        )
        return 2
    try:
        node = read_node(api, name)
        if node is None:
            print(f"{prefix} node {name} not found", file=terminal.err)
            return 1
        taint = out_of_service_taint((node.get("spec") or {}).get("taints") or [])
        if taint is not None:
            print(f"Node {name} is already fenced ({taint_text(taint)}, {fenced_text(node)}); nothing to do.", file=say)
            return 0
        refusal = fence_refusal(node, request.min_down, now())
        if refusal is not None:
            print(f"{prefix} {refusal}", file=terminal.err)
            return 1
        pods = api.get_json("/api/v1/pods", pods_query(name)).get("items") or []
    except Exception as error:
        print(f"{prefix} cannot read the cluster: {explained(error, FENCER)}", file=terminal.err)
        return 1
    attachments, unreadable = read_attachments(api)
    print(render_plan(fence_plan(node, pods, attachments, now(), unreadable), now()), file=say)
    print(file=say)
    if not request.yes and not terminal.confirmed(f"Fence node {name}?"):
        print(f"Not fenced: node {name} is left as it was.", file=say)
        return 1
    for attempt in range(ATTEMPTS):
        patch = fence_patch(node, who, now())
        if patch is None:
            print(f"Node {name} was fenced meanwhile ({fenced_text(node)}); nothing to do.", file=say)
            return 0
        try:
            api.patch_json(node_path(name), patch.ops)
        except Exception as error:
            if not (is_conflict(error) or is_invalid(error)) or attempt + 1 == ATTEMPTS:
                print(f"{prefix} cannot fence node {name}: {explained(error, FENCER)}", file=terminal.err)
                return 1
        else:
            return _fenced(name, patch, say)
        fresh = _read_node_or_say(api, name, prefix, terminal)  # it changed since it was read: decide again
        if fresh is None:
            return 1
        node = fresh
        refusal = fence_refusal(node, request.min_down, now())
        if refusal is not None:
            print(f"{prefix} {refusal}", file=terminal.err)
            return 1
    return 1  # not reached: the last attempt returns


def _fenced(name: str, patch: FencePatch, say: IO[str]) -> int:
    marks = " ".join(f"{key}={value!r}" for key, value in patch.annotations.items())
    print(f"Node {name} fenced: taint {taint_text(patch.taint)}, annotations {marks}.", file=say)
    print(
        f"taintkeeper's controller now force deletes its pods and deletes its volume attachments (events on the "
        f"node and the pods). Once the node is back, unfence it: kubectl taintkeeper unfence {name}",
        file=say,
    )
    return 0


# --- unfence -------------------------------------------------------------------------------------------


def removed_text(node: Json) -> str:
    """What unfencing removes from the node, as a phrase."""
    taints = [taint_text(t) for t in (node.get("spec") or {}).get("taints") or [] if is_out_of_service(t)]
    marks = [
        key
        for key in (FENCED_BY_ANNOTATION, FENCED_AT_ANNOTATION, CONFIRMED_AT_ANNOTATION)
        if key in node_annotations(node)
    ]
    parts = ([f"the taint {', '.join(taints)}"] if taints else []) + (
        [f"the annotation(s) {', '.join(marks)}"] if marks else []
    )
    return " and ".join(parts)


def unfence(request: FenceRequest, api: FenceApi, terminal: Terminal) -> int:
    name, say = request.node, terminal.out
    prefix = "unfence: error:"
    for attempt in range(ATTEMPTS):
        node = _read_node_or_say(api, name, prefix, terminal)
        if node is None:
            return 1
        ops = unfence_patch(node)
        if not ops:
            print(
                f"Node {name} is not fenced (no out-of-service taint, no fencing annotations); nothing to do.", file=say
            )
            return 0
        try:
            api.patch_json(node_path(name), ops)
        except Exception as error:
            if (is_conflict(error) or is_invalid(error)) and attempt + 1 < ATTEMPTS:
                continue  # the node changed since it was read: read it again
            print(f"{prefix} cannot unfence node {name}: {explained(error, FENCER)}", file=terminal.err)
            return 1
        print(f"Node {name} unfenced: removed {removed_text(node)}.", file=say)
        status = (ready_condition(node) or {}).get("status")
        if status != "True":
            print(
                f"Node {name} is not Ready ({status or 'no Ready condition'}): its pods are no longer force deleted, "
                f"and pods stuck Terminating on it stay so until it is back or fenced again.",
                file=say,
            )
        return 0
    return 1  # not reached: the last attempt returns


# --- running -------------------------------------------------------------------------------------------


def run(
    request: FenceRequest, out: IO[str] | None = None, err: IO[str] | None = None, stdin: IO[str] | None = None
) -> int:
    """The command against the cluster of `request.kubeconfig`; the streams default to the process's."""
    terminal = Terminal(out or sys.stdout, err or sys.stderr, stdin or sys.stdin)
    try:
        api = make_api_client(request.kubeconfig, component=FENCE)
    except ClientConfigError as error:
        print(f"{request.command}: error: {error}", file=terminal.err)
        return 2
    try:
        if request.command == "fence":
            return fence(request, ApiCalls(api), terminal, fencer(request.kubeconfig))
        return unfence(request, ApiCalls(api), terminal)
    except KeyboardInterrupt:
        print(f"\n{request.command}: interrupted", file=terminal.err)
        return 130
    finally:
        api.close()


def main(command: str, argv: list[str]) -> int:
    return run(parse_args(command, argv))
