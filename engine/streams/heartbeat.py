"""StreamsGroupHeartbeat (KIP-1071; Kafka 4.4 `GroupMetadataManager.streamsGroupHeartbeat`,
`streams/CurrentAssignmentBuilder`, `streams/TargetAssignmentBuilder`) and the fencing of a
member whose session expired.

One heartbeat is one operation: it may store a newer topology (type 23), the member's metadata
(19), a new group epoch (17) when the membership, the topology or the topics it uses changed, a
new target assignment (20, 21) when the group epoch moved past it, and the member's reconciled
current assignment (22). Reconciliation revokes before it assigns: a member first gives up the
active tasks it must lose (UNREVOKED_TASKS, its epoch unchanged) and only gets a task once no
other member holds it, assigned or pending revocation (UNRELEASED_TASKS until then).

When targets are computed (Kafka 4.4 `maybeUpdateStreamsTargetAssignment`): not while a new or
emptied group's initial rebalance delay runs (its timer computes the first one), and at most once
per `streams.assignment.interval.ms` after the last one (`canComputeNextTargetAssignment`, from
type 20's AssignmentTimestamp). A heartbeat that needs a target then is answered
ASSIGNMENT_DELAYED with Kafka's detail and reconciles towards the target there is; the first
heartbeat after the interval computes it. Kafka 4.4.0 has no timer for the interval's end and runs
the assignor in the heartbeat (`group.streams.assignor.offload.enable` is read by nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import cast

from engine.assignment import shared_epoch_object
from engine.classic.group import ClassicGroup
from engine.classic.state import ClassicGroupState
from engine.config import split_list
from engine.context import RequestContext
from engine.errors import CoordinatorError, Errors, invalid_request
from engine.operation import Operation
from engine.state import ShardState
from engine.streams.api import (
    ASSIGNMENT_DELAYED,
    MISSING_CLIENT_TAGS,
    SHUTDOWN_APPLICATION,
    STALE_TOPOLOGY,
    EndpointPartitions,
    Status,
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
    TaskOffset,
)
from engine.streams.assignor import assign
from engine.streams.group import (
    Held,
    MemberState,
    MemberTaskOffsets,
    StreamsGroup,
    StreamsMember,
    TaskHolders,
    Tasks,
    task_ids,
    tasks_equal,
    tasks_from,
    tasks_intersect,
    tasks_minus,
)
from engine.streams.topology import ConfiguredTopology, configure, java_hash_order
from engine.timers import TimerKind
from records.classic_group import GroupMetadataKey
from records.coordinator import CoordinatorRecord
from records.streams_group import (
    KeyValue,
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMetadataKey,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyKey,
    StreamsGroupTopologyValue,
    TaskIds,
)

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


# --- validation ---------------------------------------------------------------------------------


def _blank(value: str) -> bool:
    """Java's `String.trim().isEmpty()`: every character at or below U+0020 is trimmed."""
    return not value.strip("".join(chr(c) for c in range(0x21)))


