"""The wire of client-side assignors (KIP-848 as designed, "Client-Side Assignor"; never shipped).

KIP-848's design lets one member compute a consumer group's target assignment with its own
assignor, driven by the coordinator: the member lists its client assignors in its heartbeat, the
coordinator asks the chosen member to compute (COMPUTE_ASSIGNMENT), the member reads the group with
ConsumerGroupPrepareAssignment and installs the result with ConsumerGroupInstallAssignment. Kafka
dropped the feature (KAFKA-18327), so none of this exists in Kafka's schemas or in kio; groupshift
carries it as follows (docs/client-side-assignors.md is the reference):

* the heartbeat's `ClientAssignors` list is a top-level tagged field of the
  ConsumerGroupHeartbeat request (tag `CLIENT_ASSIGNORS_TAG`, far above any tag Kafka uses): Kafka's
  brokers and kio skip unknown tags, so a frame carrying it is a valid Kafka request;
* COMPUTE_ASSIGNMENT is a top-level tagged field of the ConsumerGroupHeartbeat response (tag
  `COMPUTE_ASSIGNMENT_TAG`, an int32: the group epoch to compute for), which Kafka's clients skip;
* PrepareAssignment and InstallAssignment are two flexible (v0) APIs with keys outside Kafka's
  range (`PREPARE_ASSIGNMENT_KEY`, `INSTALL_ASSIGNMENT_KEY`), with KIP-848's field lists.

This module only knows bytes: it reads and writes those shapes, bounded by the frame (an array
count larger than the bytes left is malformed, as `length_guard` does for kio's schemas).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from protocol.varint import encode_uvarint, read_uvarint

CONSUMER_GROUP_HEARTBEAT_KEY = 68
CLIENT_ASSIGNORS_TAG = 10000
"""ConsumerGroupHeartbeat request tag of the client-assignor list (Kafka's tags are below 10)."""
COMPUTE_ASSIGNMENT_TAG = 10000
"""ConsumerGroupHeartbeat response tag asking the member to compute the target for an epoch."""
ASSIGNMENT_METADATA_TAG = 10001
"""ConsumerGroupHeartbeat response tag: the assignor's metadata for the member (with an
assignment): {MetadataVersion int16, MetadataBytes compact bytes}."""
PREPARE_ASSIGNMENT_KEY = 32000
"""ConsumerGroupPrepareAssignment: Kafka's keys are below 100; 32000+ is groupshift's."""
INSTALL_ASSIGNMENT_KEY = 32001
"""ConsumerGroupInstallAssignment."""
EXTENSION_NAMES = {
    PREPARE_ASSIGNMENT_KEY: "ConsumerGroupPrepareAssignment",
    INSTALL_ASSIGNMENT_KEY: "ConsumerGroupInstallAssignment",
}
"""groupshift's extension APIs by key (the names KIP-848 gave them)."""
EXTENSION_VERSION = 0
"""The one version of each extension API (flexible: header v2 / response header v1)."""
CLASSIC_METADATA_VERSION = -1
"""The metadata version of a classic member's protocol metadata (KIP-848 "online upgrade")."""

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class MalformedExtension(ValueError):
    """The bytes are not a well-formed extension field or request."""


@dataclass(frozen=True, slots=True)
class WireClientAssignor:
    """One entry of the heartbeat's client-assignor list (KIP-848 `Assignor`)."""

    name: str
    minimum_version: int
    maximum_version: int
    reason: int
    metadata_version: int
    metadata: bytes


@dataclass(frozen=True, slots=True)
class WireTopicPartitions:
    topic_id: uuid.UUID
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PrepareAssignmentRequest:
    group_id: str
    member_id: str
    member_epoch: int


@dataclass(frozen=True, slots=True)
class PreparedMember:
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_ids: tuple[uuid.UUID, ...]
    reason: int
    metadata_version: int
    metadata: bytes
    target: tuple[WireTopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class PreparedTopic:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int


@dataclass(frozen=True, slots=True)
class PrepareAssignmentResponse:
    error_code: int = 0
    error_message: str | None = None
    group_epoch: int = -1
    assignor_name: str = ""
    members: tuple[PreparedMember, ...] = ()
    topics: tuple[PreparedTopic, ...] = ()
    throttle_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class InstalledMember:
    member_id: str
    partitions: tuple[WireTopicPartitions, ...]
    metadata_version: int
    metadata: bytes


@dataclass(frozen=True, slots=True)
class InstallAssignmentRequest:
    group_id: str
    member_id: str
    member_epoch: int
    group_epoch: int
    error: int
    members: tuple[InstalledMember, ...]


@dataclass(frozen=True, slots=True)
class InstallAssignmentResponse:
    error_code: int = 0
    error_message: str | None = None
    throttle_time_ms: int = 0


# --- reading ---------------------------------------------------------------------------------


class _Reader:
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
        return int(_I8.unpack_from(self.buf, self._take(1))[0])

    def int16(self) -> int:
        return int(_I16.unpack_from(self.buf, self._take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack_from(self.buf, self._take(4))[0])

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

    def skip_tags(self) -> dict[int, tuple[int, int]]:
        """Reads a tagged-field section: tag -> (start, end) of its data."""
        tags: dict[int, tuple[int, int]] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            at = self._take(size)
            tags[tag] = (at, at + size)
        return tags


BoundedReader = _Reader
"""The bounded cursor, for the other extension codecs (`protocol.connect_wire`)."""


def _topic_partitions(r: _Reader) -> WireTopicPartitions:
    tp = WireTopicPartitions(r.uuid(), r.int32_array())
    r.skip_tags()
    return tp


def _topic_partitions_array(r: _Reader) -> tuple[WireTopicPartitions, ...]:
    n = r.array_count()
    if n < 0:
        raise MalformedExtension("null topic-partitions array")
    return tuple(_topic_partitions(r) for _ in range(n))


def heartbeat_tags(frame: bytes, body_offset: int, version: int) -> dict[int, tuple[int, int]]:
    """The top-level tagged fields of a ConsumerGroupHeartbeat v0/v1 request body."""
    r = _Reader(frame, heartbeat_tags_start(frame, body_offset, version))
    tags = r.skip_tags()
    if r.pos != len(frame):
        raise MalformedExtension(f"{len(frame) - r.pos} bytes after the request body")
    return tags


def heartbeat_tags_start(frame: bytes, body_offset: int, version: int) -> int:
    """Where the top-level tag section of a ConsumerGroupHeartbeat v0/v1 request body starts.

    kio decodes the known fields but refuses unknown tags; this walks the same body (fields in
    Kafka's order, `version` >= 1 adds SubscribedTopicRegex) to the tag section."""
    r = _Reader(frame, body_offset)
    r.string()  # GroupId
    r.string()  # MemberId
    r.int32()  # MemberEpoch
    r.nullable_string()  # InstanceId
    r.nullable_string()  # RackId
    r.int32()  # RebalanceTimeoutMs
    n = r.array_count()  # SubscribedTopicNames
    for _ in range(n):
        r.string()
    if version >= 1:
        r.nullable_string()  # SubscribedTopicRegex
    r.nullable_string()  # ServerAssignor
    n = r.array_count()  # TopicPartitions
    for _ in range(n):
        _topic_partitions(r)
    return r.pos


def read_client_assignors(
    frame: bytes, body_offset: int, version: int
) -> tuple[WireClientAssignor, ...] | None:
    """The heartbeat's client-assignor list, or None when the tag is absent (null: unchanged)."""
    span = heartbeat_tags(frame, body_offset, version).get(CLIENT_ASSIGNORS_TAG)
    if span is None:
        return None
    r = _Reader(frame, span[0], span[1])
    n = r.array_count()
    if n < 0:
        return None
    out = []
    for _ in range(n):
        out.append(
            WireClientAssignor(
                name=r.string(),
                minimum_version=r.int16(),
                maximum_version=r.int16(),
                reason=r.int8(),
                metadata_version=r.int16(),
                metadata=r.bytes_(),
            )
        )
        r.skip_tags()
    if r.pos != r.end:
        raise MalformedExtension("trailing bytes in the client-assignor field")
    return tuple(out)


def body_offset(frame: bytes) -> int:
    """Where the body of a flexible request (header v2) starts: after api key, version,
    correlation id, the nullable int16-length client id and the header's tag section."""
    r = _Reader(frame, 8)
    n = r.int16()
    if n > 0:
        r._take(n)
    r.skip_tags()
    return r.pos


def read_prepare_request(frame: bytes, body_offset: int) -> PrepareAssignmentRequest:
    r = _Reader(frame, body_offset)
    req = PrepareAssignmentRequest(r.string(), r.string(), r.int32())
    r.skip_tags()
    return req


def read_install_request(frame: bytes, body_offset: int) -> InstallAssignmentRequest:
    r = _Reader(frame, body_offset)
    group_id, member_id, member_epoch, group_epoch, error = (
        r.string(),
        r.string(),
        r.int32(),
        r.int32(),
        r.int8(),
    )
    n = r.array_count()
    if n < 0:
        raise MalformedExtension("null members array")
    members = []
    for _ in range(n):
        mid = r.string()
        parts = _topic_partitions_array(r)
        members.append(InstalledMember(mid, parts, r.int32(), r.bytes_()))
        r.skip_tags()
    r.skip_tags()
    return InstallAssignmentRequest(group_id, member_id, member_epoch, group_epoch, error, tuple(members))


# --- writing ---------------------------------------------------------------------------------


def _string(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode()
    return encode_uvarint(len(b) + 1) + b


def _bytes(b: bytes) -> bytes:
    return encode_uvarint(len(b) + 1) + b


def _count(n: int) -> bytes:
    return encode_uvarint(n + 1)


def _tp_array(tps: tuple[WireTopicPartitions, ...]) -> bytes:
    out = [_count(len(tps))]
    for tp in tps:
        out.append(tp.topic_id.bytes)
        out.append(_count(len(tp.partitions)))
        out.extend(_I32.pack(p) for p in tp.partitions)
        out.append(b"\x00")
    return b"".join(out)


def tagged(fields: dict[int, bytes]) -> bytes:
    """A tagged-field section (tags ascending, as Kafka writes them)."""
    out = [encode_uvarint(len(fields))]
    for tag in sorted(fields):
        data = fields[tag]
        out += [encode_uvarint(tag), encode_uvarint(len(data)), data]
    return b"".join(out)


def client_assignors_field(assignors: tuple[WireClientAssignor, ...]) -> bytes:
    """The data of the heartbeat request's CLIENT_ASSIGNORS_TAG field."""
    out = [_count(len(assignors))]
    for a in assignors:
        out += [
            _string(a.name),
            _I16.pack(a.minimum_version),
            _I16.pack(a.maximum_version),
            _I8.pack(a.reason),
            _I16.pack(a.metadata_version),
            _bytes(a.metadata),
            b"\x00",
        ]
    return b"".join(out)


def with_top_level_tag(body: bytes, tag: int, data: bytes) -> bytes:
    """`body` (a flexible body whose top-level tag section is empty, its last byte) with one tag."""
    return with_top_level_tags(body, {tag: data})


def with_top_level_tags(body: bytes, fields: dict[int, bytes]) -> bytes:
    """`body` (a flexible body whose top-level tag section is empty, its last byte) with `fields`.

    ConsumerGroupHeartbeat request and response bodies have no top-level tagged field in Kafka's
    schemas, so an encoded body ends with the single byte 0 (no tags)."""
    if not body or body[-1] != 0:
        raise ValueError("the body does not end with an empty tagged-field section")
    return body[:-1] + tagged(fields)


def assignment_metadata_field(version: int, metadata: bytes) -> bytes:
    """The data of the heartbeat response's ASSIGNMENT_METADATA_TAG field."""
    return _I16.pack(version) + _bytes(metadata)


def read_assignment_metadata(body: bytes, tags_offset: int) -> tuple[int, bytes] | None:
    """(version, metadata) of ASSIGNMENT_METADATA in a response's tag section (clients)."""
    span = _Reader(body, tags_offset).skip_tags().get(ASSIGNMENT_METADATA_TAG)
    if span is None:
        return None
    r = _Reader(body, span[0], span[1])
    return r.int16(), r.bytes_()


def compute_assignment_field(group_epoch: int) -> bytes:
    """The data of the heartbeat response's COMPUTE_ASSIGNMENT_TAG field."""
    return _I32.pack(group_epoch)


def read_compute_assignment(body: bytes, tags_offset: int) -> int | None:
    """The epoch of COMPUTE_ASSIGNMENT in a response's tag section at `tags_offset` (clients)."""
    span = _Reader(body, tags_offset).skip_tags().get(COMPUTE_ASSIGNMENT_TAG)
    if span is None:
        return None
    return int(_I32.unpack_from(body, span[0])[0]) if span[1] - span[0] == 4 else None


def write_prepare_request(req: PrepareAssignmentRequest) -> bytes:
    return _string(req.group_id) + _string(req.member_id) + _I32.pack(req.member_epoch) + b"\x00"


def write_install_request(req: InstallAssignmentRequest) -> bytes:
    out = [
        _string(req.group_id),
        _string(req.member_id),
        _I32.pack(req.member_epoch),
        _I32.pack(req.group_epoch),
        _I8.pack(req.error),
        _count(len(req.members)),
    ]
    for m in req.members:
        out += [
            _string(m.member_id),
            _tp_array(m.partitions),
            _I32.pack(m.metadata_version),
            _bytes(m.metadata),
        ]
        out.append(b"\x00")
    out.append(b"\x00")
    return b"".join(out)


def write_prepare_response(resp: PrepareAssignmentResponse) -> bytes:
    out = [
        _I32.pack(resp.throttle_time_ms),
        _I16.pack(resp.error_code),
        _string(resp.error_message),
        _I32.pack(resp.group_epoch),
        _string(resp.assignor_name),
        _count(len(resp.members)),
    ]
    for m in resp.members:
        out += [
            _string(m.member_id),
            _I32.pack(m.member_epoch),
            _string(m.instance_id),
            _string(m.rack_id),
            _count(len(m.subscribed_topic_ids)),
            *(t.bytes for t in m.subscribed_topic_ids),
            # Assignor (a struct field: its own tag section)
            _I8.pack(m.reason),
            _I16.pack(m.metadata_version),
            _bytes(m.metadata),
            b"\x00",
            _tp_array(m.target),
            b"\x00",
        ]
    out.append(_count(len(resp.topics)))
    for t in resp.topics:
        out += [t.topic_id.bytes, _string(t.topic_name), _I32.pack(t.num_partitions), b"\x00"]
    out.append(b"\x00")
    return b"".join(out)


def read_prepare_response(body: bytes, offset: int = 0) -> PrepareAssignmentResponse:
    r = _Reader(body, offset)
    throttle, code, message, epoch, assignor = (
        r.int32(),
        r.int16(),
        r.nullable_string(),
        r.int32(),
        r.string(),
    )
    members = []
    for _ in range(max(r.array_count(), 0)):
        mid, mepoch, iid, rack = r.string(), r.int32(), r.nullable_string(), r.nullable_string()
        ids = tuple(r.uuid() for _ in range(max(r.array_count(), 0)))
        reason, mversion, meta = r.int8(), r.int16(), r.bytes_()
        r.skip_tags()
        target = _topic_partitions_array(r)
        r.skip_tags()
        members.append(PreparedMember(mid, mepoch, iid, rack, ids, reason, mversion, meta, target))
    topics = []
    for _ in range(max(r.array_count(), 0)):
        topics.append(PreparedTopic(r.uuid(), r.string(), r.int32()))
        r.skip_tags()
    r.skip_tags()
    return PrepareAssignmentResponse(code, message, epoch, assignor, tuple(members), tuple(topics), throttle)


def write_install_response(resp: InstallAssignmentResponse) -> bytes:
    return (
        _I32.pack(resp.throttle_time_ms) + _I16.pack(resp.error_code) + _string(resp.error_message) + b"\x00"
    )


def read_install_response(body: bytes, offset: int = 0) -> InstallAssignmentResponse:
    r = _Reader(body, offset)
    throttle, code, message = r.int32(), r.int16(), r.nullable_string()
    r.skip_tags()
    return InstallAssignmentResponse(code, message, throttle)


# --- the client's side of the heartbeat ------------------------------------------------------


def response_body_offset(frame: bytes) -> int:
    """Where the body of a flexible response (header v1) starts: after the correlation id and
    the header's tag section. `frame` is the response without its size prefix."""
    r = _Reader(frame, 4)
    r.skip_tags()
    return r.pos


def heartbeat_response_tags_start(frame: bytes, body_offset: int) -> int:
    """Where the top-level tag section of a ConsumerGroupHeartbeat v0/v1 response body starts.

    kio refuses the unknown tags groupshift adds (COMPUTE_ASSIGNMENT, ASSIGNMENT_METADATA); a
    client walks the body (Kafka's field order) to them, reads them with `read_compute_assignment`
    and `read_assignment_metadata`, and decodes the rest with the tag section emptied."""
    r = _Reader(frame, body_offset)
    r.int32()  # ThrottleTimeMs
    r.int16()  # ErrorCode
    r.nullable_string()  # ErrorMessage
    r.nullable_string()  # MemberId
    r.int32()  # MemberEpoch
    r.int32()  # HeartbeatIntervalMs
    if r.int8() >= 0:  # Assignment: a nullable struct, -1 when null
        _topic_partitions_array(r)
        r.skip_tags()
    return r.pos


def without_top_level_tags(frame: bytes, tags_offset: int) -> bytes:
    """`frame` with its last, top-level tag section (at `tags_offset`) emptied, for kio."""
    r = _Reader(frame, tags_offset)
    r.skip_tags()
    if r.pos != len(frame):
        raise MalformedExtension(f"{len(frame) - r.pos} bytes after the response body")
    return frame[:tags_offset] + b"\x00"
