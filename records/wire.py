"""Kafka message-schema primitives: the byte layouts of Kafka's generated message classes.

These are the rules of Kafka's message generator (`generator/`, `common/protocol/`) that the
coordinator records in `__consumer_offsets` use, written as plain functions over `bytes`:

* fixed-width integers are big-endian (`int8/16/32/64`); a `uuid` is its 16 raw bytes;
* in a **non-flexible** version a string is `int16 length` + UTF-8, bytes and arrays are
  `int32 length` + data, and length -1 means null;
* in a **flexible** version strings, bytes and arrays are *compact*: `unsigned varint (length+1)`
  + data, 0 meaning null; every struct (the message and each nested struct) ends with a tagged
  fields section: `uvarint count`, then per field `uvarint tag`, `uvarint size`, `size` bytes;
* a string is at most 0x7fff UTF-8 bytes, in both encodings.

Readers take `(buf, pos)` and return `(value, new_pos)`; they raise `WireFormatError` for bytes
that cannot be what the schema says (a length past the end, a null where none is allowed, an
over-long varint, invalid UTF-8). A fixed-width read past the end raises `struct.error` or
`IndexError` from the standard library: checking every fixed field by hand would cost more than
the record codec's single `except` that turns those into a `RecordDecodeError`.

The hot record decoders in `records.codec` inline the commonest of these steps rather than call
them; these functions are the reference and the path for everything else.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

__all__ = [
    "EMPTY_TAGGED_FIELDS",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "MAX_STRING_LENGTH",
    "WireFormatError",
    "compact_array_length",
    "compact_bytes",
    "compact_nullable_string",
    "compact_string",
    "compact_string_array",
    "int32_compact_array",
    "nullable_string",
    "read_array_length",
    "read_bytes",
    "read_compact_array_length",
    "read_compact_bytes",
    "read_compact_nullable_string",
    "read_compact_string",
    "read_compact_string_array",
    "read_int32_compact_array",
    "read_nullable_string",
    "read_string",
    "read_tagged_fields",
    "read_uuid",
    "read_uvarint",
    "skip_tagged_fields",
    "string",
    "uuid_bytes",
    "uvarint",
    "wire_bytes",
]

MAX_STRING_LENGTH = 0x7FFF
"""Kafka rejects longer strings on write and on read (generated `read`/`addSize`)."""

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")

_unpack_i16 = INT16.unpack_from
_unpack_i32 = INT32.unpack_from
_pack_i16 = INT16.pack
_pack_i32 = INT32.pack

# Unsigned varints below 128 are one byte: the common case for every compact length and count.
_SMALL_UVARINTS: tuple[bytes, ...] = tuple(bytes((i,)) for i in range(128))
_MAX_UVARINT = 0xFFFFFFFF


class WireFormatError(ValueError):
    """Bytes that no writer of the schema could have produced (the codec adds the record type)."""


# --- varints --------------------------------------------------------------------------------


def uvarint(n: int) -> bytes:
    """Unsigned varint (protobuf style, 7 bits a byte, low bits first), as Kafka's ByteUtils."""
    if n < 0x80:
        return _SMALL_UVARINTS[n]
    if n > _MAX_UVARINT:
        raise ValueError(f"unsigned varint {n} does not fit in 32 bits")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """Read an unsigned 32-bit varint; at most 5 bytes, as Kafka's `readUnsignedVarint`."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    value = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 28:
            raise WireFormatError("varint longer than 5 bytes")
    if value > _MAX_UVARINT:
        raise WireFormatError(f"varint {value} does not fit in 32 bits")
    return value, pos


# --- non-flexible (classic) encoding ----------------------------------------------------------


def _utf8(buf: bytes, start: int, end: int, name: str) -> str:
    try:
        return buf[start:end].decode()
    except UnicodeDecodeError as exc:
        raise WireFormatError(f"{name}: invalid UTF-8 ({exc.reason} at byte {exc.start})") from None


def _check_length(n: int, pos: int, buf: bytes, name: str) -> int:
    end = pos + n
    if end > len(buf):
        raise WireFormatError(f"{name}: length {n} but only {len(buf) - pos} bytes left")
    return end


def read_string(buf: bytes, pos: int, name: str) -> tuple[str, int]:
    """Non-nullable `string`: int16 length + UTF-8; a null (-1) is an error, as in Kafka."""
    (n,) = _unpack_i16(buf, pos)
    pos += 2
    if n < 0:
        raise WireFormatError(f"{name}: non-nullable string has length {n}")
    end = _check_length(n, pos, buf, name)
    return _utf8(buf, pos, end, name), end


def read_nullable_string(buf: bytes, pos: int, name: str) -> tuple[str | None, int]:
    """Nullable `string`: length -1 is null; other negative lengths are malformed."""
    (n,) = _unpack_i16(buf, pos)
    pos += 2
    if n < 0:
        if n == -1:
            return None, pos
        raise WireFormatError(f"{name}: string length {n}")
    end = _check_length(n, pos, buf, name)
    return _utf8(buf, pos, end, name), end


def read_bytes(buf: bytes, pos: int, name: str) -> tuple[bytes, int]:
    """Non-nullable `bytes`: int32 length + data."""
    (n,) = _unpack_i32(buf, pos)
    pos += 4
    if n < 0:
        raise WireFormatError(f"{name}: non-nullable bytes have length {n}")
    end = _check_length(n, pos, buf, name)
    return buf[pos:end], end


def read_array_length(buf: bytes, pos: int, name: str, min_element_size: int) -> tuple[int, int]:
    """Non-nullable array count (int32), checked against the bytes left so that a corrupt count
    cannot make the reader loop or allocate far beyond the record (Kafka does the same check)."""
    (n,) = _unpack_i32(buf, pos)
    pos += 4
    if n < 0:
        raise WireFormatError(f"{name}: non-nullable array has length {n}")
    if n * min_element_size > len(buf) - pos:
        raise WireFormatError(f"{name}: {n} elements cannot fit in {len(buf) - pos} bytes")
    return n, pos


def string(s: str) -> bytes:
    """Encode a non-flexible `string`."""
    data = s.encode()
    if len(data) > MAX_STRING_LENGTH:
        raise ValueError(f"string of {len(data)} UTF-8 bytes exceeds {MAX_STRING_LENGTH}")
    return _pack_i16(len(data)) + data


def nullable_string(s: str | None) -> bytes:
    """Encode a non-flexible nullable `string` (null is length -1)."""
    if s is None:
        return b"\xff\xff"
    return string(s)


def wire_bytes(data: bytes) -> bytes:
    """Encode non-flexible `bytes`: int32 length + data."""
    return _pack_i32(len(data)) + data


# --- flexible (compact) encoding ----------------------------------------------------------------


def _read_compact_length(buf: bytes, pos: int) -> tuple[int, int]:
    """Length+1 varint; returns (length, pos) where length -1 is null."""
    b = buf[pos]
    if b < 0x80:
        return b - 1, pos + 1
    n, pos = read_uvarint(buf, pos)
    return n - 1, pos


def read_compact_string(buf: bytes, pos: int, name: str) -> tuple[str, int]:
    n, pos = _read_compact_length(buf, pos)
    if n < 0:
        raise WireFormatError(f"{name}: non-nullable string was serialized as null")
    if n > MAX_STRING_LENGTH:
        raise WireFormatError(f"{name}: string length {n} exceeds {MAX_STRING_LENGTH}")
    end = _check_length(n, pos, buf, name)
    return _utf8(buf, pos, end, name), end


def read_compact_nullable_string(buf: bytes, pos: int, name: str) -> tuple[str | None, int]:
    n, pos = _read_compact_length(buf, pos)
    if n < 0:
        return None, pos
    if n > MAX_STRING_LENGTH:
        raise WireFormatError(f"{name}: string length {n} exceeds {MAX_STRING_LENGTH}")
    end = _check_length(n, pos, buf, name)
    return _utf8(buf, pos, end, name), end


def read_compact_bytes(buf: bytes, pos: int, name: str) -> tuple[bytes, int]:
    n, pos = _read_compact_length(buf, pos)
    if n < 0:
        raise WireFormatError(f"{name}: non-nullable bytes were serialized as null")
    end = _check_length(n, pos, buf, name)
    return buf[pos:end], end


def read_compact_array_length(
    buf: bytes, pos: int, name: str, min_element_size: int
) -> tuple[int, int]:
    """Non-nullable compact array count, bounded by the bytes left (see `read_array_length`)."""
    n, pos = _read_compact_length(buf, pos)
    if n < 0:
        raise WireFormatError(f"{name}: non-nullable array was serialized as null")
    if n * min_element_size > len(buf) - pos:
        raise WireFormatError(f"{name}: {n} elements cannot fit in {len(buf) - pos} bytes")
    return n, pos


def read_compact_string_array(buf: bytes, pos: int, name: str) -> tuple[tuple[str, ...], int]:
    """`[]string` in a flexible version (elements are non-nullable compact strings)."""
    n, pos = read_compact_array_length(buf, pos, name, 1)
    out = []
    for _ in range(n):
        s, pos = read_compact_string(buf, pos, name)
        out.append(s)
    return tuple(out), pos


_INT32_ARRAYS: dict[int, struct.Struct] = {}


def _int32_array_struct(n: int) -> struct.Struct:
    s = _INT32_ARRAYS.get(n)
    if s is None:
        s = struct.Struct(f">{n}i")
        if n <= 4096:  # partition counts; keep the cache bounded
            _INT32_ARRAYS[n] = s
    return s


def read_int32_compact_array(buf: bytes, pos: int, name: str) -> tuple[tuple[int, ...], int]:
    """`[]int32` in a flexible version, unpacked in one `struct` call."""
    n, pos = read_compact_array_length(buf, pos, name, 4)
    return _int32_array_struct(n).unpack_from(buf, pos), pos + 4 * n


def int32_compact_array(values: Sequence[int]) -> bytes:
    n = len(values)
    return uvarint(n + 1) + _int32_array_struct(n).pack(*values)


# Topic ids repeat in nearly every KIP-848 record of a group, and `uuid.UUID(bytes=...)` costs
# about 0.8 µs; a bounded cache of the decoded objects makes the repeats a dict lookup.
_UUID_CACHE: dict[bytes, uuid.UUID] = {}
_UUID_CACHE_LIMIT = 1 << 16


def read_uuid(buf: bytes, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    raw = buf[pos:end]
    u = _UUID_CACHE.get(raw)
    if u is None:
        if len(raw) != 16:
            raise WireFormatError(f"uuid: 16 bytes needed, {len(raw)} left")
        if len(_UUID_CACHE) >= _UUID_CACHE_LIMIT:
            _UUID_CACHE.clear()
        u = _UUID_CACHE[raw] = uuid.UUID(bytes=raw)
    return u, end


def uuid_bytes(u: uuid.UUID) -> bytes:
    return u.bytes


def compact_string(s: str) -> bytes:
    data = s.encode()
    n = len(data)
    if n > MAX_STRING_LENGTH:
        raise ValueError(f"string of {n} UTF-8 bytes exceeds {MAX_STRING_LENGTH}")
    if n < 0x7F:
        return _SMALL_UVARINTS[n + 1] + data
    return uvarint(n + 1) + data


def compact_nullable_string(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    return compact_string(s)


def compact_bytes(data: bytes) -> bytes:
    return uvarint(len(data) + 1) + data


def compact_array_length(n: int) -> bytes:
    return uvarint(n + 1)


def compact_string_array(values: Sequence[str]) -> bytes:
    return uvarint(len(values) + 1) + b"".join([compact_string(s) for s in values])


# --- tagged fields ------------------------------------------------------------------------------

TaggedField = tuple[int, int, int]
"""(tag, start, end): where one tagged field's data lies in the buffer."""


def read_tagged_fields(buf: bytes, pos: int) -> tuple[list[TaggedField], int]:
    """Read a tagged-fields section; return the fields' positions, for the caller to parse the
    tags it knows and skip the rest (as Kafka's generated readers do with unknown tags)."""
    count, pos = read_uvarint(buf, pos)
    if count * 2 > len(buf) - pos:
        raise WireFormatError(f"{count} tagged fields cannot fit in {len(buf) - pos} bytes")
    fields: list[TaggedField] = []
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise WireFormatError(
                f"tagged field {tag}: size {size} but {len(buf) - pos} bytes left"
            )
        fields.append((tag, pos, end))
        pos = end
    return fields, pos


def skip_tagged_fields(buf: bytes, pos: int) -> int:
    """Skip a tagged-fields section whose tags are all unknown to us; one byte in the usual case."""
    if buf[pos] == 0:
        return pos + 1
    return read_tagged_fields(buf, pos)[1]


EMPTY_TAGGED_FIELDS = b"\x00"
