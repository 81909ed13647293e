"""OffsetCommit, OffsetFetch, OffsetDelete and DeleteGroups (Kafka `OffsetMetadataManager`; Kafka
`OffsetMetadataManager.commitOffset/fetchOffsets/fetchAllOffsets/deleteOffsets`,
`GroupCoordinatorShard.deleteGroups`).

Every change is an OffsetCommit record (type 1) or its tombstone, replayed into the store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.classic.group import ClassicGroup
from engine.classic.rebalance import reschedule_heartbeat
from engine.classic.records import group_metadata_tombstone
from engine.classic.state import ClassicGroupState
from engine.connect import heartbeat as connect_heartbeat
from engine.connect.group import ConnectGroup
from engine.consumer import record_builders as rb
from engine.consumer.group import ConsumerGroup, ConsumerGroupState
from engine.context import RequestContext
from engine.errors import CoordinatorError, Errors
from engine.metadata import TopicId
from engine.offsets.api import (
    DEFAULT_RETENTION_TIME,
    DeleteGroupResult,
    FetchedPartition,
    FetchedTopic,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchGroupRequest,
    OffsetFetchGroupResponse,
    PartitionResult,
    TopicResult,
)
from engine.offsets.store import OffsetAndMetadata
from engine.offsets.validation import (
    PartitionCheck,
    validate_classic_commit,
    validate_consumer_commit,
    validate_consumer_fetch,
    validate_streams_commit,
    validate_streams_fetch,
)
from engine.operation import Operation
from engine.streams.group import StreamsGroup
from engine.streams.heartbeat import streams_group_tombstones
from records.coordinator import CoordinatorRecord
from records.offsets import OffsetCommitKey

if TYPE_CHECKING:
    from engine.state import Group, ShardState

S = ClassicGroupState
# OffsetCommit v9+: GROUP_ID_NOT_FOUND for a missing group (older versions: ILLEGAL_GENERATION).
GROUP_ID_NOT_FOUND_COMMIT_VERSION = 9


def offset_record(group: str, topic: str, partition: int, o: OffsetAndMetadata) -> CoordinatorRecord:
    return CoordinatorRecord(OffsetCommitKey(group, topic, partition), o)


def offset_tombstone(group: str, topic: str, partition: int) -> CoordinatorRecord:
    return CoordinatorRecord(OffsetCommitKey(group, topic, partition), None)


def commit_offsets(
    shard: ShardState, req: OffsetCommitRequest, ctx: RequestContext, op: Operation
) -> OffsetCommitResponse:
    gid = req.group_id
    group = shard.groups.get(gid)
    if group is None:
        if req.generation_id_or_member_epoch < 0:
            # An admin or manual-assignment commit: a "simple" group, created by the replay of
            # the records below (none is kept when nothing is written).
            group = ClassicGroup(gid, shard.now_ms)
        elif ctx.api_version >= GROUP_ID_NOT_FOUND_COMMIT_VERSION:
            raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
        else:
            raise CoordinatorError(Errors.ILLEGAL_GENERATION)
    check: PartitionCheck | None = None
    if isinstance(group, ClassicGroup):
        validate_classic_commit(
            group, req.member_id, req.group_instance_id, req.generation_id_or_member_epoch
        )
        if group.state in (S.STABLE, S.PREPARING_REBALANCE):
            member = group.members.get(req.member_id)
            if member is not None:
                reschedule_heartbeat(op, group, member)  # commits keep a classic session alive
    elif isinstance(group, ConsumerGroup):
        try:
            check = validate_consumer_commit(
                group, req.member_id, req.generation_id_or_member_epoch, ctx.api_version, _topic_id(shard)
            )
        except CoordinatorError as e:
            _fenced(op, group, req, e)
            raise
    elif isinstance(group, ConnectGroup):
        # Connect workers keep their offsets elsewhere (docs/connect-groups.md).
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {gid} is a connect group.")
    else:
        check = validate_streams_commit(
            group, req.member_id, req.generation_id_or_member_epoch, ctx.api_version
        )

    now = shard.now_ms
    expire = -1 if req.retention_time_ms == DEFAULT_RETENTION_TIME else now + req.retention_time_ms
    max_bytes = shard.config.offset_metadata_max_bytes
    topics: list[TopicResult] = []
    for t in req.topics:
        results: list[PartitionResult] = []
        for p in t.partitions:
            metadata = p.committed_metadata if p.committed_metadata is not None else ""
            if len(metadata) > max_bytes:
                results.append(PartitionResult(p.partition_index, int(Errors.OFFSET_METADATA_TOO_LARGE)))
                continue
            if check is not None:
                # As Kafka: a partition that fails fails the whole request, nothing is written.
                try:
                    check(t.name, p.partition_index)
                except CoordinatorError as e:
                    if isinstance(group, ConsumerGroup):
                        _fenced(op, group, req, e, topic=t.name, partition=p.partition_index)
                    raise
            op.records.append(
                offset_record(
                    gid,
                    t.name,
                    p.partition_index,
                    OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch, metadata, now, expire),
                )
            )
            results.append(PartitionResult(p.partition_index))
        topics.append(TopicResult(t.name, results))
    return OffsetCommitResponse(topics)


def _topic_id(shard: ShardState) -> Callable[[str], TopicId | None]:
    def resolve(name: str) -> TopicId | None:
        topic = shard.image.topic(name)
        return None if topic is None else topic.topic_id

    return resolve


def _fenced(
    op: Operation, group: ConsumerGroup, req: OffsetCommitRequest, e: CoordinatorError, **where: object
) -> None:
    member = group.members.get(req.member_id)
    op.explain(
        "offset_commit.fenced",
        group=group.group_id,
        member=req.member_id,
        received_epoch=req.generation_id_or_member_epoch,
        member_epoch=None if member is None else member.member_epoch,
        error=e.code.name,
        **where,
    )


def fetch_offsets(
    shard: ShardState, req: OffsetFetchGroupRequest, require_stable: bool
) -> OffsetFetchGroupResponse:
    """A missing (or Dead) group fails all partitions: offset -1 and no error, as Kafka does.
    The engine keeps no pending transactional offsets, so `require_stable` finds none here; in
    upstream mode the gateway marks the pending ones UNSTABLE_OFFSET_COMMIT
    (`gateway.upstream.transactions`)."""
    gid = req.group_id
    group = shard.groups.get(gid)
    fail_all = group is None or (isinstance(group, ClassicGroup) and group.is_in_state(S.DEAD))
    if isinstance(group, ConsumerGroup | StreamsGroup):
        try:
            if isinstance(group, ConsumerGroup):
                validate_consumer_fetch(group, req.member_id, req.member_epoch)
            else:
                validate_streams_fetch(group, req.member_id, req.member_epoch)
        except CoordinatorError as e:
            return OffsetFetchGroupResponse(gid, [], int(e.code), e.message)
    stored = {} if fail_all else shard.offsets.group(gid)
    topics: list[FetchedTopic] = []
    if req.topics is None:
        for topic, parts in stored.items():
            topics.append(
                FetchedTopic(
                    topic,
                    [FetchedPartition(p, o.offset, o.leader_epoch, o.metadata) for p, o in parts.items()],
                )
            )
        return OffsetFetchGroupResponse(gid, topics)
    for t in req.topics:
        parts = stored.get(t.name, {})
        fetched = []
        for p in t.partition_indexes:
            o = parts.get(p)
            fetched.append(
                FetchedPartition(p)
                if o is None
                else FetchedPartition(p, o.offset, o.leader_epoch, o.metadata)
            )
        topics.append(FetchedTopic(t.name, fetched))
    return OffsetFetchGroupResponse(gid, topics)


def is_subscribed_to_topic(group: Group, topic: str) -> bool:
    if isinstance(group, ConsumerGroup):
        return group.is_subscribed_to(topic)
    if isinstance(group, StreamsGroup):
        return group.is_subscribed_to(topic)
    if isinstance(group, ConnectGroup):
        return False
    return group.is_subscribed_to_topic(topic)


def delete_offsets(shard: ShardState, req: OffsetDeleteRequest, op: Operation) -> OffsetDeleteResponse:
    gid = req.group_id
    group = shard.groups.get(gid)
    if group is None:
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
    if isinstance(group, ClassicGroup):
        if group.is_in_state(S.DEAD):
            raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {gid} is in dead state.")
        if (
            group.state in (S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE)
            and not group.uses_consumer_protocol()
        ):
            raise CoordinatorError(Errors.NON_EMPTY_GROUP)
    results: list[TopicResult] = []
    for t in req.topics:
        if is_subscribed_to_topic(group, t.name):
            results.append(
                TopicResult(
                    t.name,
                    [PartitionResult(p, int(Errors.GROUP_SUBSCRIBED_TO_TOPIC)) for p in t.partition_indexes],
                )
            )
            continue
        for p in t.partition_indexes:
            if shard.offsets.get(gid, t.name, p) is not None:
                op.records.append(offset_tombstone(gid, t.name, p))
        results.append(TopicResult(t.name, [PartitionResult(p) for p in t.partition_indexes]))
    return OffsetDeleteResponse(topics=results)


def group_tombstones(group: Group, records: list[CoordinatorRecord]) -> None:
    """The records that delete a group (Kafka's `__consumer_offsets` records)."""
    if isinstance(group, ClassicGroup):
        records.append(group_metadata_tombstone(group.group_id))
        return
    if isinstance(group, StreamsGroup):
        records.extend(streams_group_tombstones(group))
        return
    if isinstance(group, ConnectGroup):
        records.extend(connect_heartbeat.tombstones(group))
        return
    gid = group.group_id
    records.extend(rb.current_assignment_tombstone(gid, m) for m in group.members)
    records.extend(rb.target_member_tombstone(gid, m) for m in group.members)
    records.append(rb.target_epoch_tombstone(gid))
    records.extend(rb.member_metadata_tombstone(gid, m) for m in group.members)
    records.extend(rb.regex_tombstone(gid, r) for r in group.resolved_regexes)
    records.append(rb.subscription_metadata_tombstone(gid))
    records.append(rb.group_epoch_tombstone(gid))


def delete_groups(shard: ShardState, group_ids: list[str], op: Operation) -> list[DeleteGroupResult]:
    results = []
    for gid in group_ids:
        group = shard.groups.get(gid)
        code = Errors.NONE
        if group is None:
            code = Errors.GROUP_ID_NOT_FOUND
        elif isinstance(group, ClassicGroup):
            if group.is_in_state(S.DEAD):
                code = Errors.GROUP_ID_NOT_FOUND
            elif group.state in (S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE):
                code = Errors.NON_EMPTY_GROUP
        elif isinstance(group, StreamsGroup | ConnectGroup):
            if group.members:
                code = Errors.NON_EMPTY_GROUP
        elif group.state() is not ConsumerGroupState.EMPTY:
            code = Errors.NON_EMPTY_GROUP
        if group is not None and code is Errors.NONE:
            for topic, parts in shard.offsets.group(gid).items():
                op.records.extend(offset_tombstone(gid, topic, p) for p in parts)
            group_tombstones(group, op.records)
            op.event("group.deleted", group=gid)
        results.append(DeleteGroupResult(gid, int(code)))
    return results


# --- expiry (Kafka `OffsetMetadataManager`)


def _expiry_base(group: Group | None, o: OffsetAndMetadata) -> int | None:
    """The timestamp an offset's age is measured from, or None when it never expires now."""
    if not isinstance(group, ClassicGroup):
        return o.commit_timestamp  # a consumer group, or offsets without a group
    if group.protocol_type is None:
        return o.commit_timestamp  # a simple group
    if group.is_in_state(S.EMPTY):
        ts = group.current_state_timestamp
        return o.commit_timestamp if ts is None else ts
    if group.uses_consumer_protocol() and group.subscribed_topics is not None and group.is_in_state(S.STABLE):
        return o.commit_timestamp
    return None


def expire_offsets(shard: ShardState, op: Operation) -> None:
    """Kafka `cleanupGroupMetadata`, run every `offsets.retention.check.interval.ms`: for every
    group, expired offsets of topics it does not subscribe to are deleted; a group whose offsets
    are all gone (or that had none) and that has no members is deleted too."""
    now = shard.now_ms
    retention = shard.config.offsets_retention_ms
    for gid, group in list(shard.groups.items()):
        all_expired = True
        for topic, parts in shard.offsets.group(gid).items():
            if is_subscribed_to_topic(group, topic):
                all_expired = False
                continue
            for p, o in parts.items():
                if o.expire_timestamp != -1:
                    expired = now >= o.expire_timestamp
                else:
                    base = _expiry_base(group, o)
                    expired = base is not None and now - base >= retention
                if expired:
                    op.records.append(offset_tombstone(gid, topic, p))
                    op.event("offset.expired", group=gid, topic=topic, partition=p)
                else:
                    all_expired = False
        if all_expired and group.is_empty():
            group_tombstones(group, op.records)
            op.event("group.deleted", group=gid, reason="no members and no unexpired offsets")


def offsets_of_deleted_topics(shard: ShardState, topics: set[str], op: Operation) -> None:
    """Kafka `onPartitionsDeleted`: a deleted topic's committed offsets go with it."""
    for gid in shard.offsets.group_ids():
        for topic, parts in shard.offsets.group(gid).items():
            if topic in topics:
                op.records.extend(offset_tombstone(gid, topic, p) for p in parts)
