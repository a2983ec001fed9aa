"""The default NoExecute tolerations a pod is missing: upstream DefaultTolerationSeconds.

A pod "already tolerates" a key when some toleration has that key or an empty key, AND effect
NoExecute or an empty effect. Operator, value and tolerationSeconds are deliberately ignored:
an existing toleration, whatever its seconds, is the pod author's choice and is kept.

The one exception, only when asked (the webhook's --replace-builtin-defaults): a toleration that is
exactly what the built-in DefaultTolerationSeconds plugin adds is taken to be the plugin's, not the
author's, and gets taintkeeper's seconds (`builtin_default_replacements`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from shared.taints import NO_EXECUTE, NOT_READY, UNREACHABLE

Toleration = Mapping[str, object]

DEFAULT_TOLERATION_SECONDS = 300


def already_tolerates(tolerations: Iterable[Toleration], key: str) -> bool:
    """Whether some toleration covers `key:NoExecute` by upstream's admission rule."""
    for toleration in tolerations:
        key_matches = (toleration.get("key") or "") in ("", key)
        effect_matches = (toleration.get("effect") or "") in ("", NO_EXECUTE)
        if key_matches and effect_matches:
            return True
    return False


def default_toleration(key: str, seconds: int) -> dict[str, object]:
    """The toleration the admission step adds for `key`."""
    return {"key": key, "operator": "Exists", "effect": NO_EXECUTE, "tolerationSeconds": seconds}


def missing_default_tolerations(
    tolerations: Iterable[Toleration],
    not_ready_seconds: int = DEFAULT_TOLERATION_SECONDS,
    unreachable_seconds: int = DEFAULT_TOLERATION_SECONDS,
) -> list[dict[str, object]]:
    """The default tolerations to append, not-ready first, empty when nothing is missing."""
    existing = list(tolerations)
    missing: list[dict[str, object]] = []
    if not already_tolerates(existing, NOT_READY):
        missing.append(default_toleration(NOT_READY, not_ready_seconds))
    if not already_tolerates(existing, UNREACHABLE):
        missing.append(default_toleration(UNREACHABLE, unreachable_seconds))
    return missing


# --- per-namespace defaults and opting out (used by the webhook and the controller's backfill) ------------

SKIP_LABEL = "taintkeeper.io/skip"
NOT_READY_SECONDS_ANNOTATION = "taintkeeper.io/not-ready-toleration-seconds"
UNREACHABLE_SECONDS_ANNOTATION = "taintkeeper.io/unreachable-toleration-seconds"


@dataclass(frozen=True)
class DefaultSeconds:
    """The tolerationSeconds of the two default tolerations."""

    not_ready: int = DEFAULT_TOLERATION_SECONDS
    unreachable: int = DEFAULT_TOLERATION_SECONDS


def skips(labels: Mapping[str, str] | None) -> bool:
    """Pods and namespaces labelled `taintkeeper.io/skip=true` are never given default tolerations."""
    return (labels or {}).get(SKIP_LABEL) == "true"


# tolerationSeconds is an int64, but the apiserver carries an admission policy's patch values through a
# float64 (as JSON readers in JavaScript do): above 2^53-1 a number would be rounded, or fail the pod,
# rather than kept. Every way taintkeeper takes seconds (flags, annotations, the policy's parameter) is
# bounded here, so the webhook and the policy give the same number.
MAX_TOLERATION_SECONDS = 2**53 - 1
_BLANKS = " \t\n\v\f\r"  # ASCII whitespace, as the policy's pattern has it (str.strip() alone takes more)
_SHOWN_CHARS = 64


def whole_seconds(text: object) -> int | None:
    """A whole number of seconds in [0, MAX_TOLERATION_SECONDS], written in ASCII digits with ASCII
    whitespace around them at most; else None.

    `str.isdigit` alone also accepts characters such as "²" or "①" that `int` rejects.
    """
    value = str(text).strip(_BLANKS)
    if not (value.isascii() and value.isdigit()):
        return None
    number = int(value)
    return number if number <= MAX_TOLERATION_SECONDS else None


