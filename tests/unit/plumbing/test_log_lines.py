"""plumbing.log_lines: lines held and written together, lines held without making their record, and the
logging setup."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator

import pytest

from plumbing.log_formats import JsonFormatter, PlainFormatter
from plumbing.log_lines import LineHandler, configure_logging, held_lines, hold_line


def test_held_lines_are_written_together_and_in_order() -> None:
    stream = io.StringIO()
    handler = LineHandler()
    handler.stream = stream
    handler.setFormatter(PlainFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    logger = logging.getLogger("taintkeeper.test.held")
    logger.setLevel(logging.INFO)
    try:
        with held_lines():
            logger.info("one")
            logger.info("two")
            assert stream.getvalue() == ""
        assert [line.split(": ", 1)[1] for line in stream.getvalue().splitlines()] == ["one", "two"]
        logger.info("three")  # not held: at once
        assert stream.getvalue().splitlines()[-1].endswith(": three")
    finally:
        root.removeHandler(handler)


# -- lines held without making their record (hold_line) -------------------------------------------------------

FORMATTERS = {"plain": PlainFormatter, "json": JsonFormatter}
LOGGER = "taintkeeper.test.direct"


@contextlib.contextmanager
def only_root_handler(handler: logging.Handler) -> Iterator[None]:
    """`handler` as the root's one handler (pytest's own capture handlers set aside), every level on."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)


def line_handler(log_format: str) -> tuple[LineHandler, io.StringIO]:
    handler = LineHandler()
    handler.stream = stream = io.StringIO()
    handler.setFormatter(FORMATTERS[log_format]())
    return handler, stream


def made_record(
    logger: logging.Logger, level: int, created: float, message: str, args: tuple[object, ...], extra: dict[str, object]
) -> logging.LogRecord:
    record = logger.makeRecord(logger.name, level, "(unknown file)", 0, message, args, None, extra=extra)
    record.created, record.msecs = created, int((created - int(created)) * 1000) + 0.0
    return record


def written(stream: io.StringIO, action) -> tuple[object, str]:
    """What `action()` returned and what it wrote, lines held meanwhile."""
    stream.seek(0)
    stream.truncate()
    with held_lines():
        returned = action()
    return returned, stream.getvalue()


NOW = 1_750_000_000.0
FACTS = {"uid": "u-1", "operation": "CREATE", "namespace": "team-a", "pod": "web-0"}
LINE_CASES = [
    ("a review's line", logging.INFO, NOW + 0.25, "added default tolerations %s", ("a,b",), FACTS),
    ("no extras", logging.INFO, NOW, "started", (), {}),
    ("a warning", logging.WARNING, NOW, "ignored namespace annotation: %s", ("x; y",), FACTS),
    ("debug", logging.DEBUG, NOW, "admitted without a patch (%s%s)", ("unchanged", ""), FACTS),
    ("an unnamed level", 25, NOW, "between", (), {}),
    ("a private extra is not shown", logging.INFO, NOW, "m", (), {"uid": "u-1", "_hidden": "h", "pod": "p"}),
    (
        "extras that are not strings",
        logging.WARNING,
        NOW,
        "refused: %s",
        ("x",),
        {"remote": None, "count": 3, "nested": {"a": [1, "b"]}, "ratio": 0.5},
    ),
    (
        "extras named like the JSON line's fields",
        logging.INFO,
        NOW,
        "m",
        (),
        {"time": "then", "severity": "high", "logger": "other", "uid": "u"},
    ),
    (
        "characters JSON escapes",
        logging.INFO,
        NOW,
        'quote " backslash \\ tab \t %s',
        ("ünï ✓ \u2028 \x00",),
        {"pod": 'p"\n\\', "namespace": "日本"},
    ),
    ("a percent sign without arguments", logging.INFO, NOW, "100% done", (), {}),
    ("a number argument", logging.INFO, NOW, "%d pods in %.1f s", (3, 0.25), {}),
    ("the millisecond before a second", logging.INFO, NOW + 0.9995, "m", (), {}),
    ("a time that rounds up to the next second", logging.INFO, NOW + 0.9999996, "m", (), {}),
    ("the epoch", logging.INFO, 0.0, "m", (), {}),
]


@pytest.mark.parametrize("log_format", FORMATTERS)
@pytest.mark.parametrize(
    ("level", "created", "message", "args", "extra"), [c[1:] for c in LINE_CASES], ids=[c[0] for c in LINE_CASES]
)
def test_a_line_held_directly_is_the_line_its_record_gives(log_format, level, created, message, args, extra):
    handler, stream = line_handler(log_format)
    logger = logging.getLogger(LOGGER)
    msecs = int((created - int(created)) * 1000) + 0.0
    with only_root_handler(handler):
        held, direct = written(stream, lambda: hold_line(logger, level, created, msecs, message, args, extra))
        _, full = written(stream, lambda: logger.handle(made_record(logger, level, created, message, args, extra)))
    assert held is True
    assert direct == full


