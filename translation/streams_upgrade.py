"""Online conversion of a classic Kafka Streams group to a KIP-1071 streams group when the first
`group.protocol=streams` instance joins (issue 31, part 3; beyond Kafka, whose 4.4 refuses a
StreamsGroupHeartbeat on a non-empty classic group: docs/streams-classic-groups.md).

A classic group that is not a Kafka Streams group (protocol type other than `consumer`, or a
protocol other than `stream`) gets Kafka 4.4's own GROUP_ID_NOT_FOUND "Group X is not a streams
group.". Conditions (all, else GROUP_ID_NOT_FOUND "Cannot convert classic Kafka Streams group ..." with
the reason, and a `group.conversion_refused` event naming the check): the migration policy
allows upgrades; the joining heartbeat brings a topology (classic instances send none: the
streams group's topology is the first streams-protocol member's); the group is a classic Streams
group none of whose members trips a rule of translation/streams_conversion_rules.py (the rules
`check upgrade` reports); every classic member subscribes only to topics the topology reads; at
most `group.streams.max.size` members.

Procedure (records only, so replay equals live): parked JoinGroups and SyncGroups are answered
REBALANCE_IN_PROGRESS; the GroupMetadata tombstone; each classic member's metadata (type 19,
with groupshift's ClassicMemberMetadata tag); the group epoch at the classic generation (type
17, metadata hash 0 so the joiner's heartbeat recomputes the target); each member's target and
current assignment as the leader's AssignmentInfo gave it, plus the active tasks its latest
JoinGroup says it still runs beyond it (a cooperative instance revoking what its leader withheld,
or one whose SyncGroup answer was lost; `_still_running`) (types 21, 20, 22: Stable at epoch =
generation). The heartbeat then continues on the streams group those records build: it stores
the topology, bumps the epoch and computes a new target for every member, classic ones included.
The classic group's timers are cancelled; each converted member gets a streams session timer of
its classic session timeout.
"""

from __future__ import annotations

from engine.classic.api import JoinGroupResponse, SyncGroupResponse
from engine.classic.group import ClassicGroup
from engine.errors import CoordinatorError, Errors
from engine.operation import Operation
from engine.replay import apply_streams_record
from engine.state import ShardState
from engine.streams.api import StreamsGroupHeartbeatRequest
from engine.streams.group import (
    MemberState,
    StreamsGroup,
    StreamsMember,
    Tasks,
    task_ids,
    tasks_minus,
    tasks_union,
)
from engine.streams.topology import configure
from engine.timers import TimerKind
from records.classic_group import GroupMetadataKey
from records.consumer_group import ClassicProtocol
from records.coordinator import CoordinatorRecord
from records.streams_group import (
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMetadataKey,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyValue,
)
from translation.embedded_protocol import SchemaError, parse_assignment
from translation.policy import refused, upgrade_enabled
from translation.streams_classic_member import (
    build_member,
    numbered_subtopologies,
    owned_tasks,
    to_tasks,
    topic_subtopologies,
)
from translation.streams_classic_protocol import (
    PROTOCOL_TYPE,
    STREAMS_PROTOCOL_NAME,
    StreamsClassicMember,
    decode_assignment_info,
    parse_streams_member_metadata,
)
from translation.streams_conversion_rules import conversion_blockers


class _Facts:
    """One member as the conversion rules read it."""

    def __init__(self, member_id: str, client_id: str) -> None:
        self.member_id = member_id
        self.client_id = client_id
        self.decode_error: str | None = None
        self.subscription_version: int | None = None
        self.subscription_error = 0
        self.topics: tuple[str, ...] = ()


def cannot_convert(group_id: str, because: str) -> CoordinatorError:
    return CoordinatorError(
        Errors.GROUP_ID_NOT_FOUND,
        f"Cannot convert classic Kafka Streams group {group_id} to a streams group because {because}",
    )


