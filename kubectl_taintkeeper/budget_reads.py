"""The reads `explain` and `status` make for disruption budgets: the namespaces' annotations and
every PodDisruptionBudget, in the policy version the server serves. A user who may not read
budgets still gets the rest of the report: why they could not be read is said in it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controller.tainteviction.disruption_budget import BudgetSettings
from kube.errors import describe_error, is_not_found, status_code
from kube.policy import V1, V1BETA1, budgets_path, version_served
from kubectl_taintkeeper.budgets import Budgets

Json = dict[str, Any]
GetJson = Callable[[str, list[tuple[str, str]]], Json]  # a GET of PATH with QUERY; raises on failure


def read_budgets(get_json: GetJson, settings: BudgetSettings) -> Budgets:
    """What the report needs to say which budget a pod waits for; an API error other than on the
    budgets themselves raises (as the report's other reads do)."""
    namespaces = get_json("/api/v1/namespaces", [("resourceVersion", "0")]).get("items") or []
    annotations = {
        (n.get("metadata") or {}).get("name", ""): (n.get("metadata") or {}).get("annotations") or {}
        for n in namespaces
    }
    try:
        version = version_served(get_json("/apis/policy", []))
    except Exception as error:
        if not is_not_found(error):
            raise
        version = V1BETA1
    everywhere = budgets_path(version).replace("/namespaces/{namespace}", "")
    try:
        found = get_json(everywhere, [("resourceVersion", "0")]).get("items") or []
    except Exception as error:
        if status_code(error) is None:
            raise  # not an answer from the API: the caller's connection handling applies
        return Budgets(settings, annotations, None, " ".join(describe_error(error).split()), version == V1)
    return Budgets(settings, annotations, found, empty_selects_all=version == V1)