def test_a_line_that_fails_to_format_is_left_to_logging():
    handler, stream = line_handler("plain")
    logger = logging.getLogger(LOGGER)
    with only_root_handler(handler):
        held, text = written(stream, lambda: hold_line(logger, logging.INFO, NOW, 0.0, "%d pods", ("x",), {}))
    assert (held, text) == (False, "")


def _filter_on_logger(logger, handler):
    logger.addFilter(lambda record: True)


def _filter_on_handler(logger, handler):
    handler.addFilter(lambda record: True)


def _handler_level_above(logger, handler):
    handler.setLevel(logging.WARNING)


def _second_root_handler(logger, handler):
    logging.getLogger().addHandler(logging.NullHandler())


def _handler_on_a_parent(logger, handler):
    parent = logging.getLogger(LOGGER.rsplit(".", 1)[0])
    parent.addHandler(logging.NullHandler())


def _not_propagating(logger, handler):
    logger.propagate = False


def _not_propagating_parent(logger, handler):
    logging.getLogger(LOGGER.rsplit(".", 1)[0]).propagate = False


def _handler_subclass(logger, handler):
    class Custom(LineHandler):
        pass

    handler.__class__ = Custom


def _formatter_subclass(logger, handler):
    class Custom(PlainFormatter):
        pass

    handler.setFormatter(Custom())


def _logging_formatter(logger, handler):
    handler.setFormatter(logging.Formatter())


def _not_holding(logger, handler):
    handler.write_held()


NOT_HELD_DIRECTLY = [
    ("a filter on the logger", _filter_on_logger),
    ("a filter on the handler", _filter_on_handler),
    ("the handler's level above the line's", _handler_level_above),
    ("another handler on the root", _second_root_handler),
    ("a handler on a parent logger", _handler_on_a_parent),
    ("a logger that does not propagate", _not_propagating),
    ("a parent that does not propagate", _not_propagating_parent),
    ("a subclass of LineHandler", _handler_subclass),
    ("a subclass of our formatter", _formatter_subclass),
    ("logging's own formatter", _logging_formatter),
    ("lines not held", _not_holding),
]


@pytest.mark.parametrize("change", [c[1] for c in NOT_HELD_DIRECTLY], ids=[c[0] for c in NOT_HELD_DIRECTLY])
def test_a_line_is_held_directly_only_when_nothing_else_would_see_its_record(change):
    handler, stream = line_handler("plain")
    logger = logging.getLogger(LOGGER)
    parent = logging.getLogger(LOGGER.rsplit(".", 1)[0])
    with only_root_handler(handler):
        try:
            handler.hold()
            assert hold_line(logger, logging.INFO, NOW, 0.0, "before", (), {}) is True
            change(logger, handler)
            assert hold_line(logger, logging.INFO, NOW, 0.0, "after", (), {}) is False
            handler.write_held()
        finally:
            for changed in (logger, parent):
                changed.filters.clear()
                changed.handlers.clear()
                changed.propagate = True
            logging.getLogger().handlers[1:] = []
    assert [line.rsplit(" ", 1)[-1] for line in stream.getvalue().splitlines()] == ["before"]


def test_a_logger_outside_the_hierarchy_is_left_to_logging():
    handler, stream = line_handler("plain")
    orphan = logging.Logger("orphan")  # made directly: no parent, so logging calls its own handlers only (none)
    with only_root_handler(handler):
        held, text = written(stream, lambda: hold_line(orphan, logging.INFO, NOW, 0.0, "m", (), {}))
    assert (held, text) == (False, "")


def test_a_logger_of_another_class_is_left_to_logging():
    class Custom(logging.Logger):
        pass

    handler, stream = line_handler("json")
    logger = Custom("custom")
    logger.parent = logging.getLogger()
    with only_root_handler(handler):
        held, text = written(stream, lambda: hold_line(logger, logging.INFO, NOW, 0.0, "m", (), {}))
    assert (held, text) == (False, "")


# -- the logging setup ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("log_format", "formatter"), [("plain", PlainFormatter), ("json", JsonFormatter)])
def test_the_root_logger_gets_one_line_handler_in_the_format_asked_for(log_format, formatter, monkeypatch):
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [logging.NullHandler(), logging.NullHandler()])
    monkeypatch.setattr(root, "level", root.level)
    srcfile = logging._srcfile  # the webhook's fast paths' to change (webhook/fast_paths.py), not the setup's
    configure_logging(log_format, "debug")
    (handler,) = root.handlers
    assert type(handler) is LineHandler and type(handler.formatter) is formatter
    assert root.level == logging.DEBUG
    assert logging._srcfile == srcfile


def test_an_unknown_log_format_is_refused():
    with pytest.raises(ValueError, match="log format must be one of plain, json, not 'xml'"):
        configure_logging("xml")
