"""Who may commit and fetch offsets, per group type (Kafka `OffsetMetadataManager`; Kafka
`ClassicGroup.validateOffsetCommit`, `ConsumerGroup.validateOffsetCommit/Fetch`).

Classic groups check generation and member id; consumer groups check the member epoch, and a
classic member living in a consumer group gets the classic error (ILLEGAL_GENERATION) while a
consumer-protocol member gets STALE_MEMBER_EPOCH. Commits with generation -1 and no member are
admin or manual-assignment commits, allowed only while the group has no members.
"""

from __future__ import annotations

from engine.classic.group import ClassicGroup
from engine.classic.state import ClassicGroupState
from engine.consumer.group import ConsumerGroup
from engine.errors import CoordinatorError, Errors

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


def validate_consumer_commit(group: ConsumerGroup, member_id: str, epoch: int, api_version: int) -> None:
    if epoch < 0 and not group.members:
        return
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
    _check_epoch(epoch, member.member_epoch, member.uses_classic_protocol)


def validate_consumer_fetch(group: ConsumerGroup, member_id: str | None, epoch: int) -> None:
    if member_id is None and epoch < 0:
        return  # admin clients, and clients that do not send them (librdkafka)
    member = group.members.get(member_id or "")
    if member is None:
        raise CoordinatorError(
            Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
        )
    _check_epoch(epoch, member.member_epoch, member.uses_classic_protocol)
