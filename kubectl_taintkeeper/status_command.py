"""`python -m controller status` (and `kubectl taintkeeper status`): taintkeeper's view of the cluster,
read live from the API. kubectl_taintkeeper/status.py computes it, kubectl_taintkeeper/status_render.py writes it;
this module parses the flags and does the reads.

Reads: the nodes (LIST), the pods (LIST, filtered by --namespace and --selector; not made when no
node has a NoExecute taint, as then no eviction is pending), the leader Lease (GET: its holder, and
the last monitor pass the leader publishes in its annotations, controller/nodelifecycle/lease_annotation.py)
and the admission objects (GET). The nodes and pods are needed: an error reading them is one line and
exit 1. The rest are not: why they could not be read is part of the report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any, Protocol
from urllib.parse import quote

from controller.nodelifecycle.decision import MonitorSettings
from controller.options import OptionsError, parse_options
from controller.options import build_parser as controller_flags
from controller.tainteviction.disruption_budget import BudgetSettings
from controller.tainteviction.verdict import EvictionRule
from kube.client import LIST_REQUEST_TIMEOUT, ClientConfigError, make_api_client
from kube.errors import is_not_found
from kube.identity import STATUS
from kube.request import request_json
from kubectl_taintkeeper.admission_mode import (
    POLICY_BINDING,
    POLICY_PARAMETER,
    WEBHOOK_CONFIGURATION,
    AdmissionStatus,
    admission_status,
    parameter_ref,
)
from kubectl_taintkeeper.budget_reads import read_budgets
from kubectl_taintkeeper.budgets import Budgets
from kubectl_taintkeeper.forbidden import VIEWER, explained, namespace_viewer
from kubectl_taintkeeper.reading import Reading
from kubectl_taintkeeper.status import (
    ClusterStatus,
    any_no_execute_taint,
    cluster_status,
    last_monitor_pass,
)
from kubectl_taintkeeper.status_render import render_text, status_json
from plumbing.arguments import OneLineErrorParser

Json = dict[str, Any]

PROG = "python -m controller status"
DESCRIPTION = (
    "taintkeeper's view of the cluster, live: zones and their rates, the brake, tainted nodes, pending "
    "evictions, the leader."
)
INTERVAL = 1.0  # seconds between frames of --watch
# The four flags whose values set the zones' rates, as the controller spells them.
RATE_FLAGS = (
    "node_eviction_rate",
    "secondary_node_eviction_rate",
    "large_cluster_size_threshold",
    "unhealthy_zone_threshold",
)
BUDGET_FLAGS = ("respect_disruption_budgets_for_taints", "disruption_budget_timeout")
RULE_FLAGS = ("controllers", "feature_gates")  # whether the out-of-service handling runs; Lt/Gt tolerations
# ANSI: cursor home, erase to the end of the line, erase below, clear the screen.
HOME, ERASE_LINE, ERASE_BELOW, CLEAR = "\x1b[H", "\x1b[K", "\x1b[J", "\x1b[2J"
METRICS_PORT_IGNORED = "--metrics-port is deprecated and ignored: the last monitor pass is read from the leader's Lease"


@dataclass(frozen=True)
class StatusRequest:
    kubeconfig: str | None  # None: the in-cluster config, else $KUBECONFIG or ~/.kube/config
    namespace: str | None  # only this namespace's pods; None: every namespace
    selector: str | None  # a label selector for the pods
    output: str  # "text" or "json"
    watch: bool
    lease_namespace: str
    lease_name: str
    settings: MonitorSettings  # the rate flags; the rest keep the controller's defaults
    budgets: BudgetSettings = field(default_factory=BudgetSettings)  # the controller's disruption-budget flags
    rule: EvictionRule = field(default_factory=EvictionRule)  # the controller's --controllers, --feature-gates


def add_arguments(
    parser: argparse.ArgumentParser,
    kubeconfig_default: Any = None,
    kubeconfig_help: str = "kubeconfig file (default: the in-cluster config, else $KUBECONFIG, else ~/.kube/config)",
) -> None:
    """The status flags; defaults are the controller's own (controller/options.py). `kubeconfig_default`
    is argparse.SUPPRESS where an enclosing parser already takes --kubeconfig."""
    defaults = controller_flags()
    parser.add_argument("--kubeconfig", default=kubeconfig_default, help=kubeconfig_help)
    parser.add_argument("-n", "--namespace", help="only the pods of this namespace (default: all)")
    parser.add_argument("-l", "--selector", help="only the pods matching this label selector, e.g. app=web")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="text (default) or json")
    parser.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help=f"redraw every {INTERVAL:g}s until Ctrl-C (piped: one frame per interval)",
    )
    parser.add_argument(
        "--lease-namespace",
        default=defaults.get_default("leader_elect_resource_namespace"),
        help="namespace of the controller's Lease (default %(default)s)",
    )
    parser.add_argument(
        "--lease-name",
        default=defaults.get_default("leader_elect_resource_name"),
        help="name of the controller's Lease (default %(default)s)",
    )
    parser.add_argument(
        "--metrics-port",
        metavar="PORT",
        help="deprecated and ignored (the last monitor pass is read from the leader's Lease)",
    )
    for flags, purpose in (
        (RATE_FLAGS, "for the zones' rates (default %(default)s)"),
        (BUDGET_FLAGS, "for what evictions wait for (default %(default)r)"),
        (RULE_FLAGS, "for which pods the taint eviction manager deletes (default %(default)r)"),
    ):
        for flag in flags:
            option = "--" + flag.replace("_", "-")
            parser.add_argument(
                option,
                default=defaults.get_default(flag),
                metavar="VALUE",
                help=f"the controller's {option}, {purpose}",
            )


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog=PROG, allow_abbrev=False, description=DESCRIPTION)
    add_arguments(parser)
    return parser


def request_from(
    args: argparse.Namespace, parser: argparse.ArgumentParser, kubeconfig: str | None = None
) -> StatusRequest:
    """The request parsed flags ask for; bad rate flags end with one line and exit 2, checked by the
    controller's own rules. `kubeconfig` stands in when --kubeconfig is absent. --metrics-port is
    accepted, so scripts that pass it go on working, and said on stderr to be ignored."""
    if args.metrics_port is not None:
        print(f"status: warning: {METRICS_PORT_IGNORED}", file=sys.stderr)
    flags = [f"--{flag.replace('_', '-')}={getattr(args, flag)}" for flag in (*RATE_FLAGS, *BUDGET_FLAGS, *RULE_FLAGS)]
    try:
        options = parse_options(flags)
    except OptionsError as error:
        parser.error(str(error))
    return StatusRequest(
        kubeconfig=getattr(args, "kubeconfig", None) or kubeconfig,
        namespace=args.namespace or None,
        selector=args.selector or None,
        output=args.output,
        watch=args.watch,
        lease_namespace=args.lease_namespace,
        lease_name=args.lease_name,
        settings=options.monitor,
        budgets=options.budgets,
        rule=options.eviction_rule,
    )


def parse_args(argv: list[str]) -> StatusRequest:
    parser = build_parser()
    return request_from(parser.parse_args(argv), parser)


# --- the reads ---------------------------------------------------------------------------------------


def pods_query(namespace: str | None, selector: str | None) -> tuple[str, list[tuple[str, str]]]:
    """(path, query) of the pods LIST: the filters go to the apiserver, so only matching pods come back."""
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods" if namespace else "/api/v1/pods"
    query = [("resourceVersion", "0")]  # served from the apiserver's watch cache: cheap, a moment old at most
    if selector:
        query.append(("labelSelector", selector))
    return path, query


def lease_path(namespace: str, name: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace, safe='')}/leases/{quote(name, safe='')}"


class ClusterReads(Protocol):
    """The GETs the command makes; `ApiReads` is the real one. Each raises on failure."""

    def get_json(self, path: str, query: list[tuple[str, str]]) -> Json: ...


class ApiReads:
    """GETs through the ApiClient, each allowed a LIST's time."""

    def __init__(self, api: Any) -> None:
        self._api = api

    def get_json(self, path: str, query: list[tuple[str, str]]) -> Json:
        answer: Json = request_json(self._api, "GET", path, query=query, timeout=LIST_REQUEST_TIMEOUT)
        return answer


