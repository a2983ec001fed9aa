"""shared.jsonlog: the log line formats, their extra fields, and lines held and written together."""

from __future__ import annotations

import io
import json
import logging

import pytest

from shared.jsonlog import JsonFormatter, LineHandler, PlainFormatter, extra_fields, held_lines


def _record(extra: dict[str, object] | None = None, **added: object) -> logging.LogRecord:
    logger = logging.getLogger("taintkeeper.test")
    record = logger.makeRecord(logger.name, logging.INFO, "f.py", 1, "added %s", ("x",), None, extra=extra)
    for name, value in added.items():  # as a filter or another formatter might
        setattr(record, name, value)
    return record


@pytest.mark.parametrize("extra, added, fields", [
    (None, {}, []),
    ({"uid": "u-1", "namespace": "team-a", "pod": "web-0"}, {}, [("uid", "u-1"), ("namespace", "team-a"),
                                                                 ("pod", "web-0")]),
    ({"uid": "u-1"}, {"message": "added x", "asctime": "now"}, [("uid", "u-1")]),
    ({"uid": "u-1", "_private": 1}, {"later": 2}, [("uid", "u-1"), ("later", 2)]),
    (None, {"msg": "rewritten", "later": 2}, [("later", 2)]),
], ids=["none", "in the order given", "set by formatting are not extras", "private ones left out",
        "a record's own attribute changed stays its own"])
def test_the_extra_fields_are_what_was_added_to_the_record_in_order(extra, added, fields) -> None:
    record = _record(extra, **added)
    assert extra_fields(record) == fields
    assert extra_fields(record) == [  # the definition: every attribute a new record does not have
        (name, value) for name, value in vars(record).items()
        if name not in vars(logging.LogRecord("", 0, "", 0, "", None, None))
        and name not in ("message", "asctime") and not name.startswith("_")]


def test_both_formats_show_the_extra_fields() -> None:
    record = _record({"uid": "u-1", "pod": "web-0"})
    assert PlainFormatter().format(record).endswith("taintkeeper.test: added x uid=u-1 pod=web-0")
    entry = json.loads(JsonFormatter().format(record))
    assert (entry["message"], entry["uid"], entry["pod"]) == ("added x", "u-1", "web-0")


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
