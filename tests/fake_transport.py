"""An in-memory stand-in for an asyncio transport, for driving `KafkaConnection` in tests."""

from __future__ import annotations

import struct
from typing import Any


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False
        self.reading = True

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.written.append(data)

    def frames(self) -> list[bytes]:
        """What was written, cut into size-prefixed frames (writes may carry several)."""
        data = b"".join(self.written)
        out, pos = [], 0
        while pos < len(data):
            (size,) = struct.unpack_from(">i", data, pos)
            out.append(data[pos : pos + 4 + size])
            pos += 4 + size
        return out

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def get_extra_info(self, name: str) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 9092)}[name]
