"""The default NoExecute tolerations a pod is missing: upstream DefaultTolerationSeconds.

A pod "already tolerates" a key when some toleration has that key or an empty key, AND effect
NoExecute or an empty effect. Operator, value and tolerationSeconds are deliberately ignored:
an existing toleration, whatever its seconds, is the pod author's choice and is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

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
