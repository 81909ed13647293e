"""Kafka's size-prefixed framing, sans I/O: where one frame ends and whether its size is sane.

Every Kafka request and response on the wire is a 4-byte big-endian signed size followed by
that many bytes (`NetworkReceive`, `NetworkSend`). As in Kafka's `NetworkReceive.readFrom`, a
negative size or one above the reader's maximum (`socket.request.max.bytes` on a broker) is
refused as soon as the 4 size bytes have arrived, before any payload is buffered: a peer
cannot make the reader allocate or wait for more than that maximum.

These functions only look at bytes; the connection machinery that owns a socket (the
gateway's asyncio protocol, the upstream link, the blocking clients) calls them:

* `frame_end` for a buffered parser that slices frames out of one buffer in place;
* `FrameReader` for a reader that is fed chunks and takes whole frames back;
* `frame_size` for a blocking reader that reads the 4 size bytes, then exactly that many;
* `frame` to prefix a payload with its size.
"""

from __future__ import annotations

import struct

__all__ = [
    "SIZE",
    "FrameReader",
    "FrameSizeError",
    "frame",
    "frame_end",
    "frame_size",
]

SIZE = struct.Struct(">i")
"""The size prefix: a big-endian int32."""
_unpack_size = SIZE.unpack_from
_pack_size = SIZE.pack


class FrameSizeError(ValueError):
    """A frame's size prefix is negative, or outside what this reader accepts.

    `reason` is the gateway's log and metric name for it: `frame.negative_size` or
    `frame.oversized` (`frame.undersized` for a reader that needs a minimum, such as a response
    reader that needs at least the correlation id)."""

    def __init__(self, size: int, min_size: int, max_size: int) -> None:
        if size < 0:
            self.reason = "frame.negative_size"
        elif size > max_size:
            self.reason = "frame.oversized"
        else:
            self.reason = "frame.undersized"
        super().__init__(f"frame size {size} is outside {min_size}..{max_size}")
        self.size = size
        self.min_size = min_size
        self.max_size = max_size


def frame_end(buf: bytes | bytearray | memoryview, pos: int, max_size: int, min_size: int = 0) -> int:
    """Where the frame whose size prefix starts at `pos` ends (prefix included), or -1 while
    its bytes have not all arrived. Raises `FrameSizeError` as soon as the 4 size bytes are
    there if the size is below `min_size` (never below 0) or above `max_size`."""
    n = len(buf)
    if n - pos < 4:
        return -1
    size = _unpack_size(buf, pos)[0]
    if size < min_size or size > max_size:
        raise FrameSizeError(size, max(min_size, 0), max_size)
    end = pos + 4 + size
    return end if end <= n else -1


def frame_size(prefix: bytes | bytearray | memoryview, max_size: int, min_size: int = 0) -> int:
    """The payload size a 4-byte prefix announces, checked as `frame_end` does (blocking readers:
    read 4 bytes, then exactly this many)."""
    if len(prefix) != 4:
        raise ValueError(f"a frame size prefix is 4 bytes, not {len(prefix)}")
    size: int = _unpack_size(prefix, 0)[0]
    if size < min_size or size > max_size:
        raise FrameSizeError(size, max(min_size, 0), max_size)
    return size


def frame(payload: bytes) -> bytes:
    """The payload with its size prefix, as it goes on the wire."""
    return _pack_size(len(payload)) + payload


class FrameReader:
    """Feed it bytes as they arrive, take complete frames (payloads, without the prefix) back
    one at a time, so the caller can stop between two (a failed connection, back-pressure).

    A refused size raises `FrameSizeError` from `next_frame`, after every frame before it was
    taken; the stream has then lost its framing (Kafka closes the connection)."""

    __slots__ = ("_buf", "_pos", "max_size", "min_size")

    def __init__(self, max_size: int, min_size: int = 0) -> None:
        self.max_size = max_size
        self.min_size = min_size
        self._buf = bytearray()
        self._pos = 0

    @property
    def buffered(self) -> int:
        """Bytes held that are not yet a taken frame."""
        return len(self._buf) - self._pos

    def feed(self, data: bytes) -> None:
        self._buf += data

    def next_frame(self) -> bytes | None:
        """The next complete frame's payload, or None until more bytes are fed."""
        buf = self._buf
        pos = self._pos
        end = frame_end(buf, pos, self.max_size, self.min_size)
        if end < 0:
            if pos:
                del buf[:pos]
                self._pos = 0
            return None
        self._pos = end
        return bytes(buf[pos + 4 : end])
