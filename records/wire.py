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

The hottest decoders (keys, offset commits, topic-partition lists in `records.*_codec`) inline
the commonest of these steps rather than call them; these functions are the reference and the
path for everything else.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

from protocol.varint import MAX_UVARINT as _MAX_UVARINT
from protocol.varint import OverlongVarintError, encode_uvarint
from protocol.varint import read_uvarint as _read_uvarint

__all__ = [
    "MAX_STRING_LENGTH",
    "TaggedField",
    "WireFormatError",
    "bad_string_length_error",
    "cached_uuid",
    "check_string_length",
    "compact_bytes",
    "compact_nullable_string",
    "compact_string",
    "compact_string_array",
    "int32_array_struct",
    "int32_compact_array",
    "nullable_string",
    "read_array_length",
    "read_bytes",
    "read_compact_array_length",
    "read_compact_bytes",
    "read_compact_nullable_string",
    "read_compact_string",
    "read_compact_string_array",
    "read_nullable_string",
    "read_string",
    "read_tagged_fields",
    "read_uuid",
    "read_uvarint",
    "skip_tagged_fields",
    "string",
    "trailing_bytes_error",
    "unsupported_version_error",
    "uvarint",
    "wire_bytes",
]

MAX_STRING_LENGTH = 0x7FFF
"""Kafka rejects longer strings on write and on read (generated `read`/`addSize`)."""

_unpack_i16 = struct.Struct(">h").unpack_from
_unpack_i32 = struct.Struct(">i").unpack_from
_pack_i16 = struct.Struct(">h").pack
_pack_i32 = struct.Struct(">i").pack

# Unsigned varints below 128 are one byte: the common case for every compact length and count.
_SMALL_UVARINTS: tuple[bytes, ...] = tuple(bytes((i,)) for i in range(128))


class WireFormatError(ValueError):
    """Bytes that no writer of the schema could have produced (the codec adds the record type)."""


# --- varints --------------------------------------------------------------------------------


uvarint = encode_uvarint
"""Unsigned 32-bit varint (protobuf style, 7 bits a byte, low bits first), as Kafka's ByteUtils."""


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """Read an unsigned 32-bit varint; at most 5 bytes, as Kafka's `readUnsignedVarint`, and
    the value must fit 32 bits (Kafka would silently drop the 5th byte's high bits)."""
    try:
        value, pos = _read_uvarint(buf, pos)
    except OverlongVarintError:
        raise WireFormatError("varint longer than 5 bytes") from None
    if value > _MAX_UVARINT:
        raise WireFormatError(f"varint {value} does not fit in 32 bits")
    return value, pos


# --- non-flexible (classic) encoding ----------------------------------------------------------
# Readers are written flat (no helper calls on the success path): a call costs about as much as
# the read itself, and these run several times for every record of a replay.


def _length_error(name: str, n: int, pos: int, buf: bytes) -> WireFormatError:
    if n < 0:
        return WireFormatError(f"{name}: non-nullable field was serialized with length {n}")
    if n > MAX_STRING_LENGTH:
        return WireFormatError(f"{name}: length {n} exceeds {MAX_STRING_LENGTH}")
    return WireFormatError(f"{name}: length {n} but only {len(buf) - pos} bytes left")


def _utf8_error(name: str, exc: UnicodeDecodeError) -> WireFormatError:
    return WireFormatError(f"{name}: invalid UTF-8 ({exc.reason} at byte {exc.start})")


def read_string(buf: bytes, pos: int, name: str) -> tuple[str, int]:
    """Non-nullable `string`: int16 length + UTF-8; a null (-1) is an error, as in Kafka."""
    (n,) = _unpack_i16(buf, pos)
    pos += 2
    end = pos + n
    if n < 0 or end > len(buf):
        raise _length_error(name, n, pos, buf)
    try:
        return buf[pos:end].decode(), end
    except UnicodeDecodeError as exc:
        raise _utf8_error(name, exc) from None


def read_nullable_string(buf: bytes, pos: int, name: str) -> tuple[str | None, int]:
    """Nullable `string`: length -1 is null; other negative lengths are malformed."""
    (n,) = _unpack_i16(buf, pos)
    pos += 2
    end = pos + n
    if n < 0 or end > len(buf):
        if n == -1:
            return None, pos
        raise _length_error(name, n, pos, buf)
    try:
        return buf[pos:end].decode(), end
    except UnicodeDecodeError as exc:
        raise _utf8_error(name, exc) from None


def read_bytes(buf: bytes, pos: int, name: str) -> tuple[bytes, int]:
    """Non-nullable `bytes`: int32 length + data."""
    (n,) = _unpack_i32(buf, pos)
    pos += 4
    end = pos + n
    if n < 0 or end > len(buf):
        raise _length_error(name, n, pos, buf)
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
# A compact length is `uvarint(length + 1)`; below 127 it is one byte, read inline.


