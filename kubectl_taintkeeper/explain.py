"""`python -m controller explain --node NAME`: for each pod on a node, whether and when it will be
evicted and why (which taint, which toleration, the deadline), by the very rule the taint eviction
manager acts on (controller/tainteviction/verdict.py, and disruption_budget.py); for a pod whose
eviction respects its disruption budget, which budget it waits for.

A taint without `timeAdded` is counted from now: this command cannot know when the running
controller first saw it, and says so. The controller's `--respect-disruption-budgets-for-taints`
and `--disruption-budget-timeout` are not in the API: pass the same flags here.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from controller.describe import describe_duration, taint_text, toleration_text
from controller.objects import node_view, pod_view
from controller.tainteviction.decision import EXPIRES, NO_TAINTS, UNTOLERATED, evicting_taints
from controller.tainteviction.disruption_budget import BudgetSettings, check_taint_keys
from controller.tainteviction.verdict import EvictionRule, pod_verdict
from kube.timestamps import format_time
from kubectl_taintkeeper.budgets import Budgets, budget_note
from plumbing.durations import parse_duration

Json = dict[str, Any]


def explain(
    node: Json, pods: list[Json], now: float, budgets: Budgets | None = None, rule: EvictionRule | None = None
) -> list[str]:
    """The report, one line per pod after a header about the node."""
    budgets = budgets or Budgets()
    rule = rule or EvictionRule()
    view = node_view(node)
    ready = view.condition("Ready")
    lines = [
        f"node {view.name}: Ready={ready.get('status') if ready else 'none'}; NoExecute taints: "
        + (
            ", ".join(
                taint_text(t)
                + (f" (added {t['timeAdded']})" if t.get("timeAdded") else " (no timeAdded: counted from now)")
                for t in view.no_execute_taints
            )
            or "none"
        )
    ]
    evicting = evicting_taints(view)
    if len(evicting) < len(view.no_execute_taints):
        lines.append(
            "  (Ready: its not-ready/unreachable taint is stale, lifted on the monitor's next pass; it evicts nothing)"
        )
    labels_of = {pod_view(p).key: dict((p.get("metadata") or {}).get("labels") or {}) for p in pods}
    for pod in sorted((pod_view(p) for p in pods), key=lambda p: p.key):
        if pod.node_name != view.name:
            continue
        verdict = pod_verdict(pod, view, lambda _t: now, now, rule)
        if verdict.left_because is not None:
            lines.append(f"  {pod.key}: {verdict.left_because}")
            continue
        decision = verdict.decision
        if decision.at is None:
            if decision.reason == NO_TAINTS and evicting != view.no_execute_taints:
                lines.append(f"  {pod.key}: not evicted (no NoExecute taint but the stale one)")
            elif decision.reason == NO_TAINTS:
                lines.append(f"  {pod.key}: not evicted (no NoExecute taints)")
            else:
                lines.append(f"  {pod.key}: not evicted (tolerates every NoExecute taint forever)")
            continue
        waiting, how = budget_note(pod, labels_of[pod.key], decision, evicting, budgets, now)
        if decision.reason == UNTOLERATED:
            lines.append(
                f"  {pod.key}: {waiting or 'evicted now'}: taint {taint_text(decision.taint or {})} "
                f"is not tolerated{how}"
            )
            continue
        assert decision.reason == EXPIRES
        when = (
            f"in {describe_duration(decision.at - now)}"
            if decision.at > now
            else f"overdue by {describe_duration(now - decision.at)}: due now"
        )
        lines.append(
            f"  {pod.key}: {waiting + ' since' if waiting else 'evicted at'} {format_time(decision.at)} "
            f"({when}): taint {taint_text(decision.taint or {})} counted from "
            f"{format_time(decision.started or now)}, toleration {toleration_text(decision.toleration or {})}"
            f"{how}"
        )
    if len(lines) == 1:
        lines.append("  (no pods on this node)")
    return lines


RULE_FLAGS = ("--controllers", "--feature-gates")  # the controller's flags the eviction rule depends on


def eviction_rule(args: argparse.Namespace) -> EvictionRule:
    """The rule as the controller's flags given here set it (the controller's defaults for those absent);
    a bad value raises ValueError naming the flag."""
    from controller.options import parse_options

    given = [f"{flag}={value}" for flag in RULE_FLAGS if (value := getattr(args, flag[2:].replace("-", "_")))]
    return parse_options(given).eviction_rule


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m controller explain", description=__doc__.splitlines()[0])
    parser.add_argument("--node", required=True)
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument(
        "--respect-disruption-budgets-for-taints",
        default="",
        metavar="KEY,...",
        help="as the controller's flag of that name",
    )
    parser.add_argument(
        "--disruption-budget-timeout", default="0", metavar="DURATION", help="as the controller's flag of that name"
    )
    for flag in RULE_FLAGS:
        parser.add_argument(flag, default=None, metavar="VALUE", help="as the controller's flag of that name")
    args = parser.parse_args(argv)
    try:
        timeout = parse_duration(args.disruption_budget_timeout)
        settings = BudgetSettings(
            check_taint_keys(args.respect_disruption_budgets_for_taints.split(",")), timeout if timeout > 0 else None
        )
        rule = eviction_rule(args)
    except ValueError as error:
        print(f"explain: error: {error}", file=sys.stderr)
        return 2

    from kube.client import LIST_REQUEST_TIMEOUT, REQUEST_TIMEOUT, ClientConfigError, make_api_client
    from kube.errors import is_not_found, status_code
    from kube.identity import EXPLAIN
    from kube.request import request_json
    from kubectl_taintkeeper.budget_reads import read_budgets
    from kubectl_taintkeeper.forbidden import VIEWER, explained

    try:
        api = make_api_client(args.kubeconfig, component=EXPLAIN)
    except ClientConfigError as error:
        print(f"explain: error: {error}", file=sys.stderr)
        return 2
    try:
        node = request_json(
            api, "GET", "/api/v1/nodes/{name}", path_params={"name": args.node}, timeout=REQUEST_TIMEOUT
        )
        pods = request_json(
            api,
            "GET",
            "/api/v1/pods",
            query=[("fieldSelector", f"spec.nodeName={args.node}")],
            timeout=LIST_REQUEST_TIMEOUT,
        )
        budgets = read_budgets(
            lambda path, query: request_json(api, "GET", path, query=query, timeout=LIST_REQUEST_TIMEOUT), settings
        )
    except Exception as error:
        if status_code(error) is None:
            raise  # not an answer from the API (a connection error): the traceback says more
        reason = "no such node" if is_not_found(error) else explained(error, VIEWER)
        print(f"explain: error: node {args.node}: {reason}", file=sys.stderr)
        return 1
    finally:
        api.close()
    print("\n".join(explain(node, pods.get("items") or [], time.time(), budgets, rule)))
    return 0
