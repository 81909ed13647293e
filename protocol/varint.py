"""Kafka's variable-length integers, as `org.apache.kafka.common.utils.ByteUtils` writes them.

A varint is protobuf's base-128 encoding: 7 bits a byte, low bits first, the high bit set on
every byte but the last. Kafka uses four flavours:

* unsigned varint (32-bit): compact lengths, counts and tags of flexible message versions
  (KIP-482), at most 5 bytes (`readUnsignedVarint`);
* signed varint (32-bit, zigzag: 0, -1, 1, -2 -> 0, 1, 2, 3): record lengths, key/value/header
  sizes, offset deltas and header counts in v2 record batches (KIP-98), at most 5 bytes;
* signed varlong (64-bit, zigzag): a record's timestamp delta, at most 10 bytes;
* unsigned varlong (64-bit), the zigzagged form of a varlong, at most 10 bytes.

This is the one implementation in groupshift: every other module encodes and decodes through
it. Decoding is bounded as in ByteUtils: a varint whose 5th byte (a varlong's 10th) still has
the continuation bit set is refused with `OverlongVarintError`, so bytes from a client can
never make a reader loop past the bound or build an unbounded integer; a buffer that ends
inside a varint raises `TruncatedVarintError`. Both name the offending position.

Readers take `(buf, pos)` and return `(value, new_pos)`. Hot decoders (record batches, compact
lengths) read the one-byte case inline (`b = buf[pos]; if b < 0x80: ...`) and call these only
for the longer forms: a Python call costs about as much as the read itself.
"""

from __future__ import annotations

__all__ = [
    "MAX_UVARINT",
    "MAX_UVARLONG",
    "MAX_VARINT_BYTES",
    "MAX_VARLONG_BYTES",
    "OverlongVarintError",
    "TruncatedVarintError",
    "encode_uvarint",
    "encode_uvarlong",
    "encode_varint",
    "encode_varlong",
    "read_uvarint",
    "read_uvarlong",
    "read_varint",
    "read_varlong",
    "unzigzag",
    "zigzag32",
    "zigzag64",
]

MAX_VARINT_BYTES = 5
"""ByteUtils.readVarint / readUnsignedVarint: a 32-bit value takes at most 5 bytes."""
MAX_VARLONG_BYTES = 10
"""ByteUtils.readVarlong / readUnsignedVarlong: a 64-bit value takes at most 10 bytes."""
MAX_UVARINT = 0xFFFF_FFFF
MAX_UVARLONG = 0xFFFF_FFFF_FFFF_FFFF

# One-byte varints (0..127) are the common case of every length and count: no allocation.
_SMALL: tuple[bytes, ...] = tuple(bytes((i,)) for i in range(128))


class OverlongVarintError(ValueError):
    """The continuation bit is still set on the last byte a varint may take (Kafka's
    `IllegalArgumentException("Varint is too long...")`). A `ValueError`: callers that treat
    malformed input as a value error keep doing so."""


class TruncatedVarintError(IndexError):
    """The buffer ends inside a varint (Kafka's `BufferUnderflowException`). An `IndexError`:
    callers that treat running off the end as "premature end of data" keep doing so."""


# --- encoding --------------------------------------------------------------------------------
# The loops are written out in each function: a helper call would cost about a third of an encode.


def encode_uvarint(n: int) -> bytes:
    """Unsigned 32-bit varint (`writeUnsignedVarint`); 0 <= n <= 2^32 - 1."""
    if n < 0x80:
        if n >= 0:
            return _SMALL[n]
    elif n <= MAX_UVARINT:
        out = bytearray()
        while n >= 0x80:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)
        return bytes(out)
    raise ValueError(f"unsigned varint {n} does not fit in 32 bits" if n > 0 else f"negative varint {n}")


