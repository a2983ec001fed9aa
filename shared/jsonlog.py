"""Both processes' log lines: `--log-format json` (one JSON object per line) or plain, written by a
handler that can hold a batch of lines and write them together (`held_lines`).

Fields: time (RFC 3339, UTC), severity, logger, message, plus anything passed in `extra=`
(request uid, namespace, pod, node ...) so log pipelines can filter on them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime

# Attributes every LogRecord has; anything else came from `extra=` and is worth emitting.
_SET_BY_FORMATTERS = frozenset({"message", "asctime"})
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | _SET_BY_FORMATTERS


def extra_fields(record: logging.LogRecord) -> list[tuple[str, object]]:
    """The record's `extra=` fields (and any other attribute added to it but private ones), in the order
    they were set. A record's own attributes come first (LogRecord's constructor), its extras after
    them (Logger.makeRecord), then what formatting adds: so the search starts at the end and stops at
    the first attribute every record has (the webhook logs a line per review; there are ~20 of them)."""
    attributes = vars(record)
    names: list[str] = []
    for name in reversed(attributes):
        if name in _RECORD_ATTRIBUTES:
            if name in _SET_BY_FORMATTERS:
                continue
            break
        if not name.startswith("_"):
            names.append(name)
    return [(name, attributes[name]) for name in reversed(names)]


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "severity": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(extra_fields(record))
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
        extras = [f"{name}={value}" for name, value in extra_fields(record)]
        return f"{line} {' '.join(extras)}" if extras else line


class LineHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A StreamHandler whose lines can be held and written together (`held_lines`): a batch of the
    webhook's per-review lines is then one write instead of a write and a flush per line."""

    def __init__(self) -> None:
        super().__init__()
        self._held: list[str] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        held = self._held
        if held is None:
            super().emit(record)
            return
        try:
            held.append(self.format(record) + self.terminator)
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)

    def hold(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            if self._held is None:
                self._held = []

    def write_held(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            lines, self._held = self._held, None
            if lines:
                try:
                    self.stream.write("".join(lines))
                    self.flush()
                except Exception:
                    self.handleError(logging.makeLogRecord({"msg": "writing held log lines"}))


@contextlib.contextmanager
def held_lines() -> Iterator[None]:
    """Within: the root logger's LineHandlers hold every line (from any thread); written on leaving."""
    handlers = [handler for handler in logging.getLogger().handlers if isinstance(handler, LineHandler)]
    for handler in handlers:
        handler.hold()
    try:
        yield
    finally:
        for handler in handlers:
            handler.write_held()


LOG_FORMATS = ("plain", "json")


def configure_logging(log_format: str = "plain", level: str = "INFO") -> None:
    """Route the root logger to stderr in the chosen format (a pure configuration step)."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {log_format!r}")
    # No format here or in gunicorn prints the caller's file and line: don't walk the stack for
    # them on every record (a webhook logs once per mutated pod, thousands of times a second).
    # Process and thread ids stay: gunicorn's own log lines print the pid.
    logging._srcfile = None
    handler = LineHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else PlainFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
