"""JoinGroup to a classic group (Kafka's classic group protocol; Kafka `classicGroupJoinToClassicGroup`,
`classicGroupJoinNewMember`, `classicGroupJoinExistingMember`,
`updateStaticMemberThenRebalanceOrCompleteJoin`; KIP-345 for static members).

A join either answers at once (an error, MEMBER_ID_REQUIRED, or the current generation for a
member whose metadata did not change) or parks: the response is a `Pending` handle completed
when the join phase ends. Static members (`group.instance.id`) that come back with a new member
id take their old member's place and assignment; in a Stable group whose protocol does not
change this happens without a rebalance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.classic.api import JoinGroupRequest, JoinGroupResponse, JoinGroupResponseMember
from engine.classic.group import ClassicGroup
from engine.classic.member import ClassicGroupMember
from engine.classic.rebalance import (
    maybe_complete_join_phase,
    maybe_prepare_rebalance_or_complete_join,
    prepare_rebalance,
    reschedule_heartbeat,
    schedule_member_heartbeat,
)
from engine.classic.records import empty_group_metadata_record, group_metadata_record
from engine.classic.state import ClassicGroupState
from engine.context import RequestContext
from engine.errors import Errors
from engine.ids import classic_member_id
from engine.operation import Operation
from engine.outcome import Pending

if TYPE_CHECKING:
    from engine.state import ShardState

S = ClassicGroupState

# Heartbeat deadline of a new member while its first JoinGroup is parked (Kafka constant).
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000
# From this JoinGroup version a dynamic member must first obtain a member id (KIP-394).
KNOWN_MEMBER_ID_REQUIRED_VERSION = 4
# From this version the leader may be told to skip assignment (static member replacement).
SKIP_ASSIGNMENT_VERSION = 9

JoinResult = JoinGroupResponse | Pending


def error(code: Errors, member_id: str = "") -> JoinGroupResponse:
    return JoinGroupResponse(error_code=int(code), member_id=member_id)


def join_classic_group(
    shard: ShardState, group: ClassicGroup | None, req: JoinGroupRequest, ctx: RequestContext, op: Operation
) -> JoinResult:
    """`group` is the classic group the request found, or None: no group, or an empty consumer
    group this join replaces (its tombstones are already in `op`). A new group is created here
    and installed by the operation (`op.put_group`) once its records are accepted; until then
    this handler works on the object itself."""
    member_id = req.member_id
    unknown = member_id == ""
    is_new_group = group is None
    if group is None:
        if not unknown:
            return error(Errors.UNKNOWN_MEMBER_ID, member_id)
        group = ClassicGroup(req.group_id, shard.now_ms)
        op.put_group(group)
    records_before = len(op.records)

    if not _accept_joining_member(shard, group, member_id):
        group.remove(member_id)
        result: JoinResult = error(Errors.GROUP_MAX_SIZE_REACHED)
    elif unknown:
        result = _join_new_member(shard, group, req, ctx, op)
    else:
        result = _join_existing_member(shard, group, req, ctx, op)

    if is_new_group and len(op.records) == records_before and op.on_append is None:
        op.records.append(empty_group_metadata_record(group))
    return result


def _accept_joining_member(shard: ShardState, group: ClassicGroup, member_id: str) -> bool:
    """`group.max.size`: in PreparingRebalance count the members already waiting (so the last
    ones to rejoin are the ones kept out); otherwise count members."""
    max_size = shard.config.max_size
    if group.state in (S.EMPTY, S.DEAD):
        return True
    if group.state is S.PREPARING_REBALANCE:
        m = group.members.get(member_id)
        return (m is not None and m.is_awaiting_join) or group.num_awaiting_join < max_size
    return member_id in group.members or group.num_members < max_size


def _join_new_member(
    shard: ShardState, group: ClassicGroup, req: JoinGroupRequest, ctx: RequestContext, op: Operation
) -> JoinResult:
    if group.is_in_state(S.DEAD):
        return error(Errors.COORDINATOR_NOT_AVAILABLE)
    if not group.supports_protocols(req.protocol_type, (p.name for p in req.protocols)):
        op.event(
            "request.rejected",
            api="JoinGroup",
            group=group.group_id,
            member="",
            error="INCONSISTENT_GROUP_PROTOCOL",
            reason=f"protocols {[p.name for p in req.protocols]} of type {req.protocol_type!r} "
            f"do not overlap the group's {sorted(group.candidate_protocols())}",
        )
        return error(Errors.INCONSISTENT_GROUP_PROTOCOL)
    prefix = req.group_instance_id if req.group_instance_id is not None else ctx.client_id
    new_id = classic_member_id(prefix, shard.ids)
    shard.bind_created(op, group.group_id, new_id, ctx.principal)
    if req.group_instance_id is not None:
        existing = group.static_member_id(req.group_instance_id)
        if existing is not None:
            return _replace_static_member(shard, group, req, ctx, existing, new_id, op)
        return add_member_then_rebalance_or_complete_join(shard, group, req, ctx, new_id, op)
    if ctx.api_version >= KNOWN_MEMBER_ID_REQUIRED_VERSION:
        group.add_pending_member(new_id)
        schedule_member_heartbeat(op, group.group_id, new_id, req.session_timeout_ms)
        return error(Errors.MEMBER_ID_REQUIRED, new_id)
    return add_member_then_rebalance_or_complete_join(shard, group, req, ctx, new_id, op)


def _join_existing_member(
    shard: ShardState, group: ClassicGroup, req: JoinGroupRequest, ctx: RequestContext, op: Operation
) -> JoinResult:
    member_id = req.member_id
    if group.is_in_state(S.DEAD):
        return error(Errors.COORDINATOR_NOT_AVAILABLE, member_id)
    if not group.supports_protocols(req.protocol_type, (p.name for p in req.protocols)):
        op.event(
            "request.rejected",
            api="JoinGroup",
            group=group.group_id,
            member=member_id,
            error="INCONSISTENT_GROUP_PROTOCOL",
            reason=f"protocols {[p.name for p in req.protocols]} of type {req.protocol_type!r} "
            f"do not overlap the group's {sorted(group.candidate_protocols())}",
        )
        return error(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id)
    if group.is_pending_member(member_id):
        if req.group_instance_id is not None:
            raise ValueError(
                f"Received unexpected JoinGroup with groupInstanceId={req.group_instance_id} "
                f"for pending member with memberId={member_id}"
            )
        return add_member_then_rebalance_or_complete_join(shard, group, req, ctx, member_id, op)
    from engine.errors import CoordinatorError

    try:
        group.validate_member(member_id, req.group_instance_id)
    except CoordinatorError as e:
        return error(e.code, member_id)
    member = group.members[member_id]
    state = group.state
    if state is S.PREPARING_REBALANCE:
        return _update_member_then_rebalance(
            shard, group, member, req, op, "member rejoins during PreparingRebalance"
        )
    if state is S.COMPLETING_REBALANCE:
        if member.matches(req.protocols):
            # It lost the JoinGroup response: the same generation again.
            return _current_generation(group, member_id, include_members=group.is_leader(member_id))
        return _update_member_then_rebalance(shard, group, member, req, op, "member metadata changed")
    if state is S.STABLE:
        if group.is_leader(member_id):
            # The leader rejoining always rebalances: it may have seen metadata changes
            # (e.g. partitions added) that no member's subscription shows.
            return _update_member_then_rebalance(shard, group, member, req, op, "leader rejoins")
        if not member.matches(req.protocols):
            return _update_member_then_rebalance(shard, group, member, req, op, "member metadata changed")
        return _current_generation(group, member_id, include_members=False)
    return error(Errors.UNKNOWN_MEMBER_ID, member_id)


def _current_generation(group: ClassicGroup, member_id: str, include_members: bool) -> JoinGroupResponse:
    members = (
        [JoinGroupResponseMember(mid, iid, md) for mid, iid, md in group.leader_members()]
        if include_members
        else []
    )
    return JoinGroupResponse(
        members=members,
        member_id=member_id,
        generation_id=group.generation_id,
        protocol_name=group.protocol_name,
        protocol_type=group.protocol_type,
        leader=group.leader_id or "",
        skip_assignment=False,
    )


def _park(shard: ShardState, group: ClassicGroup, member: ClassicGroupMember, op: Operation) -> Pending:
    """A fresh handle for the member's join. A join still parked from an earlier request of the
    same member is answered REBALANCE_IN_PROGRESS rather than left hanging (Kafka overwrites it
    and never answers it; a never-answered request would block its connection's responses)."""
    if member.awaiting_join is not None:
        group.complete_join(member, error(Errors.REBALANCE_IN_PROGRESS, member.member_id), op)
    return Pending("JoinGroup", group.group_id, member.member_id)


def _update_member_then_rebalance(
    shard: ShardState,
    group: ClassicGroup,
    member: ClassicGroupMember,
    req: JoinGroupRequest,
    op: Operation,
    reason: str,
) -> Pending:
    handle = _park(shard, group, member, op)
    group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, handle)
    maybe_prepare_rebalance_or_complete_join(shard, group, op, reason)
    return handle


