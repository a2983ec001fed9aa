"""Which tolerations tolerate which taints: upstream `ToleratesTaint` and friends.

Tolerations and taints are API-shaped dicts: a toleration has `key`, `operator` (`Exists`,
`Equal` or empty, meaning `Equal`), `value`, `effect` and `tolerationSeconds`; a taint has
`key`, `value`, `effect` and maybe `timeAdded`. Missing fields read as empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.taints import Taint

# API JSON: a value may be anything JSON holds.
Toleration = Mapping[str, Any]


def tolerates(toleration: Toleration, taint: Taint, comparison_operators: bool = False) -> bool:
    """True when `toleration` tolerates `taint`, exactly as upstream `Toleration.ToleratesTaint`.

    An empty effect matches every effect; an empty key (only valid with `Exists`) matches every
    key; `Exists` ignores the value; `Equal` (or an empty operator) compares values. `Lt` and `Gt`
    compare them as integers, only with `comparison_operators` (upstream's alpha gate
    TaintTolerationComparisonOperators, 1.35+); any other operator tolerates nothing.
    """
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    if operator in ("Lt", "Gt") and comparison_operators:
        threshold, value = decimal_integer(toleration.get("value")), decimal_integer(taint.get("value"))
        if threshold is None or value is None:
            return False
        return value < threshold if operator == "Lt" else value > threshold
    return False


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def decimal_integer(text: Any) -> int | None:
    """The value as upstream's IsDecimalInteger and ParseInt read it: an optional minus, no leading
    zero (but "0" itself), digits only, within int64; None for anything else."""
    if not isinstance(text, str) or not text:
        return None
    digits = text[1:] if text.startswith("-") else text
    if not digits or not digits.isascii() or not digits.isdigit() or (digits[0] == "0" and text != "0"):
        return None
    value = int(text)
    return value if INT64_MIN <= value <= INT64_MAX else None


def first_toleration_for_taint(
    tolerations: Iterable[Toleration], taint: Taint, comparison_operators: bool = False
) -> Toleration | None:
    """The toleration that decides how long `taint` is tolerated: the pod's first that tolerates it.

    Upstream `GetMatchingTolerations` takes this one and ignores later ones, so
    `[unreachable Exists (forever), Exists NoExecute 60s]` tolerates `unreachable` forever.
    """
    return next((toleration for toleration in tolerations if tolerates(toleration, taint, comparison_operators)), None)


@dataclass(frozen=True)
class TolerationMatch:
    """How a pod's tolerations meet a set of taints.

    `used` holds, for each tolerated taint, the first toleration that tolerates it (upstream
    `GetMatchingTolerations`); `untolerated` the taints no toleration covers.
    """

    used: list[Toleration] = field(default_factory=list)
    untolerated: list[Taint] = field(default_factory=list)

    @property
    def all_tolerated(self) -> bool:
        return not self.untolerated


def match_tolerations(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> TolerationMatch:
    """Match every taint against the pod's tolerations (first tolerating toleration wins)."""
    used: list[Toleration] = []
    untolerated: list[Taint] = []
    for taint in taints:
        matching = first_toleration_for_taint(tolerations, taint)
        if matching is None:
            untolerated.append(taint)
        else:
            used.append(matching)
    return TolerationMatch(used=used, untolerated=untolerated)


def toleration_seconds(toleration: Toleration) -> int | None:
    """A toleration's `tolerationSeconds`, or None when it tolerates forever."""
    seconds = toleration.get("tolerationSeconds")
    if seconds is None:
        return None
    return int(seconds)


def min_toleration_seconds(tolerations: Iterable[Toleration]) -> int | None:
    """The shortest time the given tolerations allow, upstream `getMinTolerationTime`.

    None means forever (no toleration sets `tolerationSeconds`); 0 means at once (some
    toleration sets it <= 0, or there are no tolerations at all, as upstream).
    """
    shortest: int | None = None
    seen_any = False
    for toleration in tolerations:
        seen_any = True
        seconds = toleration_seconds(toleration)
        if seconds is None:
            continue
        if seconds <= 0:
            return 0
        shortest = seconds if shortest is None else min(shortest, seconds)
    if not seen_any:
        return 0
    return shortest
