"""Heartbeat and LeaveGroup for classic groups (Kafka's classic group protocol; Kafka
`classicGroupHeartbeatToClassicGroup`, `classicGroupLeaveToClassicGroup`).

A heartbeat keeps a member's session and tells it when to rejoin (REBALANCE_IN_PROGRESS). A
LeaveGroup (batched from v3) removes members at once; an empty member id with an instance id is
the admin removal of a static member (KIP-345).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.classic.api import (
    HeartbeatRequest,
    HeartbeatResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberResponse,
)
from engine.classic.rebalance import (
    answer_parked_requests,
    maybe_complete_join_phase,
    maybe_prepare_rebalance_or_complete_join,
    reschedule_heartbeat,
)
from engine.classic.state import ClassicGroupState
from engine.errors import CoordinatorError, Errors
from engine.operation import Operation
from engine.timers import TimerKind

if TYPE_CHECKING:
    from engine.classic.group import ClassicGroup
    from engine.state import ShardState

S = ClassicGroupState


def heartbeat_classic_group(
    shard: ShardState, group: ClassicGroup, req: HeartbeatRequest, op: Operation
) -> HeartbeatResponse:
    if group.is_in_state(S.DEAD):
        raise CoordinatorError(Errors.COORDINATOR_NOT_AVAILABLE)
    group.validate_member(req.member_id, req.group_instance_id)
    if req.generation_id != group.generation_id:
        raise CoordinatorError(
            Errors.ILLEGAL_GENERATION,
            f"generation {req.generation_id} is not the group's generation {group.generation_id}",
        )
    if group.is_in_state(S.EMPTY):
        raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, "the group is empty")
    reschedule_heartbeat(op, group, group.members[req.member_id])
    if group.is_in_state(S.PREPARING_REBALANCE):
        return HeartbeatResponse(int(Errors.REBALANCE_IN_PROGRESS))
    return HeartbeatResponse(0)


def leave_classic_group(
    shard: ShardState, group: ClassicGroup, req: LeaveGroupRequest, op: Operation
) -> LeaveGroupResponse:
    if group.is_in_state(S.DEAD):
        return LeaveGroupResponse(error_code=int(Errors.COORDINATOR_NOT_AVAILABLE))
    responses: list[MemberResponse] = []
    left: list[str] = []
    for ident in req.members:
        mid, iid = ident.member_id, ident.group_instance_id
        if mid == "":
            existing = group.static_member_id(iid)
            if existing is not None:
                _remove_current_member(shard, group, existing, op, ident.reason)
                responses.append(MemberResponse(mid, iid))
                left.append(existing)
            else:
                responses.append(MemberResponse(mid, iid, int(Errors.UNKNOWN_MEMBER_ID)))
        elif group.is_pending_member(mid):
            group.remove(mid)
            op.cancel(TimerKind.CLASSIC_HEARTBEAT, group.group_id, mid)
            op.event("member.left", group=group.group_id, member=mid, reason=ident.reason or "pending member")
            responses.append(MemberResponse(mid, iid))
            left.append(mid)
        else:
            try:
                group.validate_member(mid, iid)
            except CoordinatorError as e:
                responses.append(MemberResponse(mid, iid, int(e.code)))
                continue
            _remove_current_member(shard, group, mid, op, ident.reason)
            responses.append(MemberResponse(mid, iid))
            left.append(mid)
    if left:
        reason = f"explicit LeaveGroup request for ({', '.join(left)}) members."
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            maybe_prepare_rebalance_or_complete_join(shard, group, op, reason)
        elif group.is_in_state(S.PREPARING_REBALANCE):
            maybe_complete_join_phase(shard, group, op)
    return LeaveGroupResponse(members=responses)


def _remove_current_member(
    shard: ShardState, group: ClassicGroup, member_id: str, op: Operation, reason: str | None
) -> None:
    member = group.members[member_id]
    op.cancel(TimerKind.CLASSIC_HEARTBEAT, group.group_id, member_id)
    answer_parked_requests(group, member, op)
    group.remove(member_id)
    op.event(
        "member.left",
        group=group.group_id,
        member=member_id,
        instance_id=member.group_instance_id,
        generation=group.generation_id,
        reason=reason or "not provided",
    )
