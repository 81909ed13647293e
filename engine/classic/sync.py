"""SyncGroup to a classic group (Kafka's classic group protocol; Kafka `classicGroupSyncToClassicGroup`).

Followers park until the leader's SyncGroup carries everyone's assignment; the leader's
assignment is written as a GroupMetadata record, and only once that record is durable does the
group become Stable and every parked SyncGroup get its member's assignment (Kafka's append
future). A failed write answers everyone with the mapped error and rebalances.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.classic.api import SyncGroupRequest, SyncGroupResponse
from engine.classic.member import EMPTY_ASSIGNMENT
from engine.classic.rebalance import (
    maybe_prepare_rebalance_or_complete_join,
    remove_pending_sync_member,
    reset_and_propagate_assignment_with_error,
    set_and_propagate_assignment,
)
from engine.classic.records import group_metadata_record
from engine.classic.state import ClassicGroupState
from engine.context import RequestContext
from engine.errors import CoordinatorError, Errors
from engine.operation import Operation
from engine.outcome import Pending

if TYPE_CHECKING:
    from engine.classic.group import ClassicGroup
    from engine.state import ShardState

S = ClassicGroupState

# From this version ProtocolType and ProtocolName are mandatory (KIP-559).
PROTOCOL_FIELDS_REQUIRED_VERSION = 5


def _inconsistent(request_value: str | None, group_value: str | None) -> bool:
    return request_value is not None and group_value is not None and request_value != group_value


def sync_classic_group(
    shard: ShardState, group: ClassicGroup, req: SyncGroupRequest, ctx: RequestContext, op: Operation
) -> SyncGroupResponse | Pending:
    if group.is_in_state(S.DEAD):
        raise CoordinatorError(Errors.COORDINATOR_NOT_AVAILABLE)
    group.validate_member(req.member_id, req.group_instance_id)
    if req.generation_id != group.generation_id:
        raise CoordinatorError(
            Errors.ILLEGAL_GENERATION,
            f"generation {req.generation_id} is not the group's generation {group.generation_id}",
        )
    if _inconsistent(req.protocol_type, group.protocol_type) or _inconsistent(
        req.protocol_name, group.protocol_name
    ):
        raise CoordinatorError(
            Errors.INCONSISTENT_GROUP_PROTOCOL,
            f"protocol {req.protocol_type}/{req.protocol_name} is not the group's "
            f"{group.protocol_type}/{group.protocol_name}",
        )
    if group.is_in_state(S.PREPARING_REBALANCE):
        raise CoordinatorError(Errors.REBALANCE_IN_PROGRESS, "the group is rebalancing")
    member = group.members[req.member_id]
    if group.is_in_state(S.STABLE):
        remove_pending_sync_member(op, group, req.member_id)
        return SyncGroupResponse(
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            assignment=member.assignment,
        )
    # CompletingRebalance: park until the leader's assignment is durable.
    if member.awaiting_sync is not None:  # an earlier SyncGroup of this member: never leave it hanging
        group.complete_sync(member, SyncGroupResponse(error_code=int(Errors.REBALANCE_IN_PROGRESS)), op)
    handle = Pending("SyncGroup", group.group_id, req.member_id)
    member.awaiting_sync = handle
    remove_pending_sync_member(op, group, req.member_id)
    if not group.is_leader(req.member_id):
        return handle

    assignment = dict(req.assignments)
    for mid in group.members:
        assignment.setdefault(mid, EMPTY_ASSIGNMENT)
    generation = req.generation_id
    op.records.append(group_metadata_record(group, assignment))
    op.event(
        "group.assignment_received",
        group=group.group_id,
        leader=req.member_id,
        generation=generation,
        members=group.num_members,
    )

    def appended(err: Errors, o: Operation) -> None:
        # Another member may have joined meanwhile: act only if nothing moved.
        if not (group.is_in_state(S.COMPLETING_REBALANCE) and generation == group.generation_id):
            return
        if err is Errors.NONE:
            set_and_propagate_assignment(shard, group, assignment, o)
            group.transition_to(S.STABLE, shard.now_ms)
            o.event("group.stable", group=group.group_id, generation=generation)
        else:
            reset_and_propagate_assignment_with_error(shard, group, err, o)
            maybe_prepare_rebalance_or_complete_join(
                shard, group, o, f"failed to store the assignment of generation {generation}"
            )

    op.on_append = appended
    return handle
