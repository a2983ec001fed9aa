"""Which of taintkeeper's two admission modes gives pods their default tolerations, for `status`: the
webhook (its MutatingWebhookConfiguration) or the policy (its MutatingAdmissionPolicyBinding, whose
parameter holds the seconds), both, or neither. Pure: the objects as read in, one answer out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubectl_taintkeeper.reading import Reading
from shared.defaults import toleration_seconds

WEBHOOK_CONFIGURATION = "taintkeeper"  # manifests/base/mutatingwebhookconfiguration.yaml, the chart's
POLICY_BINDING = "taintkeeper-default-tolerations"  # manifests/admission-policy/policy.yaml, the chart's
POLICY_PARAMETER = "taintkeeper-defaults"  # a ConfigMap in the controller's namespace, there
NOT_READY_KEY = "default-not-ready-toleration-seconds"
UNREACHABLE_KEY = "default-unreachable-toleration-seconds"

Json = Mapping[str, Any]


@dataclass(frozen=True)
class AdmissionStatus:
    mode: str  # "webhook", "policy", "both", "none", or "unknown" (something could not be read)
    webhook_configuration: str | None  # its name, when it exists
    policy_binding: str | None
    parameter: str | None  # namespace/name of the policy's parameter, when there is a binding
    not_ready_seconds: int | None  # the parameter's, when it is readable
    unreachable_seconds: int | None
    problem: str | None  # one line: what keeps pods from their tolerations, or what could not be read


def parameter_ref(binding: Json) -> tuple[str, str] | None:
    """(namespace, name) of the ConfigMap a policy binding reads its seconds from, if it names one."""
    reference = (binding.get("spec") or {}).get("paramRef") or {}
    name, namespace = reference.get("name"), reference.get("namespace")
    return (str(namespace), str(name)) if name and namespace else None


def _seconds(parameter: Json) -> tuple[int, int] | str:
    """The parameter's two seconds, or why the policy cannot read them: plain digits only (the policy's
    int() takes no whitespace, so its guard refuses any), by the rule every seconds value follows."""
    data = parameter.get("data") or {}
    try:
        seconds = []
        for key in (NOT_READY_KEY, UNREACHABLE_KEY):
            text = str(data.get(key, ""))
            if text != text.strip():
                raise ValueError(f"must be plain digits, got {text!r}")
            seconds.append(toleration_seconds(text))
    except ValueError as error:
        return f"its parameter is malformed ({NOT_READY_KEY} and {UNREACHABLE_KEY} each {error})"
    return seconds[0], seconds[1]


def admission_status(
    webhook: Reading[Json], binding: Reading[Json], parameter: Reading[Json] | None
) -> AdmissionStatus:
    """The mode in force; `parameter` is the binding's ConfigMap as read (None: not read)."""
    unread = [
        f"cannot read the {what}: {reading.error}"
        for what, reading in (
            (f"MutatingWebhookConfiguration {WEBHOOK_CONFIGURATION}", webhook),
            (f"MutatingAdmissionPolicyBinding {POLICY_BINDING}", binding),
        )
        if reading.error is not None
    ]
    has_webhook, has_policy = webhook.value is not None, binding.value is not None
    reference = parameter_ref(binding.value) if binding.value is not None else None
    problem = None
    seconds: tuple[int, int] | None = None
    if has_policy:
        if reference is None:
            problem = "the policy's binding names no parameter: pods get no tolerations from it"
        elif parameter is None or (parameter.value is None and parameter.error is None):
            problem = (
                f"its parameter {'/'.join(reference)} is missing: pods are admitted without the tolerations "
                "(failurePolicy Ignore) until the controller's backfill gives them"
            )
        elif parameter.error is not None:
            unread.append(f"cannot read the parameter {'/'.join(reference)}: {parameter.error}")
        else:
            read = _seconds(parameter.value or {})
            if isinstance(read, str):
                problem = read + ": pods are admitted without the tolerations until the controller's backfill"
            else:
                seconds = read
    if unread:
        mode, problem = "unknown", "; ".join(unread)
    elif has_webhook and has_policy:
        mode = "both"
        problem = problem or "both add the tolerations (the policy first, then the webhook finds them): keep one"
    elif has_webhook or has_policy:
        mode = "webhook" if has_webhook else "policy"
    else:
        mode = "none"
        problem = "neither the webhook nor the policy is registered: pods get the tolerations only from the backfill"
    return AdmissionStatus(
        mode=mode,
        webhook_configuration=WEBHOOK_CONFIGURATION if has_webhook else None,
        policy_binding=POLICY_BINDING if has_policy else None,
        parameter="/".join(reference) if reference else None,
        not_ready_seconds=seconds[0] if seconds else None,
        unreachable_seconds=seconds[1] if seconds else None,
        problem=problem,
    )
