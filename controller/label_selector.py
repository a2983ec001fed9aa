"""Does a Kubernetes LabelSelector (matchLabels, matchExpressions) select a set of labels? Pure.

As upstream `metav1.LabelSelectorAsSelector`: every term must hold; `In`/`NotIn` against values,
`Exists`/`DoesNotExist` on the key; `NotIn` and `DoesNotExist` hold for a missing key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """True if every term of `selector` holds for `labels` (an empty selector selects everything)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for term in selector.get("matchExpressions") or []:
        key, operator, values = term.get("key"), term.get("operator"), set(term.get("values") or [])
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False  # an operator the API would have refused: select nothing rather than everything
    return True
