"""Classic members living inside a consumer group (KIP-848 "Supporting Online Consumer Group
Upgrade"; KIP-848 "Supporting Online Consumer Group Upgrade"; Kafka `classicGroupJoinToConsumerGroup`,
`classicGroupSyncToConsumerGroup`,
`classicGroupHeartbeatToConsumerGroup`, `classicGroupLeaveToConsumerGroup`).

Rules of this file:
* A classic member is a consumer-group member with ClassicMemberMetadata; it is reconciled by
  the same engine code as a KIP-848 member, so both protocols move through the same epochs.
* There is no group-wide barrier: each classic member runs its own loop, told to rejoin when it
  must (REBALANCE_IN_PROGRESS on Heartbeat), answered at once on JoinGroup with its new member
  epoch as the generation, and given its *current* assigned partitions on SyncGroup.
* A classic member always sees its assignment shrink (a SyncGroup without the partitions to
  revoke) before those partitions go to anyone else: partitions pending revocation are left out
  of the SyncGroup answer and stay owned until the member rejoins without them (cooperative) or
  rejoins owning nothing (eager).

Theory of operation, one member's loop (the classic states are the member's view):

    Stable ──Heartbeat: REBALANCE_IN_PROGRESS──> PrepareRebalance (rejoin, bounded by join timer)
    PrepareRebalance ──JoinGroup: reconciled, generation = member epoch──> CompletingRebalance
    CompletingRebalance ──SyncGroup: current assignment (bounded by sync timer)──> Stable

A Heartbeat answers REBALANCE_IN_PROGRESS when the member is behind the group epoch, must revoke
(UNREVOKED_PARTITIONS), or waits for partitions that have meanwhile been released.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.classic.api import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from engine.consumer import record_builders as rb
from engine.consumer.client_assignment import client_choice
from engine.consumer.group import ConsumerGroup
from engine.consumer.member import ConsumerGroupMember, MemberState, normalize_topic_names
from engine.consumer.membership import (
    cancel_member_timers,
    joining_static_member,
    known_static_member,
    maybe_reconcile,
    remove_member_records,
    schedule_session_timeout,
    subscription_metadata,
    topic_counts,
    update_subscription,
    update_target,
)
from engine.consumer.reconcile import waiting_on_unreleased_partition
from engine.context import RequestContext
from engine.errors import CoordinatorError, Errors
from engine.ids import consumer_member_id
from engine.operation import Operation
from engine.timers import TimerKind
from records.consumer_group import ClassicMemberMetadata, ClassicProtocol, TopicPartitions
from translation.downgrade import can_downgrade_after_replacement, downgrade
from translation.embedded_protocol import (
    SchemaError,
    parse_subscription,
    read_version,
    serialize_assignment,
)
from translation.policy import refused

if TYPE_CHECKING:
    from engine.state import ShardState

CONSUMER = "consumer"
# A dynamic classic member must first obtain a member id from JoinGroup v4 (KIP-394).
KNOWN_MEMBER_ID_REQUIRED_VERSION = 4


def supports_classic_protocols(group: ConsumerGroup, protocol_type: str, names: list[str]) -> bool:
    """Kafka `supportsClassicProtocols`: type `consumer`, and some protocol every classic member
    supports (any name when the group has no classic member)."""
    if protocol_type != CONSUMER:
        return False
    if group.is_empty():
        return bool(names)
    n = group.num_classic_members
    return any(group.classic_protocol_counts.get(name, 0) == n for name in names)


# --- JoinGroup --------------------------------------------------------------------------------


def join(
    shard: ShardState, group: ConsumerGroup, req: JoinGroupRequest, ctx: RequestContext, op: Operation
) -> JoinGroupResponse:
    gid = group.group_id
    if shard.config.consumer_migration_policy == "disabled":
        # Kafka 4.3 `throwIfClassicMemberCannotJoinConsumerGroup` (KAFKA-20640), before any
        # other check.
        refused(op, gid, "join", "policy", policy="disabled", member=req.member_id)
        raise CoordinatorError(
            Errors.INCONSISTENT_GROUP_PROTOCOL,
            f"Cannot join the consumer group {gid} with the classic protocol because the group "
            "migration is disabled.",
        )
    member_id = req.member_id
    unknown = member_id == ""
    if unknown:
        member_id = consumer_member_id(shard.ids)  # the consumer-group id format, not clientId-UUID
        shard.bind_created(op, gid, member_id, ctx.principal)
    if group.num_members >= shard.config.consumer_max_size and (unknown or member_id not in group.members):
        raise CoordinatorError(
            Errors.GROUP_MAX_SIZE_REACHED,
            f"The consumer group has reached its maximum capacity of "
            f"{shard.config.consumer_max_size} members.",
        )
    names = [p.name for p in req.protocols]
    if not supports_classic_protocols(group, req.protocol_type, names):
        op.explain(
            "request.protocols_not_supported",
            group=gid,
            member=member_id,
            protocol_type=req.protocol_type,
            protocols=names,
            group_protocols=sorted(group.classic_protocol_counts),
        )
        raise CoordinatorError(
            Errors.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not supported."
        )
    if unknown and req.group_instance_id is None and ctx.api_version >= KNOWN_MEMBER_ID_REQUIRED_VERSION:
        # No pending-member tracking in consumer groups: nothing is recorded.
        return JoinGroupResponse(error_code=int(Errors.MEMBER_ID_REQUIRED), member_id=member_id)

    instance_id = req.group_instance_id
    replaced: ConsumerGroupMember | None = None
    if instance_id is None:
        member = group.members.get(member_id)
        old = member
        base = member if member is not None else ConsumerGroupMember(member_id=member_id)
        if member is None:
            op.event("member.joined", group=gid, member=member_id, protocol="classic")
    elif unknown:
        # A classic static member takes the instance id over at once (no -2 needed).
        old, base, replaced = joining_static_member(
            group, member_id, instance_id, op, protocol="classic", rejoin_by_id=False, take_over_active=True
        )
    else:
        old = base = known_static_member(group, member_id, instance_id)

    first = req.protocols[0]
    try:
        subscription = parse_subscription(first.metadata)
    except SchemaError as e:
        raise CoordinatorError(
            Errors.UNKNOWN_SERVER_ERROR,
            f"Malformed embedded consumer protocol in subscription deserialization: {e}",
        ) from None
    changes: dict[str, object] = {
        "subscribed_topic_names": normalize_topic_names(subscription.topics),
        "client_id": ctx.client_id,
        "client_host": ctx.client_host,
        "classic_member_metadata": ClassicMemberMetadata(
            req.session_timeout_ms, tuple(ClassicProtocol(p.name, p.metadata) for p in req.protocols)
        ),
    }
    if instance_id is not None:
        changes["instance_id"] = instance_id
    if subscription.rack_id:
        changes["rack_id"] = subscription.rack_id
    if req.rebalance_timeout_ms != -1:
        changes["rebalance_timeout_ms"] = req.rebalance_timeout_ms
    updated = base.with_changes(**changes)

    sub = update_subscription(shard, group, old, updated, op)
    # A client-side assignor computes the target when every member supports it (a classic member
    # by its protocol names, at metadata version -1): docs/client-side-assignors.md.
    computes = client_choice(shard, group, old, updated, sub.group_epoch) is not None
    target_epoch, target = update_target(shard, group, sub, old, updated, op, computes)
    owned = []
    for topic, parts in subscription.owned_partitions:
        t = shard.image.topic(topic)
        if t is not None:
            owned.append(TopicPartitions(t.topic_id, tuple(parts)))  # unknown topics are dropped
    updated = maybe_reconcile(shard, group, updated, target_epoch, target, owned, op)

    downgraded = False
    protocol_name = first.name  # the member's first preference: no vote in a consumer group
    if replaced is not None and can_downgrade_after_replacement(shard, group, replaced.member_id, op):
        classic = downgrade(
            shard,
            group,
            replaced.member_id,
            updated,
            op,
            "a classic static member replaced the last consumer-protocol member",
        )
        downgraded = True
        # The joiner now belongs to a classic group: its SyncGroup must name the protocol that
        # group selected (Kafka answers the first preference, which the classic SyncGroup then
        # rejects with INCONSISTENT_GROUP_PROTOCOL whenever the vote picked another one).
        protocol_name = classic.protocol_name or first.name

    op.cancel(TimerKind.CLASSIC_MEMBER_JOIN, gid, member_id)
    if not downgraded:
        schedule_session_timeout(op, gid, member_id, req.session_timeout_ms)
        sync_timeout = max(req.rebalance_timeout_ms, 0)
        op.schedule(TimerKind.CLASSIC_MEMBER_SYNC, gid, member_id, sync_timeout)
    return JoinGroupResponse(
        member_id=member_id,
        generation_id=updated.member_epoch,
        protocol_type=CONSUMER,
        protocol_name=protocol_name,
        leader="",
        skip_assignment=False,
        members=[],
    )


# --- SyncGroup and Heartbeat --------------------------------------------------------------------


def _validate_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise CoordinatorError(
                Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
            )
    else:
        member = known_static_member(group, member_id, instance_id)
    if member.classic_member_metadata is None:
        raise CoordinatorError(
            Errors.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol."
        )
    return member


def _check_generation(member: ConsumerGroupMember, generation: int) -> None:
    if member.member_epoch != generation:
        raise CoordinatorError(
            Errors.ILLEGAL_GENERATION,
            f"The request generation id {generation} is not equal to the member epoch "
            f"{member.member_epoch} of member {member.member_id}.",
        )


def _schedule_join_timeout(op: Operation, group_id: str, member: ConsumerGroupMember) -> None:
    op.schedule_if_absent(
        TimerKind.CLASSIC_MEMBER_JOIN, group_id, member.member_id, max(member.rebalance_timeout_ms, 0)
    )


def _session_timeout(member: ConsumerGroupMember) -> int:
    assert member.classic_member_metadata is not None
    return member.classic_member_metadata.session_timeout_ms


def sync(shard: ShardState, group: ConsumerGroup, req: SyncGroupRequest, op: Operation) -> SyncGroupResponse:
    gid = group.group_id
    member = _validate_member(group, req.member_id, req.group_instance_id)
    _check_generation(member, req.generation_id)
    assert member.classic_member_metadata is not None
    first = member.classic_member_metadata.supported_protocols[0]
    if req.protocol_type is not None and req.protocol_type != CONSUMER:
        raise CoordinatorError(
            Errors.INCONSISTENT_GROUP_PROTOCOL,
            f"The protocol type {req.protocol_type} from member {member.member_id} request "
            "is not equal to the "
            f"group protocol type {CONSUMER}.",
        )
    if req.protocol_name is not None and req.protocol_name != first.name:
        raise CoordinatorError(
            Errors.INCONSISTENT_GROUP_PROTOCOL,
            f"The protocol name {req.protocol_name} from member {member.member_id} request "
            "is not equal to the "
            f"protocol name {first.name} returned in the join response.",
        )
    if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
        # An answer, not a raise: the join timer it starts must outlive the refusal.
        _schedule_join_timeout(op, gid, member)
        message = (
            f"A new rebalance is triggered in group {gid} and member {member.member_id} "
            "should rejoin to catch up."
        )
        op.event(
            "request.rejected",
            api="SyncGroup",
            group=gid,
            member=member.member_id,
            error=Errors.REBALANCE_IN_PROGRESS.name,
            reason=message,
        )
        return SyncGroupResponse(error_code=int(Errors.REBALANCE_IN_PROGRESS))
    op.cancel(TimerKind.CLASSIC_MEMBER_SYNC, gid, member.member_id)
    schedule_session_timeout(op, gid, member.member_id, _session_timeout(member))
    by_name: list[tuple[str, list[int]]] = []
    for tid, parts in member.assigned_partitions.items():
        t = shard.image.topic_by_id(tid)
        if t is not None:
            by_name.append((t.name, sorted(parts)))
    try:
        version = read_version(first.metadata)
    except SchemaError:
        version = 0
    return SyncGroupResponse(
        protocol_type=req.protocol_type,
        protocol_name=req.protocol_name,
        assignment=serialize_assignment(sorted(by_name), version),
    )


def heartbeat(
    shard: ShardState, group: ConsumerGroup, req: HeartbeatRequest, op: Operation
) -> HeartbeatResponse:
    gid = group.group_id
    member = _validate_member(group, req.member_id, req.group_instance_id)
    _check_generation(member, req.generation_id)
    schedule_session_timeout(op, gid, member.member_id, _session_timeout(member))
    must_rejoin = (
        member.member_epoch < group.group_epoch
        or member.state is MemberState.UNREVOKED_PARTITIONS
        or (
            member.state is MemberState.UNRELEASED_PARTITIONS
            and not waiting_on_unreleased_partition(
                member, group.target(member.member_id), group.current_partition_epoch
            )
        )
    )
    if must_rejoin:
        _schedule_join_timeout(op, gid, member)
        return HeartbeatResponse(int(Errors.REBALANCE_IN_PROGRESS))
    return HeartbeatResponse(0)


# --- LeaveGroup ---------------------------------------------------------------------------------


def leave(
    shard: ShardState, group: ConsumerGroup, req: LeaveGroupRequest, op: Operation
) -> LeaveGroupResponse:
    """Per-member removal, one epoch bump for the batch; never a downgrade (the leavers are
    classic), even when the group is left empty."""
    gid = group.group_id
    responses: list[MemberResponse] = []
    removed: list[ConsumerGroupMember] = []
    for ident in req.members:
        member_id, instance_id = ident.member_id, ident.group_instance_id
        try:
            if instance_id is None:
                member = group.members.get(member_id)
                if member is None:
                    raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID)
            else:
                member = group.static_member(instance_id)
                if member is None:
                    raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                if member_id != "" and member.member_id != member_id:
                    raise CoordinatorError(Errors.FENCED_INSTANCE_ID)
            if member.classic_member_metadata is None:
                raise CoordinatorError(
                    Errors.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol."
                )
            if any(r.member_id == member.member_id for r in removed):
                raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID)
        except CoordinatorError as e:
            responses.append(MemberResponse(member_id, instance_id, int(e.code)))
            continue
        remove_member_records(gid, member.member_id, op)
        cancel_member_timers(op, gid, member.member_id)
        removed.append(member)
        responses.append(MemberResponse(member.member_id, instance_id))
        op.event(
            "member.left",
            group=gid,
            member=member.member_id,
            instance_id=instance_id,
            protocol="classic",
            reason=ident.reason or "not provided",
        )
    if removed:
        counts = topic_counts(group, None, None, group.resolved_regexes)
        for m in removed:
            counts = _minus(counts, m)  # classic members subscribe by names only, never by regex
        metadata = subscription_metadata(shard.image, counts)
        if metadata != group.subscription_metadata:
            op.records.append(rb.subscription_metadata(gid, metadata.values()))
        epoch = group.group_epoch + 1
        op.records.append(rb.group_epoch(gid, epoch))
        op.event(
            "group.epoch_bumped",
            group=gid,
            group_epoch=epoch,
            reason="classic members left",
            members=[m.member_id for m in removed],
        )
    return LeaveGroupResponse(members=responses)


def _minus(counts: dict[str, int], m: ConsumerGroupMember) -> dict[str, int]:
    out = dict(counts)
    for t in m.subscribed_topic_names:
        n = out.get(t, 0) - 1
        if n > 0:
            out[t] = n
        else:
            out.pop(t, None)
    return out