def upgrade(
    st: ShardState, group: ClassicGroup, req: StreamsGroupHeartbeatRequest, op: Operation
) -> StreamsGroup:
    """Convert `group` (writing the records into `op`); return the streams group to join."""
    gid = group.group_id
    if group.protocol_type != PROTOCOL_TYPE or group.protocol_name != STREAMS_PROTOCOL_NAME:
        # Not a Kafka Streams group at all (a consumer group, a Connect cluster, ...): nothing to
        # convert, so Kafka 4.4's own answer (the differential's `live-classic-refuses-streams`).
        refused(
            op, gid, "upgrade", "not a Kafka Streams group",
            protocol_type=group.protocol_type, protocol=group.protocol_name,
        )  # fmt: skip
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {gid} is not a streams group.")
    if not upgrade_enabled(st.config):
        refused(op, gid, "upgrade", "policy", policy=st.config.consumer_migration_policy)
        raise cannot_convert(gid, "online upgrade is disabled.")
    if group.protocol_type != PROTOCOL_TYPE:
        refused(op, gid, "upgrade", "protocol type", protocol_type=group.protocol_type)
        raise cannot_convert(gid, f"its protocol type is {group.protocol_type!r}, not {PROTOCOL_TYPE!r}.")
    if req.topology is None:
        refused(op, gid, "upgrade", "streams-topology", detail="the joining member sent no topology")
        raise cannot_convert(gid, "the joining member sent no topology.")
    if group.num_members > st.config.streams_max_size:
        refused(op, gid, "upgrade", "size", members=group.num_members, max_size=st.config.streams_max_size)
        raise cannot_convert(gid, "the group size exceeds the streams group maximum size.")
    decoded: dict[str, StreamsClassicMember] = {}
    facts: list[_Facts] = []
    for m in group.members.values():
        f = _Facts(m.member_id, m.client_id)
        facts.append(f)
        try:
            d = parse_streams_member_metadata(m.metadata(STREAMS_PROTOCOL_NAME))
        except (SchemaError, ValueError, KeyError) as e:
            f.decode_error = str(e) or type(e).__name__
            continue
        decoded[m.member_id] = d
        f.subscription_version = d.info.version
        f.subscription_error = d.info.error_code
        f.topics = tuple(sorted(d.subscription.topics))
    blockers = conversion_blockers(group.protocol_name, facts)
    if not numbered_subtopologies(req.topology):
        blockers.append(
            (
                "streams-topology",
                "the joining member's subtopologies are not numbered as Kafka Streams numbers them "
                "(classic task ids carry numbers)",
            )
        )
    readable = topic_subtopologies(req.topology)
    stray = sorted({t for d in decoded.values() for t in d.subscription.topics if t not in readable})
    if stray:
        blockers.append(
            (
                "streams-topology",
                f"the classic instances subscribe to topics the joining member's topology does not read "
                f"({', '.join(stray)}): they run another topology",
            )
        )
    if blockers:
        for check, reason in blockers:
            refused(op, gid, "upgrade", check, detail=reason)
        raise cannot_convert(gid, blockers[0][1] + ".")

    generation = group.generation_id
    stored: dict[str, tuple[Tasks, Tasks]] = {}
    for m in group.members.values():
        active, standby = {}, {}
        if m.assignment:
            try:
                a = parse_assignment(m.assignment)
                if a.user_data:
                    info = decode_assignment_info(a.user_data)
                    if not info.is_future:
                        active = dict(to_tasks(info.active_tasks))
                        standby = dict(to_tasks(t for t, _ in info.standby_tasks))
            except SchemaError as e:
                refused(op, gid, "upgrade", "streams-metadata", member=m.member_id, error=str(e))
                raise cannot_convert(
                    gid, f"member {m.member_id}'s assignment does not decode: {e}."
                ) from None
        stored[m.member_id] = (active, standby)
    still_running = _still_running(st, req.topology, group, decoded, stored)
    members: list[StreamsMember] = []
    for m in group.members.values():
        d = decoded[m.member_id]
        base = StreamsMember(
            m.member_id,
            member_epoch=generation,
            previous_member_epoch=generation,
            state=MemberState.STABLE,
            active=tasks_union(stored[m.member_id][0], still_running.get(m.member_id, {})),
            standby=stored[m.member_id][1],
        )
        members.append(
            build_member(
                base,
                d,
                req.topology.epoch,
                m.session_timeout_ms,
                m.rebalance_timeout_ms,
                tuple(ClassicProtocol(p.name, p.metadata) for p in m.supported_protocols),
                m.client_id,
                m.client_host,
                m.group_instance_id,
            )
        )

    for m in group.members.values():
        group.complete_join(
            m, JoinGroupResponse(error_code=int(Errors.REBALANCE_IN_PROGRESS), member_id=m.member_id), op
        )
        if group.complete_sync(m, SyncGroupResponse(error_code=int(Errors.REBALANCE_IN_PROGRESS)), op):
            # Kept if the append fails and the classic group stays: its session, whose expiry
            # was ignored while the sync was parked, starts afresh, as `propagate_assignment`
            # does for the answers it gives (seed 6127).
            op.schedule_if_refused(TimerKind.CLASSIC_HEARTBEAT, gid, m.member_id, m.session_timeout_ms)

    records: list[CoordinatorRecord] = [
        CoordinatorRecord(StreamsGroupMemberMetadataKey(gid, m.member_id), m.metadata_value())
        for m in members
    ]
    records.append(
        CoordinatorRecord(StreamsGroupMetadataKey(gid), StreamsGroupMetadataValue(generation, 0, -1, None))
    )
    records.extend(
        CoordinatorRecord(
            StreamsGroupTargetAssignmentMemberKey(gid, m.member_id),
            StreamsGroupTargetAssignmentMemberValue(task_ids(m.active), task_ids(m.standby), ()),
        )
        for m in members
    )
    # Stamped 0: the classic group's assignment is taken over, not computed, so the joining
    # member's heartbeat computes the first real target without waiting for the assignment
    # interval.
    records.append(
        CoordinatorRecord(
            StreamsGroupTargetAssignmentMetadataKey(gid),
            StreamsGroupTargetAssignmentMetadataValue(generation, 0),
        )
    )
    records.extend(
        CoordinatorRecord(StreamsGroupCurrentMemberAssignmentKey(gid, m.member_id), m.assignment_value())
        for m in members
    )
    op.records.append(CoordinatorRecord(GroupMetadataKey(gid), None))
    op.records.extend(records)
    converted = StreamsGroup(gid)
    for r in records:
        apply_streams_record(converted, r)

    op.cancel(TimerKind.CLASSIC_JOIN_PHASE, gid)
    op.cancel(TimerKind.CLASSIC_SYNC_PHASE, gid)
    for classic_id in [*group.members, *group.pending_join_members]:
        op.cancel(TimerKind.CLASSIC_HEARTBEAT, gid, classic_id)
    for cm in members:
        assert cm.classic is not None
        op.schedule(TimerKind.STREAMS_SESSION, gid, cm.member_id, cm.classic.session_timeout_ms)
    op.event(
        "group.converted",
        group=gid,
        from_type="classic",
        to_type="streams",
        group_epoch=generation,
        members=len(members),
        reason="a streams-protocol member joined a classic Kafka Streams group",
    )
    return converted


