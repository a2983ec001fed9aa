"""A watch response's body read straight off its socket, in batches: the informer's stream of events.

urllib3 reads a chunked body one HTTP chunk at a time, several calls for each, and a watch sends
every event as a chunk of its own: at 5,000 nodes that is 500 Lease events a second (one renewal per
node every 10 s), each waking the informer's thread alone, and the wake-up and the reads are most of
an event's CPU. Here the body is read in large blocks from the connection's buffered reader and
unframed by `ChunkedBody`; with `batch_seconds`, a read that would block waits that long first, so
the events of that time arrive in one read and cost one wake-up (a Lease renewal or a Node heartbeat
seen 0.1 s later changes nothing: grace periods are tens of seconds).

A response this cannot read so (not chunked, compressed, or a connection without the expected
parts) is read by urllib3's own reader.
"""

from __future__ import annotations

import select
from collections.abc import Callable, Iterator
from typing import Any

READ_BYTES = 1 << 16
MAX_SIZE_LINE = 1024  # a chunk-size line, extensions included; anything longer is not HTTP


class ChunkedBody:
    """HTTP/1.1 chunked transfer coding -> the payload, fed bytes whatever their boundaries."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._left = 0  # payload bytes of the current chunk still to come
        self._crlf_due = False  # the CRLF that ends a chunk's payload
        self.done = False  # the last (zero-size) chunk was read

    def feed(self, data: bytes) -> bytes:
        """The payload in `data` (and in what earlier calls left unfinished); raise ValueError on a malformed body."""
        self._buffer += data
        payload = bytearray()
        buffer = self._buffer
        position = 0
        while not self.done:
            if self._left:
                taken = buffer[position : position + self._left]
                payload += taken
                position += len(taken)
                self._left -= len(taken)
                if self._left:
                    break
                self._crlf_due = True
            if self._crlf_due:
                if len(buffer) - position < 2:
                    break
                if buffer[position : position + 2] != b"\r\n":
                    raise ValueError("a chunk's payload is not followed by CRLF")
                position += 2
                self._crlf_due = False
            end = buffer.find(b"\r\n", position)
            if end < 0:
                if len(buffer) - position > MAX_SIZE_LINE:
                    raise ValueError("no chunk-size line within 1 KiB")
                break
            size_text = bytes(buffer[position:end]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise ValueError(f"not a chunk size: {size_text[:40]!r}") from None
            position = end + 2
            if size == 0:
                self.done = True  # trailers, if any, are not read: the stream is over
            self._left = size
        del buffer[:position]
        return bytes(payload)


def batched_body(response: Any, batch_seconds: float, sleep: Callable[[float], object]) -> Iterator[bytes] | None:
    """The payload of `response` (urllib3, not yet read) in blocks as they arrive, or None when it
    cannot be read off the socket (then read it with urllib3). Before a read that would block, waits
    `batch_seconds` with `sleep` (an interruptible wait), unless it is 0."""
    headers = getattr(response, "headers", None)
    if (
        headers is None
        or headers.get("Transfer-Encoding", "").lower() != "chunked"
        or headers.get("Content-Encoding")
        or getattr(response, "_decoded_buffer", None)
    ):
        return None
    reader = getattr(getattr(response, "_fp", None), "fp", None)  # http.client's buffered reader
    sock = getattr(getattr(reader, "raw", None), "_sock", None)
    if reader is None or sock is None or not hasattr(reader, "read1"):
        return None
    return _blocks(reader, sock, batch_seconds, sleep)


def _blocks(reader: Any, sock: Any, batch_seconds: float, sleep: Callable[[float], object]) -> Iterator[bytes]:
    body = ChunkedBody()
    while not body.done:
        if batch_seconds > 0 and not _readable(sock):
            sleep(batch_seconds)
        data = reader.read1(READ_BYTES)
        if not data:
            return  # the connection closed (or stop() shut it down): the stream ended early
        payload = body.feed(data)
        if payload:
            yield payload


def _readable(sock: Any) -> bool:
    """Bytes are waiting: decrypted inside the TLS object, or on the socket."""
    pending = getattr(sock, "pending", None)
    if pending is not None and pending() > 0:
        return True
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):  # closed meanwhile: the read reports it
        return True
