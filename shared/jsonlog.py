"""One JSON object per log line, for both processes' `--log-format json`.

Fields: time (RFC 3339, UTC), severity, logger, message, plus anything passed in `extra=`
(request uid, namespace, pod, node ...) so log pipelines can filter on them.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

# Attributes every LogRecord has; anything else came from `extra=` and is worth emitting.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "severity": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in vars(record).items():
            if name not in _RECORD_ATTRIBUTES and not name.startswith("_"):
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class PlainFormatter(logging.Formatter):
    """Human-readable lines that still show the `extra=` fields as key=value pairs."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = [
            f"{name}={value}"
            for name, value in vars(record).items()
            if name not in _RECORD_ATTRIBUTES and not name.startswith("_")
        ]
        return f"{line} {' '.join(extras)}" if extras else line


LOG_FORMATS = ("plain", "json")


def configure_logging(log_format: str = "plain", level: str = "INFO") -> None:
    """Route the root logger to stderr in the chosen format (a pure configuration step)."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {log_format!r}")
    # No format here or in gunicorn prints the caller's file and line: don't walk the stack for
    # them on every record (a webhook logs once per mutated pod, thousands of times a second).
    # Process and thread ids stay: gunicorn's own log lines print the pid.
    logging._srcfile = None  # type: ignore[attr-defined]
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else PlainFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
