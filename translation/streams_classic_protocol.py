"""Kafka Streams' own assignment protocol inside a classic group: the `SubscriptionInfo` a
Streams instance puts in its ConsumerProtocolSubscription's user data (JoinGroup metadata) and
the `AssignmentInfo` the group leader's `StreamsPartitionAssignor` puts in each
ConsumerProtocolAssignment's user data (SyncGroup), versions 1 to 11 (Kafka Streams
`SubscriptionInfo`, `SubscriptionInfoData.json`, `AssignmentInfo`, `ConsumerProtocolUtils`,
`StreamsAssignmentProtocolVersions`; 11 is still the latest in Kafka Streams 4.4). Such a group
has protocol type `consumer` and protocol name `stream` (the assignor's name).

groupshift reads these to show a classic Streams group's members with their tasks and to tell
whether the group could become a streams group online (issue 31, part 3); the encoders give the
same bytes back, so that what is decoded is exactly what was sent.

    SubscriptionInfo (Kafka's generated, non-flexible message; every field big-endian):
      version int32, latestSupportedVersion int32 (v3+; -1 before), processId uuid,
      prevTasks []TaskId, standbyTasks []TaskId (v1-6; TaskId = int32 subtopology, int32 partition),
      userEndPoint bytes (v2+, "host:port" or empty),
      taskOffsetSums (v7+): v7-9 []{int32 subtopology, []{int32 partition, int64 offsetSum}},
                            v10+ []{int32 subtopology, int32 partition, int64 offsetSum,
                                    namedTopology string?},
      uniqueField int8 (v8+), errorCode int32 (v9+), clientTags []{key bytes, value bytes} (v11+)

    AssignmentInfo (hand-written with Java's DataOutputStream; strings are writeUTF, an unsigned
    16-bit length then modified UTF-8):
      version int32, commonlySupportedVersion int32 (v3+),
      activeTasks []TaskId, standbyTasks []{TaskId, []{topic, int32 partition}},
      v2-4: partitionsByHost []{host, int32 port, []{topic, int32 partition}},
      v5:   topic dictionary []{int32 index, topic}, then partitionsByHost with topic indexes,
      v6+:  the dictionary, partitionsByHost, standbyPartitionsByHost (both with indexes),
      errorCode int32 (v4+), nextRebalanceMs int64 (v7+).
      A TaskId here is int32 subtopology, int32 partition, and from v10 an int32 count of UTF-16
      code units then the named topology's chars (0: none).

Version probing: a member whose Streams is newer than the leader's sends a version above the
leader's latest; the leader reads only the first two fields. Versions above 11 are decoded the
same way here (`future` holds the rest, unread), so a newer member is reported, not refused.
Bytes that are not a message of the version they announce raise `StreamsProtocolError` (a
`SchemaError`) with the reason; so do encodings Kafka would never write and that could not come
back byte-identical (trailing bytes, a duplicated dictionary entry, an unknown topic index).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from translation.bounded_reader import BoundedReader
from translation.embedded_protocol import SchemaError, Subscription, parse_subscription

PROTOCOL_TYPE = "consumer"
# StreamsPartitionAssignor.name(): the only protocol name a Kafka Streams instance offers.
STREAMS_PROTOCOL_NAME = "stream"
LATEST_SUPPORTED_VERSION = 11
EARLIEST_PROBEABLE_VERSION = 3
MIN_OFFSET_SUM_VERSION = 7
MIN_NAMED_TOPOLOGY_VERSION = 10
UNKNOWN = -1
# Task.LATEST_OFFSET: the offset sum a member reports for a task it ran as active.
LATEST_OFFSET = -2
# SubscriptionInfo.UNKNOWN_OFFSET_SUM: a standby task of a pre-7 subscription, as an offset sum.
UNKNOWN_OFFSET_SUM = -3
NO_NEXT_REBALANCE = 2**63 - 1


class StreamsProtocolError(SchemaError):
    """The bytes are not a Kafka Streams SubscriptionInfo / AssignmentInfo of their version."""


@dataclass(frozen=True, slots=True, order=True)
class TaskId:
    """A Streams task: subtopology (Kafka's topic group id) and partition, with the named
    topology of the long-deprecated NamedTopology feature (v10+ encodings carry the field)."""

    subtopology: int
    partition: int
    topology: str | None = None

    def __str__(self) -> str:
        base = f"{self.subtopology}_{self.partition}"
        return base if self.topology is None else f"{self.topology}__{base}"


@dataclass(frozen=True, slots=True)
class TaskOffsetSum:
    task: TaskId
    offset_sum: int


@dataclass(frozen=True, slots=True)
class SubscriptionInfo:
    version: int
    latest_supported_version: int
    process_id: uuid.UUID
    prev_tasks: tuple[TaskId, ...] = ()
    standby_tasks: tuple[TaskId, ...] = ()
    user_endpoint: bytes = b""
    task_offset_sums: tuple[TaskOffsetSum, ...] = ()
    unique_field: int = 0
    error_code: int = 0
    client_tags: tuple[tuple[bytes, bytes], ...] = ()
    # Version probing: a version above LATEST_SUPPORTED_VERSION; the bytes after the first two
    # fields (process id included), unread.
    future: bytes | None = None

    @property
    def is_future(self) -> bool:
        return self.future is not None

    @property
    def endpoint(self) -> str | None:
        """The instance's `application.server` (host:port), None when not set."""
        if not self.user_endpoint:
            return None
        return self.user_endpoint.decode("utf-8", errors="replace")

    @property
    def active_tasks(self) -> tuple[TaskId, ...]:
        """The tasks the instance ran as active before this rebalance (prevTasks; from v7 the
        tasks whose offset sum is Task.LATEST_OFFSET)."""
        if self.version < MIN_OFFSET_SUM_VERSION:
            return self.prev_tasks
        return tuple(t.task for t in self.task_offset_sums if t.offset_sum == LATEST_OFFSET)

    @property
    def standby_or_state_tasks(self) -> tuple[TaskId, ...]:
        """The tasks the instance holds state of without running them (standbyTasks; from v7
        every other task of the offset sums, standbys and leftover state directories alike)."""
        if self.version < MIN_OFFSET_SUM_VERSION:
            return self.standby_tasks
        return tuple(t.task for t in self.task_offset_sums if t.offset_sum != LATEST_OFFSET)

    @property
    def tags(self) -> dict[str, str]:
        return {
            k.decode("utf-8", errors="replace"): v.decode("utf-8", errors="replace")
            for k, v in self.client_tags
        }


@dataclass(frozen=True, slots=True)
class HostPartitions:
    """One `application.server` endpoint and the partitions its instance serves."""

    host: str
    port: int
    partitions: tuple[tuple[str, int], ...]

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class AssignmentInfo:
    version: int
    commonly_supported_version: int
    active_tasks: tuple[TaskId, ...] = ()
    standby_tasks: tuple[tuple[TaskId, tuple[tuple[str, int], ...]], ...] = ()
    partitions_by_host: tuple[HostPartitions, ...] = ()
    standby_partitions_by_host: tuple[HostPartitions, ...] = ()
    error_code: int = 0
    next_rebalance_ms: int = NO_NEXT_REBALANCE
    # v5+: the topic dictionary as written (index, topic), so the bytes come back identical;
    # empty means "build one in order of first use" when encoding a new assignment.
    topic_dictionary: tuple[tuple[int, str], ...] = field(default=(), compare=True)
    future: bytes | None = None

    @property
    def is_future(self) -> bool:
        return self.future is not None


# -- reading -------------------------------------------------------------------------------------

_B = struct.Struct(">b")
_H = struct.Struct(">H")
_h = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")


class _Reader(BoundedReader):
    __slots__ = ()
    error = StreamsProtocolError

    def count(self, min_element: int, name: str) -> int:
        n = self.int32()
        if n < 0:
            raise self.fail(f"negative {name} count {n}")
        if n * min_element > len(self.buf) - self.pos:
            raise self.fail(f"{name} count {n} exceeds the remaining {len(self.buf) - self.pos} bytes")
        return n

    def bytes_(self, name: str) -> bytes:
        n = self.int32()
        if n < 0:
            raise self.fail(f"null or negative length {n} for {name}")
        return self.take(n)

    def kafka_string(self, name: str) -> str | None:
        n: int = _h.unpack(self.take(2))[0]
        if n == -1:
            return None
        if n < 0:
            raise self.fail(f"invalid length {n} for {name}")
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"{name} is not UTF-8: {e.reason}") from None

    def java_utf(self, name: str) -> str:
        n: int = _H.unpack(self.take(2))[0]
        raw = self.take(n)
        try:
            return _decode_modified_utf8(raw)
        except ValueError as e:
            raise self.fail(f"{name} is not Java modified UTF-8: {e}") from None

    def task_id(self, version: int) -> TaskId:
        subtopology, partition = self.int32(), self.int32()
        if version < MIN_NAMED_TOPOLOGY_VERSION:
            return TaskId(subtopology, partition)
        chars = self.count(2, "named-topology char")
        raw = self.take(2 * chars)
        return TaskId(subtopology, partition, raw.decode("utf-16-be", "surrogatepass") if chars else None)


