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

This module only knows bytes: it reads and writes those shapes with the reader and writer every
extension API shares (`protocol.extension_wire`), bounded by the frame (an array count larger
than the bytes left is malformed, as `length_guard` does for kio's schemas).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from protocol import extension_wire as ew
from protocol.extension_wire import BoundedReader as BoundedReader
from protocol.extension_wire import MalformedExtension as MalformedExtension
from protocol.extension_wire import body_offset as body_offset
from protocol.extension_wire import response_body_offset as response_body_offset
from protocol.extension_wire import tagged as tagged

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

WireClientAssignor = ew.WireAssignor
"""One entry of the heartbeat's client-assignor list (KIP-848 `Assignor`)."""


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


def _topic_partitions(r: BoundedReader) -> WireTopicPartitions:
    tp = WireTopicPartitions(r.uuid(), r.int32_array())
    r.skip_tags()
    return tp


def _topic_partitions_array(r: BoundedReader) -> tuple[WireTopicPartitions, ...]:
    n = r.array_count()
    if n < 0:
        raise MalformedExtension("null topic-partitions array")
    return tuple(_topic_partitions(r) for _ in range(n))


def heartbeat_tags(frame: bytes, body_offset: int, version: int) -> dict[int, tuple[int, int]]:
    """The top-level tagged fields of a ConsumerGroupHeartbeat v0/v1 request body."""
    r = BoundedReader(frame, heartbeat_tags_start(frame, body_offset, version))
    tags = r.skip_tags()
    if r.pos != len(frame):
        raise MalformedExtension(f"{len(frame) - r.pos} bytes after the request body")
    return tags


def heartbeat_tags_start(frame: bytes, body_offset: int, version: int) -> int:
    """Where the top-level tag section of a ConsumerGroupHeartbeat v0/v1 request body starts.

    kio decodes the known fields but refuses unknown tags; this walks the same body (fields in
    Kafka's order, `version` >= 1 adds SubscribedTopicRegex) to the tag section."""
    r = BoundedReader(frame, body_offset)
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
    r = BoundedReader(frame, span[0], span[1])
    n = r.array_count()
    if n < 0:
        return None
    out = [ew.read_assignor(r) for _ in range(n)]
    if r.pos != r.end:
        raise MalformedExtension("trailing bytes in the client-assignor field")
    return tuple(out)


def read_prepare_request(frame: bytes, body_offset: int) -> PrepareAssignmentRequest:
    r = BoundedReader(frame, body_offset)
    req = PrepareAssignmentRequest(*ew.read_member_request(r))
    r.skip_tags()
    return req


def read_install_request(frame: bytes, body_offset: int) -> InstallAssignmentRequest:
    r = BoundedReader(frame, body_offset)
    group_id, member_id, member_epoch, group_epoch, error, n = ew.read_install_head(r)
    members = []
    for _ in range(n):
        mid = r.string()
        parts = _topic_partitions_array(r)
        members.append(InstalledMember(mid, parts, r.int32(), r.bytes_()))
        r.skip_tags()
    r.skip_tags()
    return InstallAssignmentRequest(group_id, member_id, member_epoch, group_epoch, error, tuple(members))


# --- writing ---------------------------------------------------------------------------------


def _tp_array(tps: tuple[WireTopicPartitions, ...]) -> bytes:
    out = [ew.count(len(tps))]
    for tp in tps:
        out.append(tp.topic_id.bytes)
        out.append(ew.count(len(tp.partitions)))
        out.extend(ew.INT32.pack(p) for p in tp.partitions)
        out.append(b"\x00")
    return b"".join(out)


def client_assignors_field(assignors: tuple[WireClientAssignor, ...]) -> bytes:
    """The data of the heartbeat request's CLIENT_ASSIGNORS_TAG field."""
    return ew.count(len(assignors)) + b"".join(ew.write_assignor(a) for a in assignors)


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
    return ew.INT16.pack(version) + ew.bytes_(metadata)


def read_assignment_metadata(body: bytes, tags_offset: int) -> tuple[int, bytes] | None:
    """(version, metadata) of ASSIGNMENT_METADATA in a response's tag section (clients)."""
    span = BoundedReader(body, tags_offset).skip_tags().get(ASSIGNMENT_METADATA_TAG)
    if span is None:
        return None
    r = BoundedReader(body, span[0], span[1])
    return r.int16(), r.bytes_()


def compute_assignment_field(group_epoch: int) -> bytes:
    """The data of the heartbeat response's COMPUTE_ASSIGNMENT_TAG field."""
    return ew.INT32.pack(group_epoch)


def read_compute_assignment(body: bytes, tags_offset: int) -> int | None:
    """The epoch of COMPUTE_ASSIGNMENT in a response's tag section at `tags_offset` (clients)."""
    span = BoundedReader(body, tags_offset).skip_tags().get(COMPUTE_ASSIGNMENT_TAG)
    if span is None:
        return None
    return int(ew.INT32.unpack_from(body, span[0])[0]) if span[1] - span[0] == 4 else None


def write_prepare_request(req: PrepareAssignmentRequest) -> bytes:
    return ew.write_member_request(req.group_id, req.member_id, req.member_epoch)


def write_install_request(req: InstallAssignmentRequest) -> bytes:
    out = ew.write_install_head(
        req.group_id, req.member_id, req.member_epoch, req.group_epoch, req.error, len(req.members)
    )
    for m in req.members:
        out += [
            ew.string(m.member_id),
            _tp_array(m.partitions),
            ew.INT32.pack(m.metadata_version),
            ew.bytes_(m.metadata),
        ]
        out.append(b"\x00")
    out.append(b"\x00")
    return b"".join(out)


def write_prepare_response(resp: PrepareAssignmentResponse) -> bytes:
    out = ew.write_prepare_response_head(
        resp.throttle_time_ms, resp.error_code, resp.error_message, resp.group_epoch, resp.assignor_name
    )
    out.append(ew.count(len(resp.members)))
    for m in resp.members:
        out += [
            ew.string(m.member_id),
            ew.INT32.pack(m.member_epoch),
            ew.string(m.instance_id),
            ew.string(m.rack_id),
            ew.count(len(m.subscribed_topic_ids)),
            *(t.bytes for t in m.subscribed_topic_ids),
            # Assignor (a struct field: its own tag section)
            ew.INT8.pack(m.reason),
            ew.INT16.pack(m.metadata_version),
            ew.bytes_(m.metadata),
            b"\x00",
            _tp_array(m.target),
            b"\x00",
        ]
    out.append(ew.count(len(resp.topics)))
    for t in resp.topics:
        out += [t.topic_id.bytes, ew.string(t.topic_name), ew.INT32.pack(t.num_partitions), b"\x00"]
    out.append(b"\x00")
    return b"".join(out)


def read_prepare_response(body: bytes, offset: int = 0) -> PrepareAssignmentResponse:
    r = BoundedReader(body, offset)
    throttle, code, message, epoch, assignor = ew.read_prepare_response_head(r)
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
    return ew.write_install_response(resp.throttle_time_ms, resp.error_code, resp.error_message)


def read_install_response(body: bytes, offset: int = 0) -> InstallAssignmentResponse:
    throttle, code, message = ew.read_install_response(BoundedReader(body, offset))
    return InstallAssignmentResponse(code, message, throttle)


# --- the client's side of the heartbeat ------------------------------------------------------


def heartbeat_response_tags_start(frame: bytes, body_offset: int) -> int:
    """Where the top-level tag section of a ConsumerGroupHeartbeat v0/v1 response body starts.

    kio refuses the unknown tags groupshift adds (COMPUTE_ASSIGNMENT, ASSIGNMENT_METADATA); a
    client walks the body (Kafka's field order) to them, reads them with `read_compute_assignment`
    and `read_assignment_metadata`, and decodes the rest with the tag section emptied."""
    r = BoundedReader(frame, body_offset)
    r.int32()  # ThrottleTimeMs
    r.int16()  # ErrorCode
    r.nullable_string()  # ErrorMessage
    r.nullable_string()  # MemberId
    r.int32()  # MemberEpoch
    r.int32()  # HeartbeatIntervalMs
    if r.present():  # Assignment: a nullable struct, -1 when null
        _topic_partitions_array(r)
        r.skip_tags()
    return r.pos


def without_top_level_tags(frame: bytes, tags_offset: int) -> bytes:
    """`frame` with its last, top-level tag section (at `tags_offset`) emptied, for kio."""
    r = BoundedReader(frame, tags_offset)
    r.skip_tags()
    if r.pos != len(frame):
        raise MalformedExtension(f"{len(frame) - r.pos} bytes after the response body")
    return frame[:tags_offset] + b"\x00"
