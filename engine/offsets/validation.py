"""Who may commit and fetch offsets, per group type (Kafka `OffsetMetadataManager`; Kafka
`ClassicGroup.validateOffsetCommit`, `ConsumerGroup.validateOffsetCommit/Fetch`).

Classic groups check generation and member id; consumer groups check the member epoch, and a
classic member living in a consumer group gets the classic error (ILLEGAL_GENERATION) while a
consumer-protocol member gets STALE_MEMBER_EPOCH. Commits with generation -1 and no member are
admin or manual-assignment commits, allowed only while the group has no members.

A consumer-group commit whose member epoch is older than the member's is checked per partition,
as Kafka 4.3+ does: it is accepted for a partition the member holds (assigned or pending
revocation) since an epoch at or before the one sent. A client commits with the epoch it knew
when it built the request, and a heartbeat can move the member to the next epoch while the
commit is on its way; offsets of partitions it kept are still its own. Kafka up to 4.2 refused
every commit with an older epoch.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.classic.group import ClassicGroup
from engine.classic.state import ClassicGroupState
from engine.consumer.group import ConsumerGroup
from engine.consumer.member import ConsumerGroupMember
from engine.errors import CoordinatorError, Errors
from engine.metadata import TopicId
from engine.streams.group import StreamsGroup, StreamsMember

PartitionCheck = Callable[[str, int], None]
"""Checks one partition (topic name, partition) of a commit; raises CoordinatorError."""

S = ClassicGroupState
# OffsetCommit v9 is the first version a KIP-848 member may use (member epochs).
CONSUMER_PROTOCOL_MIN_COMMIT_VERSION = 9


def validate_classic_commit(
    group: ClassicGroup, member_id: str, instance_id: str | None, generation: int
) -> None:
    if group.is_in_state(S.DEAD):
        raise CoordinatorError(Errors.COORDINATOR_NOT_AVAILABLE)
    if generation < 0 and group.is_in_state(S.EMPTY):
        return
    if generation >= 0 or member_id != "" or instance_id is not None:
        group.validate_member(member_id, instance_id)
        if generation != group.generation_id:
            raise CoordinatorError(Errors.ILLEGAL_GENERATION)
    elif not group.is_in_state(S.EMPTY):
        raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID)
    if group.is_in_state(S.COMPLETING_REBALANCE):
        raise CoordinatorError(Errors.REBALANCE_IN_PROGRESS)


def _check_epoch(received: int, expected: int, classic: bool) -> None:
    if received == expected:
        return
    if classic:
        raise CoordinatorError(
            Errors.ILLEGAL_GENERATION,
            f"The received generation id {received} does not match the expected member epoch {expected}.",
        )
    raise CoordinatorError(
        Errors.STALE_MEMBER_EPOCH,
        f"The received member epoch {received} does not match the expected member epoch {expected}.",
    )


def _stale(classic: bool, message: str) -> CoordinatorError:
    return CoordinatorError(Errors.ILLEGAL_GENERATION if classic else Errors.STALE_MEMBER_EPOCH, message)


def _partition_check(
    member: ConsumerGroupMember, epoch: int, topic_id: Callable[[str], TopicId | None]
) -> PartitionCheck:
    """Kafka `ConsumerGroup.createAssignmentEpochValidator`."""
    classic = member.uses_classic_protocol
    sent = "generation id" if classic else "member epoch"

    def check(topic: str, partition: int) -> None:
        tid = topic_id(topic)
        given = None if tid is None else member.assignment_epoch(tid, partition)
        if given is None:
            raise _stale(
                classic, f"Partition {topic}-{partition} is not assigned or pending revocation for member."
            )
        if epoch < given:
            raise _stale(
                classic,
                f"Received {sent} {epoch} is older than assignment epoch {given} "
                f"for partition {topic}-{partition}.",
            )

    return check


def validate_consumer_commit(
    group: ConsumerGroup,
    member_id: str,
    epoch: int,
    api_version: int,
    topic_id: Callable[[str], TopicId | None],
) -> PartitionCheck | None:
    """Kafka `ConsumerGroup.validateOffsetCommit`: raises for the whole request, or returns the
    check each partition must pass (None: every partition may be committed). `topic_id`
    resolves a topic name in the metadata image (None: unknown topic)."""
    if epoch < 0 and not group.members:
        return None
    member = group.members.get(member_id)
    if member is None:
        raise CoordinatorError(
            Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
        )
    if not member.uses_classic_protocol and api_version < CONSUMER_PROTOCOL_MIN_COMMIT_VERSION:
        raise CoordinatorError(
            Errors.UNSUPPORTED_VERSION,
            "OffsetCommit version 9 or above must be used by members using the modern group protocol",
        )
    if epoch == member.member_epoch:
        return None
    if epoch > member.member_epoch:
        classic = member.uses_classic_protocol
        sent = "generation id" if classic else "member epoch"
        raise _stale(
            classic, f"Received {sent} {epoch} is newer than current member epoch {member.member_epoch}."
        )
    return _partition_check(member, epoch, topic_id)


def validate_consumer_fetch(group: ConsumerGroup, member_id: str | None, epoch: int) -> None:
    if member_id is None and epoch < 0:
        return  # admin clients, and clients that do not send them (librdkafka)
    member = group.members.get(member_id or "")
    if member is None:
        raise CoordinatorError(
            Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
        )
    _check_epoch(epoch, member.member_epoch, member.uses_classic_protocol)


def validate_streams_commit(
    group: StreamsGroup, member_id: str, epoch: int, api_version: int
) -> PartitionCheck | None:
    """Kafka 4.4 `StreamsGroup.validateOffsetCommit`: an admin commit (epoch < 0) while the group
    has no members, else the member's own epoch, or an older one for the tasks the member was
    given at that epoch or before (`createAssignmentEpochValidator`, KAFKA-19779): a Kafka
    Streams instance's commit sent just before its heartbeat moved it to a new epoch is kept.
    Returns the check each partition must pass (None: every partition may be committed)."""
    if epoch < 0 and not group.members:
        return None
    member = group.members.get(member_id)
    if member is None:
        raise CoordinatorError(
            Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
        )
    # A classic Kafka Streams instance living in the group (docs/streams-classic-groups.md)
    # commits with its generation, at any version, as a classic member of a consumer group does.
    classic = member.classic is not None
    if not classic and api_version < CONSUMER_PROTOCOL_MIN_COMMIT_VERSION:
        raise CoordinatorError(
            Errors.UNSUPPORTED_VERSION,
            "OffsetCommit version 9 or above must be used by members using the streams group protocol",
        )
    if classic or epoch >= member.member_epoch:
        _check_epoch(epoch, member.member_epoch, classic)
        return None
    return _task_check(group, member, epoch)


def _task_check(group: StreamsGroup, member: StreamsMember, epoch: int) -> PartitionCheck:
    """Kafka 4.4 `StreamsGroup.createAssignmentEpochValidator`: a partition of a source or
    repartition source topic is the task of its subtopology with the same number."""
    topology = group.topology
    if topology is None:
        raise CoordinatorError(
            Errors.STALE_MEMBER_EPOCH, "Topology is not available for offset commit validation."
        )
    subtopology_of: dict[str, str] = {}
    for sub in topology.subtopologies:
        for name in sub.source_topics:
            subtopology_of[name] = sub.subtopology_id
        for info in sub.repartition_source_topics:
            subtopology_of[info.name] = sub.subtopology_id

    def check(topic: str, partition: int) -> None:
        sid = subtopology_of.get(topic)
        if sid is None:
            raise CoordinatorError(Errors.STALE_MEMBER_EPOCH, f"Topic {topic} is not in the topology.")
        given = member.active_task_epoch(sid, partition)
        if given is None:
            raise CoordinatorError(
                Errors.STALE_MEMBER_EPOCH,
                f"Task {sid}-{partition} is not assigned or pending revocation for member.",
            )
        if epoch < given:
            raise CoordinatorError(
                Errors.STALE_MEMBER_EPOCH,
                f"Received member epoch {epoch} is older than assignment epoch {given} "
                f"for task {sid}-{partition}.",
            )

    return check


def validate_streams_fetch(group: StreamsGroup, member_id: str | None, epoch: int) -> None:
    if member_id is None and epoch < 0:
        return
    member = group.members.get(member_id or "")
    if member is None:
        raise CoordinatorError(
            Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
        )
    _check_epoch(epoch, member.member_epoch, member.classic is not None)