def _decode_modified_utf8(raw: bytes) -> str:
    """Java's DataInput.readUTF, strict enough that writeUTF gives the same bytes back: NUL only
    as C0 80, characters above U+FFFF only as two 3-byte surrogates, no 4-byte sequences."""
    if b"\x00" in raw:
        raise ValueError("a raw NUL byte (Java writes C0 80)")
    text = raw.replace(b"\xc0\x80", b"\x00")
    if any(b >= 0xF0 for b in text) or b"\xc0" in text or b"\xc1" in text:
        raise ValueError("a byte Java's writeUTF never writes")
    # Surrogate pairs joined into the characters they stand for.
    s = (
        text.decode("utf-8", "surrogatepass")
        .encode("utf-16-be", "surrogatepass")
        .decode("utf-16-be", "surrogatepass")
    )
    if _encode_modified_utf8(s) != raw:
        raise ValueError("an overlong or non-canonical sequence")
    return s


def _encode_modified_utf8(s: str) -> bytes:
    # Characters above U+FFFF as their UTF-16 surrogate pair, each encoded on its own.
    out = bytearray()
    for ch in s:
        cp = ord(ch)
        if cp == 0:
            out += b"\xc0\x80"
        elif cp > 0xFFFF:
            hi, lo = divmod(cp - 0x10000, 0x400)
            out += chr(0xD800 + hi).encode("utf-8", "surrogatepass")
            out += chr(0xDC00 + lo).encode("utf-8", "surrogatepass")
        else:
            out += ch.encode("utf-8", "surrogatepass")
    return bytes(out)


