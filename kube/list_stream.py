"""Read a LIST response item by item, as it arrives, without ever holding the whole list.

A LIST served from the apiserver's watch cache (`resourceVersion=0`) comes in one response, however
many objects: a large cluster's pods are hundreds of MB of JSON, and many times that as one parsed
dict. So the items are cut out of the byte stream and parsed one at a time.

The apiserver writes compact JSON, list metadata before the items, every item an object whose
first key is "metadata". The cut points are therefore the bytes `},{"metadata":{`, which cannot
occur inside a JSON string (a quote there is escaped). A cut that still lands inside an item (an
array of objects keyed "metadata" first) leaves a piece that does not parse; it is then joined to
the next piece, so the JSON parser, not the pattern, decides what an item is. A body in any other
layout (pretty-printed, keys in another order) is parsed whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import orjson

ITEMS_START = b'"items":['
ITEM_SEPARATOR = b'},{"metadata":{'
LIST_END = b"]}"
HEAD_LIMIT = 1 << 16  # the bytes before the items, at most (kind, apiVersion, list metadata)


def read_list(chunks: Iterable[bytes], on_item: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Call `on_item` with each item of the list in `chunks`, in order; return the list's metadata."""
    reader = _ListReader(on_item)
    for chunk in chunks:
        reader.feed(chunk)
    return reader.finish()


class _ListReader:
    def __init__(self, on_item: Callable[[dict[str, Any]], None]) -> None:
        self._on_item = on_item
        self._buffer = bytearray()
        self._metadata: dict[str, Any] | None = None  # set once the part before the items is read
        self._whole = False  # not the compact layout: the body is parsed whole at the end
        self._scan_from = 0  # no separator before this offset of the buffer

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        if self._whole or (self._metadata is None and not self._read_head()):
            return
        self._emit_complete_items()

    def finish(self) -> dict[str, Any]:
        if self._metadata is None:  # not the compact layout: parse the body whole
            whole = orjson.loads(self._buffer)
            for item in whole.get("items") or ():
                self._on_item(item)
            return whole.get("metadata") or {}
        tail = bytes(self._buffer).rstrip()
        if not tail.endswith(LIST_END):
            raise ValueError("the LIST response ended inside its items")
        body = tail[: -len(LIST_END)].strip()
        if body:
            self._emit_last(body)
        return self._metadata

    def _read_head(self) -> bool:
        start = self._buffer.find(ITEMS_START)
        if start < 0:
            self._whole = len(self._buffer) > HEAD_LIMIT  # the list metadata is small: not this layout
            return False
        try:
            head = orjson.loads(bytes(self._buffer[:start]) + b'"items":[]}')
        except orjson.JSONDecodeError:
            head = None  # "items" inside some other value
        if not isinstance(head, dict) or not isinstance(head.get("metadata"), dict):
            self._whole = True  # the metadata is not ahead of the items: leave it all to finish()
            return False
        self._metadata = head["metadata"]
        del self._buffer[: start + len(ITEMS_START)]
        return True

    def _emit_complete_items(self) -> None:
        start = 0
        while (cut := self._buffer.find(ITEM_SEPARATOR, max(self._scan_from, start))) >= 0:
            try:
                item = orjson.loads(self._buffer[start : cut + 1])  # a bytearray slice: one copy
            except orjson.JSONDecodeError:
                self._scan_from = cut + 1  # the cut was inside an item: look for the next one
                continue
            self._on_item(item)
            start = cut + 2  # past "},"
            self._scan_from = start
        if start:
            del self._buffer[:start]
            self._scan_from -= start

    def _emit_last(self, body: bytes) -> None:
        try:
            items = [orjson.loads(body)]
        except orjson.JSONDecodeError:  # items that no cut separated (a layout with spaces): one array
            items = orjson.loads(b"[" + body + b"]")
        for item in items:
            self._on_item(item)
