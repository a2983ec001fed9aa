"""Go duration strings (`5s`, `1m30s`, `300ms`, `1.5h`), as kube-controller-manager's flags and
taintkeeper's annotations take them."""

from __future__ import annotations

import re

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """A Go duration string -> seconds. `0` alone is allowed; a bare number is not (as in Go)."""
    value = text.strip()
    if value in ("0", "+0", "-0"):
        return 0.0
    sign = -1.0 if value.startswith("-") else 1.0
    body = value.lstrip("+-")
    position, total = 0, 0.0
    while position < len(body):
        match = _DURATION_PART.match(body, position)
        if match is None:
            raise ValueError(f"invalid duration {text!r} (use Go durations such as 5s, 1m30s, 300ms)")
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if not body:
        raise ValueError(f"invalid duration {text!r} (use Go durations such as 5s, 1m30s, 300ms)")
    return sign * total