def toleration_seconds(text: str) -> int:
    """`whole_seconds` for a flag or a parameter: the number, or ValueError saying what is allowed."""
    number = whole_seconds(text)
    if number is None:
        raise ValueError(f"must be a whole number of seconds from 0 to {MAX_TOLERATION_SECONDS}, got {text!r}")
    return number


def _shown(text: object) -> str:
    value = str(text)
    return value if len(value) <= _SHOWN_CHARS else value[: _SHOWN_CHARS - 3] + "..."


def namespace_seconds(
    annotations: Mapping[str, str] | None, cluster: DefaultSeconds
) -> tuple[DefaultSeconds, list[str]]:
    """The seconds for pods in a namespace: its annotations override the cluster-wide values.

    An annotation that is not a whole number from 0 to 2^53-1 (`whole_seconds`) is ignored, with a warning that says so.
    The webhook and the controller's backfill both read annotations through here, so they agree.
    """
    annotations = annotations or {}
    warnings: list[str] = []
    values = {"not_ready": cluster.not_ready, "unreachable": cluster.unreachable}
    for field_name, annotation in (
        ("not_ready", NOT_READY_SECONDS_ANNOTATION),
        ("unreachable", UNREACHABLE_SECONDS_ANNOTATION),
    ):
        if annotation not in annotations:
            continue
        parsed = whole_seconds(annotations[annotation])
        if parsed is None:
            warnings.append(
                f"namespace annotation {annotation}={_shown(annotations[annotation])!r} is not a whole "
                f"number >= 0 (at most {MAX_TOLERATION_SECONDS}); using the cluster default "
                f"{values[field_name]}"
            )
        else:
            values[field_name] = parsed
    return DefaultSeconds(**values), warnings


# --- replacing the built-in plugin's defaults (the webhook's --replace-builtin-defaults) -------------------

# kube-apiserver's --default-not-ready-toleration-seconds / --default-unreachable-toleration-seconds default.
BUILTIN_DEFAULT_TOLERATION_SECONDS = 300


@dataclass(frozen=True)
class SecondsReplacement:
    """A toleration at `index` that the built-in plugin added, and the seconds taintkeeper gives it instead."""

    index: int
    key: str
    old_seconds: int
    new_seconds: int


def is_builtin_default(toleration: Toleration, builtin_seconds: int = BUILTIN_DEFAULT_TOLERATION_SECONDS) -> bool:
    """Whether `toleration` is exactly what the built-in DefaultTolerationSeconds plugin adds.

    A pod author who wrote this very toleration cannot be told apart from the plugin: that is the
    documented price of --replace-builtin-defaults.
    """
    seconds = toleration.get("tolerationSeconds")
    return (
        toleration.get("key") in (NOT_READY, UNREACHABLE)
        and toleration.get("operator") == "Exists"
        and not toleration.get("value")
        and toleration.get("effect") == NO_EXECUTE
        and type(seconds) is int
        and seconds == builtin_seconds
    )  # not a bool, nor 300.0


def builtin_default_replacements(
    tolerations: Sequence[Toleration],
    seconds: DefaultSeconds,
    builtin_seconds: int = BUILTIN_DEFAULT_TOLERATION_SECONDS,
) -> list[SecondsReplacement]:
    """The built-in plugin's tolerations whose seconds are not `seconds` (taintkeeper's), in list order.

    Every other toleration is left alone, and so is a built-in one that already has our seconds.
    """
    wanted = {NOT_READY: seconds.not_ready, UNREACHABLE: seconds.unreachable}
    replacements = []
    for index, toleration in enumerate(tolerations):
        if is_builtin_default(toleration, builtin_seconds):
            key = str(toleration["key"])
            if wanted[key] != builtin_seconds:
                replacements.append(SecondsReplacement(index, key, builtin_seconds, wanted[key]))
    return replacements
