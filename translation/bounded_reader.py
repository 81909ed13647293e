"""Reading the big-endian, length-prefixed layouts Kafka's Java clients write by hand into a
group's member metadata and assignments (Kafka Streams' SubscriptionInfo / AssignmentInfo,
Kafka Connect's worker metadata and assignments): bounded by the bytes given, every failure a
`SchemaError` of the caller's kind naming what was read and where, never a traceback.

No Kafka behaviour of its own: the codecs that use it (translation/streams_classic_protocol.py,
translation/connect_classic_protocol.py) name the Kafka classes whose bytes they read.
"""

from __future__ import annotations

import struct
from typing import ClassVar

from translation.embedded_protocol import SchemaError

_b = struct.Struct(">b")
_h = struct.Struct(">h")
_i = struct.Struct(">i")
_q = struct.Struct(">q")


class BoundedReader:
    """A cursor over `buf`; a subclass names its error type in `error`."""

    __slots__ = ("buf", "pos", "what")
    error: ClassVar[type[SchemaError]] = SchemaError

    def __init__(self, buf: bytes, what: str) -> None:
        self.buf = buf
        self.pos = 0
        self.what = what

    def fail(self, reason: str) -> SchemaError:
        return self.error(f"{self.what}: {reason} (at byte {self.pos} of {len(self.buf)})")

    @property
    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def take(self, n: int) -> bytes:
        if n < 0 or n > self.remaining:
            raise self.fail(f"truncated: need {n} bytes, have {self.remaining}")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def int8(self) -> int:
        v: int = _b.unpack(self.take(1))[0]
        return v

    def int16(self) -> int:
        v: int = _h.unpack(self.take(2))[0]
        return v

    def int32(self) -> int:
        v: int = _i.unpack(self.take(4))[0]
        return v

    def int64(self) -> int:
        v: int = _q.unpack(self.take(8))[0]
        return v

    def done(self) -> None:
        if self.remaining:
            raise self.fail(f"{self.remaining} trailing bytes")