def _still_running(
    st: ShardState,
    topology: StreamsGroupTopologyValue,
    group: ClassicGroup,
    decoded: dict[str, StreamsClassicMember],
    stored: dict[str, tuple[Tasks, Tasks]],
) -> dict[str, Tasks]:
    """The active tasks each classic instance's latest JoinGroup says it runs (its cooperative
    owned partitions and its SubscriptionInfo's active tasks, as `owned_tasks` reads them for a
    JoinGroup inside a streams group) beyond what its stored assignment gives it.

    A cooperative instance keeps running a task its leader withheld until it has read the
    SyncGroup answer that drops it and rejoined without it: the leader withholds such a task
    precisely because the instance reports it (a lost SyncGroup answer leaves it running for
    good until its next sync), and Kafka's `prepareRebalance` from CompletingRebalance empties
    every stored assignment while the instances still run their tasks. Taken from the stored
    assignment alone, the conversion would hand those tasks at once to the joining
    streams-protocol member while the instance still runs them (streams chaos seeds 6283 and
    6721). So the converted instance holds them, and the streams group moves them with
    revoke-before-assign like any other task. A claim that would give a task two holders (a task
    another instance's assignment gives it as active, or a standby there of the claimant's own
    process, or one two instances both claim) is left out: the leader's assignment stands, as a
    classic leader withholds a task two instances claim. Tasks outside the topology are left out
    too."""
    sizes = configure(topology, st.image).tasks
    valid = {s.subtopology_id for s in topology.subtopologies}
    process = {mid: str(d.info.process_id) for mid, d in decoded.items()}
    extra: dict[str, Tasks] = {}
    claimants: dict[tuple[str, int], int] = {}
    for mid in group.members:
        claimed = owned_tasks(topology, decoded[mid]).active
        more = {
            sid: frozenset(p for p in parts if sizes is None or p < sizes.get(sid, 0))
            for sid, parts in tasks_minus(claimed, stored[mid][0]).items()
            if sid in valid
        }
        extra[mid] = {sid: parts for sid, parts in more.items() if parts}
        for sid, parts in extra[mid].items():
            for p in parts:
                claimants[(sid, p)] = claimants.get((sid, p), 0) + 1
    out: dict[str, Tasks] = {}
    for mid, tasks in extra.items():
        taken: Tasks = {}
        for other, (active, standby) in stored.items():
            taken = tasks_union(taken, active)
            if process[other] == process[mid]:
                taken = tasks_union(taken, standby)
        keep = tasks_minus(tasks, taken)
        keep = {sid: frozenset(p for p in parts if claimants[(sid, p)] == 1) for sid, parts in keep.items()}
        keep = {sid: parts for sid, parts in keep.items() if parts}
        if keep:
            out[mid] = keep
    return out