ADMISSION = "/apis/admissionregistration.k8s.io/v1"


def _read_object(reads: ClusterReads, path: str, role: str) -> Reading[Mapping[str, Any]]:
    """One object, absent (also where its API is not served), or why it could not be read."""
    try:
        return Reading(reads.get_json(path, []))
    except Exception as error:
        if is_not_found(error):
            return Reading()
        return Reading(error=explained(error, role))


def _read_lease(reads: ClusterReads, request: StatusRequest) -> Reading[Mapping[str, Any]]:
    return _read_object(
        reads, lease_path(request.lease_namespace, request.lease_name), namespace_viewer(request.lease_namespace)
    )


def _last_pass(lease: Reading[Mapping[str, Any]]) -> Reading[float]:
    """The last monitor pass the Lease's holder published on it; nothing without a holder."""
    if lease.value is None or not (lease.value.get("spec") or {}).get("holderIdentity"):
        return Reading()
    return last_monitor_pass(lease.value)


def _read_admission(reads: ClusterReads, request: StatusRequest) -> AdmissionStatus:
    """The webhook's configuration, the policy's binding, and the policy's parameter: where the binding
    names it, else where the installations put it (so the same requests are made on every cluster)."""
    webhook = _read_object(reads, f"{ADMISSION}/mutatingwebhookconfigurations/{WEBHOOK_CONFIGURATION}", VIEWER)
    binding = _read_object(reads, f"{ADMISSION}/mutatingadmissionpolicybindings/{POLICY_BINDING}", VIEWER)
    named = parameter_ref(binding.value) if binding.value is not None else None
    namespace, name = named or (request.lease_namespace, POLICY_PARAMETER)
    path = f"/api/v1/namespaces/{quote(namespace)}/configmaps/{quote(name)}"
    parameter = _read_object(reads, path, namespace_viewer(namespace))
    return admission_status(webhook, binding, parameter)