def add_member_then_rebalance_or_complete_join(
    shard: ShardState,
    group: ClassicGroup,
    req: JoinGroupRequest,
    ctx: RequestContext,
    member_id: str,
    op: Operation,
) -> Pending:
    member = ClassicGroupMember(
        member_id,
        req.group_instance_id,
        ctx.client_id,
        ctx.client_host,
        req.rebalance_timeout_ms,
        req.session_timeout_ms,
        req.protocol_type,
        req.protocols,
    )
    member.is_new = True
    if group.is_in_state(S.PREPARING_REBALANCE) and group.previous_state is S.EMPTY:
        group.new_member_added = True  # extends the initial rebalance delay
    handle = Pending("JoinGroup", group.group_id, member_id)
    group.add(member, handle)
    op.event(
        "member.joined",
        group=group.group_id,
        member=member_id,
        instance_id=req.group_instance_id,
        protocol="classic",
        generation=group.generation_id,
    )
    # A new member cannot heartbeat while its join is parked: the join timeout is its session.
    reschedule_heartbeat(op, group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
    maybe_prepare_rebalance_or_complete_join(shard, group, op, f"Adding new member {member_id}")
    return handle


def _replace_static_member(
    shard: ShardState,
    group: ClassicGroup,
    req: JoinGroupRequest,
    ctx: RequestContext,
    old_member_id: str,
    new_member_id: str,
    op: Operation,
) -> JoinResult:
    assert req.group_instance_id is not None
    instance_id = req.group_instance_id
    current_leader = group.leader_id
    new = group.replace_static_member(instance_id, old_member_id, new_member_id, op)
    op.event(
        "member.replaced",
        group=group.group_id,
        member=new_member_id,
        replaced=old_member_id,
        instance_id=instance_id,
        protocol="classic",
    )
    reschedule_heartbeat(op, group, new)
    old_protocols = new.supported_protocols
    old_rebalance, old_session = new.rebalance_timeout_ms, new.session_timeout_ms
    handle = Pending("JoinGroup", group.group_id, new_member_id)
    group.update_member(new, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, handle)

    if group.is_in_state(S.STABLE):
        if (group.protocol_name or "") == group.select_protocol():
            # KIP-345: same protocol, Stable group: persist the new member id, no rebalance.
            op.records.append(group_metadata_record(group, group.group_assignment()))
            version = ctx.api_version

            def appended(err: Errors, _op: Operation) -> None:
                if err is not Errors.NONE:
                    group.update_member(new, old_protocols, old_rebalance, old_session, None)
                    old = group.replace_static_member(instance_id, new_member_id, old_member_id, _op)
                    reschedule_heartbeat(_op, group, old)
                    _op.complete(
                        handle,
                        JoinGroupResponse(
                            error_code=int(err),
                            member_id="",
                            generation_id=group.generation_id,
                            protocol_name=group.protocol_name,
                            protocol_type=group.protocol_type,
                            leader=current_leader or "",
                        ),
                    )
                    return
                is_leader = group.is_leader(new_member_id)
                if version >= SKIP_ASSIGNMENT_VERSION:
                    resp = _current_generation(group, new_member_id, include_members=is_leader)
                    resp.skip_assignment = is_leader
                else:
                    resp = _current_generation(group, new_member_id, include_members=False)
                    resp.leader = current_leader or ""
                group.complete_join(new, resp, _op)
                # Its heartbeat timer may have fired while the join waited for the append (a
                # parked member satisfies it: no effect), leaving it with none; schedule it from
                # the answer, as a completed join phase does. Kafka does not (a member that dies
                # now is never removed); docs/deviations.md.
                reschedule_heartbeat(_op, group, new)

            op.on_append = appended
            return handle
        maybe_prepare_rebalance_or_complete_join(
            shard, group, op, f"static member {new_member_id} changed the selected protocol"
        )
    elif group.is_in_state(S.COMPLETING_REBALANCE):
        # The leader may already have the old member id: rebalance so assignments match.
        prepare_rebalance(shard, group, op, f"static member {new_member_id} rejoined during sync")
    elif group.state in (S.EMPTY, S.DEAD):
        raise ValueError(
            f"Group {group.group_id} was not supposed to be in the state {group.state.value} when "
            f"the unknown static member {instance_id} rejoins."
        )
    maybe_complete_join_phase(shard, group, op)
    return handle
