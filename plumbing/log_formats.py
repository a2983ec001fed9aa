"""Both processes' log line formats: `--log-format json` (one JSON object per line) or plain.

Fields: time (RFC 3339, UTC), severity, logger, message, plus anything passed in `extra=`
(request uid, namespace, pod, node ...) so log pipelines can filter on them.

Each formatter can also make the very line it would make of a record straight from the record's
fields (`format_fields`), so a line can be held without making its record (plumbing/log_lines.py
`hold_line`, for the webhook's per-review lines). Only formatting here, no I/O: where the lines go
(the handler, the logging setup) is plumbing/log_lines.py.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Collection, Mapping
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
    directly, as the encoder writes it, rather than by a new encoder made for each line (`json.dumps`)."""
    parts = []
    for name, value in entry.items():
        if type(name) is not str or type(value) is not str:
            return _JSON_ENCODER.encode(entry)
        parts.append(f"{_json_string(name)}: {_json_string(value)}")
    return "{" + ", ".join(parts) + "}"


class JsonFormatter(logging.Formatter):
    """One JSON object per line. The time is formatted once per second, with its milliseconds added,
    not by datetime for every line."""

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
    generic `logging.Formatter` path does a localtime and a strftime for every line.
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


LOG_FORMATS = ("plain", "json")
