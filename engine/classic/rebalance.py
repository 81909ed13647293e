"""Classic rebalance mechanics (Kafka's classic group protocol; Kafka `prepareRebalance`,
`completeClassicGroupJoin`, `tryCompleteInitialRebalanceElseSchedule`, `expirePendingSync`,
`expireClassicGroupMemberHeartbeat`).

A rebalance has two barriers: the join phase (everybody rejoins, bounded by the largest
rebalance timeout, or by the initial delay for a new group) and the sync phase (the leader sends
the assignment, bounded by the same timeout). Members that miss a barrier are removed and the
group rebalances again. Every function here changes the group in place and appends completions of
parked requests and records to the operation; none returns a response of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.classic.api import JoinGroupResponse, JoinGroupResponseMember, SyncGroupResponse
from engine.classic.group import ClassicGroup
from engine.classic.member import EMPTY_ASSIGNMENT, ClassicGroupMember
from engine.classic.records import group_metadata_record
from engine.classic.state import ClassicGroupState
from engine.errors import Errors
from engine.operation import Operation
from engine.timers import TimerKind

if TYPE_CHECKING:
    from engine.state import ShardState

S = ClassicGroupState


# --- heartbeats --------------------------------------------------------------------------------


def reschedule_heartbeat(
    op: Operation, group: ClassicGroup, member: ClassicGroupMember, timeout_ms: int | None = None
) -> None:
    timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
    schedule_member_heartbeat(op, group.group_id, member.member_id, timeout)


def schedule_member_heartbeat(op: Operation, group_id: str, member_id: str, timeout_ms: int) -> None:
    op.schedule(TimerKind.CLASSIC_HEARTBEAT, group_id, member_id, timeout_ms)


def expire_member_heartbeat(shard: ShardState, group_id: str, member_id: str, op: Operation) -> None:
    group = shard.classic_group(group_id)
    if group is None or group.is_in_state(S.DEAD):
        return
    if group.is_pending_member(member_id):
        group.remove(member_id)
        op.event("member.fenced", group=group_id, member=member_id, reason="pending member expired")
        if group.is_in_state(S.PREPARING_REBALANCE) and group.has_all_members_joined():
            complete_join(shard, group, op)
        return
    member = group.members.get(member_id)
    if member is None or member.has_satisfied_heartbeat():
        return
    remove_member_and_update(shard, group, member, op, "the member's session expired")


def answer_parked_requests(group: ClassicGroup, member: ClassicGroupMember, op: Operation) -> None:
    """A member leaving the group gets UNKNOWN_MEMBER_ID for whatever it still has parked.

    Kafka answers only the parked JoinGroup and forgets a parked SyncGroup; a request that is
    never answered would stall every later response on its connection (responses go out in
    request order), so groupshift answers both."""
    group.complete_join(member, JoinGroupResponse(error_code=int(Errors.UNKNOWN_MEMBER_ID), member_id=""), op)
    group.complete_sync(member, SyncGroupResponse(error_code=int(Errors.UNKNOWN_MEMBER_ID)), op)


def remove_member_and_update(
    shard: ShardState, group: ClassicGroup, member: ClassicGroupMember, op: Operation, reason: str
) -> None:
    """Kafka `removeMemberAndUpdateClassicGroup`: answer its parked requests, remove it, rebalance."""
    answer_parked_requests(group, member, op)
    group.remove(member.member_id)
    op.event(
        "member.fenced",
        group=group.group_id,
        member=member.member_id,
        generation=group.generation_id,
        reason=reason,
    )
    if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
        maybe_prepare_rebalance_or_complete_join(shard, group, op, reason)
    elif group.is_in_state(S.PREPARING_REBALANCE) and group.has_all_members_joined():
        complete_join(shard, group, op)


# --- join phase ------------------------------------------------------------------------------


def maybe_prepare_rebalance_or_complete_join(
    shard: ShardState, group: ClassicGroup, op: Operation, reason: str
) -> None:
    if group.can_rebalance():
        prepare_rebalance(shard, group, op, reason)
    else:
        maybe_complete_join_phase(shard, group, op)


def prepare_rebalance(shard: ShardState, group: ClassicGroup, op: Operation, reason: str) -> None:
    if group.is_in_state(S.COMPLETING_REBALANCE):
        reset_and_propagate_assignment_with_error(shard, group, Errors.REBALANCE_IN_PROGRESS, op)
    group.pending_sync_members.clear()
    op.cancel(TimerKind.CLASSIC_SYNC_PHASE, group.group_id)
    initial = group.is_in_state(S.EMPTY)
    gid = group.group_id
    if initial:
        delay = shard.config.initial_rebalance_delay_ms
        remaining = max(group.rebalance_timeout_ms() - delay, 0)
        _schedule_initial(op, gid, delay, remaining)
    group.transition_to(S.PREPARING_REBALANCE, shard.now_ms)
    op.event("group.rebalance_prepared", group=gid, generation=group.generation_id, reason=reason)
    if not initial:
        _complete_join_else_schedule(shard, group, op)


def _schedule_initial(op: Operation, group_id: str, delay: int, remaining: int) -> None:
    op.schedule(TimerKind.CLASSIC_INITIAL_REBALANCE, group_id, "", delay, epoch=delay, data=remaining)


def try_complete_initial_rebalance(
    shard: ShardState, group_id: str, delay: int, remaining: int, op: Operation
) -> None:
    """The initial delay: each newly added member extends the wait (up to the rebalance timeout),
    so a fleet starting together forms one generation instead of many."""
    group = shard.classic_group(group_id)
    if group is None:
        return
    if group.new_member_added and remaining != 0:
        group.new_member_added = False
        new_delay = min(shard.config.initial_rebalance_delay_ms, remaining)
        new_remaining = max(remaining - delay, 0)
        _schedule_initial(op, group_id, new_delay, new_remaining)
    else:
        complete_join(shard, group, op)


def _complete_join_else_schedule(shard: ShardState, group: ClassicGroup, op: Operation) -> None:
    if group.has_all_members_joined():
        complete_join(shard, group, op)
    else:
        op.schedule(TimerKind.CLASSIC_JOIN_PHASE, group.group_id, "", group.rebalance_timeout_ms())


def maybe_complete_join_phase(shard: ShardState, group: ClassicGroup, op: Operation) -> None:
    if not group.is_in_state(S.PREPARING_REBALANCE):
        return
    if group.previous_state is S.EMPTY:
        return  # an initial rebalance is only completed by its delay timer
    if not group.has_all_members_joined():
        return
    complete_join(shard, group, op)


def complete_join_by_id(shard: ShardState, group_id: str, op: Operation) -> None:
    group = shard.classic_group(group_id)
    if group is not None:
        complete_join(shard, group, op)


def complete_join(shard: ShardState, group: ClassicGroup, op: Operation) -> None:
    """End the join phase: drop dynamic members that did not rejoin, start the next
    generation, answer every parked join (the leader gets the member list), open the sync phase."""
    gid = group.group_id
    op.cancel(TimerKind.CLASSIC_JOIN_PHASE, gid)
    gone = [m for m in group.members.values() if not m.is_awaiting_join and not m.is_static]
    for m in gone:
        group.remove(m.member_id)
        op.cancel(TimerKind.CLASSIC_HEARTBEAT, gid, m.member_id)
        op.event("member.fenced", group=gid, member=m.member_id, reason="did not rejoin in time")
    if group.is_in_state(S.DEAD):
        return
    if not group.maybe_elect_new_joined_leader() and group.members:
        # Nobody rejoined: try again after another rebalance timeout, until sessions expire.
        op.schedule(TimerKind.CLASSIC_JOIN_PHASE, gid, "", group.rebalance_timeout_ms())
        return
    group.init_next_generation(shard.now_ms)
    op.event(
        "group.generation_started",
        group=gid,
        generation=group.generation_id,
        protocol=group.protocol_name,
        leader=group.leader_id,
        members=group.num_members,
    )
    if group.is_in_state(S.EMPTY):
        op.records.append(group_metadata_record(group, {}))
        return
    leader_members = [JoinGroupResponseMember(mid, iid, md) for mid, iid, md in group.leader_members()]
    for m in list(group.members.values()):
        resp = JoinGroupResponse(
            members=leader_members if group.is_leader(m.member_id) else [],
            member_id=m.member_id,
            generation_id=group.generation_id,
            protocol_name=group.protocol_name,
            protocol_type=group.protocol_type,
            leader=group.leader_id or "",
            skip_assignment=False,
        )
        group.complete_join(m, resp, op)
        reschedule_heartbeat(op, group, m)
        m.is_new = False
        group.pending_sync_members[m.member_id] = None
    op.schedule(
        TimerKind.CLASSIC_SYNC_PHASE, gid, "", group.rebalance_timeout_ms(), epoch=group.generation_id
    )


# --- sync phase ----------------------------------------------------------------------------


def expire_pending_sync(shard: ShardState, group_id: str, generation: int, op: Operation) -> None:
    group = shard.classic_group(group_id)
    if group is None or generation != group.generation_id:
        return
    if group.state in (S.COMPLETING_REBALANCE, S.STABLE) and not group.has_received_sync_from_all_members():
        late = list(group.pending_sync_members)
        for mid in late:
            group.remove(mid)
            op.cancel(TimerKind.CLASSIC_HEARTBEAT, group_id, mid)
            op.event("member.fenced", group=group_id, member=mid, reason="did not sync in time")
        prepare_rebalance(shard, group, op, f"Removing {late} on pending sync request expiration")


def remove_pending_sync_member(op: Operation, group: ClassicGroup, member_id: str) -> None:
    group.pending_sync_members.pop(member_id, None)
    if group.state in (S.DEAD, S.EMPTY, S.PREPARING_REBALANCE) or group.has_received_sync_from_all_members():
        op.cancel(TimerKind.CLASSIC_SYNC_PHASE, group.group_id)


def reset_and_propagate_assignment_with_error(
    shard: ShardState, group: ClassicGroup, error: Errors, op: Operation
) -> None:
    for m in group.members.values():
        m.assignment = EMPTY_ASSIGNMENT
    propagate_assignment(shard, group, error, op)


def set_and_propagate_assignment(
    shard: ShardState, group: ClassicGroup, assignment: dict[str, bytes], op: Operation
) -> None:
    for mid, m in group.members.items():
        m.assignment = assignment.get(mid, EMPTY_ASSIGNMENT)
    propagate_assignment(shard, group, Errors.NONE, op)


def propagate_assignment(shard: ShardState, group: ClassicGroup, error: Errors, op: Operation) -> None:
    ok = error is Errors.NONE
    for m in group.members.values():
        resp = SyncGroupResponse(
            error_code=int(error),
            protocol_name=group.protocol_name if ok else None,
            protocol_type=group.protocol_type if ok else None,
            assignment=m.assignment,
        )
        if group.complete_sync(m, resp, op):
            # A session that expired while the sync was parked was ignored: start it afresh.
            reschedule_heartbeat(op, group, m)