def _check_versions(r: _Reader, version: int, latest: int) -> None:
    # SubscriptionInfo.validateVersions; AssignmentInfo refuses versions below 1 the same way.
    if version < 1:
        raise r.fail(f"version {version} is below 1")
    if latest == UNKNOWN and version > 2:
        raise r.fail(f"version {version} without a latest supported version (only 1 and 2 have none)")
    if latest != UNKNOWN and version > latest:
        raise r.fail(f"version {version} above its own latest supported version {latest}")


def decode_subscription_info(data: bytes) -> SubscriptionInfo:
    """A SubscriptionInfo from a ConsumerProtocolSubscription's user data."""
    r = _Reader(bytes(data), "Kafka Streams SubscriptionInfo")
    version = r.int32()
    if version < 1:
        raise r.fail(f"version {version} is below 1")
    latest = r.int32() if version >= 3 else UNKNOWN
    _check_versions(r, version, latest)
    if version > LATEST_SUPPORTED_VERSION:
        # Version probing: Kafka's leader reads these two fields and nothing else.
        return SubscriptionInfo(version, latest, uuid.UUID(int=0), future=r.take(len(r.buf) - r.pos))
    process_id = uuid.UUID(bytes=r.take(16))
    prev: tuple[TaskId, ...] = ()
    standby: tuple[TaskId, ...] = ()
    if version <= 6:
        prev = tuple(r.task_id(version) for _ in range(r.count(8, "prevTasks")))
        standby = tuple(r.task_id(version) for _ in range(r.count(8, "standbyTasks")))
    endpoint = r.bytes_("userEndPoint") if version >= 2 else b""
    sums: list[TaskOffsetSum] = []
    if version >= MIN_OFFSET_SUM_VERSION:
        for _ in range(r.count(4, "taskOffsetSums")):
            subtopology = r.int32()
            if version >= MIN_NAMED_TOPOLOGY_VERSION:
                partition, offset_sum = r.int32(), r.int64()
                topology = r.kafka_string("namedTopology")
                sums.append(TaskOffsetSum(TaskId(subtopology, partition, topology), offset_sum))
                continue
            n = r.count(12, "partitionToOffsetSum")
            if n == 0:
                raise r.fail(f"subtopology {subtopology} with no partitions (Streams never writes one)")
            if sums and sums[-1].task.subtopology == subtopology and sums[-1].task.topology is None:
                raise r.fail(f"subtopology {subtopology} in two adjacent groups (Streams writes one)")
            for _ in range(n):
                partition, offset_sum = r.int32(), r.int64()
                sums.append(TaskOffsetSum(TaskId(subtopology, partition), offset_sum))
    unique = r.int8() if version >= 8 else 0
    error = r.int32() if version >= 9 else 0
    tags: list[tuple[bytes, bytes]] = []
    if version >= 11:
        for _ in range(r.count(8, "clientTags")):
            tags.append((r.bytes_("client tag key"), r.bytes_("client tag value")))
    r.done()
    return SubscriptionInfo(
        version,
        latest,
        process_id,
        prev,
        standby,
        endpoint,
        tuple(sums),
        unique,
        error,
        tuple(tags),
    )


