"""Loader probes: one real Kafka broker, one `__consumer_offsets` partition per record kind, to
see what a release's coordinator does with each kind when it loads the partition.

Each case's partition holds an offset commit of a probe group (value v3, readable by every
release since 0.11), then the records of the case, then a second offset commit of the probe
group. After the broker restarts on these files, the probe group's offsets tell the outcome:

* both offsets present: the partition loaded, so the case's records were read or skipped (the
  broker's log says which: Kafka logs "Unknown message key with version N" / "Unknown record
  type N ... Ignoring it" for a skipped record);
* no offsets, or the coordinator answering with an error: the load failed (`fatal`). The old
  Scala coordinator (`GroupMetadataManager`) logs "Error loading offsets from
  __consumer_offsets-N", marks the partition as owned anyway and serves it EMPTY: every group
  and offset of the partition is silently gone. The new coordinator (`CoordinatorRuntime`)
  logs "Failed to load metadata from __consumer_offsets-N" and the partition fails.

The recipe: start the target once (creates `__consumer_offsets` with the topic id the broker
wants in `partition.metadata`), stop it, replace each partition's segments
(`tools.kafka_logs.write_partition`), start it again, query with admin APIs.
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.kafka_dist import KafkaCluster
from protocol.varint import encode_uvarint
from records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecord,
    GroupMemberMetadata,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    TopicMetadata,
    TopicPartitions,
)
from records.codec import encode_record
from tests.plugins.kafka import QUICK_RESTART_CONFIGS
from tools.groups.wire import AdminWire, KafkaError
from tools.kafka_logs import partition_dir, partition_for, write_partition

TOPIC = "probe-t"
NOW = 1_790_000_000_000
Pair = tuple[bytes, bytes | None]

# --- hand-written encodings of versions our codecs do not write ----------------------------------


def _cstr(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    b = s.encode()
    return encode_uvarint(len(b) + 1) + b


def _cbytes(b: bytes) -> bytes:
    return encode_uvarint(len(b) + 1) + b


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def offset_key(group: str, partition: int, key_version: int = 1) -> bytes:
    return struct.pack(">h", key_version) + _str(group) + _str(TOPIC) + struct.pack(">i", partition)


def offset_value_v0(offset: int) -> bytes:
    return struct.pack(">hq", 0, offset) + _str("") + struct.pack(">q", NOW)


def offset_value_v4(offset: int, *, topic_id: uuid.UUID | None, version: int = 4) -> bytes:
    """OffsetCommitValue v4 as Kafka 4.1+ writes it: flexible, `topicId` as tagged field 0."""
    body = struct.pack(">hqi", version, offset, -1) + _cstr("") + struct.pack(">q", NOW)
    if topic_id is None:
        return body + b"\x00"
    return body + b"\x01" + b"\x00" + b"\x10" + topic_id.bytes


def consumer_subscription(topics: Sequence[str]) -> bytes:
    out = struct.pack(">hi", 0, len(topics)) + b"".join(_str(t) for t in topics)
    return out + struct.pack(">i", -1)


def consumer_assignment(topic: str, partitions: Sequence[int]) -> bytes:
    out = struct.pack(">hi", 0, 1) + _str(topic) + struct.pack(">i", len(partitions))
    out += b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


def group_metadata_v4(group_member: str) -> bytes:
    """GroupMetadataValue v4 (flexible; no release writes it yet, every release since KIP-915
    reads it)."""
    member = (
        _cstr(group_member)
        + _cstr(None)
        + _cstr("client")
        + _cstr("/127.0.0.1")
        + struct.pack(">ii", 30000, 10000)
        + _cbytes(consumer_subscription([TOPIC]))
        + _cbytes(consumer_assignment(TOPIC, [0, 1]))
        + b"\x00"
    )
    return (
        struct.pack(">h", 4)
        + _cstr("consumer")
        + struct.pack(">i", 1)
        + _cstr("range")
        + _cstr(group_member)
        + struct.pack(">q", NOW)
        + encode_uvarint(2)
        + member
        + b"\x00"
    )


def unknown_key(record_type: int, group: str) -> bytes:
    return struct.pack(">h", record_type) + _str(group)


# --- the consumer-group records Kafka 4.x writes for one member -----------------------------------

TOPIC_ID = uuid.UUID("6f1f1a52-0000-4000-8000-000000000001")


def consumer_group_records(group: str, member: str = "m-1") -> dict[int, Pair]:
    """One record of each consumer-group type (3-8, 16), as `encode_record` writes them (the
    bytes Kafka 4.x writes), by record type."""
    tps = (TopicPartitions(TOPIC_ID, (0, 1)),)
    recs = {
        3: CoordinatorRecord(ConsumerGroupMetadataKey(group), ConsumerGroupMetadataValue(2)),
        4: CoordinatorRecord(
            ConsumerGroupPartitionMetadataKey(group),
            ConsumerGroupPartitionMetadataValue((TopicMetadata(TOPIC_ID, TOPIC, 2),)),
        ),
        5: CoordinatorRecord(
            ConsumerGroupMemberMetadataKey(group, member),
            ConsumerGroupMemberMetadataValue(None, None, "client", "/127.0.0.1", (TOPIC,), None, 30000),
        ),
        6: CoordinatorRecord(
            ConsumerGroupTargetAssignmentMetadataKey(group), ConsumerGroupTargetAssignmentMetadataValue(2)
        ),
        7: CoordinatorRecord(
            ConsumerGroupTargetAssignmentMemberKey(group, member),
            ConsumerGroupTargetAssignmentMemberValue(tps),
        ),
        8: CoordinatorRecord(
            ConsumerGroupCurrentMemberAssignmentKey(group, member),
            ConsumerGroupCurrentMemberAssignmentValue(2, 1, 0, tps),
        ),
        16: CoordinatorRecord(
            ConsumerGroupRegularExpressionKey(group, "probe-.*"),
            ConsumerGroupRegularExpressionValue((TOPIC,), 1, NOW),
        ),
    }
    return {t: encode_record(r) for t, r in recs.items()}


def _offset_v3(group: str, partition: int, offset: int) -> Pair:
    return encode_record(
        CoordinatorRecord(OffsetCommitKey(group, TOPIC, partition), OffsetCommitValue(offset, -1, "", NOW))
    )


def _classic_group(group: str) -> Pair:
    member = GroupMemberMetadata(
        "m-1", None, "client", "/127.0.0.1", 30000, 10000,
        consumer_subscription([TOPIC]), consumer_assignment(TOPIC, [0, 1]),
    )  # fmt: skip
    return encode_record(
        CoordinatorRecord(
            GroupMetadataKey(group), GroupMetadataValue("consumer", 1, "range", "m-1", NOW, (member,))
        )
    )


# --- cases -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """Records of one kind, for `group` (which lives in the same partition as the probe group).
    `record_type`/`value_version` name the row of the loader rules the case decides."""

    name: str
    record_type: int
    value_version: int | None
    build: Callable[[str], list[Pair]]
    # the case group's committed offsets when the partition loads (None: not checked)
    offsets: Mapping[tuple[str, int], int] | None = None
    # the case's first record creates the consumer group (rules with `needs_group` then read)
    creates_group: bool = False


def _cg_case(rtype: int) -> Case:
    return Case(f"type-{rtype}", rtype, 0, lambda g: [consumer_group_records(g)[rtype]])


CASES: tuple[Case, ...] = (
    Case("offset-v3", 1, 3, lambda g: [_offset_v3(g, 0, 11)], {(TOPIC, 0): 11}),
    Case(
        "offset-v1-expire",
        1,
        1,
        lambda g: [
            encode_record(
                CoordinatorRecord(
                    OffsetCommitKey(g, TOPIC, 0), OffsetCommitValue(12, -1, "", NOW, NOW + 86_400_000)
                )
            )
        ],
        {(TOPIC, 0): 12},
    ),
    Case("offset-key-v0", 0, 0, lambda g: [(offset_key(g, 0, 0), offset_value_v0(13))], {(TOPIC, 0): 13}),
    Case(
        "offset-v4-topic-id",
        1,
        4,
        lambda g: [(offset_key(g, 0), offset_value_v4(14, topic_id=TOPIC_ID))],
        {(TOPIC, 0): 14},
    ),
    Case("offset-v5", 1, 5, lambda g: [(offset_key(g, 0), offset_value_v4(15, topic_id=None, version=5))]),
    Case("group-metadata-v3", 2, 3, lambda g: [_classic_group(g), _offset_v3(g, 0, 16)], {(TOPIC, 0): 16}),
    Case(
        "group-metadata-v4",
        2,
        4,
        lambda g: [(struct.pack(">h", 2) + _str(g), group_metadata_v4("m-1")), _offset_v3(g, 0, 17)],
        {(TOPIC, 0): 17},
    ),
    *(_cg_case(t) for t in (3, 4, 5, 6, 7, 8, 16)),
    Case("cg-tombstone", 3, None, lambda g: [(consumer_group_records(g)[3][0], None)]),
    Case(
        "cg-full",
        3,
        0,
        lambda g: [consumer_group_records(g)[t] for t in (5, 16, 4, 3, 7, 6, 8)] + [_offset_v3(g, 0, 18)],
        {(TOPIC, 0): 18},
        creates_group=True,
    ),
    Case("unknown-type-99", 99, 0, lambda g: [(unknown_key(99, g), struct.pack(">h", 0) + b"\x00")]),
)


def group_in(partition: int, num_partitions: int, prefix: str) -> str:
    """The first `prefix-N` group id that Kafka places in `partition`."""
    n = 0
    while partition_for(f"{prefix}-{n}", num_partitions) != partition:
        n += 1
    return f"{prefix}-{n}"


@dataclass
class CaseResult:
    case: Case
    partition: int
    probe_group: str
    group: str
    probe_offsets: dict[tuple[str, int], int] | None  # None: the coordinator answered an error
    group_offsets: dict[tuple[str, int], int] | None
    error: str | None = None
    listed: dict[str, object] | None = None
    log_lines: list[str] = field(default_factory=list)

    @property
    def loaded(self) -> bool:
        return self.probe_offsets == {(TOPIC, 0): 1, (TOPIC, 1): 2}


def layout(num_partitions: int, cases: Sequence[Case] = CASES) -> list[tuple[Case, int, str, str]]:
    """(case, partition, probe group, case group); case i in partition i + 1 (0 is left for
    the group used to create `__consumer_offsets`)."""
    if len(cases) + 1 > num_partitions:
        raise ValueError("one partition per case needed")
    return [
        (c, i + 1, group_in(i + 1, num_partitions, "probe"), group_in(i + 1, num_partitions, f"g-{c.name}"))
        for i, c in enumerate(cases)
    ]


def write_cases(log_dir: Path, num_partitions: int, cases: Sequence[Case] = CASES) -> None:
    for case, p, probe, group in layout(num_partitions, cases):
        pairs = [_offset_v3(probe, 0, 1), *case.build(group), _offset_v3(probe, 1, 2)]
        write_partition(partition_dir(log_dir, p), [(k, v, NOW) for k, v in pairs])


def _fetch(
    admin: AdminWire, group: str, deadline: float
) -> tuple[dict[tuple[str, int], int] | None, str | None]:
    while True:
        try:
            got = admin.offset_fetch(group)
            return {k: v[0] for k, v in got.items()}, None
        except KafkaError as e:
            if time.monotonic() > deadline:
                return None, str(e)
            admin.reset()
            time.sleep(0.3)


PROBE_CONFIGS = {
    "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
    **QUICK_RESTART_CONFIGS,
}


def prepare_cluster(cluster: KafkaCluster) -> None:
    """Create `__consumer_offsets` (a FindCoordinator does) and the probe topic; stop the broker."""
    from kafka.admin import KafkaAdminClient, NewTopic  # kafka-python

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(TOPIC, 2, 1)])
    finally:
        admin.close()
    deadline = time.monotonic() + 60
    with AdminWire(cluster.bootstrap, timeout=30) as wire:
        while True:  # the coordinator of a new __consumer_offsets partition answers late
            codes = wire.commit_offsets("setup", {(TOPIC, 0): 1})
            if set(codes.values()) == {0}:
                break
            assert time.monotonic() < deadline, codes
            wire.reset()
            time.sleep(0.3)


def wait_partition_dirs(cluster: KafkaCluster, num_partitions: int, timeout: float = 30.0) -> None:
    """Until the broker created every `__consumer_offsets-N` directory with its
    `partition.metadata` (it does so asynchronously, when it becomes each partition's leader):
    replacing the segments before that leaves a partition without the topic id file."""
    deadline = time.monotonic() + timeout
    data = cluster.nodes[0].data_dir
    while not all((partition_dir(data, p) / "partition.metadata").is_file() for p in range(num_partitions)):
        assert time.monotonic() < deadline, f"__consumer_offsets directories missing in {data}"
        time.sleep(0.1)


def observe(
    cluster: KafkaCluster,
    num_partitions: int,
    cases: Sequence[Case] = CASES,
    timeout: float = 60.0,
    settle: float = 5.0,
) -> list[CaseResult]:
    """Each case's outcome once the broker restarted on `write_cases`' files. The first case
    (plain offsets) loads on every release: it is waited for up to `timeout`; every other
    partition was scheduled for loading at the same time, so an error still answered `settle`
    seconds later (a failed load: NOT_COORDINATOR on 4.x) is the outcome."""
    out: list[CaseResult] = []
    deadline = time.monotonic() + timeout
    log = cluster.log_path(0)
    with AdminWire(cluster.bootstrap, timeout=timeout) as admin:
        for case, p, probe, group in layout(num_partitions, cases):
            probe_offsets, error = _fetch(admin, probe, deadline)
            deadline = min(deadline, time.monotonic() + settle)
            group_offsets = None
            if probe_offsets is not None:
                group_offsets, _ = _fetch(admin, group, time.monotonic() + settle)
            out.append(CaseResult(case, p, probe, group, probe_offsets, group_offsets, error))
        try:
            listed = {g["group"]: g for g in admin.list_groups()}
        except KafkaError:
            listed = {}
    text = log.read_text(errors="replace").splitlines()
    for r in out:
        r.listed = listed.get(r.group)
        r.log_lines = [ln for ln in text if _about(ln, r.partition)]
    return out


def _about(line: str, partition: int) -> bool:
    """A WARN or ERROR line of the broker's log naming `__consumer_offsets-<partition>`."""
    if " WARN " not in line and " ERROR " not in line:
        return False
    tag = f"__consumer_offsets-{partition}"
    return any(tag + end in line for end in (" ", ".", ",")) or line.endswith(tag)
