"""One JSON object per log line, for both processes' `--log-format json`.

Fields: time (RFC 3339, UTC), severity, logger, message, plus anything passed in `extra=`
(request uid, namespace, pod, node ...) so log pipelines can filter on them.
"""

from __future__ import annotations

import json
import logging
import time
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
    """Human-readable lines that still show the `extra=` fields as key=value pairs.

    `%(asctime)s %(levelname)s %(name)s: %(message)s` plus the extras, written out directly and with
    the date and time formatted once per second: the webhook logs a line per mutated pod, and the
    generic `logging.Formatter` path (a localtime and a strftime per line) cost a quarter more.
    """

    default_msec_format = "%s,%03d"  # logging.Formatter's own, declared here as never None

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self._second: tuple[int, str] = (-1, "")  # (whole second, its "%Y-%m-%d %H:%M:%S" in local time)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        cached, text = self._second  # one tuple: threads read a consistent pair
        if second != cached:
            text = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = (second, text)
        return self.default_msec_format % (text, record.msecs)

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        record.asctime = self.formatTime(record)
        line = f"{record.asctime} {record.levelname} {record.name}: {record.message}"
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        for block in (record.exc_text, record.stack_info and self.formatStack(record.stack_info)):
            if block:  # on lines of their own, as logging.Formatter puts them
                line = line + ("" if line.endswith("\n") else "\n") + block
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
    logging._srcfile = None
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else PlainFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