def decode_assignment_info(data: bytes) -> AssignmentInfo:
    """An AssignmentInfo from a ConsumerProtocolAssignment's user data."""
    r = _Reader(bytes(data), "Kafka Streams AssignmentInfo")
    version = r.int32()
    if version < 1:
        raise r.fail(f"version {version} is below 1")
    common = r.int32() if version >= 3 else UNKNOWN
    if version > LATEST_SUPPORTED_VERSION:
        return AssignmentInfo(version, common, future=r.take(len(r.buf) - r.pos))
    active = tuple(r.task_id(version) for _ in range(r.count(8, "activeTasks")))
    standby = []
    for _ in range(r.count(12, "standbyTasks")):
        task = r.task_id(version)
        parts = tuple((r.java_utf("topic"), r.int32()) for _ in range(r.count(6, "standby partitions")))
        standby.append((task, parts))
    by_host: tuple[HostPartitions, ...] = ()
    standby_by_host: tuple[HostPartitions, ...] = ()
    dictionary: tuple[tuple[int, str], ...] = ()
    if 2 <= version <= 4:
        by_host = _hosts(r, None)
    elif version >= 5:
        entries = tuple((r.int32(), r.java_utf("topic")) for _ in range(r.count(6, "topic dictionary")))
        if len({i for i, _ in entries}) != len(entries) or len({t for _, t in entries}) != len(entries):
            raise r.fail("a topic dictionary with a repeated index or topic")
        dictionary = entries
        names = dict(entries)
        by_host = _hosts(r, names)
        if version >= 6:
            standby_by_host = _hosts(r, names)
    error = r.int32() if version >= 4 else 0
    next_rebalance = r.int64() if version >= 7 else NO_NEXT_REBALANCE
    r.done()
    return AssignmentInfo(
        version, common, active, tuple(standby), by_host, standby_by_host, error, next_rebalance, dictionary
    )


