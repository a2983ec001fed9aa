"""How taintkeeper's reports (`explain`, `status`) write taints, tolerations and durations: one
wording, so the two commands read alike. Pure text in, text out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def describe_duration(seconds: float) -> str:
    """`1h2m5s`, `4m0s`, `30s`: the magnitude only (callers say "ago", "in" or "overdue")."""
    whole = round(abs(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return "".join(f"{value}{unit}" for value, unit in ((hours, "h"), (minutes, "m")) if value) + f"{secs}s"


def taint_text(taint: Mapping[str, Any]) -> str:
    """`key[=value]:Effect`, as kubectl writes a taint."""
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key', '')}{value}:{taint.get('effect', '')}"


def toleration_text(toleration: Mapping[str, Any]) -> str:
    """`key[=value] Operator Effect for Ns` (or `forever`); an empty key or effect reads `*`."""
    key = toleration.get("key") or "*"
    operator = toleration.get("operator") or "Equal"
    value = f"={toleration['value']}" if operator == "Equal" and toleration.get("value") else ""
    seconds = toleration.get("tolerationSeconds")
    return f"{key}{value} {operator} {toleration.get('effect') or '*'}" + (
        f" for {seconds}s" if seconds is not None else " forever"
    )
