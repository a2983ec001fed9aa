"""`kubectl taintkeeper explain node NAME`, `kubectl taintkeeper status [options]` and
`kubectl taintkeeper fence|unfence NODE [options]`: the kubectl plugin.

Installed as the console script `kubectl-taintkeeper`; kubectl runs any `kubectl-*` on the PATH,
passing its environment and every argument after the plugin's name. The work is done by
explain.py (`python -m controller explain --node NAME`), status_command.py (`python -m controller
status`) and fencing_command.py (`python -m controller fence|unfence`); this module only parses.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

from kubectl_taintkeeper.fencing_command import COMMANDS as FENCING_COMMANDS
from kubectl_taintkeeper.fencing_command import DESCRIPTIONS as FENCING_DESCRIPTIONS
from kubectl_taintkeeper.fencing_command import FenceRequest
from kubectl_taintkeeper.fencing_command import add_arguments as add_fencing_arguments
from kubectl_taintkeeper.fencing_command import request_from as fencing_request_from
from kubectl_taintkeeper.status_command import DESCRIPTION as STATUS_DESCRIPTION
from kubectl_taintkeeper.status_command import StatusRequest, add_arguments, request_from
from plumbing.arguments import OneLineErrorParser

PROG = "kubectl taintkeeper"
# The controller's flags `explain` takes, passed on to it: what evictions wait for, which pods are deleted.
BUDGET_FLAGS = (
    "--respect-disruption-budgets-for-taints",
    "--disruption-budget-timeout",
    "--controllers",
    "--feature-gates",
)


@dataclass(frozen=True)
class ExplainNode:
    node: str
    kubeconfig: str | None  # None: the in-cluster config, else ~/.kube/config
    budget_flags: tuple[str, ...] = ()  # the controller's disruption-budget flags, passed on to explain


def build_parser() -> argparse.ArgumentParser:
    kubeconfig_help = "kubeconfig file (default: $KUBECONFIG, else the in-cluster config, else ~/.kube/config)"
    parser = OneLineErrorParser(prog=PROG, description="taintkeeper's view of a cluster, from its own decision code.")
    parser.add_argument("--kubeconfig", help=kubeconfig_help)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    explain = commands.add_parser("explain", help="why and when pods will be evicted")
    kinds = explain.add_subparsers(dest="kind", metavar="KIND", required=True)
    node = kinds.add_parser("node", help="each pod on node NAME: whether, when and why it will be evicted")
    node.add_argument("name", metavar="NAME")
    # Also accepted after the node's name; SUPPRESS keeps an absent one from hiding the one given earlier.
    node.add_argument("--kubeconfig", default=argparse.SUPPRESS, help=kubeconfig_help)
    for flag in BUDGET_FLAGS:
        node.add_argument(flag, default=None, help="as the controller's flag of that name")
    status = commands.add_parser(
        "status", help="zones, the brake, tainted nodes, pending evictions, the leader", description=STATUS_DESCRIPTION
    )
    add_arguments(status, kubeconfig_default=argparse.SUPPRESS, kubeconfig_help=kubeconfig_help)
    for name, summary in zip(
        FENCING_COMMANDS,
        ("declare a dead node's machine off: its pods are force deleted", "remove what fence put on a node"),
        strict=True,
    ):
        fencing = commands.add_parser(name, help=summary, description=FENCING_DESCRIPTIONS[name])
        add_fencing_arguments(fencing, name, kubeconfig_default=argparse.SUPPRESS, kubeconfig_help=kubeconfig_help)
    return parser


def parse_args(argv: list[str], environ: dict[str, str] | None = None) -> ExplainNode | StatusRequest | FenceRequest:
    """The command asked for; a bad command line exits 2 with one line on stderr."""
    parser = build_parser()
    args = parser.parse_args(argv)
    environ = dict(os.environ) if environ is None else environ
    # Passed on explicitly: without it the client would try the in-cluster config before $KUBECONFIG,
    # while kubectl itself prefers $KUBECONFIG.
    kubeconfig = args.kubeconfig or environ.get("KUBECONFIG") or None
    if args.command == "status":
        return request_from(args, parser, kubeconfig)
    if args.command in FENCING_COMMANDS:
        return fencing_request_from(args, parser, args.command, kubeconfig)
    budget_flags = tuple(
        f"{flag}={value}"
        for flag in BUDGET_FLAGS
        if (value := getattr(args, flag.lstrip("-").replace("-", "_"))) is not None
    )
    return ExplainNode(node=args.name, kubeconfig=kubeconfig, budget_flags=budget_flags)


def main(argv: list[str] | None = None) -> int:
    command = parse_args(sys.argv[1:] if argv is None else argv)
    if isinstance(command, StatusRequest):
        from kubectl_taintkeeper.status_command import run

        return run(command)
    if isinstance(command, FenceRequest):
        from kubectl_taintkeeper.fencing_command import run as run_fencing

        return run_fencing(command)
    from kubectl_taintkeeper.explain import main as explain_main

    kubeconfig = ["--kubeconfig", command.kubeconfig] if command.kubeconfig else []
    return explain_main(["--node", command.node, *kubeconfig, *command.budget_flags])


if __name__ == "__main__":
    sys.exit(main())
