"""plumbing.log_formats: the log line formats and their extra fields (where the lines go, and lines held without
making their record: tests/unit/plumbing/test_log_lines.py)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plumbing.log_formats import JsonFormatter, PlainFormatter, extra_fields, json_text


def _record(extra: dict[str, object] | None = None, **added: object) -> logging.LogRecord:
    logger = logging.getLogger("taintkeeper.test")
    record = logger.makeRecord(logger.name, logging.INFO, "f.py", 1, "added %s", ("x",), None, extra=extra)
    for name, value in added.items():  # as a filter or another formatter might
        setattr(record, name, value)
    return record


@pytest.mark.parametrize(
    "extra, added, fields",
    [
        (None, {}, []),
        (
            {"uid": "u-1", "namespace": "team-a", "pod": "web-0"},
            {},
            [("uid", "u-1"), ("namespace", "team-a"), ("pod", "web-0")],
        ),
        ({"uid": "u-1"}, {"message": "added x", "asctime": "now"}, [("uid", "u-1")]),
        ({"uid": "u-1", "_private": 1}, {"later": 2}, [("uid", "u-1"), ("later", 2)]),
        (None, {"msg": "rewritten", "later": 2}, [("later", 2)]),
    ],
    ids=[
        "none",
        "in the order given",
        "set by formatting are not extras",
        "private ones left out",
        "a record's own attribute changed stays its own",
    ],
)
def test_the_extra_fields_are_what_was_added_to_the_record_in_order(extra, added, fields) -> None:
    record = _record(extra, **added)
    assert extra_fields(record) == fields
    assert extra_fields(record) == [  # the definition: every attribute a new record does not have
        (name, value)
        for name, value in vars(record).items()
        if name not in vars(logging.LogRecord("", 0, "", 0, "", None, None))
        and name not in ("message", "asctime")
        and not name.startswith("_")
    ]


def test_both_formats_show_the_extra_fields() -> None:
    record = _record({"uid": "u-1", "pod": "web-0"})
    assert PlainFormatter().format(record).endswith("taintkeeper.test: added x uid=u-1 pod=web-0")
    entry = json.loads(JsonFormatter().format(record))
    assert (entry["message"], entry["uid"], entry["pod"]) == ("added x", "u-1", "web-0")


# -- the JSON line's text and time ----------------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text()
json_entries = st.dictionaries(
    st.text() | st.integers(),
    st.recursive(
        json_scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
        max_leaves=5,
    ),
    max_size=8,
)


@given(st.dictionaries(st.text(), st.text(), max_size=8) | json_entries)  # strings only: written out directly
def test_json_text_is_what_json_dumps_writes(entry):
    assert json_text(entry) == json.dumps(entry, default=str)


def test_json_text_writes_what_json_cannot_as_its_str_like_json_dumps():
    entry = {"uid": "u", "when": datetime(2025, 1, 2, tzinfo=UTC), "error": ValueError("bad")}
    assert json_text(entry) == json.dumps(entry, default=str)


NOW = 1_750_000_000.0
EDGE_TIMES = [
    0.0,
    0.0005,
    0.9994999,
    0.9995,
    0.9999994,
    0.9999995,
    0.9999996,
    1.0000005,
    1.0000015,
    2.5e-7,
    NOW,
    NOW + 0.0004999,
    NOW + 0.0005,
    NOW + 0.9999995,
    253402300798.9999,
    -1.5,
    -0.0000004,
]


@pytest.mark.parametrize("created", EDGE_TIMES)
def test_the_json_time_is_datetimes_at_the_edges_of_a_millisecond(created):
    assert _json_time(created) == datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")


@given(st.floats(min_value=0, max_value=4e9) | st.integers(0, 2**32).map(lambda s: s + 0.9999995))
def test_the_json_time_is_datetimes(created):
    assert _json_time(created) == datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")


def _json_time(created: float) -> str:
    record = _record()
    record.created = created
    return json.loads(JsonFormatter().format(record))["time"]


@pytest.mark.parametrize(
    ("extra", "added"),
    [
        (None, {}),
        ({"uid": "u-1", "pod": "web-0"}, {}),
        ({"pod": 'ünï ✓ "\\\n\x00'}, {}),
        ({"remote": None, "n": 3}, {"later": [1]}),
    ],
)
def test_a_json_line_is_the_entry_json_dumps_writes(extra, added):
    record = _record(extra, **added)
    entry = {
        "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
        "severity": "info",
        "logger": "taintkeeper.test",
        "message": "added x",
        **(extra or {}),
        **added,
    }
    assert JsonFormatter().format(record) == json.dumps(entry, default=str)
