"""What went wrong in a benchmarked server's log: its tracebacks and ERROR/CRITICAL lines, one line each."""

from __future__ import annotations

import re
from pathlib import Path

_GUNICORN_PREFIX = re.compile(r"^\[[^\]]+\] \[\d+\] ")
_SEVERE = re.compile(r"\b(ERROR|CRITICAL)\b")


def log_problems(log_path: Path, since: int) -> list[str]:
    """What went wrong in a server's log after byte offset `since`: one line per traceback or ERROR line.

    A traceback is summarised by the exception line that ends it. The logs are temporary, so
    these lines are what the report keeps of them.
    """
    if not log_path.exists():
        return []
    with log_path.open("rb") as log:
        log.seek(since)
        lines = log.read().decode(errors="replace").splitlines()
    problems: list[str] = []
    in_traceback = False
    for line in lines:
        if line.startswith("Traceback"):
            in_traceback = True
        elif in_traceback and line and not line[0].isspace():
            problems.append(line.strip())
            in_traceback = False
        elif not in_traceback and _SEVERE.search(line):
            problems.append(_GUNICORN_PREFIX.sub("", line.strip()))
    if in_traceback:
        problems.append("(traceback cut off at the end of the log)")
    return problems


def log_size(log_path: Path) -> int:
    """Where a server's log ends now: log_problems(log_path, since=this) reads only what comes after."""
    return log_path.stat().st_size if log_path.exists() else 0
