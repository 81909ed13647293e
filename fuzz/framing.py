"""Target `framing`: the TCP frame parser and response ordering (`gateway.connection`'s
`KafkaConnection`, over `protocol.framing`).

An input is `[max frame size / 8][chunking][byte stream]`: the stream is fed to
`data_received` in chunks of the chosen sizes, as TCP may split it anywhere. Every frame the
parser hands out is answered, half at once and half later in reverse order, so responses
complete out of order.

Clean: none; nothing may raise. Asserted (Kafka's `NetworkReceive` and its in-order responses):
* the frames handed out are exactly those an independent reading of the stream finds, up to the
  first size that is negative or above the maximum;
* the connection is closed iff such a size arrived (a frame split across chunks is not a reason);
* the bytes written are the responses in request order, whatever order they completed in.
"""

from __future__ import annotations

import struct
from typing import Any

from fuzz.common import Target
from gateway.connection import KafkaConnection, ResponseSlot

_SIZE = struct.Struct(">i")


class _Transport:
    def __init__(self) -> None:
        self.written = bytearray()
        self.closed = False
        self.paused = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "write after close"
        self.written += data

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 9) if name in ("peername", "sockname") else default


def expected(stream: bytes, max_frame: int) -> tuple[list[bytes], bool]:
    """(frames, refused): the frames before the first bad size, and whether one was seen."""
    frames: list[bytes] = []
    pos = 0
    while len(stream) - pos >= 4:
        (size,) = _SIZE.unpack_from(stream, pos)
        if size < 0 or size > max_frame:
            return frames, True
        if pos + 4 + size > len(stream):
            break
        frames.append(stream[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return frames, False


def one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    max_frame = data[0] * 8
    chunking = data[1]
    stream = data[2:]
    got: list[bytes] = []
    later: list[tuple[int, ResponseSlot]] = []

    def on_frame(conn: KafkaConnection, frame: bytes, slot: ResponseSlot) -> None:
        i = len(got)
        got.append(frame)
        if i % 2 == 0:
            slot.complete(_SIZE.pack(i))
        else:
            later.append((i, slot))

    def drain_later() -> None:
        while later:
            i, slot = later.pop()
            slot.complete(_SIZE.pack(i))

    conn = KafkaConnection(connection_id=1, on_frame=on_frame, max_frame_bytes=max_frame)
    transport = _Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    pos, step = 0, 0
    while pos < len(stream) and not transport.closed:
        if transport.paused:  # too many in flight: answer them, as handlers eventually do
            drain_later()
            assert not transport.paused, "reading still paused with nothing in flight"
        n = 1 + ((chunking >> (step % 8)) & 1) * (1 + chunking % 13) * ((step % 3) + 1)
        conn.data_received(stream[pos : pos + n])
        pos += n
        step += 1
    closed = transport.closed
    drain_later()
    want, refused = expected(stream, max_frame)
    assert got == want, f"frames {len(got)} != expected {len(want)}"
    assert closed == refused, f"closed={closed} but a bad size was {'' if refused else 'not '}seen"
    if not closed:
        assert bytes(transport.written) == b"".join(_SIZE.pack(i) for i in range(len(got))), "order"


def _frame(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body


def seeds() -> list[bytes]:
    from kio.index import load_request_schema

    from protocol.codec import encode_request
    from protocol.entity_builder import build

    api_versions = encode_request(
        build(load_request_schema(18, 3), {"client_software_name": "fuzz", "client_software_version": "1"}),
        correlation_id=1,
    )
    metadata = encode_request(
        build(
            load_request_schema(3, 12),
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        ),
        correlation_id=2,
    )
    stream = api_versions + metadata + _frame(b"") + _frame(b"x" * 40)
    return [
        bytes([255, 0]) + stream,
        bytes([255, 0xA5]) + stream * 3,
        bytes([4, 0x0F]) + stream,
        bytes([255, 1]) + _SIZE.pack(-1) + stream,
        bytes([0, 2]) + _frame(b""),
    ]


TARGET = Target(
    name="framing",
    doc=__doc__ or "",
    seeds=seeds,
    one_input=one_input,
    clean=(),
    instrument=("gateway.connection", "protocol.framing"),
)