def _hosts(r: _Reader, names: dict[int, str] | None) -> tuple[HostPartitions, ...]:
    out = []
    for _ in range(r.count(10, "hosts")):
        host, port = r.java_utf("host"), r.int32()
        parts: list[tuple[str, int]] = []
        for _ in range(r.count(6 if names is None else 8, "host partitions")):
            if names is None:
                parts.append((r.java_utf("topic"), r.int32()))
                continue
            index = r.int32()
            if index not in names:
                raise r.fail(f"topic index {index} not in the dictionary")
            parts.append((names[index], r.int32()))
        out.append(HostPartitions(host, port, tuple(parts)))
    return tuple(out)


# -- writing -------------------------------------------------------------------------------------


class _Writer:
    __slots__ = ("out", "version")

    def __init__(self, version: int) -> None:
        self.out = bytearray()
        self.version = version

    def int8(self, v: int) -> None:
        self.out += _B.pack(v)

    def int32(self, v: int) -> None:
        self.out += _I.pack(v)

    def int64(self, v: int) -> None:
        self.out += _Q.pack(v)

    def bytes_(self, v: bytes) -> None:
        self.int32(len(v))
        self.out += v

    def java_utf(self, s: str) -> None:
        raw = _encode_modified_utf8(s)
        if len(raw) > 0xFFFF:
            raise StreamsProtocolError(f"string of {len(raw)} bytes is too long for writeUTF")
        self.out += _H.pack(len(raw)) + raw

    def task_id(self, t: TaskId) -> None:
        self.int32(t.subtopology)
        self.int32(t.partition)
        if self.version >= MIN_NAMED_TOPOLOGY_VERSION:
            raw = (t.topology or "").encode("utf-16-be", "surrogatepass")
            self.int32(len(raw) // 2)
            self.out += raw
        elif t.topology is not None:
            raise StreamsProtocolError(
                f"named topology {t.topology!r} needs version {MIN_NAMED_TOPOLOGY_VERSION}+"
            )


def encode_subscription_info(info: SubscriptionInfo) -> bytes:
    """The bytes Kafka Streams writes for `info` at `info.version`."""
    w = _Writer(info.version)
    w.int32(info.version)
    if info.version >= 3:
        w.int32(info.latest_supported_version)
    if info.future is not None:
        w.out += info.future
        return bytes(w.out)
    w.out += info.process_id.bytes
    if info.version <= 6:
        for tasks in (info.prev_tasks, info.standby_tasks):
            w.int32(len(tasks))
            for t in tasks:
                w.task_id(t)
    if info.version >= 2:
        w.bytes_(info.user_endpoint)
    if info.version >= MIN_NAMED_TOPOLOGY_VERSION:
        w.int32(len(info.task_offset_sums))
        for s in info.task_offset_sums:
            w.int32(s.task.subtopology)
            w.int32(s.task.partition)
            w.int64(s.offset_sum)
            if s.task.topology is None:
                w.out += _h.pack(-1)
            else:
                raw = s.task.topology.encode("utf-8")
                w.out += _h.pack(len(raw)) + raw
    elif info.version >= MIN_OFFSET_SUM_VERSION:
        groups = _adjacent_groups(info.task_offset_sums)
        w.int32(len(groups))
        for subtopology, members in groups:
            w.int32(subtopology)
            w.int32(len(members))
            for s in members:
                w.int32(s.task.partition)
                w.int64(s.offset_sum)
    if info.version >= 8:
        w.int8(info.unique_field)
    if info.version >= 9:
        w.int32(info.error_code)
    if info.version >= 11:
        w.int32(len(info.client_tags))
        for k, v in info.client_tags:
            w.bytes_(k)
            w.bytes_(v)
    return bytes(w.out)


def _adjacent_groups(sums: Iterable[TaskOffsetSum]) -> list[tuple[int, list[TaskOffsetSum]]]:
    groups: list[tuple[int, list[TaskOffsetSum]]] = []
    for s in sums:
        if s.task.topology is not None:
            raise StreamsProtocolError(f"named topology {s.task.topology!r} needs version 10+")
        if groups and groups[-1][0] == s.task.subtopology:
            groups[-1][1].append(s)
        else:
            groups.append((s.task.subtopology, [s]))
    return groups


def encode_assignment_info(info: AssignmentInfo) -> bytes:
    """The bytes Kafka Streams' leader writes for `info` at `info.version`."""
    w = _Writer(info.version)
    w.int32(info.version)
    if info.version >= 3:
        w.int32(info.commonly_supported_version)
    if info.future is not None:
        w.out += info.future
        return bytes(w.out)
    w.int32(len(info.active_tasks))
    for t in info.active_tasks:
        w.task_id(t)
    w.int32(len(info.standby_tasks))
    for t, parts in info.standby_tasks:
        w.task_id(t)
        _write_partitions(w, parts, None)
    if 2 <= info.version <= 4:
        _write_hosts(w, info.partitions_by_host, None)
    elif info.version >= 5:
        hosts = info.partitions_by_host + (info.standby_partitions_by_host if info.version >= 6 else ())
        dictionary = info.topic_dictionary or _dictionary_of(hosts)
        w.int32(len(dictionary))
        for index, topic in dictionary:
            w.int32(index)
            w.java_utf(topic)
        indexes = {topic: index for index, topic in dictionary}
        _write_hosts(w, info.partitions_by_host, indexes)
        if info.version >= 6:
            _write_hosts(w, info.standby_partitions_by_host, indexes)
    if info.version >= 4:
        w.int32(info.error_code)
    if info.version >= 7:
        w.int64(info.next_rebalance_ms)
    return bytes(w.out)


def _dictionary_of(hosts: Iterable[HostPartitions]) -> tuple[tuple[int, str], ...]:
    seen: dict[str, int] = {}
    for h in hosts:
        for topic, _ in h.partitions:
            seen.setdefault(topic, len(seen))
    return tuple((i, t) for t, i in seen.items())


def _write_partitions(w: _Writer, parts: tuple[tuple[str, int], ...], indexes: dict[str, int] | None) -> None:
    w.int32(len(parts))
    for topic, partition in parts:
        if indexes is None:
            w.java_utf(topic)
        elif topic in indexes:
            w.int32(indexes[topic])
        else:
            raise StreamsProtocolError(f"topic {topic!r} is not in the assignment's topic dictionary")
        w.int32(partition)


def _write_hosts(w: _Writer, hosts: tuple[HostPartitions, ...], indexes: dict[str, int] | None) -> None:
    w.int32(len(hosts))
    for h in hosts:
        w.java_utf(h.host)
        w.int32(h.port)
        _write_partitions(w, h.partitions, indexes)


# -- a classic group's member ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StreamsClassicMember:
    """A Kafka Streams instance's JoinGroup metadata, both layers decoded."""

    subscription: Subscription
    info: SubscriptionInfo


def parse_streams_member_metadata(metadata: bytes) -> StreamsClassicMember:
    """The ConsumerProtocolSubscription of a `stream` protocol and its SubscriptionInfo user
    data; either layer malformed (or no user data) is a StreamsProtocolError/SchemaError."""
    sub = parse_subscription(metadata)
    if sub.user_data is None:
        raise StreamsProtocolError("a `stream` protocol subscription without SubscriptionInfo user data")
    return StreamsClassicMember(sub, decode_subscription_info(sub.user_data))
