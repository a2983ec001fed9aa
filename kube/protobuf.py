"""Read a LIST answered in Kubernetes' protobuf encoding, item by item, as it arrives.

The apiserver encodes a large LIST in protobuf several times faster than in JSON, and smaller
(bench/REPORT.md); client-go's informers ask for built-in resources so too. A body is the 4 bytes
`k8s\\0`, then a `runtime.Unknown` whose field 2 (`raw`) holds the list: field 1 its ListMeta,
field 2 each item. Only those framing fields are read here; the items are handed over as bytes,
for a message class that declares just the fields the caller needs (`message_classes`): the C
parser (upb) skips everything else, so reading a pod's few fields costs a fraction of walking the
whole pod in Python.

Field numbers are those of the upstream `generated.proto` files (k8s.io/api, k8s.io/apimachinery),
which never renumber a field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

PROTOBUF = "application/vnd.kubernetes.protobuf"
# Protobuf where the server has it, else JSON (custom resources): as client-go asks.
ACCEPT_PROTOBUF = f"{PROTOBUF}, application/json"
MAGIC = b"k8s\x00"

UNKNOWN_RAW = 2  # runtime.Unknown: typeMeta = 1, raw = 2, contentEncoding = 3, contentType = 4
UNKNOWN_CONTENT_ENCODING = 3
LIST_METADATA = 1  # every List: metadata = 1, items = 2
LIST_ITEMS = 2
LIST_META_RESOURCE_VERSION = 2  # ListMeta: resourceVersion = 2, continue = 3, remainingItemCount = 4
LIST_META_CONTINUE = 3

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5

_SCALARS = {
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
    "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
}


class Field(NamedTuple):
    """One field of a message: its name, its number in upstream's generated.proto, and its type: a
    scalar ("string", "int64", ...) or another message of the same schema. A `map<string, string>`
    is `repeated` of a message with key = 1 and value = 2, as it travels."""

    name: str
    number: int
    type: str
    repeated: bool = False


def message_classes(package: str, schema: Mapping[str, Sequence[Field]]) -> dict[str, type[message.Message]]:
    """Message classes (proto2, parsed by the C implementation) for a subset of upstream's messages:
    fields left out of `schema` are skipped when parsing. `package` keeps two schemas apart."""
    file = descriptor_pb2.FileDescriptorProto(name=f"{package}.proto", package=package, syntax="proto2")
    for name, fields in schema.items():
        declared = file.message_type.add(name=name)
        for field in fields:
            label = (
                descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
                if field.repeated
                else descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
            )
            added = declared.field.add(name=field.name, number=field.number, label=label)
            if field.type in _SCALARS:
                added.type = _SCALARS[field.type]
            elif field.type in schema:
                added.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
                added.type_name = f".{package}.{field.type}"
            else:
                raise ValueError(f"{name}.{field.name}: unknown type {field.type!r}")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}")) for name in schema}


def is_protobuf(content_type: str | None) -> bool:
    return (content_type or "").split(";")[0].strip().lower() == PROTOBUF


def read_protobuf_list(chunks: Iterable[bytes], on_item: Callable[[bytes], None]) -> dict[str, Any]:
    """Call `on_item` with the bytes of each item of the protobuf list in `chunks`, in order; return the
    list's metadata as the JSON list has it (`resourceVersion`, `continue` when set)."""
    reader = _Reader(iter(chunks))
    if reader.take(len(MAGIC)) != MAGIC:
        raise ValueError("not a Kubernetes protobuf body (no k8s\\0 prefix)")
    metadata: dict[str, Any] | None = None
    while not reader.at_end():
        number, wire_type = reader.key()
        if number == UNKNOWN_RAW and wire_type == LENGTH_DELIMITED:
            metadata = _read_list(reader, reader.varint(), on_item)
        elif number == UNKNOWN_CONTENT_ENCODING and wire_type == LENGTH_DELIMITED:
            encoding = reader.take(reader.varint())
            if encoding:
                raise ValueError(f"protobuf list with content encoding {encoding!r}, which is not read")
        else:
            reader.skip(wire_type)
    if metadata is None:
        raise ValueError("the protobuf body holds no list")
    return metadata


