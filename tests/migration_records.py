"""Expected coordinator records for the migration tests, built from the record schemas directly
(not from the engine's record builders), so a test pins the exact keys and values written.

Every helper writes for group "g". Assignments are given by topic name (`foo=[0, 1]`) and
turned into topic ids the way the harness's metadata image does. `assert_records` compares in
order; like Kafka's `assertRecordEquals`, the order of partitions inside one assignment and of
topics inside the subscription metadata is not compared (it carries no meaning on the wire).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from engine.consumer.member import MemberState
from engine.metadata import topic_id_for
from records.classic_group import GroupMemberMetadata, GroupMetadataKey, GroupMetadataValue
from records.consumer_group import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicMetadata,
    TopicPartitions,
)
from records.coordinator import CoordinatorRecord
from tests.migration_harness import CLASSIC_CLIENT, KIP848_CLIENT

G = "g"

__all__ = [
    "CLASSIC_CLIENT",
    "KIP848_CLIENT",
    "assert_records",
    "classic_meta",
    "classic_record",
    "classic_tomb",
    "current",
    "current_tomb",
    "epoch",
    "epoch_tomb",
    "member",
    "member_tomb",
    "metadata",
    "metadata_tomb",
    "target",
    "target_epoch",
    "target_epoch_tomb",
    "target_tomb",
]


def _tps(parts: Mapping[str, Sequence[int]]) -> tuple[TopicPartitions, ...]:
    return tuple(TopicPartitions(topic_id_for(t), tuple(p)) for t, p in parts.items() if p)


def classic_meta(session_timeout_ms: int, *protocols: tuple[str, bytes]) -> ClassicMemberMetadata:
    return ClassicMemberMetadata(session_timeout_ms, tuple(ClassicProtocol(n, m) for n, m in protocols))


# --- consumer-group records (k3-k8) ---------------------------------------------------------------


def member(
    member_id: str,
    topics: Sequence[str],
    *,
    rebalance: int,
    client: tuple[str, str] = CLASSIC_CLIENT,
    instance: str | None = None,
    rack: str | None = None,
    assignor: str | None = None,
    classic: ClassicMemberMetadata | None = None,
) -> CoordinatorRecord:
    """k5: the member's subscription (topic names are written sorted)."""
    return CoordinatorRecord(
        ConsumerGroupMemberMetadataKey(G, member_id),
        ConsumerGroupMemberMetadataValue(
            instance_id=instance,
            rack_id=rack,
            client_id=client[0],
            client_host=client[1],
            subscribed_topic_names=tuple(sorted(topics)),
            subscribed_topic_regex=None,
            rebalance_timeout_ms=rebalance,
            server_assignor=assignor,
            classic_member_metadata=classic,
        ),
    )


def member_tomb(member_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupMemberMetadataKey(G, member_id), None)


def epoch(e: int) -> CoordinatorRecord:
    """k3: the group epoch."""
    return CoordinatorRecord(ConsumerGroupMetadataKey(G), ConsumerGroupMetadataValue(e))


def epoch_tomb() -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupMetadataKey(G), None)


def metadata(**partitions: int) -> CoordinatorRecord:
    """k4: the subscription metadata, `metadata(foo=2, bar=1)`."""
    return CoordinatorRecord(
        ConsumerGroupPartitionMetadataKey(G),
        ConsumerGroupPartitionMetadataValue(
            tuple(TopicMetadata(topic_id_for(n), n, c) for n, c in sorted(partitions.items()))
        ),
    )


def metadata_tomb() -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupPartitionMetadataKey(G), None)


def target(member_id: str, **parts: Sequence[int]) -> CoordinatorRecord:
    """k7: one member's target assignment."""
    return CoordinatorRecord(
        ConsumerGroupTargetAssignmentMemberKey(G, member_id),
        ConsumerGroupTargetAssignmentMemberValue(_tps(parts)),
    )


def target_tomb(member_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(G, member_id), None)


def target_epoch(e: int) -> CoordinatorRecord:
    """k6: the target assignment epoch."""
    return CoordinatorRecord(
        ConsumerGroupTargetAssignmentMetadataKey(G), ConsumerGroupTargetAssignmentMetadataValue(e)
    )


def target_epoch_tomb() -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(G), None)


def current(
    member_id: str,
    member_epoch: int,
    previous_epoch: int,
    state: MemberState = MemberState.STABLE,
    *,
    pending: Mapping[str, Sequence[int]] | None = None,
    **assigned: Sequence[int],
) -> CoordinatorRecord:
    """k8: the member's epochs, state, assigned partitions and partitions pending revocation."""
    return CoordinatorRecord(
        ConsumerGroupCurrentMemberAssignmentKey(G, member_id),
        ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=member_epoch,
            previous_member_epoch=previous_epoch,
            state=int(state),
            assigned_partitions=_tps(assigned),
            partitions_pending_revocation=_tps(pending or {}),
        ),
    )


def current_tomb(member_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(G, member_id), None)


# --- classic-group record (k2) ----------------------------------------------------------------------


def classic_tomb() -> CoordinatorRecord:
    return CoordinatorRecord(GroupMetadataKey(G), None)


def classic_record(
    generation: int,
    protocol: str | None,
    leader: str | None,
    timestamp: int,
    *members: GroupMemberMetadata,
    protocol_type: str = "consumer",
) -> CoordinatorRecord:
    return CoordinatorRecord(
        GroupMetadataKey(G),
        GroupMetadataValue(protocol_type, generation, protocol, leader, timestamp, tuple(members)),
    )


# --- comparison -------------------------------------------------------------------------------------


def _canon_tps(tps: Sequence[TopicPartitions]) -> tuple[TopicPartitions, ...]:
    """Sorted, without assignment epochs: these scenarios are Kafka's tests of 4.2 and earlier,
    whose records have none (tests/test_commit_assignment_epochs.py checks them)."""
    return tuple(sorted((TopicPartitions(t.topic_id, tuple(sorted(t.partitions))) for t in tps), key=str))


def _canon(r: CoordinatorRecord) -> tuple[Any, Any]:
    v: Any = r.value
    if isinstance(v, ConsumerGroupCurrentMemberAssignmentValue):
        v = replace(
            v,
            assigned_partitions=_canon_tps(v.assigned_partitions),
            partitions_pending_revocation=_canon_tps(v.partitions_pending_revocation),
        )
    elif isinstance(v, ConsumerGroupTargetAssignmentMemberValue):
        v = replace(v, topic_partitions=_canon_tps(v.topic_partitions))
    elif isinstance(v, ConsumerGroupPartitionMetadataValue):
        v = replace(v, topics=tuple(sorted(v.topics, key=lambda t: t.topic_name)))
    return (r.key, v)


def assert_records(actual: Sequence[CoordinatorRecord], expected: Sequence[CoordinatorRecord]) -> None:
    got = [_canon(r) for r in actual]
    want = [_canon(r) for r in expected]
    assert got == want, _diff(got, want)


def _diff(got: list[tuple[Any, Any]], want: list[tuple[Any, Any]]) -> str:
    lines = [f"{len(got)} records written, {len(want)} expected"]
    for i in range(max(len(got), len(want))):
        g = got[i] if i < len(got) else None
        w = want[i] if i < len(want) else None
        mark = "  " if g == w else "!!"
        lines.append(f"{mark} {i}: got  {g}")
        if g != w:
            lines.append(f"{mark} {i}: want {w}")
    return "\n".join(lines)
