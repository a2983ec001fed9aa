"""Reading a protobuf LIST body item by item, whatever the chunking, and the subset message classes.
The field numbers themselves are checked against the real apiserver (tests/integration/test_informer.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube.protobuf import MAGIC, Field, _Reader, is_protobuf, message_classes, read_protobuf_list

# The framing as upstream declares it (k8s.io/apimachinery runtime.Unknown, meta/v1 ListMeta), the
# items as opaque bytes, plus a field no reader knows, to show it is skipped.
_FRAMING: Any = message_classes(
    "test.framing",
    {
        "TypeMeta": [Field("apiVersion", 1, "string"), Field("kind", 2, "string")],
        "Unknown": [
            Field("typeMeta", 1, "TypeMeta"),
            Field("raw", 2, "bytes"),
            Field("contentEncoding", 3, "string"),
            Field("contentType", 4, "string"),
            Field("future", 9, "int64"),
        ],
        "ListMeta": [
            Field("selfLink", 1, "string"),
            Field("resourceVersion", 2, "string"),
            Field("continue", 3, "string"),
            Field("remainingItemCount", 4, "int64"),
        ],
        "List": [
            Field("metadata", 1, "ListMeta"),
            Field("items", 2, "bytes", repeated=True),
            Field("future", 7, "string"),
        ],
    },
)


def body(
    items: list[bytes],
    resource_version: str = "42",
    continue_token: str = "",
    *,
    metadata_last: bool = False,
    encoding: str = "",
    future: bool = False,
) -> bytes:
    listed = _FRAMING["List"]()
    if not metadata_last:
        listed.metadata.resourceVersion = resource_version
        setattr(listed.metadata, "continue", continue_token)  # a Python keyword
    listed.items.extend(items)
    if future:
        listed.future = "ignored"
    raw = listed.SerializeToString()
    if metadata_last:  # the same fields, metadata after the items: a reader must not depend on the order
        meta = _FRAMING["ListMeta"](resourceVersion=resource_version)
        setattr(meta, "continue", continue_token)
        raw += _FRAMING["List"](metadata=meta).SerializeToString()
    unknown = _FRAMING["Unknown"](raw=raw, contentEncoding=encoding, contentType="application/vnd.kubernetes.protobuf")
    unknown.typeMeta.apiVersion, unknown.typeMeta.kind = "v1", "PodList"
    if future:
        unknown.future = 7
    return MAGIC + unknown.SerializeToString()


def chunked(data: bytes, sizes: list[int]) -> list[bytes]:
    chunks, start = [], 0
    for size in sizes:
        if start >= len(data):
            break
        chunks.append(data[start : start + size])
        start += size
    chunks.append(data[start:])
    return chunks


def read(chunks: list[bytes]) -> tuple[list[bytes], dict[str, Any]]:
    items: list[bytes] = []
    metadata = read_protobuf_list(chunks, items.append)
    return items, metadata


ITEMS = [b"", b"x", b"\x00" * 127, b"y" * 128, b"z" * 20_000, bytes(range(256)) * 40]


@pytest.mark.parametrize(
    ("case", "kwargs", "metadata"),
    [
        ("a list with its resourceVersion", {}, {"resourceVersion": "42"}),
        ("a page with a continue token", {"continue_token": "abc"}, {"resourceVersion": "42", "continue": "abc"}),
        ("the metadata after the items", {"metadata_last": True}, {"resourceVersion": "42"}),
        ("fields no reader knows are skipped", {"future": True}, {"resourceVersion": "42"}),
    ],
)
def test_items_and_metadata_come_out_as_sent(case: str, kwargs: dict[str, Any], metadata: dict[str, str]) -> None:
    items, got = read([body(ITEMS, **kwargs)])
    assert items == ITEMS
    assert got == metadata


def test_an_empty_list_has_no_items_and_its_metadata() -> None:
    assert read([body([])]) == ([], {"resourceVersion": "42"})


@given(st.lists(st.integers(min_value=1, max_value=9000), max_size=60))
def test_any_chunking_gives_the_same_items(sizes: list[int]) -> None:
    data = body(ITEMS, continue_token="next")
    assert read(chunked(data, sizes)) == (ITEMS, {"resourceVersion": "42", "continue": "next"})


def test_one_byte_chunks_give_the_same_items() -> None:
    data = body(ITEMS[:4])
    assert read([data[i : i + 1] for i in range(len(data))]) == (ITEMS[:4], {"resourceVersion": "42"})


@pytest.mark.parametrize(
    ("case", "data", "message"),
    [
        ("JSON instead of protobuf", b'{"kind":"PodList","items":[]}', "no k8s"),
        ("a body cut inside an item", body(ITEMS)[:-300], "ended inside"),
        ("a compressed list", body(ITEMS, encoding="gzip"), "content encoding"),
        ("an envelope without a list", MAGIC + _FRAMING["Unknown"](contentType="x").SerializeToString(), "no list"),
    ],
)
def test_a_body_that_cannot_be_read_whole_raises(case: str, data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        read([data])


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("application/vnd.kubernetes.protobuf", True),
        ("application/vnd.kubernetes.protobuf;stream=watch", True),
        ("application/json", False),
        (None, False),
    ],
)
def test_protobuf_is_told_by_the_content_type(content_type: str | None, expected: bool) -> None:
    assert is_protobuf(content_type) is expected


def test_a_schema_naming_an_unknown_type_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown type 'Nowhere'"):
        message_classes("test.bad", {"A": [Field("b", 1, "Nowhere")]})


def test_read_bytes_are_dropped_as_the_stream_goes() -> None:
    items = [bytes([n]) * 50_000 for n in range(100)]  # 5 MB in all
    data = body(items)
    reader_chunks = chunked(data, [65_536] * (len(data) // 65_536))
    assert read(reader_chunks) == (items, {"resourceVersion": "42"})
    reader = _Reader(iter(reader_chunks))
    while not reader.at_end():
        reader.take(min(40_000, len(data) - reader.position))
        assert len(reader._buffer) <= _Reader.COMPACT_AT + 2 * 65_536