def _read_list(reader: _Reader, length: int, on_item: Callable[[bytes], None]) -> dict[str, Any]:
    end = reader.position + length
    metadata: dict[str, Any] = {}
    while reader.position < end:
        item = reader.item(LIST_ITEMS)  # the common case, read in one step
        if item is not None:
            on_item(item)
            continue
        number, wire_type = reader.key()
        if number == LIST_ITEMS and wire_type == LENGTH_DELIMITED:
            on_item(reader.take(reader.varint()))
        elif number == LIST_METADATA and wire_type == LENGTH_DELIMITED:
            metadata = _list_meta(reader.take(reader.varint()))
        else:
            reader.skip(wire_type)
    if reader.position != end:
        raise ValueError("a protobuf field ran past the end of the list")
    return metadata


def _list_meta(data: bytes) -> dict[str, Any]:
    reader = _Reader(iter((data,)))
    metadata: dict[str, Any] = {}
    while not reader.at_end():
        number, wire_type = reader.key()
        if number in (LIST_META_RESOURCE_VERSION, LIST_META_CONTINUE) and wire_type == LENGTH_DELIMITED:
            text = reader.take(reader.varint()).decode()
            if text:  # JSON omits both when empty
                metadata["resourceVersion" if number == LIST_META_RESOURCE_VERSION else "continue"] = text
        else:
            reader.skip(wire_type)
    return metadata


class _Reader:
    """Protobuf wire format over a stream of chunks: keys, varints and byte strings, in order."""

    COMPACT_AT = 1 << 20  # drop consumed bytes from the buffer once this many have piled up

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buffer = bytearray()
        self._offset = 0  # read position in the buffer
        self.position = 0  # bytes consumed since the start of the stream

    def at_end(self) -> bool:
        return not self._available(1)

    def key(self) -> tuple[int, int]:
        key = self.varint()
        return key >> 3, key & 7

    def varint(self) -> int:
        self._available(10)  # a varint has at most 10 bytes; fewer may be left at the end
        buffer, start = self._buffer, self._offset
        value = shift = 0
        for index in range(start, min(start + 10, len(buffer))):
            byte = buffer[index]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                self._offset = index + 1
                self.position += index + 1 - start
                return value
            shift += 7
        raise ValueError("malformed or cut protobuf varint")

    def item(self, number: int) -> bytes | None:
        """The bytes of a length-delimited field `number` (one-byte key, length below 2 MiB) when it is
        next and wholly buffered; else None, consuming nothing: the general path reads it."""
        buffer, start = self._buffer, self._offset
        if len(buffer) - start < 4 or buffer[start] != (number << 3 | LENGTH_DELIMITED):
            if not self._available(4) or self._buffer[self._offset] != (number << 3 | LENGTH_DELIMITED):
                return None
            buffer, start = self._buffer, self._offset
        length, head = buffer[start + 1], 2
        if length >= 0x80:
            length = (length & 0x7F) | (buffer[start + 2] & 0x7F) << 7
            head = 3
            if buffer[start + 2] >= 0x80:
                length |= buffer[start + 3] << 14
                head = 4
                if buffer[start + 3] >= 0x80:
                    return None
        if len(buffer) - start < head + length:
            return None
        self._offset = start + head + length
        self.position += head + length
        return bytes(buffer[start + head : self._offset])

    def take(self, count: int) -> bytes:
        if not self._available(count):
            raise ValueError("the protobuf body ended inside a field")
        start = self._offset
        self._offset += count
        self.position += count
        return bytes(self._buffer[start : self._offset])

    def skip(self, wire_type: int) -> None:
        if wire_type == VARINT:
            self.varint()
        elif wire_type == FIXED64:
            self.take(8)
        elif wire_type == LENGTH_DELIMITED:
            self.take(self.varint())
        elif wire_type == FIXED32:
            self.take(4)
        else:
            raise ValueError(f"unsupported protobuf wire type {wire_type}")

    def _available(self, count: int) -> bool:
        while len(self._buffer) - self._offset < count:
            chunk = next(self._chunks, None)
            if chunk is None:
                return False
            if self._offset >= self.COMPACT_AT:
                del self._buffer[: self._offset]
                self._offset = 0
            self._buffer += chunk
        return True
