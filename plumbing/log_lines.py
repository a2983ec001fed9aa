"""Where a process's log lines go: the root logger's one handler, which can hold a batch of lines and
write them together (`held_lines`), and `configure_logging`, which puts it in place.

A line can also be held without making its record (`hold_line`, for the webhook's per-review lines),
when that record would reach nothing but the root's LineHandler, holding lines: its formatter
(plumbing/log_formats.py) then makes the very line it would have made of the record, straight from the
record's fields.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping

from plumbing.log_formats import LOG_FORMATS, JsonFormatter, PlainFormatter, public_fields


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
    making the record: making it and passing it through logging's handling is most of a held line's
    cost. The caller has checked that `level` is enabled and `extra` as Logger.makeRecord does; the
    record has neither exception nor stack. Done only when the record would reach nothing but the
    root's LineHandler, holding lines, with one of plumbing/log_formats.py's formatters (`_sole_holding_handler`).
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


def configure_logging(log_format: str = "plain", level: str = "INFO") -> None:
    """Route the root logger to stderr in the chosen format, through one LineHandler."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {log_format!r}")
    handler = LineHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else PlainFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
