"""ConsumerGroupHeartbeat (KIP-848 "ConsumerGroupHeartbeat API"; Kafka 4.0
`GroupMetadataManager.consumerGroupHeartbeat`, Kafka `throwIfConsumerGroupHeartbeatRequestIsInvalid`).

One request does everything a member needs: join (epoch 0), stay alive and acknowledge
revocations (epoch > 0), leave (-1) or leave temporarily as a static member (-2). The handler
reads the group, computes the records and the response, and lets the shard replay the records.

Where this follows Kafka 4.x rather than the 3.x snapshot, on purpose (real clients are 4.x era):
member ids may be client-generated (v1, KIP-1082) and are required from v1; regex subscriptions
(v1); a join needs topic names *or* a regex (either may be empty); a known member rejoining with
epoch 0 is accepted (KAFKA-19233); a member's rack or assignor change bumps the group epoch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.assignment import is_subset, to_records
from engine.config import CoordinatorConfig
from engine.consumer import record_builders as rb
from engine.consumer.api import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from engine.consumer.client_assignment import client_choice, notify_assigning_member, refuse_unsupported
from engine.consumer.group import ConsumerGroup
from engine.consumer.member import ConsumerGroupMember, normalize_topic_names
from engine.consumer.membership import (
    fence_member,
    joining_static_member,
    known_static_member,
    maybe_reconcile,
    schedule_session_timeout,
    update_subscription,
    update_target,
)
from engine.consumer.reconcile import OwnedPartitions
from engine.context import RequestContext
from engine.errors import CoordinatorError, Errors, invalid_request
from engine.ids import consumer_member_id
from engine.operation import Operation

if TYPE_CHECKING:
    from engine.state import ShardState

# From this version the client generates its member id (KIP-1082).
CLIENT_GENERATED_MEMBER_ID_VERSION = 1


def validate(req: ConsumerGroupHeartbeatRequest, ctx: RequestContext, config: CoordinatorConfig) -> None:
    """Kafka `throwIfConsumerGroupHeartbeatRequestIsInvalid` (4.0 rules). Its signature is the
    shard's request check (`engine.shard.Check`), so a heartbeat runs it without a wrapper."""
    epoch = req.member_epoch
    api_version = ctx.api_version
    # Kafka checks the member id first, then group, instance and rack ids (a request with both
    # ids empty is told about the member id).
    if (api_version >= CLIENT_GENERATED_MEMBER_ID_VERSION or epoch > 0 or epoch == -1) and (
        req.member_id is None or not req.member_id.strip()
    ):
        raise invalid_request("MemberId can't be empty.")
    if req.group_id is None or not req.group_id.strip():
        raise invalid_request("GroupId can't be empty.")
    if req.instance_id is not None and not req.instance_id.strip():
        raise invalid_request("InstanceId can't be empty.")
    if req.rack_id is not None and not req.rack_id.strip():
        raise invalid_request("RackId can't be empty.")
    if epoch > 0 and req.rebalance_timeout_ms == -1 and req.server_assignor is None:
        return  # the common steady heartbeat: nothing else to check
    if epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise invalid_request("RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or len(req.topic_partitions) > 0:
            raise invalid_request("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise invalid_request(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
            )
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.instance_id is None:
            raise invalid_request("InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid_request("MemberEpoch is invalid.")
    if req.rebalance_timeout_ms < -1:
        raise invalid_request("RebalanceTimeoutMs must be -1 (unchanged) or a positive value.")
    assignors = config.consumer_assignors
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise CoordinatorError(
            Errors.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {req.server_assignor} is not supported. "
            f"Supported assignors: {', '.join(assignors)}.",
        )


def check_member_epoch(member: ConsumerGroupMember, received: int, owned: OwnedPartitions) -> None:
    """Kafka `throwIfConsumerGroupMemberEpochIsInvalid`, with the lost-response tolerance."""
    if received == 0:
        return  # KAFKA-19233: a known member may rejoin with epoch 0
    if received > member.member_epoch:
        raise CoordinatorError(
            Errors.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin.",
        )
    if received < member.member_epoch and (
        received != member.previous_member_epoch or not is_subset(owned, member.assigned_partitions)
    ):
        raise CoordinatorError(
            Errors.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a smaller member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin.",
        )


def heartbeat(
    shard: ShardState,
    group: ConsumerGroup | None,
    req: ConsumerGroupHeartbeatRequest,
    ctx: RequestContext,
    op: Operation,
) -> ConsumerGroupHeartbeatResponse:
    """The native path (`engine.routing`): `group` is the consumer group the request found, or
    None; the request has passed `validate`."""
    if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
        if group is None:  # Kafka's `consumerGroup(groupId)` words for a leave
            raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
        return leave(shard, group, req, op)
    if group is None:
        if req.member_epoch != 0:
            raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found.")
        group = ConsumerGroup(req.group_id)  # materialised by replaying the join's records
    return join_or_heartbeat(shard, group, req, ctx, op)


def join_or_heartbeat(
    shard: ShardState,
    group: ConsumerGroup,
    req: ConsumerGroupHeartbeatRequest,
    ctx: RequestContext,
    op: Operation,
) -> ConsumerGroupHeartbeatResponse:
    gid = req.group_id
    joining = req.member_epoch == 0

    member_id = req.member_id
    if group.num_members >= shard.config.consumer_max_size and (
        not member_id or member_id not in group.members
    ):
        raise CoordinatorError(
            Errors.GROUP_MAX_SIZE_REACHED,
            f"The consumer group has reached its maximum capacity of "
            f"{shard.config.consumer_max_size} members.",
        )
    if not member_id:
        member_id = consumer_member_id(shard.ids)
        shard.bind_created(op, gid, member_id, ctx.principal)

    owned = req.topic_partitions
    if req.instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise CoordinatorError(
                    Errors.UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {gid}.",
                )
            old: ConsumerGroupMember | None = None
            base = ConsumerGroupMember(member_id=member_id)
            op.event("member.joined", group=gid, member=member_id, protocol="consumer")
        else:
            check_member_epoch(member, req.member_epoch, owned)
            old = base = member
    else:
        old, base = _static_member(group, member_id, req, op)

    # `old` is the member as the group counts it today: None for a new member, the member
    # itself, or (static takeover) the copy of the replaced member under the new id.
    updated = _apply_request(base, req, ctx, shard.config.consumer_client_assignors_enable)
    refuse_unsupported(shard, group, old, updated)
    sub = update_subscription(shard, group, old, updated, op)
    choice = client_choice(shard, group, old, updated, sub.group_epoch)
    target_epoch, target = update_target(shard, group, sub, old, updated, op, choice is not None)
    updated = maybe_reconcile(shard, group, updated, target_epoch, target, owned, op)
    compute_epoch = None
    if choice is not None and choice.assigning_member == member_id:
        compute_epoch = notify_assigning_member(group, updated, sub.group_epoch, op)

    schedule_session_timeout(op, gid, member_id, shard.consumer_session_timeout_ms(gid))

    full = joining or (
        req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None and owned is not None
    )
    assignment = None
    if full or (
        updated.assigned_partitions is not base.assigned_partitions
        and updated.assigned_partitions != base.assigned_partitions
    ):
        assignment = to_records(updated.assigned_partitions)
    return ConsumerGroupHeartbeatResponse(
        member_id=member_id,
        member_epoch=updated.member_epoch,
        heartbeat_interval_ms=shard.consumer_heartbeat_interval_ms(gid),
        assignment=assignment,
        compute_assignment_epoch=compute_epoch,
        assignment_metadata=None if assignment is None else group.target_client_metadata.get(member_id),
    )


def _static_member(
    group: ConsumerGroup,
    member_id: str,
    req: ConsumerGroupHeartbeatRequest,
    op: Operation,
) -> tuple[ConsumerGroupMember | None, ConsumerGroupMember]:
    """Returns (old, base) where `old` is the member as the group knows it (None when new) and
    `base` the member the request updates (`membership.joining_static_member`)."""
    instance_id = req.instance_id
    assert instance_id is not None
    if req.member_epoch == 0:
        old, base, _ = joining_static_member(
            group, member_id, instance_id, op, protocol="consumer", rejoin_by_id=True, take_over_active=False
        )
        return old, base
    existing = known_static_member(group, member_id, instance_id)
    check_member_epoch(existing, req.member_epoch, req.topic_partitions)
    return existing, existing


def _apply_request(
    member: ConsumerGroupMember,
    req: ConsumerGroupHeartbeatRequest,
    ctx: RequestContext,
    client_assignors_enabled: bool = False,
) -> ConsumerGroupMember:
    """The member with the request's non-null fields applied (null means "unchanged"). The
    client-assignor list counts only with `group.consumer.client.assignors.enable`: flag off,
    the field is ignored as Kafka ignores an unknown tag."""
    changes: dict[str, object] = {}
    if (
        client_assignors_enabled
        and req.client_assignors is not None
        and req.client_assignors != member.client_assignors
    ):
        changes["client_assignors"] = tuple(req.client_assignors)
    if req.instance_id is not None and req.instance_id != member.instance_id:
        changes["instance_id"] = req.instance_id
    if req.rack_id is not None and req.rack_id != member.rack_id:
        changes["rack_id"] = req.rack_id
    if req.rebalance_timeout_ms != -1 and req.rebalance_timeout_ms != member.rebalance_timeout_ms:
        changes["rebalance_timeout_ms"] = req.rebalance_timeout_ms
    if req.server_assignor is not None and req.server_assignor != member.server_assignor:
        changes["server_assignor"] = req.server_assignor
    if req.subscribed_topic_names is not None:
        names = normalize_topic_names(req.subscribed_topic_names)
        if names != member.subscribed_topic_names:
            changes["subscribed_topic_names"] = names
    if req.subscribed_topic_regex is not None and req.subscribed_topic_regex != member.subscribed_topic_regex:
        changes["subscribed_topic_regex"] = req.subscribed_topic_regex
    if ctx.client_id != member.client_id:
        changes["client_id"] = ctx.client_id
    if ctx.client_host != member.client_host:
        changes["client_host"] = ctx.client_host
    if member.classic_member_metadata is not None:
        changes["classic_member_metadata"] = None  # it now speaks the consumer protocol
    return member.with_changes(**changes) if changes else member


def leave(
    shard: ShardState, group: ConsumerGroup, req: ConsumerGroupHeartbeatRequest, op: Operation
) -> ConsumerGroupHeartbeatResponse:
    """Kafka `consumerGroupLeave`: -1 fences the member, -2 parks a static member's assignment."""
    gid = req.group_id
    response = ConsumerGroupHeartbeatResponse(member_id=req.member_id, member_epoch=req.member_epoch)
    if req.instance_id is None:
        member = group.members.get(req.member_id)
        if member is None:
            raise CoordinatorError(
                Errors.UNKNOWN_MEMBER_ID,
                f"Member {req.member_id} is not a member of group {gid}.",
            )
        fence_member(shard, group, member, op, "the member left the group.", "member.left")
        return response
    member = known_static_member(group, req.member_id, req.instance_id)
    if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        leaving = member.with_changes(
            member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={}
        )
        op.records.append(rb.current_assignment(gid, leaving))
        op.event(
            "member.left_temporarily",
            group=gid,
            member=member.member_id,
            instance_id=req.instance_id,
        )
        return ConsumerGroupHeartbeatResponse(
            member_id=member.member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH
        )
    fence_member(shard, group, member, op, "the static member left the group.", "member.left")
    return response