def read_compact_string(buf: bytes, pos: int, name: str) -> tuple[str, int]:
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos)
    n -= 1
    end = pos + n
    if n < 0 or end > len(buf) or n > MAX_STRING_LENGTH:
        raise _length_error(name, n, pos, buf)
    try:
        return buf[pos:end].decode(), end
    except UnicodeDecodeError as exc:
        raise _utf8_error(name, exc) from None


def read_compact_nullable_string(buf: bytes, pos: int, name: str) -> tuple[str | None, int]:
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    end = pos + n
    if end > len(buf) or n > MAX_STRING_LENGTH:
        raise _length_error(name, n, pos, buf)
    try:
        return buf[pos:end].decode(), end
    except UnicodeDecodeError as exc:
        raise _utf8_error(name, exc) from None


def read_compact_bytes(buf: bytes, pos: int, name: str) -> tuple[bytes, int]:
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos)
    n -= 1
    end = pos + n
    if n < 0 or end > len(buf):
        raise _length_error(name, n, pos, buf)
    return buf[pos:end], end


def read_compact_array_length(buf: bytes, pos: int, name: str, min_element_size: int) -> tuple[int, int]:
    """Non-nullable compact array count, bounded by the bytes left (see `read_array_length`)."""
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos)
    n -= 1
    if n < 0:
        raise WireFormatError(f"{name}: non-nullable array was serialized as null")
    if n * min_element_size > len(buf) - pos:
        raise WireFormatError(f"{name}: {n} elements cannot fit in {len(buf) - pos} bytes")
    return n, pos


def read_compact_string_array(buf: bytes, pos: int, name: str) -> tuple[tuple[str, ...], int]:
    """`[]string` in a flexible version (elements are non-nullable compact strings)."""
    count, pos = read_compact_array_length(buf, pos, name, 1)
    size = len(buf)
    out = []
    for _ in range(count):
        n = buf[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = read_uvarint(buf, pos)
        n -= 1
        end = pos + n
        if n < 0 or end > size or n > MAX_STRING_LENGTH:
            raise _length_error(name, n, pos, buf)
        try:
            out.append(buf[pos:end].decode())
        except UnicodeDecodeError as exc:
            raise _utf8_error(name, exc) from None
        pos = end
    return tuple(out), pos


_INT32_ARRAYS: dict[int, struct.Struct] = {}


def int32_array_struct(n: int) -> struct.Struct:
    """The `Struct` of n big-endian int32s (cached for the partition counts that occur)."""
    s = _INT32_ARRAYS.get(n)
    if s is None:
        s = struct.Struct(f">{n}i")
        if n <= 4096:  # partition counts; keep the cache bounded
            _INT32_ARRAYS[n] = s
    return s


def int32_compact_array(values: Sequence[int]) -> bytes:
    n = len(values)
    return uvarint(n + 1) + int32_array_struct(n).pack(*values)


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


cached_uuid = _UUID_CACHE.get
"""`cached_uuid(raw16)`: the UUID already decoded from these bytes, or None (inline fast path)."""


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
            raise WireFormatError(f"tagged field {tag}: size {size} but {len(buf) - pos} bytes left")
        fields.append((tag, pos, end))
        pos = end
    return fields, pos


def skip_tagged_fields(buf: bytes, pos: int) -> int:
    """Skip a tagged-fields section whose tags are all unknown to us; one byte in the usual case."""
    if buf[pos] == 0:
        return pos + 1
    return read_tagged_fields(buf, pos)[1]


# --- errors the schema modules share --------------------------------------------------------


def trailing_bytes_error(end: int, buf: bytes) -> WireFormatError:
    return WireFormatError(f"{len(buf) - end} trailing bytes after the message")


def bad_string_length_error(name: str, n: int, pos: int, buf: bytes) -> WireFormatError:
    """For an inlined non-nullable string read whose length is negative or past the end."""
    if n < 0:
        return WireFormatError(f"{name}: non-nullable string has length {n}")
    return WireFormatError(f"{name}: length {n} but only {len(buf) - pos} bytes left")


def unsupported_version_error(version: int, supported: str) -> WireFormatError:
    return WireFormatError(f"value version {version} is not supported (expected {supported})")


def check_string_length(data: bytes) -> bytes:
    """UTF-8 bytes of a string about to be written; Kafka's limit is 0x7fff bytes."""
    if len(data) > MAX_STRING_LENGTH:
        raise ValueError(f"string of {len(data)} UTF-8 bytes exceeds Kafka's limit of {MAX_STRING_LENGTH}")
    return data
