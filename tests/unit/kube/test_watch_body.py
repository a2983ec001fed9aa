"""Reading a watch body off the socket: the chunked framing, and waiting only before a read that would block."""

from __future__ import annotations

import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube.watch_body import ChunkedBody, _blocks


def chunked(*payloads: bytes, end: bool = True) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in payloads) + (b"0\r\n\r\n" if end else b"")


EVENTS = [b'{"type": "MODIFIED", "object": {"metadata": {"name": "node-1"}}}\n', b'{"type": "ADDED"}\n']


@pytest.mark.parametrize(
    ("case", "body", "payload", "done"),
    [
        ("two chunks and the last one", chunked(*EVENTS), b"".join(EVENTS), True),
        ("a stream still open", chunked(*EVENTS, end=False), b"".join(EVENTS), False),
        ("a chunk extension is ignored", b"5;name=value\r\nhello\r\n0\r\n\r\n", b"hello", True),
        ("upper-case hex sizes", b"A\r\n0123456789\r\n0\r\n\r\n", b"0123456789", True),
        ("a chunk cut in its payload gives what came", b"a\r\n01234", b"01234", False),
        ("bytes after the last chunk are not payload", chunked(b"ab") + b"trailer: x\r\n\r\n", b"ab", True),
    ],
)
def test_chunked_body_unframes(case: str, body: bytes, payload: bytes, done: bool) -> None:
    reader = ChunkedBody()
    assert (reader.feed(body), reader.done) == (payload, done), case


@pytest.mark.parametrize(
    ("case", "body", "message"),
    [
        ("a size that is not hex", b"zz\r\nhello\r\n", "not a chunk size"),
        ("a payload without its CRLF", b"2\r\nabXY1\r\nc\r\n", "not followed by CRLF"),
        ("no size line in 1 KiB", b"1" * 2000, "no chunk-size line"),
    ],
)
def test_chunked_body_refuses_a_malformed_body(case: str, body: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ChunkedBody().feed(body)


@given(st.lists(st.binary(min_size=1, max_size=300), max_size=8), st.lists(st.integers(1, 50), max_size=40))
def test_chunked_body_gives_the_same_payload_however_the_bytes_are_cut(payloads: list[bytes], cuts: list[int]) -> None:
    body = chunked(*payloads)
    reader = ChunkedBody()
    out = bytearray()
    position = 0
    for cut in cuts:
        out += reader.feed(body[position : position + cut])
        position += cut
    out += reader.feed(body[position:])
    assert (bytes(out), reader.done) == (b"".join(payloads), True)


def test_a_read_that_would_block_waits_the_batch_first_and_gets_what_arrived_meanwhile() -> None:
    ours, server = socket.socketpair()
    with ours, server, ours.makefile("rb") as reader:
        waits: list[float] = []

        def wait(seconds: float) -> None:  # the events of the wait arrive during it
            waits.append(seconds)
            server.sendall(chunked(*EVENTS))

        server.sendall(chunked(b"first\n", end=False))
        blocks = _blocks(reader, ours, 0.1, wait)
        assert next(blocks) == b"first\n" and waits == []  # waiting on the socket: read at once
        assert next(blocks) == b"".join(EVENTS) and waits == [0.1]  # nothing waiting: one wait, then all of it
        assert list(blocks) == []  # the last chunk ends the stream


def test_without_a_batch_no_read_waits() -> None:
    ours, server = socket.socketpair()
    with ours, server, ours.makefile("rb") as reader:
        server.sendall(chunked(*EVENTS))
        server.shutdown(socket.SHUT_WR)
        assert b"".join(_blocks(reader, ours, 0, lambda seconds: pytest.fail("waited"))) == b"".join(EVENTS)


def test_a_connection_closed_mid_stream_ends_the_blocks() -> None:
    ours, server = socket.socketpair()
    with ours, server, ours.makefile("rb") as reader:
        server.sendall(chunked(b"partial\n", end=False))
        server.shutdown(socket.SHUT_WR)
        assert list(_blocks(reader, ours, 0, lambda seconds: None)) == [b"partial\n"]
