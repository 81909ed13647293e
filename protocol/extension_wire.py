"""The reader and writer every groupshift extension API shares (keys 32000 and up).

groupshift's extensions (client-side assignors, KIP-848 as designed, `client_assignment_wire`;
Connect groups on the new protocol, `connect_wire`) are flexible v0 APIs Kafka's schemas and kio
do not have, written with Kafka's flexible encodings (KIP-482: compact strings, bytes and arrays
with unsigned-varint lengths plus one, tagged-field sections) and the request header v2 /
response header v1. Both API families share those primitives and three message shapes the
designs give them alike: the assignor entry a member advertises (`Assignor`), the
PrepareAssignment request and response heads, and the InstallAssignment request head and
response. This module holds them once; the API modules add their own structs.

Reading is bounded by the frame: every length and count is checked against the bytes left (an
array count larger than the bytes left is malformed, as `length_guard` does for kio's schemas),
and anything malformed raises `MalformedExtension`.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from protocol.varint import encode_uvarint, read_uvarint

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
NO_TAGS = b"\x00"
"""An empty tagged-field section (also: a null compact string, bytes or array)."""


class MalformedExtension(ValueError):
    """The bytes are not a well-formed extension field or request."""


class BoundedReader:
    """A bounded cursor over a frame: every length is checked against the bytes left."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def _take(self, n: int) -> int:
        at = self.pos
        if n < 0 or at + n > self.end:
            raise MalformedExtension(f"{n} bytes needed at {at}, {self.end - at} left")
        self.pos = at + n
        return at

    def int8(self) -> int:
        return int(INT8.unpack_from(self.buf, self._take(1))[0])

    def int16(self) -> int:
        return int(INT16.unpack_from(self.buf, self._take(2))[0])

    def int32(self) -> int:
        return int(INT32.unpack_from(self.buf, self._take(4))[0])

    def int64(self) -> int:
        return int(INT64.unpack_from(self.buf, self._take(8))[0])

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.buf, self.pos)
        except (IndexError, ValueError) as e:
            raise MalformedExtension(str(e)) from e
        if self.pos > self.end:
            raise MalformedExtension("varint runs past the field")
        return value

    def _length(self) -> int:
        """A compact length: -1 for null, else the length (checked against the bytes left)."""
        n = self.uvarint() - 1
        if n > self.end - self.pos:
            raise MalformedExtension(f"length {n} at {self.pos} exceeds the {self.end - self.pos} bytes left")
        return n

    def nullable_string(self) -> str | None:
        n = self._length()
        if n < 0:
            return None
        at = self._take(n)
        try:
            return self.buf[at : at + n].decode()
        except UnicodeDecodeError as e:
            raise MalformedExtension(f"string at {at} is not UTF-8") from e

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise MalformedExtension(f"null string at {self.pos}")
        return s

    def nullable_bytes(self) -> bytes | None:
        n = self._length()
        if n < 0:
            return None
        at = self._take(n)
        return bytes(self.buf[at : at + n])

    def bytes_(self) -> bytes:
        b = self.nullable_bytes()
        if b is None:
            raise MalformedExtension(f"null bytes at {self.pos}")
        return b

    def uuid(self) -> uuid.UUID:
        at = self._take(16)
        return uuid.UUID(bytes=bytes(self.buf[at : at + 16]))

    def array_count(self) -> int:
        """-1 for a null array; a count larger than the bytes left is malformed (each element
        takes at least one byte)."""
        return self._length()

    def int32_array(self) -> tuple[int, ...]:
        n = self.array_count()
        if n < 0:
            raise MalformedExtension("null int32 array")
        return tuple(self.int32() for _ in range(n))

    def present(self) -> bool:
        """The marker of a nullable struct: int8 -1 for null, else the struct follows."""
        return self.int8() >= 0

    def skip_tags(self) -> dict[int, tuple[int, int]]:
        """Reads a tagged-field section: tag -> (start, end) of its data."""
        tags: dict[int, tuple[int, int]] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            at = self._take(size)
            tags[tag] = (at, at + size)
        return tags

    def end_of_body(self) -> None:
        """The body's own tag section, then nothing: bytes after it are malformed."""
        self.skip_tags()
        if self.pos != self.end:
            raise MalformedExtension(f"{self.end - self.pos} bytes after the request body")


# --- writing ---------------------------------------------------------------------------------


def string(s: str | None) -> bytes:
    """A compact (nullable) string."""
    if s is None:
        return b"\x00"
    b = s.encode()
    return encode_uvarint(len(b) + 1) + b


def bytes_(b: bytes) -> bytes:
    """Compact bytes."""
    return encode_uvarint(len(b) + 1) + b


def count(n: int | None) -> bytes:
    """A compact array's count (None: a null array)."""
    return b"\x00" if n is None else encode_uvarint(n + 1)