def validate(req: StreamsGroupHeartbeatRequest) -> None:
    """Kafka `GroupCoordinatorService.throwIfStreamsGroupHeartbeatRequestIsUsingUnsupportedFeatures`
    then `throwIfStreamsGroupHeartbeatRequestIsInvalid`, in Kafka 4.4's order (each refusal and
    its message measured against a 4.4.0 node, e2e/test_streams_differential.py)."""
    if req.topology is not None and any(s.source_topic_regex for s in req.topology.subtopologies):
        raise invalid_request("Regular expressions for source topics are not supported yet.")
    if _blank(req.member_id):
        raise invalid_request("MemberId can't be empty.")
    if _blank(req.group_id):
        raise invalid_request("GroupId can't be empty.")
    if req.instance_id is not None and _blank(req.instance_id):
        raise invalid_request("InstanceId can't be empty.")
    if req.rack_id is not None and _blank(req.rack_id):
        raise invalid_request("RackId can't be empty.")
    tasks = (req.active_tasks, req.standby_tasks, req.warmup_tasks)
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise invalid_request("RebalanceTimeoutMs must be provided in first request.")
        for name, given in zip(("ActiveTasks", "StandbyTasks", "WarmupTasks"), tasks, strict=True):
            if given is None or given:
                raise invalid_request(f"{name} must be empty when (re-)joining.")
        if req.topology is None:
            raise invalid_request("Topology must be non-null when (re-)joining.")
        for sub in req.topology.subtopologies:
            for changelog in sub.state_changelog_topics:
                if changelog.partitions != 0:
                    raise CoordinatorError(
                        Errors.STREAMS_INVALID_TOPOLOGY,
                        f"Changelog topic {changelog.name} must have an undefined partition count, but it is "
                        f"set to {changelog.partitions}.",
                    )
    elif req.member_epoch == STATIC_LEAVE_EPOCH:
        if req.instance_id is None:
            raise invalid_request("InstanceId can't be null.")
    elif req.member_epoch < STATIC_LEAVE_EPOCH:
        raise invalid_request(f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2.")
    if any(t is None for t in tasks) and any(t is not None for t in tasks):
        raise invalid_request("If one task-type is non-null, all must be non-null.")
    if req.member_epoch != 0 and req.topology is not None:
        raise invalid_request("Topology can only be provided when (re-)joining.")


# --- records ------------------------------------------------------------------------------------


def assignment_configs(st: ShardState, group_id: str) -> tuple[KeyValue, ...]:
    """The assignor settings in force for the group, as Kafka 4.4 records them in type 17's
    LastAssignmentConfigs (`streamsGroupAssignmentConfigs`): a TreeMap, so sorted by key; the
    rack-aware tag keys only when there are some."""
    standbys = KeyValue("num.standby.replicas", str(st.streams_num_standby_replicas(group_id)))
    tags = st.streams_rack_aware_assignment_tags(group_id)
    if not tags:
        return (standbys,)
    return (standbys, KeyValue(RACK_AWARE_TAGS, ",".join(tags)))


def _by_key(tags: tuple[KeyValue, ...]) -> tuple[KeyValue, ...]:
    """A member's client tags as Kafka 4.4 keeps them: a map (a key given twice keeps its last
    value here; Kafka's `Collectors.toMap` fails the heartbeat), recorded sorted by key
    (`StreamsCoordinatorRecordHelpers.newStreamsGroupMemberRecord`)."""
    return tuple(sorted({kv.key: kv for kv in tags}.values(), key=lambda kv: kv.key))


def missing_client_tags(configs: tuple[KeyValue, ...], member: StreamsMember) -> Status | None:
    """Kafka 4.4 `streamsGroupHeartbeat` (v1 and later, after every other status): the
    assignment configs' tag keys the member reports no client tag for, in the configs' order,
    so that an instance started without `client.tag.<key>` learns why its standbys are not
    spread by it."""
    tags = next((kv.value for kv in configs if kv.key == RACK_AWARE_TAGS), "")
    keys = split_list(tags)
    have = {kv.key for kv in member.client_tags or ()}
    missing = [key for key in keys if key not in have]
    if not missing:
        return None
    return Status(
        MISSING_CLIENT_TAGS,
        f"Missing required client tags for rack-aware standby assignment: [{', '.join(missing)}]. "
        "Configure them via 'client.tag.<tagKey>' in your Streams config.",
    )


def _metadata_record(
    group_id: str, epoch: int, digest: int, validated: int, configs: tuple[KeyValue, ...]
) -> CoordinatorRecord:
    return CoordinatorRecord(
        StreamsGroupMetadataKey(group_id), StreamsGroupMetadataValue(epoch, digest, validated, configs)
    )


def _target_record(group_id: str, member_id: str, tasks: TaskRoles | None) -> CoordinatorRecord:
    value = (
        None
        if tasks is None
        else StreamsGroupTargetAssignmentMemberValue(
            task_ids(tasks.active), task_ids(tasks.standby), task_ids(tasks.warmup)
        )
    )
    return CoordinatorRecord(StreamsGroupTargetAssignmentMemberKey(group_id, member_id), value)


def _target_epoch_record(group_id: str, epoch: int, timestamp: int) -> CoordinatorRecord:
    """Type 20: the target's epoch and when it was computed (0: no target was computed, so the
    next one need not wait for the assignment interval)."""
    return CoordinatorRecord(
        StreamsGroupTargetAssignmentMetadataKey(group_id),
        StreamsGroupTargetAssignmentMetadataValue(epoch, timestamp),
    )


def member_tombstones(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    """Kafka's order: current assignment, target, then the member."""
    return [
        CoordinatorRecord(StreamsGroupCurrentMemberAssignmentKey(group_id, member_id), None),
        CoordinatorRecord(StreamsGroupTargetAssignmentMemberKey(group_id, member_id), None),
        CoordinatorRecord(StreamsGroupMemberMetadataKey(group_id, member_id), None),
    ]


def streams_group_tombstones(group: StreamsGroup) -> list[CoordinatorRecord]:
    """The records that delete a streams group (Kafka `StreamsGroup.createGroupTombstoneRecords`
    order: members' current assignments, targets, members, the target epoch, the topology, the
    group)."""
    gid = group.group_id
    out: list[CoordinatorRecord] = []
    for mid in sorted(group.members):
        out.append(CoordinatorRecord(StreamsGroupCurrentMemberAssignmentKey(gid, mid), None))
    for mid in sorted(set(group.members) | set(group.targets)):
        out.append(CoordinatorRecord(StreamsGroupTargetAssignmentMemberKey(gid, mid), None))
    for mid in sorted(group.members):
        out.append(CoordinatorRecord(StreamsGroupMemberMetadataKey(gid, mid), None))
    out.append(CoordinatorRecord(StreamsGroupTargetAssignmentMetadataKey(gid), None))
    out.append(CoordinatorRecord(StreamsGroupTopologyKey(gid), None))
    out.append(CoordinatorRecord(StreamsGroupMetadataKey(gid), None))
    return out


# --- target assignment --------------------------------------------------------------------------


def group_targets(group: StreamsGroup) -> dict[str, TaskRoles]:
    """The group's target assignment, member id -> its tasks in the three roles."""
    return {
        mid: TaskRoles(t, group.standby_targets.get(mid, {}), group.warmup_targets.get(mid, {}))
        for mid, t in group.targets.items()
    }


def _member_target(group: StreamsGroup, mid: str) -> TaskRoles:
    """`group_targets(group)[mid]`, or no tasks if `mid` has no target."""
    if mid not in group.targets:
        return TaskRoles({}, {}, {})
    return TaskRoles(
        group.targets[mid], group.standby_targets.get(mid, {}), group.warmup_targets.get(mid, {})
    )


def _new_targets(
    st: ShardState,
    group: StreamsGroup,
    members: dict[str, StreamsMember],
    topology: StreamsGroupTopologyValue | None,
    configured: ConfiguredTopology | None,
) -> dict[str, TaskRoles]:
    """`members` as they are after this heartbeat's metadata changes; `topology`: the group's,
    or the one this heartbeat brings. The assignor stays close to what the members hold now
    (their current active and standby tasks, as Kafka 4.4's `TargetAssignmentBuilder` gives
    it), not to the previous target: a member still reconciling counts with what it has."""
    if configured is None or configured.tasks is None or topology is None:
        return {mid: TaskRoles({}, {}, {}) for mid in members}
    stateful = {s.subtopology_id for s in topology.subtopologies if s.state_changelog_topics}
    out = assign(
        configured.tasks,
        stateful,
        {mid: m.process_id for mid, m in members.items()},
        {mid: m.active for mid, m in members.items()},
        {mid: m.standby for mid, m in members.items()},
        st.streams_num_standby_replicas(group.group_id),
        {m: o.offsets for m, o in group.task_offsets.items() if m in members},
    )
    # Kafka 4.4's refinement step (`AssignmentRefiner`) leaves the assignment as it is: no
    # warm-up tasks.
    return {mid: TaskRoles(out.active.get(mid, {}), out.standby.get(mid, {}), {}) for mid in members}


def _write_targets(
    st: ShardState,
    op: Operation,
    group: StreamsGroup,
    targets: dict[str, TaskRoles],
    epoch: int,
    timestamp: int | None = None,
) -> None:
    """The records of a new target at `epoch`, stamped `timestamp` (default: now, the time the
    assignment interval counts from)."""
    before = group_targets(group)
    for mid, tasks in sorted(targets.items()):
        old = before.get(mid)
        if old is None or not _same_roles(old, tasks):
            op.records.append(_target_record(group.group_id, mid, tasks))
    stamp = st.now_ms if timestamp is None else timestamp
    op.records.append(_target_epoch_record(group.group_id, epoch, stamp))


# The assignment config naming the rack-aware tag keys (Kafka 4.4 `streamsGroupAssignmentConfigs`).
RACK_AWARE_TAGS = "rack.aware.assignment.tags"
ASSIGNMENT_INTERVAL_DETAIL = "Assignment delayed due to the configured assignment interval."


def can_compute_next_target(st: ShardState, group: StreamsGroup) -> bool:
    """Kafka 4.4 `canComputeNextTargetAssignment`: a new target may be computed if none was
    computed yet (timestamp 0), the group's `streams.assignment.interval.ms` is 0, or the
    interval has passed since the last one. Until then a heartbeat that needs one is answered
    ASSIGNMENT_DELAYED and reconciles towards the target there is; no timer ends the wait, the
    first heartbeat after it computes the target (Kafka 4.4.0 runs the assignor in the heartbeat:
    `group.streams.assignor.offload.enable` is read by nothing in its group coordinator)."""
    last = group.assignment_timestamp
    interval = st.streams_assignment_interval_ms(group.group_id)
    return last == 0 or interval == 0 or st.now_ms >= last + interval


def _nested(offsets: tuple[TaskOffset, ...]) -> dict[str, dict[int, int]]:
    out: dict[str, dict[int, int]] = {}
    for t in offsets:
        out.setdefault(t.subtopology_id, {})[t.partition] = t.offset
    return out


def _same_roles(a: TaskRoles, b: TaskRoles) -> bool:
    return (
        tasks_equal(a.active, b.active)
        and tasks_equal(a.standby, b.standby)
        and tasks_equal(a.warmup, b.warmup)
    )


# --- reconciliation -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaskRoles:
    """A member's tasks in their three roles (Kafka 4.4 `TasksTuple`)."""

    active: Tasks
    standby: Tasks
    warmup: Tasks

    def intersects(self, other: TaskRoles) -> bool:
        return bool(
            tasks_intersect(self.active, other.active)
            or tasks_intersect(self.standby, other.standby)
            or tasks_intersect(self.warmup, other.warmup)
        )

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)


def _split(
    current: Tasks, target: Tasks, blocked: Callable[[str, int], bool]
) -> tuple[dict[str, set[int]], dict[str, set[int]], dict[str, set[int]], bool]:
    """Kafka's `computeAssignmentDifference` for one role: (kept, to revoke, to assign now, whether
    a task of the target is still held elsewhere)."""
    kept: dict[str, set[int]] = {}
    revoke: dict[str, set[int]] = {}
    assign: dict[str, set[int]] = {}
    waiting = False
    for sid in set(current) | set(target):
        have, want = current.get(sid, frozenset()), target.get(sid, frozenset())
        if have & want:
            kept[sid] = set(have & want)
        if have - want:
            revoke[sid] = set(have - want)
        free = set()
        for p in want - have:
            if blocked(sid, p):
                waiting = True
            else:
                free.add(p)
        if free:
            assign[sid] = free
    return kept, revoke, assign, waiting


def _has(tasks: Held, sid: str, p: int) -> bool:
    return p in tasks.get(sid, ())


def _move(src: dict[str, set[int]], dst: dict[str, set[int]], sid: str, p: int) -> None:
    _drop(src, sid, p)
    dst.setdefault(sid, set()).add(p)


def _drop(tasks: dict[str, set[int]], sid: str, p: int) -> None:
    parts = tasks.get(sid)
    if parts is not None:
        parts.discard(p)
        if not parts:
            del tasks[sid]


def _frozen(tasks: Mapping[str, set[int]]) -> Tasks:
    return {s: frozenset(p) for s, p in tasks.items() if p}


def reconcile(
    member: StreamsMember,
    target: TaskRoles,
    target_epoch: int,
    holders: TaskHolders,
    owned: TaskRoles | None,
) -> StreamsMember:
    """Kafka 4.4 streams `CurrentAssignmentBuilder.build`: returns the member as it is after this
    heartbeat (the same object when nothing changes). `holders`: what the group's members hold
    (this member's stored tasks included); `owned`: the tasks the member reported, None if it
    did not report them.

    Revoke before assign, per role: an active task is given only once no member holds it as
    active and no other member of this member's process holds it as a standby or warm-up; a
    standby (warm-up) task only once no member of this process holds it in another role or as
    a standby (warm-up) still. A process never holds two copies of a task. A member's own task
    changes role in place: its active task demoted to a standby is granted as a standby at once
    (the active stays pending revocation); a standby becomes a warm-up and back at once; a
    standby or warm-up promoted to active is kept until the active task is granted."""
    state = member.state
    pending = TaskRoles(
        member.active_pending_revocation, member.standby_pending_revocation, member.warmup_pending_revocation
    )
    if state is MemberState.UNREVOKED_TASKS:
        if owned is None or owned.intersects(pending):
            return member  # still holds tasks it was asked to give up
        epoch = member.member_epoch + 1
    elif state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        epoch = member.member_epoch
    elif state is MemberState.UNKNOWN:
        if owned is None or not owned.is_empty():
            raise CoordinatorError(
                Errors.FENCED_MEMBER_EPOCH,
                "The streams group member is in a unknown state. "
                "The member must abandon all its tasks and rejoin.",
            )
        epoch = target_epoch
    else:
        epoch = member.member_epoch

    def unreleased_active(sid: str, p: int) -> bool:
        return (
            _has(holders.active, sid, p)
            or (_has(holders.standby_here, sid, p) and not _has(member.standby, sid, p))
            or (_has(holders.warmup_here, sid, p) and not _has(member.warmup, sid, p))
        )

    def unreleased_standby(sid: str, p: int) -> bool:
        return (
            (_has(holders.active_here, sid, p) and not _has(member.active, sid, p))
            or _has(holders.standby_here, sid, p)
            or (_has(holders.warmup_here, sid, p) and not _has(member.warmup, sid, p))
        )

    def unreleased_warmup(sid: str, p: int) -> bool:
        return (
            _has(holders.active_here, sid, p)
            or (_has(holders.standby_here, sid, p) and not _has(member.standby, sid, p))
            or _has(holders.warmup_here, sid, p)
        )

    keep_a, revoke_a, give_a, wait_a = _split(member.active, target.active, unreleased_active)
    keep_s, revoke_s, give_s, wait_s = _split(member.standby, target.standby, unreleased_standby)
    keep_w, revoke_w, give_w, wait_w = _split(member.warmup, target.warmup, unreleased_warmup)
    waiting = wait_a or wait_s or wait_w

    # In-place role changes that need no other member: granted in this step.
    for sid, parts in member.active.items():
        for p in parts:
            if _has(give_s, sid, p):
                _move(give_s, keep_s, sid, p)
    for src, src_revoke, dst_give, dst_keep in (
        (member.standby, revoke_s, give_w, keep_w),
        (member.warmup, revoke_w, give_s, keep_s),
    ):
        for sid, parts in src.items():
            for p in parts:
                if _has(dst_give, sid, p):
                    _move(dst_give, dst_keep, sid, p)
                    _drop(src_revoke, sid, p)
    # Promotions to active: the standby or warm-up needs no revocation, and stays until the
    # active task is granted.
    for src, src_revoke in ((member.standby, revoke_s), (member.warmup, revoke_w)):
        for sid, parts in src.items():
            for p in parts:
                if _has(target.active, sid, p):
                    _drop(src_revoke, sid, p)
    revocation = TaskRoles(_frozen(revoke_a), _frozen(revoke_s), _frozen(revoke_w))
    must_revoke = not revocation.is_empty() and (owned is None or owned.intersects(revocation))
    for src, src_keep in ((member.standby, keep_s), (member.warmup, keep_w)):
        for sid, parts in src.items():
            for p in parts:
                if _has(target.active, sid, p) and (must_revoke or not _has(give_a, sid, p)):
                    src_keep.setdefault(sid, set()).add(p)

    previous = member.member_epoch
    if must_revoke:
        updated = replace(
            member,
            state=MemberState.UNREVOKED_TASKS,
            member_epoch=epoch,
            previous_member_epoch=previous if epoch != member.member_epoch else member.previous_member_epoch,
            active=_frozen(keep_a),
            standby=_frozen(keep_s),
            warmup=_frozen(keep_w),
            active_pending_revocation=revocation.active,
            standby_pending_revocation=revocation.standby,
            warmup_pending_revocation=revocation.warmup,
        )
    else:
        for keep, grant in ((keep_a, give_a), (keep_s, give_s), (keep_w, give_w)):
            for sid, new in grant.items():
                keep.setdefault(sid, set()).update(new)
        updated = replace(
            member,
            state=MemberState.UNRELEASED_TASKS if waiting else MemberState.STABLE,
            member_epoch=target_epoch,
            previous_member_epoch=previous if target_epoch != previous else member.previous_member_epoch,
            active=_frozen(keep_a),
            standby=_frozen(keep_s),
            warmup=_frozen(keep_w),
            active_pending_revocation={},
            standby_pending_revocation={},
            warmup_pending_revocation={},
        )
    updated.active_epochs = _carried_epochs(member, updated)
    return member if _same_assignment(member, updated) else updated


def _carried_epochs(member: StreamsMember, updated: StreamsMember) -> dict[str, dict[int, int]]:
    """Kafka 4.4 streams `CurrentAssignmentBuilder`: an active task the member already held
    keeps the epoch it was given at; a task new to it gets the epoch the member moves to. The
    epochs go in as `engine.assignment.shared_epoch`'s objects, through `object`-typed views: the
    compiled build would box a new int object for every `int` it stores into the dict."""
    given = shared_epoch_object(updated.member_epoch)
    kept = shared_epoch_object(member.member_epoch)  # a held task without an epoch of its own
    out: dict[str, dict[int, int]] = {}
    for tasks in (updated.active, updated.active_pending_revocation):
        for sid, parts in tasks.items():
            into = cast("dict[int, object]", out.setdefault(sid, {}))
            had = cast("Mapping[int, object]", member.active_epochs.get(sid, {}))
            for p in parts:
                into[p] = given if member.active_task_epoch(sid, p) is None else had.get(p, kept)
    return out


def _same_assignment(a: StreamsMember, b: StreamsMember) -> bool:
    return a.assignment_value() == b.assignment_value()


# --- the heartbeat ------------------------------------------------------------------------------


def _replaceable(group: object) -> bool:
    """An empty classic group (offsets only, or no members) becomes a streams group on a
    join, as Kafka 4.4's offline migration does; its committed offsets stay."""
    return isinstance(group, ClassicGroup) and (
        group.is_simple() or group.is_in_state(ClassicGroupState.EMPTY)
    )


def heartbeat(
    st: ShardState, req: StreamsGroupHeartbeatRequest, ctx: RequestContext, op: Operation
) -> StreamsGroupHeartbeatResponse:
    validate(req)
    existing = st.groups.get(req.group_id)
    group: StreamsGroup | None
    if existing is None or isinstance(existing, StreamsGroup):
        group = existing
    elif req.member_epoch == 0 and _replaceable(existing):
        assert isinstance(existing, ClassicGroup)
        if not existing.is_simple():
            op.records.append(CoordinatorRecord(GroupMetadataKey(req.group_id), None))
        group = None
        op.event("group.converted", group=req.group_id, from_type="classic", to_type="streams")
    elif req.member_epoch == 0 and isinstance(existing, ClassicGroup):
        # A live classic Kafka Streams group: converted online with its instances kept, or
        # refused with the reason (translation/streams_upgrade.py; Kafka refuses it).
        group = st.migration.streams_heartbeat_to_classic_group(existing, req, op)
    else:
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a streams group.")

    if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        return leave(st, group, req, op)

    new_group = group is None
    if group is None:
        if req.member_epoch != 0:
            raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Streams group {req.group_id} not found.")
        group = StreamsGroup(req.group_id)
        # Kafka 4.4 creates a streams group at epoch 1, so its first member's join bumps it to 2
        # (measured: "Bumped streams group epoch to 2" on the first heartbeat).
        group.group_epoch = 1
    gid, mid = req.group_id, req.member_id
    member = group.members.get(mid)
    new_member = member is None
    owned = (
        None
        if req.active_tasks is None or req.standby_tasks is None or req.warmup_tasks is None
        else TaskRoles(
            tasks_from(req.active_tasks), tasks_from(req.standby_tasks), tasks_from(req.warmup_tasks)
        )
    )
    replaced: StreamsMember | None = None
    if member is None:
        if req.member_epoch != 0:
            raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
        replaced = _static_predecessor(group, mid, req.instance_id)
    if member is None and replaced is not None:
        # A static member back with a new member id takes its predecessor's place and tasks.
        op.records += member_tombstones(gid, replaced.member_id)
        op.cancel(TimerKind.STREAMS_SESSION, gid, replaced.member_id)
        op.cancel(TimerKind.STREAMS_REBALANCE, gid, replaced.member_id)
        member = replace(replaced, member_id=mid)
    elif member is None:
        if len(group.members) >= st.config.streams_max_size:
            raise CoordinatorError(
                Errors.GROUP_MAX_SIZE_REACHED,
                "The streams group has reached its maximum capacity of "
                f"{st.config.streams_max_size} members.",
            )
        member = StreamsMember(mid)
    elif req.member_epoch != 0:
        _check_epoch(member, req.member_epoch, owned)

    # Topology (Kafka `maybeUpdateTopology`): the first one initializes the group's; an older
    # epoch is stale; another topology at the group's epoch or later is refused, as Kafka 4.4
    # does not update topologies yet.
    topology = group.topology
    statuses: list[Status] = []
    bump = new_member and replaced is None
    if req.topology is not None:
        if topology is None:
            _throw_if_unusable(req.topology)
            topology = req.topology
            op.records.append(CoordinatorRecord(StreamsGroupTopologyKey(gid), topology))
            bump = True
        elif req.topology.epoch >= topology.epoch and not _same_topology(req.topology, topology):
            raise invalid_request("Topology updates are not supported yet.")

    updated = replace(
        member,
        instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        client_id=ctx.client_id,
        client_host=ctx.client_host,
        rebalance_timeout_ms=req.rebalance_timeout_ms
        if req.rebalance_timeout_ms != -1
        else member.rebalance_timeout_ms,
        topology_epoch=req.topology.epoch if req.topology is not None else member.topology_epoch,
        process_id=req.process_id if req.process_id is not None else member.process_id,  # may stay ""
        user_endpoint=req.user_endpoint if req.user_endpoint is not None else member.user_endpoint,
        client_tags=_by_key(req.client_tags) if req.client_tags is not None else member.client_tags,
    )
    if topology is not None and updated.topology_epoch < topology.epoch:
        statuses.append(
            Status(
                STALE_TOPOLOGY,
                f"The member's topology epoch {updated.topology_epoch} is behind the group's "
                f"topology epoch {topology.epoch}.",
            )
        )
    if new_member or updated.metadata_value() != member.metadata_value():
        op.records.append(
            CoordinatorRecord(StreamsGroupMemberMetadataKey(gid, mid), updated.metadata_value())
        )
        if (not new_member or replaced is not None) and (
            updated.process_id != member.process_id
            or updated.topology_epoch != member.topology_epoch
            or updated.rack_id != member.rack_id
            or updated.client_tags != member.client_tags
        ):
            bump = True

    configured = None if topology is None else configure(topology, st.image)
    if configured is not None and configured.error is not None:
        raise CoordinatorError(Errors.STREAMS_INVALID_TOPOLOGY, configured.error)
    if configured is not None and configured.tasks is not None:
        _throw_if_invalid_tasks(configured.tasks, (req.active_tasks, req.standby_tasks, req.warmup_tasks))
    digest = 0 if configured is None else configured.metadata_hash
    if configured is not None:
        statuses += configured.statuses
    validated = (
        topology.epoch
        if topology is not None and configured is not None and configured.tasks is not None
        else -1
    )
    if digest != group.metadata_hash:
        bump = True
    configs = assignment_configs(st, gid)
    if configs != group.last_assignment_configs:
        # Kafka 4.4: "Assignment configurations changed ... Triggering rebalance."
        bump = True
    epoch = group.group_epoch + 1 if bump else group.group_epoch
    if bump or new_group or validated != group.validated_topology_epoch:
        op.records.append(_metadata_record(gid, epoch, digest, validated, configs))

    if not new_group and (req.task_offsets is not None or req.task_end_offsets is not None):
        # Kafka 4.4 `MemberTaskOffsets.update`: a list given replaces the last one, a null list
        # keeps it; on the live group only, before the target is computed.
        known = group.task_offsets.get(mid, MemberTaskOffsets())
        group.task_offsets[mid] = MemberTaskOffsets(
            known.offsets if req.task_offsets is None else _nested(req.task_offsets),
            known.end_offsets if req.task_end_offsets is None else _nested(req.task_end_offsets),
        )

    delayed = _initial_rebalance_delay(st, op, group, bump)
    members = dict(group.members)
    if replaced is not None:
        del members[replaced.member_id]
    members[mid] = updated
    target_epoch = group.assignment_epoch
    if delayed:
        # Kafka 4.4 `maybeUpdateStreamsTargetAssignment`: while the delay runs no target is
        # computed and every member is told why it has no tasks yet.
        statuses.append(
            Status(ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance delay.")
        )
        target = TaskRoles({}, {}, {})
        if new_group:
            # Kafka 4.4 creates the group at assignment epoch 1 as well as group epoch 1
            # (measured: the members wait at member epoch 1, and Describe says assignment
            # epoch 1 while the delay runs).
            # Stamped 0: Kafka computes no target here, so the delay's end is not held back by
            # the assignment interval.
            op.records.append(_target_epoch_record(gid, 1, 0))
            target_epoch = 1
        if epoch != group.group_epoch:
            op.event("group.epoch_bumped", group=gid, epoch=epoch, member=mid)
    elif epoch > group.assignment_epoch and can_compute_next_target(st, group):
        targets = _new_targets(st, group, members, topology, configured)
        _write_targets(st, op, group, targets, epoch)
        target = targets.get(mid, TaskRoles({}, {}, {}))
        target_epoch = epoch
        if epoch != group.group_epoch or new_member:
            op.event("group.epoch_bumped", group=gid, epoch=epoch, member=mid)
    else:
        if epoch > group.assignment_epoch:
            # Kafka 4.4 `maybeUpdateStreamsTargetAssignment`: the last target is younger than
            # the assignment interval; the member is told so and reconciles towards the target
            # there is, at its epoch (a member joining now waits with no tasks).
            statuses.append(Status(ASSIGNMENT_DELAYED, ASSIGNMENT_INTERVAL_DETAIL))
            if epoch != group.group_epoch:
                op.event("group.epoch_bumped", group=gid, epoch=epoch, member=mid)
        # This member's target alone (a static member back takes its predecessor's): building
        # every member's would make each steady heartbeat cost the size of the group.
        target = _member_target(group, mid if replaced is None else replaced.member_id)
        if replaced is not None:
            op.records.append(_target_record(gid, mid, target))

    joining = updated if not new_member else replace(updated, member_epoch=0, previous_member_epoch=-1)
    reconciled = reconcile(joining, target, target_epoch, group.holders(updated.process_id), owned)
    changed = new_member or not _same_assignment(member, reconciled)
    if changed:
        op.records.append(
            CoordinatorRecord(StreamsGroupCurrentMemberAssignmentKey(gid, mid), reconciled.assignment_value())
        )
    if new_member:
        op.event("member.joined", group=gid, member=mid, process=updated.process_id)
    if reconciled.state is MemberState.UNREVOKED_TASKS and (
        member.state is not MemberState.UNREVOKED_TASKS or member.member_epoch != reconciled.member_epoch
    ):
        # Kafka's rebalance timeout: the member must give the tasks up within its
        # rebalance.timeout.ms, or it is fenced (`fence_unrevoked_member`). Armed again for each
        # epoch it revokes at, as Kafka does whenever the member changed: a timer of an older
        # epoch fires as a no-op (chaos seed 10964: revoking at epoch 9 then again at 10, the
        # member was never fenced and held its tasks for good).
        timeout = reconciled.rebalance_timeout_ms if reconciled.rebalance_timeout_ms > 0 else 0
        op.schedule(TimerKind.STREAMS_REBALANCE, gid, mid, timeout, reconciled.member_epoch, timeout)
    if changed and not new_member:
        op.event(
            "member.assignment_changed",
            group=gid,
            member=mid,
            epoch=reconciled.member_epoch,
            state=reconciled.state.name,
        )
    op.schedule(TimerKind.STREAMS_SESSION, gid, mid, st.streams_session_timeout_ms(gid))
    if not new_group:
        # Kept on the live group, not in a record (as Kafka 4.4 does); the group object of a
        # group this heartbeat creates is not the one the shard keeps, so a shutdown asked on
        # the very first join is not remembered.
        if req.shutdown_application:
            group.shutdown_requested_by = mid
        if group.shutdown_requested_by is not None:
            statuses.append(
                Status(
                    SHUTDOWN_APPLICATION,
                    f"Streams group member {group.shutdown_requested_by} encountered a fatal error and "
                    "requested a shutdown for the entire application.",
                )
            )
    if ctx.api_version >= 1:
        missing = missing_client_tags(configs, updated)
        if missing is not None:
            statuses.append(missing)

    # Kafka sends the tasks on a join and when the member's assigned tasks changed (not on an
    # epoch change alone, nor to a member that reports fewer tasks than it has). groupshift also
    # sends them to a member heartbeating at its previous epoch: it did not get the answer that
    # moved it, and Kafka 4.4 (which does not) would move it to the new epoch without the tasks
    # that answer gave it, never to be told again while its assignment does not change (a
    # standby it was given stays unheld: chaos seed 5837, docs/simulation.md).
    send_tasks = (
        req.member_epoch == 0
        or req.member_epoch < member.member_epoch
        or not (
            tasks_equal(member.active, reconciled.active)
            and tasks_equal(member.standby, reconciled.standby)
            and tasks_equal(member.warmup, reconciled.warmup)
        )
    )
    endpoints = None
    if not new_group:
        if send_tasks and reconciled.user_endpoint is not None:
            group.endpoint_information_epoch += 1
        if group.endpoint_information_epoch != req.endpoint_information_epoch:
            endpoints = _endpoints(topology, members, reconciled, configured, st)
    elif send_tasks and reconciled.user_endpoint is not None:
        # The first join of a new group: Kafka bumps the epoch of a group object it does not
        # keep, answers every endpoint and epoch 0.
        endpoints = _endpoints(topology, members, reconciled, configured, st)
    return StreamsGroupHeartbeatResponse(
        endpoint_information_epoch=0 if new_group else group.endpoint_information_epoch,
        partitions_by_user_endpoint=endpoints,
        member_id=mid,
        member_epoch=reconciled.member_epoch,
        heartbeat_interval_ms=st.streams_heartbeat_interval_ms(gid),
        status=tuple(statuses),
        active_tasks=task_ids(reconciled.active) if send_tasks else None,
        standby_tasks=task_ids(reconciled.standby) if send_tasks else None,
        warmup_tasks=task_ids(reconciled.warmup) if send_tasks else None,
        internal_topics_to_create=configured.to_create if configured is not None else (),
    )


def _initial_rebalance_delay(st: ShardState, op: Operation, group: StreamsGroup, bump: bool) -> bool:
    """Whether the group's first assignment waits (Kafka 4.4 `streamsGroupHeartbeat`): a member
    joining an empty group (the epoch bumps while the group has no member) starts
    `streams.initial.rebalance.delay.ms`, so that the instances of an application starting
    together share one assignment instead of each taking every task in turn; until the timer
    fires (`compute_delayed_target_assignment`) no heartbeat computes one."""
    gid = group.group_id
    deadline = st.streams_initial_delays.get(gid)
    if deadline is not None:
        return True
    delay = st.streams_initial_rebalance_delay_ms(gid)
    if not bump or group.members or delay <= 0:
        return False
    op.schedule_if_absent(TimerKind.STREAMS_INITIAL_REBALANCE, gid, "", delay)
    ends = st.now_ms + delay
    delays = st.streams_initial_delays

    def started() -> None:
        delays.setdefault(gid, ends)

    op.after(started)
    return True


def compute_delayed_target_assignment(st: ShardState, group_id: str, op: Operation) -> None:
    """The initial rebalance delay is over (Kafka 4.4 `computeDelayedTargetAssignment`): the
    target of every member, at the group's epoch. Nothing if the group is gone, empty or has no
    usable topology (the next heartbeat computes it then)."""
    delays = st.streams_initial_delays

    def ended() -> None:
        delays.pop(group_id, None)

    op.after(ended)
    group = st.groups.get(group_id)
    if not isinstance(group, StreamsGroup) or not group.members or group.topology is None:
        return
    if group.group_epoch <= group.assignment_epoch or not can_compute_next_target(st, group):
        return
    configured = configure(group.topology, st.image)
    if configured.tasks is None:
        return
    targets = _new_targets(st, group, dict(group.members), group.topology, configured)
    _write_targets(st, op, group, targets, group.group_epoch)
    op.event("group.initial_rebalance_done", group=group_id, epoch=group.group_epoch)


def update_member(
    st: ShardState,
    group: StreamsGroup,
    member: StreamsMember | None,
    updated: StreamsMember,
    owned: TaskRoles | None,
    op: Operation,
    replaced: StreamsMember | None = None,
) -> StreamsMember:
    """A classic Kafka Streams instance's JoinGroup in a streams group
    (translation/streams_classic_member.py): the steps of a heartbeat for a group that has its
    topology, with `updated` the member's new metadata (`member`: as stored, None when it
    joins) and `owned` the tasks its subscription says it holds. Writes the member's metadata,
    a new group epoch and target when the membership or the topics changed, and its reconciled
    current assignment, which is returned.

    `replaced`: the member a static instance takes over (its tombstones already in `op`);
    `member` is then that predecessor under the new member id, whose place, target and tasks
    the newcomer keeps: no new group epoch for the replacement itself, as for a classic static
    member (KIP-345) and a KIP-1071 static member back after epoch -2."""
    gid, mid = group.group_id, updated.member_id
    new_member = member is None
    bump = new_member
    if member is None or replaced is not None or updated.metadata_value() != member.metadata_value():
        op.records.append(
            CoordinatorRecord(StreamsGroupMemberMetadataKey(gid, mid), updated.metadata_value())
        )
        if member is not None and (
            updated.process_id != member.process_id
            or updated.rack_id != member.rack_id
            or updated.client_tags != member.client_tags
        ):
            bump = True
    topology = group.topology
    configured = None if topology is None else configure(topology, st.image)
    digest = group.metadata_hash if configured is None else configured.metadata_hash
    validated = (
        topology.epoch
        if topology is not None and configured is not None and configured.tasks is not None
        else -1
    )
    if digest != group.metadata_hash:
        bump = True
    configs = assignment_configs(st, gid)
    if configs != group.last_assignment_configs:
        bump = True
    epoch = group.group_epoch + 1 if bump else group.group_epoch
    if bump or validated != group.validated_topology_epoch:
        op.records.append(_metadata_record(gid, epoch, digest, validated, configs))
    members = dict(group.members)
    targets = group_targets(group)
    if replaced is not None:
        del members[replaced.member_id]
        targets[mid] = targets.pop(replaced.member_id, TaskRoles({}, {}, {}))
    members[mid] = updated
    holders = group.holders(updated.process_id)
    target_epoch = group.assignment_epoch
    if (
        epoch > group.assignment_epoch
        and gid not in st.streams_initial_delays
        and can_compute_next_target(st, group)
    ):
        targets = _new_targets(st, group, members, topology, configured)
        _write_targets(st, op, group, targets, epoch)
        target_epoch = epoch
        op.event("group.epoch_bumped", group=gid, epoch=epoch, member=mid)
    elif replaced is not None:
        op.records.append(_target_record(gid, mid, targets[mid]))
    start = updated if member is not None else replace(updated, member_epoch=0, previous_member_epoch=-1)
    reconciled = reconcile(start, targets.get(mid, TaskRoles({}, {}, {})), target_epoch, holders, owned)
    if member is None or replaced is not None or not _same_assignment(member, reconciled):
        op.records.append(
            CoordinatorRecord(StreamsGroupCurrentMemberAssignmentKey(gid, mid), reconciled.assignment_value())
        )
    if reconciled.state is MemberState.UNREVOKED_TASKS and (
        member is None
        or member.state is not MemberState.UNREVOKED_TASKS
        or member.member_epoch != reconciled.member_epoch
    ):
        timeout = reconciled.rebalance_timeout_ms if reconciled.rebalance_timeout_ms > 0 else 0
        op.schedule(TimerKind.STREAMS_REBALANCE, gid, mid, timeout, reconciled.member_epoch, timeout)
    return reconciled


def must_rejoin(st: ShardState, group: StreamsGroup, member: StreamsMember) -> bool:
    """A classic member must rejoin (Heartbeat answers REBALANCE_IN_PROGRESS) when its tasks are
    about to change: it lags the target assignment, has tasks to give up, waits for a task
    another member has since released, or a target left to a later heartbeat by the assignment
    interval may now be computed (its JoinGroup computes it: a group whose members are all
    classic instances has no streams heartbeat to do it)."""
    if member.member_epoch < group.assignment_epoch or member.state is MemberState.UNREVOKED_TASKS:
        return True
    if (
        group.group_epoch > group.assignment_epoch
        and group.group_id not in st.streams_initial_delays
        and can_compute_next_target(st, group)
    ):
        return True
    if member.state is not MemberState.UNRELEASED_TASKS:
        return False
    target = group_targets(group).get(member.member_id, TaskRoles({}, {}, {}))
    held = TaskRoles(member.active, member.standby, member.warmup)
    after = reconcile(member, target, group.assignment_epoch, group.holders(member.process_id), held)
    return after is not member


def _endpoints(
    topology: StreamsGroupTopologyValue | None,
    members: dict[str, StreamsMember],
    updated: StreamsMember,
    configured: ConfiguredTopology | None,
    st: ShardState,
) -> tuple[EndpointPartitions, ...]:
    """Kafka `maybeBuildEndpointToPartitions`: every other member with a user endpoint, then the
    member itself, each with the source partitions of its tasks (a task's partition of every
    source and repartition source topic of its subtopology, cut to the topic's partitions)."""
    if topology is None or configured is None or configured.tasks is None:
        return ()
    subs = {s.subtopology_id: s for s in topology.subtopologies}

    def partitions(tasks: Tasks) -> tuple[tuple[str, tuple[int, ...]], ...]:
        out: list[tuple[str, tuple[int, ...]]] = []
        for sid in java_hash_order(tasks):
            sub = subs.get(sid)
            if sub is None:
                continue
            names = [*sub.source_topics, *(i.name for i in sub.repartition_source_topics)]
            parts = sorted(tasks[sid])
            for topic in java_hash_order(names):
                t = st.image.topic(topic)
                count = 0 if t is None else t.num_partitions
                out.append((topic, tuple(parts[:count]) if count < len(parts) else tuple(parts)))
        return tuple(out)

    # Kafka iterates its hash map of members, then adds the member itself.
    order = [members[mid] for mid in java_hash_order(members) if mid != updated.member_id] + [updated]
    return tuple(
        EndpointPartitions(m.user_endpoint, partitions(m.active), partitions(m.standby))
        for m in order
        if m.user_endpoint is not None
    )


def _same_topology(a: StreamsGroupTopologyValue, b: StreamsGroupTopologyValue) -> bool:
    """Kafka's `StreamsTopology.equals`: the epoch and the subtopologies by id."""
    return a.epoch == b.epoch and sorted(a.subtopologies, key=lambda s: s.subtopology_id) == sorted(
        b.subtopologies, key=lambda s: s.subtopology_id
    )


def _throw_if_unusable(topology: StreamsGroupTopologyValue) -> None:
    """What Kafka 4.4 fails on with UNKNOWN_SERVER_ERROR and no message when a topology first
    initializes a group (measured): a negative topology epoch, and a copartition group naming a
    source or repartition topic index the subtopology does not have. The same code here, so a
    client reacts as it does to Kafka."""
    fail = CoordinatorError(Errors.UNKNOWN_SERVER_ERROR, None)
    if topology.epoch < 0:
        raise fail
    ids = [s.subtopology_id for s in topology.subtopologies]
    if len(set(ids)) != len(ids):
        raise fail
    for sub in topology.subtopologies:
        for group in sub.copartition_groups:
            if any(i < 0 or i >= len(sub.source_topics) for i in group.source_topics) or any(
                i < 0 or i >= len(sub.repartition_source_topics) for i in group.repartition_source_topics
            ):
                raise fail


def _throw_if_invalid_tasks(tasks: dict[str, int], given: tuple[tuple[TaskIds, ...] | None, ...]) -> None:
    """Kafka `throwIfRequestContainsInvalidTasks`, once the topology is ready: an owned task of a
    subtopology the topology lacks, or a partition beyond its number of tasks."""
    for ids in given:
        for t in ids or ():
            if t.subtopology_id not in tasks:
                raise invalid_request(f"Subtopology {t.subtopology_id} does not exist in the topology.")
            for p in t.partitions:
                if p < 0 or p >= tasks[t.subtopology_id]:
                    raise invalid_request(
                        f"Task {p} for subtopology {t.subtopology_id} is invalid. Number of tasks for "
                        f"this subtopology: {tasks[t.subtopology_id]}"
                    )


def _check_epoch(member: StreamsMember, received: int, owned: TaskRoles | None) -> None:
    """Kafka `throwIfStreamsGroupMemberEpochIsInvalid`: a newer epoch, or an older one that is
    not the previous epoch with no task beyond the member's (in each role), is fenced."""
    if received > member.member_epoch:
        raise CoordinatorError(Errors.FENCED_MEMBER_EPOCH, _fenced_message("greater", received, member))
    if received < member.member_epoch and (
        received != member.previous_member_epoch
        or owned is None
        or tasks_minus(owned.active, member.active)
        or tasks_minus(owned.standby, member.standby)
        or tasks_minus(owned.warmup, member.warmup)
    ):
        raise CoordinatorError(Errors.FENCED_MEMBER_EPOCH, _fenced_message("smaller", received, member))


def _fenced_message(which: str, received: int, member: StreamsMember) -> str:
    return (
        f"The streams group member has a {which} member epoch ({received}) than the one known by "
        f"the group coordinator ({member.member_epoch}). "
        "The member must abandon all its partitions and rejoin."
    )


# --- leaving and fencing ------------------------------------------------------------------------


def remove_member(
    st: ShardState, group: StreamsGroup, member_id: str, op: Operation, gone: Collection[str] = ()
) -> None:
    """The member's tombstones, a new group epoch, and the remaining members' new targets.
    `gone`: members already removed by the same operation (a LeaveGroup of several classic
    members), left out of the new targets."""
    gid = group.group_id
    op.records += member_tombstones(gid, member_id)
    epoch = group.group_epoch + 1 + len(gone)
    configured = None if group.topology is None else configure(group.topology, st.image)
    # The hash and validation of the topics as they are now: the new target is computed
    # against them, and a later heartbeat must not take an older image's hash for current.
    digest, validated = group.metadata_hash, group.validated_topology_epoch
    if group.topology is not None and configured is not None:
        digest = configured.metadata_hash
        validated = group.topology.epoch if configured.tasks is not None else -1
    op.records.append(_metadata_record(gid, epoch, digest, validated, assignment_configs(st, gid)))
    members = {mid: m for mid, m in group.members.items() if mid != member_id and mid not in gone}
    if not members:
        # Kafka 4.4 `streamsGroupFenceMember`: the last member gone, the target is empty at the
        # new epoch and stamped 0, so the next member's first target need not wait.
        _write_targets(st, op, group, {}, epoch, timestamp=0)
    elif gid not in st.streams_initial_delays and st.streams_assignment_interval_ms(gid) == 0:
        # Kafka computes it in the next heartbeat; groupshift, with no assignment interval,
        # writes it now (as it did before the interval was modelled). With an interval the
        # next heartbeat computes it once the interval has passed, as in Kafka; while the
        # initial rebalance delay runs, the delay's end does.
        targets = _new_targets(st, group, members, group.topology, configured)
        _write_targets(st, op, group, targets, epoch)
    op.cancel(TimerKind.STREAMS_SESSION, gid, member_id)


def _static_predecessor(group: StreamsGroup, member_id: str, instance_id: str | None) -> StreamsMember | None:
    """The member a static member joining as `member_id` replaces (Kafka 4.4, measured): one
    that left with epoch -2 under the same instance id. A live member holding the instance id
    refuses the join with UNRELEASED_INSTANCE_ID."""
    if instance_id is None:
        return None
    holder = next((m for m in group.members.values() if m.instance_id == instance_id), None)
    if holder is None:
        return None
    if holder.member_epoch != STATIC_LEAVE_EPOCH:
        raise CoordinatorError(
            Errors.UNRELEASED_INSTANCE_ID,
            f"Static member {member_id} with instance id {instance_id} cannot join the group because the "
            f"instance id is owned by {holder.member_id} member.",
        )
    return holder


def static_leave(
    group: StreamsGroup, req: StreamsGroupHeartbeatRequest, op: Operation
) -> StreamsGroupHeartbeatResponse:
    """Epoch -2 (Kafka 4.4, measured): the static member stays in the group with its tasks and
    epoch -2 (the group shows Reconciling) until a member with its instance id replaces it or
    its session expires; the group epoch does not move."""
    gid, mid, iid = req.group_id, req.member_id, req.instance_id
    member = next((m for m in group.members.values() if m.instance_id == iid), None)
    if member is None:
        raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {iid} is unknown.")
    if member.member_id != mid:
        raise CoordinatorError(
            Errors.FENCED_INSTANCE_ID,
            f"Static member {mid} with instance id {iid} was fenced by member {member.member_id}.",
        )
    left = replace(member, member_epoch=STATIC_LEAVE_EPOCH)
    op.records.append(
        CoordinatorRecord(StreamsGroupCurrentMemberAssignmentKey(gid, mid), left.assignment_value())
    )
    op.cancel(TimerKind.STREAMS_REBALANCE, gid, mid)
    op.event("member.left", group=gid, member=mid, reason="the static member left the group temporarily")
    return StreamsGroupHeartbeatResponse(member_id=mid, member_epoch=STATIC_LEAVE_EPOCH, status=())


def leave(
    st: ShardState, group: StreamsGroup | None, req: StreamsGroupHeartbeatRequest, op: Operation
) -> StreamsGroupHeartbeatResponse:
    if group is None:
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
    if req.member_epoch == STATIC_LEAVE_EPOCH:
        return static_leave(group, req, op)
    if req.member_id not in group.members:
        raise CoordinatorError(
            Errors.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {req.group_id}."
        )
    if not st.migration.streams_member_leaving(group, req.member_id, op, "the member left the group"):
        remove_member(st, group, req.member_id, op)
    op.event("member.left", group=req.group_id, member=req.member_id, reason="the member left the group")
    return StreamsGroupHeartbeatResponse(member_id=req.member_id, member_epoch=req.member_epoch, status=())


def fence_unrevoked_member(
    st: ShardState, group_id: str, member_id: str, epoch: int, timeout_ms: int, op: Operation
) -> None:
    """The rebalance timer of a member told to revoke tasks fired: fenced if it is still at
    that epoch and still holds tasks it was asked to give up."""
    group = st.groups.get(group_id)
    if not isinstance(group, StreamsGroup):
        return
    member = group.members.get(member_id)
    if member is None or member.member_epoch != epoch or member.state is not MemberState.UNREVOKED_TASKS:
        return
    reason = f"it failed to revoke its tasks from epoch {epoch} within {timeout_ms}ms."
    if not st.migration.streams_member_leaving(group, member_id, op, reason):
        remove_member(st, group, member_id, op)
        op.cancel(TimerKind.STREAMS_REBALANCE, group_id, member_id)
    op.event("member.fenced", group=group_id, member=member_id, reason=reason)


def fence_expired_member(
    st: ShardState, group_id: str, member_id: str, op: Operation, reason: str = "the member session expired."
) -> None:
    """The member's session timer fired (`group.streams.session.timeout.ms`), or a classic
    instance's join or sync timer (translation/streams_classic_member.py)."""
    group = st.groups.get(group_id)
    if not isinstance(group, StreamsGroup) or member_id not in group.members:
        return
    if not st.migration.streams_member_leaving(group, member_id, op, reason):
        remove_member(st, group, member_id, op)
    op.event("member.fenced", group=group_id, member=member_id, reason=reason)