def read_status(reads: ClusterReads, request: StatusRequest, now: Callable[[], float] = time.time) -> ClusterStatus:
    """The cluster's status now; reading the nodes or pods raises, the Lease and admission objects do not."""
    nodes = reads.get_json("/api/v1/nodes", [("resourceVersion", "0")]).get("items") or []
    pods: list[Json] = []
    budgets = Budgets(request.budgets)
    if any_no_execute_taint(nodes):
        pods = reads.get_json(*pods_query(request.namespace, request.selector)).get("items") or []
        budgets = read_budgets(reads.get_json, request.budgets)
    lease = _read_lease(reads, request)
    last_pass = _last_pass(lease)
    return cluster_status(
        nodes,
        pods,
        f"{request.lease_namespace}/{request.lease_name}",
        lease,
        last_pass,
        request.settings,
        now(),
        budgets,
        request.rule,
        _read_admission(reads, request),
    )


# --- the output --------------------------------------------------------------------------------------


def frame(status: ClusterStatus, output: str, colour: bool, watching: bool) -> str:
    """One report: JSON (one line per frame while watching, so each frame is one document), or text."""
    if output == "json":
        return json.dumps(status_json(status), indent=None if watching else 2)
    return render_text(status, colour)


def use_colour(stream: IO[str], environ: dict[str, str] | None = None) -> bool:
    """Colour only for a terminal, and not when NO_COLOR is set (no-color.org)."""
    environ = dict(os.environ) if environ is None else environ
    return stream.isatty() and not environ.get("NO_COLOR")


def watch(
    draw: Callable[[], str | None],
    out: IO[str],
    tty: bool,
    *,
    separator: str = "\n\n",
    interval: float = INTERVAL,
    sleep: Callable[[float], None] | None = None,
    monotonic: Callable[[], float] | None = None,
) -> int:
    """Redraw until Ctrl-C (exit 0): in place on a terminal, else each frame after the last, `separator`
    between them. A frame that `draw` gives as None is skipped. `sleep` and `monotonic` default to
    the time module's, looked up at the call."""
    sleep = time.sleep if sleep is None else sleep
    monotonic = time.monotonic if monotonic is None else monotonic
    try:
        if tty:
            out.write(CLEAR)
        while True:
            started = monotonic()
            text = draw()
            if text is not None and tty:  # overwrite the last frame line by line (no flicker), erase what is left
                out.write(HOME + text.replace("\n", ERASE_LINE + "\n") + ERASE_LINE + "\n" + ERASE_BELOW)
            elif text is not None:
                out.write(text + separator)
            out.flush()
            sleep(max(0.0, interval - (monotonic() - started)))
    except KeyboardInterrupt:
        return 0


def run(request: StatusRequest, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """The command; 0, or 1 when the cluster cannot be read, 2 for a kubeconfig that does not load.
    `out` and `err` default to the process's stdout and stderr at the time of the call."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        api = make_api_client(request.kubeconfig, component=STATUS)
    except ClientConfigError as error:
        print(f"status: error: {error}", file=err)
        return 2
    reads = ApiReads(api)
    colour = request.output == "text" and use_colour(out)
    try:
        if not request.watch:
            try:
                status = read_status(reads, request)
            except Exception as error:
                print(f"status: error: cannot read the cluster: {explained(error, VIEWER)}", file=err)
                return 1
            print(frame(status, request.output, colour, watching=False), file=out)
            return 0

        def draw() -> str | None:
            try:
                return frame(read_status(reads, request), request.output, colour, watching=True)
            except Exception as error:  # said, and tried again next frame: a blip must not end the watch
                message = f"status: error: cannot read the cluster: {explained(error, VIEWER)}"
                if request.output == "json":  # stdout carries only JSON documents
                    print(message, file=err)
                    return None
                return message

        return watch(draw, out, tty=out.isatty(), separator="\n" if request.output == "json" else "\n\n")
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `... | head`: the reader has gone
        if out is sys.stdout:  # Python flushes stdout at exit: point it somewhere that takes the rest
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        api.close()


def main(argv: list[str]) -> int:
    return run(parse_args(argv))