def tagged(fields: dict[int, bytes]) -> bytes:
    """A tagged-field section (tags ascending, as Kafka writes them)."""
    out = [encode_uvarint(len(fields))]
    for tag in sorted(fields):
        data = fields[tag]
        out += [encode_uvarint(tag), encode_uvarint(len(data)), data]
    return b"".join(out)


# --- headers ---------------------------------------------------------------------------------


def body_offset(frame: bytes) -> int:
    """Where the body of a flexible request (header v2) starts: after api key, version,
    correlation id, the nullable int16-length client id and the header's tag section."""
    r = BoundedReader(frame, 8)
    n = r.int16()
    if n > 0:
        r._take(n)
    r.skip_tags()
    return r.pos


def response_body_offset(frame: bytes) -> int:
    """Where the body of a flexible response (header v1) starts: after the correlation id and
    the header's tag section. `frame` is the response without its size prefix."""
    r = BoundedReader(frame, 4)
    r.skip_tags()
    return r.pos


def request_frame(api_key: int, version: int, correlation: int, client_id: str, body: bytes) -> bytes:
    """A whole request (size prefix, header v2 with no tags, `body`), as a client sends it."""
    cid = client_id.encode()
    frame = struct.pack(">hhih", api_key, version, correlation, len(cid)) + cid + NO_TAGS + body
    return INT32.pack(len(frame)) + frame


# --- the shapes both API families share ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WireAssignor:
    """One assignor a member offers, with the versions it reads and its own metadata
    (KIP-848's `Assignor` struct; the Connect draft reuses it)."""

    name: str
    minimum_version: int
    maximum_version: int
    reason: int
    metadata_version: int
    metadata: bytes


def read_assignor(r: BoundedReader) -> WireAssignor:
    """`Assignor => Name string, MinimumVersion int16, MaximumVersion int16, Reason int8,
    MetadataVersion int16, Metadata bytes, TAG_BUFFER`"""
    a = WireAssignor(r.string(), r.int16(), r.int16(), r.int8(), r.int16(), r.bytes_())
    r.skip_tags()
    return a


def write_assignor(a: WireAssignor) -> bytes:
    return b"".join(
        (
            string(a.name),
            INT16.pack(a.minimum_version),
            INT16.pack(a.maximum_version),
            INT8.pack(a.reason),
            INT16.pack(a.metadata_version),
            bytes_(a.metadata),
            NO_TAGS,
        )
    )


def read_member_request(r: BoundedReader) -> tuple[str, str, int]:
    """The PrepareAssignment request body before its tags: GroupId, MemberId, MemberEpoch."""
    return r.string(), r.string(), r.int32()


def write_member_request(group_id: str, member_id: str, member_epoch: int) -> bytes:
    """A whole PrepareAssignment request body (GroupId, MemberId, MemberEpoch, no tags)."""
    return string(group_id) + string(member_id) + INT32.pack(member_epoch) + NO_TAGS


def read_install_head(r: BoundedReader) -> tuple[str, str, int, int, int, int]:
    """An InstallAssignment request up to its members: GroupId, MemberId, MemberEpoch,
    GroupEpoch, Error (int8) and the members' count (not null)."""
    head = r.string(), r.string(), r.int32(), r.int32(), r.int8()
    n = r.array_count()
    if n < 0:
        raise MalformedExtension("null members array")
    return (*head, n)


def write_install_head(
    group_id: str, member_id: str, member_epoch: int, group_epoch: int, error: int, members: int
) -> list[bytes]:
    return [
        string(group_id),
        string(member_id),
        INT32.pack(member_epoch),
        INT32.pack(group_epoch),
        INT8.pack(error),
        count(members),
    ]


def read_prepare_response_head(r: BoundedReader) -> tuple[int, int, str | None, int, str]:
    """A PrepareAssignment response up to its members: ThrottleTimeMs, ErrorCode, ErrorMessage,
    GroupEpoch, AssignorName."""
    return r.int32(), r.int16(), r.nullable_string(), r.int32(), r.string()


def write_prepare_response_head(
    throttle_time_ms: int, error_code: int, error_message: str | None, group_epoch: int, assignor_name: str
) -> list[bytes]:
    return [
        INT32.pack(throttle_time_ms),
        INT16.pack(error_code),
        string(error_message),
        INT32.pack(group_epoch),
        string(assignor_name),
    ]


def read_install_response(r: BoundedReader) -> tuple[int, int, str | None]:
    """A whole InstallAssignment response: (ThrottleTimeMs, ErrorCode, ErrorMessage)."""
    out = r.int32(), r.int16(), r.nullable_string()
    r.skip_tags()
    return out


def write_install_response(throttle_time_ms: int, error_code: int, error_message: str | None) -> bytes:
    return INT32.pack(throttle_time_ms) + INT16.pack(error_code) + string(error_message) + NO_TAGS