def encode_uvarlong(n: int) -> bytes:
    """Unsigned 64-bit varint (`writeUnsignedVarlong`); 0 <= n <= 2^64 - 1."""
    if n < 0x80:
        if n >= 0:
            return _SMALL[n]
    elif n <= MAX_UVARLONG:
        out = bytearray()
        while n >= 0x80:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)
        return bytes(out)
    raise ValueError(f"unsigned varlong {n} does not fit in 64 bits" if n > 0 else f"negative varlong {n}")


def zigzag32(n: int) -> int:
    """Zigzag a signed 32-bit value (0, -1, 1, -2 -> 0, 1, 2, 3); the caller knows it fits."""
    return (n << 1) ^ (n >> 31)


def zigzag64(n: int) -> int:
    """Zigzag a signed 64-bit value (the record encoder's hot path: the caller knows it fits)."""
    return (n << 1) ^ (n >> 63)


def unzigzag(z: int) -> int:
    """The signed value of a zigzagged one (either width)."""
    return (z >> 1) ^ -(z & 1)


def encode_varint(n: int) -> bytes:
    """Signed 32-bit zigzag varint (`writeVarint`)."""
    if not -0x8000_0000 <= n <= 0x7FFF_FFFF:
        raise ValueError(f"varint {n} does not fit in 32 bits")
    return encode_uvarint((n << 1) ^ (n >> 31))


def encode_varlong(n: int) -> bytes:
    """Signed 64-bit zigzag varint (`writeVarlong`)."""
    if not -0x8000_0000_0000_0000 <= n <= 0x7FFF_FFFF_FFFF_FFFF:
        raise ValueError(f"varlong {n} does not fit in 64 bits")
    return encode_uvarlong((n << 1) ^ (n >> 63))


# --- decoding --------------------------------------------------------------------------------


def _truncated(pos: int, at: int) -> TruncatedVarintError:
    return TruncatedVarintError(f"truncated varint: the data ends at byte {at - pos} of the varint at {pos}")


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Unsigned 32-bit varint at `pos` (`readUnsignedVarint`): at most 5 bytes.

    As in Kafka, the unused high bits of the 5th byte are not checked: a caller that needs the
    value to fit 32 bits (a length about to be used) compares it itself. Unrolled: record
    batches call this for every length of 64 bytes or more."""
    i = pos
    try:
        b = buf[i]
        if b < 0x80:
            return b, i + 1
        value = b & 0x7F
        i += 1
        b = buf[i]
        if b < 0x80:
            return value | b << 7, i + 1
        value |= (b & 0x7F) << 7
        i += 1
        b = buf[i]
        if b < 0x80:
            return value | b << 14, i + 1
        value |= (b & 0x7F) << 14
        i += 1
        b = buf[i]
        if b < 0x80:
            return value | b << 21, i + 1
        value |= (b & 0x7F) << 21
        i += 1
        b = buf[i]
        if b < 0x80:
            return value | b << 28, i + 1
    except IndexError:
        raise _truncated(pos, i) from None
    raise OverlongVarintError(f"varint longer than {MAX_VARINT_BYTES} bytes (at {pos})")


def read_uvarlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Unsigned 64-bit varint at `pos` (`readUnsignedVarlong`): at most 10 bytes."""
    value = 0
    shift = 0
    i = pos
    end = pos + MAX_VARLONG_BYTES
    try:
        while i < end:
            b = buf[i]
            i += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value, i
            shift += 7
    except IndexError:
        raise _truncated(pos, i) from None
    raise OverlongVarintError(f"varint longer than {MAX_VARLONG_BYTES} bytes (at {pos})")


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Signed (zigzag) 32-bit varint at `pos` (`readVarint`): at most 5 bytes."""
    z, pos = read_uvarint(buf, pos)
    return (z >> 1) ^ -(z & 1), pos


def read_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Signed (zigzag) 64-bit varint at `pos` (`readVarlong`): at most 10 bytes."""
    z, pos = read_uvarlong(buf, pos)
    return (z >> 1) ^ -(z & 1), pos
