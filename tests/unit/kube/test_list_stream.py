"""Reading a LIST response item by item (kube/list_stream.py)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube.list_stream import _ListReader, read_list

# Strings that look like the cut pattern, so a cut inside a value is tried and must be refused.
TRICKY_TEXT = st.sampled_from(['},{"metadata":{', '"items":[', "]}", "}, {", "\\", "é", ""]) | st.text(max_size=8)
ITEM_OBJECTS = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries({"name": st.text(max_size=6), "resourceVersion": st.just("1")}),
        # An array of objects keyed "metadata" first: their joints match the cut pattern inside an item.
        "spec": st.fixed_dictionaries(
            {
                "templates": st.lists(
                    st.fixed_dictionaries({"metadata": st.fixed_dictionaries({"name": TRICKY_TEXT})}), max_size=3
                ),
                "note": TRICKY_TEXT,
            }
        ),
    }
)


def encode(metadata: dict[str, Any], items: list[dict[str, Any]], pretty: bool = False) -> bytes:
    body = {"kind": "PodList", "apiVersion": "v1", "metadata": metadata, "items": items}
    return json.dumps(body, indent=1).encode() if pretty else orjson.dumps(body)


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(cut % (len(data) + 1) for cut in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def read(chunks: list[bytes]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    items: list[dict[str, Any]] = []
    metadata = read_list(chunks, items.append)
    return metadata, items


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(ITEM_OBJECTS, max_size=8), cuts=st.lists(st.integers(min_value=0), max_size=12), pretty=st.booleans()
)
def test_every_item_arrives_once_in_order_whatever_the_chunks_and_layout(
    items: list[dict], cuts: list[int], pretty: bool
) -> None:
    metadata = {"resourceVersion": "42", "continue": "token"}
    assert read(chunked(encode(metadata, items, pretty), cuts)) == (metadata, items)


CASES = [
    (
        "an empty list",
        b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]}',
        {"resourceVersion": "7"},
        [],
    ),
    (
        "a list without items (the field omitted)",
        b'{"kind":"PodList","metadata":{"resourceVersion":"7"}}',
        {"resourceVersion": "7"},
        [],
    ),
    (
        "trailing whitespace after the list",
        b'{"metadata":{},"items":[{"metadata":{"name":"a"}}]}\n',
        {},
        [{"metadata": {"name": "a"}}],
    ),
    (
        "items before the metadata",
        b'{"items":[{"metadata":{"name":"a"}}],"metadata":{"resourceVersion":"3"}}',
        {"resourceVersion": "3"},
        [{"metadata": {"name": "a"}}],
    ),
]


@pytest.mark.parametrize(("body", "metadata", "items"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_list_layouts(body: bytes, metadata: dict, items: list) -> None:
    assert read([body]) == (metadata, items)


@pytest.mark.parametrize(
    "cut_at", [-1, -3, -20], ids=["before the closing brace", "inside the last item", "deep inside the last item"]
)
def test_a_response_cut_short_is_an_error_not_a_shorter_list(cut_at: int) -> None:
    body = encode({"resourceVersion": "1"}, [{"metadata": {"name": f"pod-{n}"}} for n in range(3)])
    with pytest.raises(ValueError):
        read([body[:cut_at]])


def test_only_the_item_being_read_is_held_not_the_list() -> None:
    item = {"metadata": {"name": "x" * 1000}}
    body = encode({"resourceVersion": "1"}, [item] * 2000)  # about 2 MB
    largest = 0
    reader = _ListReader(lambda _item: None)
    for start in range(0, len(body), 4096):
        reader.feed(body[start : start + 4096])
        largest = max(largest, len(reader._buffer))
    reader.finish()
    assert largest < 4096 + 2 * len(orjson.dumps(item))
