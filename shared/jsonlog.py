"""Both processes' log lines: `--log-format json` (one JSON object per line) or plain, written by a
handler that can hold a batch of lines and write them together (`held_lines`).

Fields: time (RFC 3339, UTC), severity, logger, message, plus anything passed in `extra=`
(request uid, namespace, pod, node ...) so log pipelines can filter on them.

A line can also be held without making its record (`hold_line`, for the webhook's per-review lines),
when that record would reach nothing but the root's LineHandler, holding lines: its formatter then
makes the very line it would have made of the record, straight from the record's fields.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections.abc import Collection, Iterator, Mapping
from datetime import UTC, datetime

# Attributes every LogRecord has; anything else came from `extra=` and is worth emitting.
_SET_BY_FORMATTERS = frozenset({"message", "asctime"})
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | _SET_BY_FORMATTERS

Fields = Collection[tuple[str, object]]  # (name, value) pairs, in order


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


def public_fields(extra: Mapping[str, object]) -> Fields:
    """The fields of `extra` that `extra_fields` finds on a record made with it: all but private ones."""
    for name in extra:
        if name.startswith("_"):
            return [(name, value) for name, value in extra.items() if not name.startswith("_")]
    return extra.items()


_JSON_ENCODER = json.JSONEncoder(default=str)  # what json.dumps(value, default=str) makes on every call
_json_string = json.encoder.encode_basestring_ascii  # how that encoder writes a str (ensure_ascii)


def json_text(entry: dict[str, object]) -> str:
    """`json.dumps(entry, default=str)`. An entry of strings (a log line's usual fields) is written out
    directly, as the encoder writes it: a new encoder per line was a fifth of a JSON line's cost."""
    parts = []
    for name, value in entry.items():
        if type(name) is not str or type(value) is not str:
            return _JSON_ENCODER.encode(entry)
        parts.append(f"{_json_string(name)}: {_json_string(value)}")
    return "{" + ", ".join(parts) + "}"


class JsonFormatter(logging.Formatter):
    """One JSON object per line. The time is formatted once per second (with its milliseconds added):
    datetime's formatting was a fifth of a line's cost."""

    def __init__(self) -> None:
        super().__init__()
        self._second: tuple[int, str] = (-1, "")  # (whole second, its "%Y-%m-%dT%H:%M:%S." in UTC)

    def format(self, record: logging.LogRecord) -> str:
        entry = self._entry(record.created, record.levelname, record.name, record.getMessage(), extra_fields(record))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json_text(entry)

    def format_fields(
        self, created: float, msecs: float, levelname: str, name: str, message: str, extras: Fields
    ) -> str:
        """`format` of a record with these fields, extras, and neither exception nor stack."""
        return json_text(self._entry(created, levelname, name, message, extras))

    def _entry(self, created: float, levelname: str, name: str, message: str, extras: Fields) -> dict[str, object]:
        entry: dict[str, object] = {
            "time": self._time_text(created),
            "severity": levelname.lower(),
            "logger": name,
            "message": message,
        }
        entry.update(extras)
        return entry

    def _time_text(self, created: float) -> str:
        """`datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")`."""
        if not 0 <= created < _LAST_SECOND:
            return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
        fraction, whole = math.modf(created)
        microseconds = round(fraction * 1e6)  # as fromtimestamp rounds: half to even, 1e6 is the next second
        second = int(whole) + (microseconds == 1_000_000)
        cached, prefix = self._second  # one tuple: threads read a consistent pair
        if second != cached:
            prefix = datetime.fromtimestamp(second, UTC).isoformat(timespec="milliseconds")[: -len("000+00:00")]
            self._second = (second, prefix)
        return f"{prefix}{microseconds % 1_000_000 // 1000:03d}+00:00"


_LAST_SECOND = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()  # the last second datetime can show


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
        return self._time_text(record.created, record.msecs)

    def _time_text(self, created: float, msecs: float) -> str:
        second = int(created)
        cached, text = self._second  # one tuple: threads read a consistent pair
        if second != cached:
            text = time.strftime(self.default_time_format, self.converter(created))
            self._second = (second, text)
        return self.default_msec_format % (text, msecs)

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        record.asctime = self.formatTime(record)
        line = f"{record.asctime} {record.levelname} {record.name}: {record.message}"
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        for block in (record.exc_text, record.stack_info and self.formatStack(record.stack_info)):
            if block:  # on lines of their own, as logging.Formatter puts them
                line = line + ("" if line.endswith("\n") else "\n") + block
        return _with_extras(line, extra_fields(record))

    def format_fields(
        self, created: float, msecs: float, levelname: str, name: str, message: str, extras: Fields
    ) -> str:
        """`format` of a record with these fields, extras, and neither exception nor stack."""
        return _with_extras(f"{self._time_text(created, msecs)} {levelname} {name}: {message}", extras)


def _with_extras(line: str, extras: Fields) -> str:
    shown = [f"{name}={value}" for name, value in extras]
    return f"{line} {' '.join(shown)}" if shown else line


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

    @property
    def holding(self) -> bool:
        return self._held is not None

    def hold_line(self, line: str) -> bool:
        """Hold `line` (as `emit` holds a formatted record) if lines are being held; False, and nothing done, if not."""
        with self.lock:  # type: ignore[union-attr]
            held = self._held
            if held is None:
                return False
            held.append(line + self.terminator)
            return True

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


def _sole_holding_handler(logger: logging.Logger, level: int) -> LineHandler | None:
    """The root's LineHandler, if it holds lines and is the only handler a record of `level` from
    `logger` would reach, and nothing on the way filters, changes or also sees the record: no filter
    (only the logger's own apply, not its parents'), no other handler, no subclass of logging's or ours.
    (Classes are checked, not methods replaced on an instance: nothing here does that.)"""
    root = logging.root
    if len(root.handlers) != 1:
        return None
    handler = root.handlers[0]
    if type(handler) is not LineHandler or not handler.holding or handler.filters or level < handler.level:
        return None
    if type(logger) not in (logging.Logger, logging.RootLogger) or logger.filters:
        return None
    node = logger
    while node.parent is not None:  # Logger.callHandlers: each logger's handlers, up to one that does not propagate
        if node.handlers or not node.propagate:
            return None
        node = node.parent
    return handler if node is root else None


def hold_line(
    logger: logging.Logger,
    level: int,
    created: float,
    msecs: float,
    message: str,
    args: tuple[object, ...],
    extra: Mapping[str, object],
) -> bool:
    """Hold the line that `logger.handle(record)` would hold for a record of these fields, without
    making the record: making it and passing it through logging's handling was most of a held line's
    cost. The caller has checked that `level` is enabled and `extra` as Logger.makeRecord does; the
    record has neither exception nor stack. Done only when the record would reach nothing but the
    root's LineHandler, holding lines, with one of the formatters above (`_sole_holding_handler`).
    False, and nothing done, otherwise: the caller logs the record.
    """
    handler = _sole_holding_handler(logger, level)
    if handler is None:
        return False
    formatter = handler.formatter
    if type(formatter) is not PlainFormatter and type(formatter) is not JsonFormatter:
        return False
    try:
        text = str(message) % args if args else str(message)  # LogRecord.getMessage
        line = formatter.format_fields(
            created, msecs, logging.getLevelName(level), logger.name, text, public_fields(extra)
        )
    except Exception:  # the record fails the same way on logging's path, which reports it (Handler.handleError)
        return False
    return handler.hold_line(line)


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
