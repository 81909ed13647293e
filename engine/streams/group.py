"""A streams group's state as its records rebuild it (Kafka 4.4 `StreamsGroup`,
`StreamsGroupMember`): the group epoch and metadata hash (type 17), the topology (23), the
members (19), the target assignment (20, 21) and each member's current assignment (22).

Tasks are kept as `{subtopology id: frozenset(partitions)}`, in three roles: active, standby and
warm-up (Kafka 4.4's assignor never produces warm-up tasks; they are stored and replayed all the
same).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Final

from engine.assignment import shared_epoch, shared_epochs
from records.consumer_group import ClassicMemberMetadata
from records.streams_group import (
    Endpoint,
    KeyValue,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataValue,
    StreamsGroupTopologyValue,
    TaskIds,
)

Tasks = Mapping[str, frozenset[int]]
NO_TASKS: Tasks = {}


class MemberState(IntEnum):
    """The byte of record type 22 (Kafka `org.apache.kafka.coordinator.group.streams.MemberState`:
    unlike the consumer-group states, which start at 0, these start at 1)."""

    STABLE = 1
    UNREVOKED_TASKS = 2
    UNRELEASED_TASKS = 3
    UNKNOWN = 127


_STATE_VALUES = frozenset(int(s) for s in MemberState)


def tasks_from(ids: Iterable[TaskIds] | None) -> Tasks:
    out: dict[str, frozenset[int]] = {}
    for t in ids or ():
        if t.partitions:
            out[t.subtopology_id] = out.get(t.subtopology_id, frozenset()) | frozenset(t.partitions)
    return out


def task_ids(tasks: Tasks) -> tuple[TaskIds, ...]:
    """Sorted by subtopology and partition, so that equal task sets write equal records."""
    return tuple(TaskIds(s, tuple(sorted(p))) for s, p in sorted(tasks.items()) if p)


# subtopology id -> partition -> the member epoch at which the member was given that active task
TaskEpochs = Mapping[str, Mapping[int, int]]


def active_task_ids(tasks: Tasks, epochs: TaskEpochs, default: int) -> tuple[TaskIds, ...]:
    """`task_ids` of active tasks with each task's assignment epoch (record type 22's tagged
    `AssignmentEpochs`, Kafka 4.3+), `default` for a task without one."""
    out = []
    for s, p in sorted(tasks.items()):
        if p:
            parts = tuple(sorted(p))
            have = epochs.get(s, {})
            out.append(TaskIds(s, parts, tuple(have.get(x, default) for x in parts)))
    return tuple(out)


def epochs_from_records(ids: Iterable[TaskIds], default: int) -> dict[str, dict[int, int]]:
    """Kafka 4.4 `TasksTupleWithEpochs.parseActiveTasksWithEpochs`: the stored epochs, or
    `default` (the member epoch) for a subtopology whose record has none or a list of another
    length than its partitions (a record written before Kafka 4.3)."""
    out: dict[str, dict[int, int]] = {}
    for t in ids:
        into = out.setdefault(t.subtopology_id, {})
        epochs = t.assignment_epochs
        if epochs is not None and len(epochs) == len(t.partitions):
            into.update(zip(t.partitions, epochs, strict=True))
        else:
            into.update(dict.fromkeys(t.partitions, default))
    return {s: e for s, e in out.items() if e}


def tasks_union(a: Tasks, b: Tasks) -> Tasks:
    out = dict(a)
    for s, p in b.items():
        out[s] = out.get(s, frozenset()) | p
    return {s: p for s, p in out.items() if p}


def tasks_minus(a: Tasks, b: Tasks) -> Tasks:
    out = {s: p - b.get(s, frozenset()) for s, p in a.items()}
    return {s: p for s, p in out.items() if p}


def tasks_intersect(a: Tasks, b: Tasks) -> Tasks:
    out = {s: p & b.get(s, frozenset()) for s, p in a.items()}
    return {s: p for s, p in out.items() if p}


def tasks_equal(a: Tasks, b: Tasks) -> bool:
    return {s: p for s, p in a.items() if p} == {s: p for s, p in b.items() if p}


@dataclass(slots=True)
class MemberTaskOffsets:
    """Kafka 4.4 `MemberTaskOffsets`: the changelog offsets a member last reported, per task
    (subtopology id -> partition -> offset sum). Kept on the live group only, as Kafka keeps
    them (a plain map, no record); the assignor ranks standby candidates by them."""

    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    end_offsets: dict[str, dict[int, int]] = field(default_factory=dict)


# subtopology id -> partitions: a task is held if its partition is a key (`HeldTasks`' values
# count the members holding it) or an element (`Tasks`).
Held = Mapping[str, Collection[int]]
HeldTasks = dict[str, dict[int, int]]


@dataclass(slots=True)
class TaskHolders:
    """Tasks held by the other members (assigned or pending revocation): `active` anywhere in the
    group, the `_here` maps on the member's own process only."""

    active: Held = field(default_factory=dict)
    active_here: Held = field(default_factory=dict)
    standby_here: Held = field(default_factory=dict)
    warmup_here: Held = field(default_factory=dict)


def _count(into: HeldTasks, tasks: Tasks, delta: int) -> None:
    for sid, parts in tasks.items():
        counts = into.setdefault(sid, {})
        for p in parts:
            n = counts.get(p, 0) + delta
            if n:
                counts[p] = n
            else:
                del counts[p]
        if not counts:
            del into[sid]


@dataclass(slots=True)
class StreamsMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: Endpoint | None = None
    client_tags: tuple[KeyValue, ...] = ()
    # A classic Kafka Streams instance living in the streams group (JoinGroup/SyncGroup):
    # its session timeout and protocols (translation/streams_classic_member.py).
    classic: ClassicMemberMetadata | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)
    active_pending_revocation: Tasks = field(default_factory=dict)
    standby_pending_revocation: Tasks = field(default_factory=dict)
    warmup_pending_revocation: Tasks = field(default_factory=dict)
    # The epoch each active task (assigned or pending revocation) was given at (Kafka 4.3+,
    # KAFKA-19779): a commit sent with an older member epoch is accepted for a task the member
    # held at that epoch. A task missing here counts as given at `member_epoch`.
    active_epochs: TaskEpochs = field(default_factory=dict)

    def active_task_epoch(self, subtopology_id: str, partition: int) -> int | None:
        """The epoch at which the member was given this active task, None if it holds no such
        active task (assigned or pending revocation)."""
        if partition in self.active.get(
            subtopology_id, ()
        ) or partition in self.active_pending_revocation.get(subtopology_id, ()):
            return self.active_epochs.get(subtopology_id, {}).get(partition, self.member_epoch)
        return None

    def pending_revocation(self) -> Tasks:
        """Every task the member was asked to give up, whatever its role."""
        return tasks_union(
            self.active_pending_revocation,
            tasks_union(self.standby_pending_revocation, self.warmup_pending_revocation),
        )

    def metadata_value(self) -> StreamsGroupMemberMetadataValue:
        return StreamsGroupMemberMetadataValue(
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.topology_epoch,
            self.process_id,
            self.user_endpoint,
            self.client_tags,
            self.classic,
        )

    def assignment_value(self) -> StreamsGroupCurrentMemberAssignmentValue:
        return StreamsGroupCurrentMemberAssignmentValue(
            self.member_epoch,
            self.previous_member_epoch,
            int(self.state),
            active_task_ids(self.active, self.active_epochs, self.member_epoch),
            task_ids(self.standby),
            task_ids(self.warmup),
            active_task_ids(self.active_pending_revocation, self.active_epochs, self.member_epoch),
            task_ids(self.standby_pending_revocation),
            task_ids(self.warmup_pending_revocation),
        )


class StreamsGroupState:
    """Kafka `StreamsGroup.StreamsGroupState` names, as StreamsGroupDescribe and ListGroups show them."""

    # Final: constants of the class (in the compiled build, mypyc makes a plain class attribute
    # an instance attribute, not readable through the class)
    EMPTY: Final = "Empty"
    NOT_READY: Final = "NotReady"
    ASSIGNING: Final = "Assigning"
    RECONCILING: Final = "Reconciling"
    STABLE: Final = "Stable"
    DEAD: Final = "Dead"


class StreamsGroup:
    """Replayed state only: a handler computes a change and writes records; `engine.replay`
    applies them here."""

    PROTOCOL_TYPE = "streams"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.validated_topology_epoch = -1
        self.topology: StreamsGroupTopologyValue | None = None
        self.members: dict[str, StreamsMember] = {}
        # The target assignment, one map per role: member id -> tasks.
        self.targets: dict[str, Tasks] = {}
        self.standby_targets: dict[str, Tasks] = {}
        self.warmup_targets: dict[str, Tasks] = {}
        # Type 17's LastAssignmentConfigs: the assignor settings the target was computed with
        # (`num.standby.replicas`); a change recomputes the target, as in Kafka 4.4.
        self.last_assignment_configs: tuple[KeyValue, ...] | None = None
        self.assignment_epoch = -1
        # When the target was last computed (type 20's AssignmentTimestamp, wall-clock ms; 0:
        # never, or the group emptied): the next one waits until this plus
        # `streams.assignment.interval.ms`, as Kafka 4.4's `canComputeNextTargetAssignment`.
        self.assignment_timestamp = 0
        # True once a record of type 17 was replayed: the group exists in the log.
        self.created = False
        # The member that asked the whole application to shut down (ShutdownApplication): every
        # member's heartbeat carries status SHUTDOWN_APPLICATION until the group is empty. Not
        # in a record, as in Kafka 4.4 (`StreamsGroup.setShutdownRequestMemberId`).
        self.shutdown_requested_by: str | None = None
        # Kafka 4.4's endpoint information epoch: bumped, on the live group only, each time a
        # member with a user endpoint is sent its tasks; a member whose epoch differs is sent
        # every member's endpoint and partitions.
        self.endpoint_information_epoch = 0
        # member id -> the task offsets it last reported (live group only, as in Kafka 4.4).
        self.task_offsets: dict[str, MemberTaskOffsets] = {}
        # What the members hold now (their current tasks, pending revocation included), kept as
        # the records are replayed, as Kafka 4.4's StreamsGroup keeps its current-task maps: a
        # member's heartbeat asks who holds a task without scanning the group (which made a
        # rebalance of n members cost n^2). Active tasks over the group; per process id, the
        # active, standby and warm-up tasks of its members.
        self._active_held: HeldTasks = {}
        self._held_on: dict[str, tuple[HeldTasks, HeldTasks, HeldTasks]] = {}

    # --- derived ---------------------------------------------------------------------------

    def state(self, topology_ready: bool = True) -> str:
        """Kafka `StreamsGroup.state`: Empty without members; NotReady while the topology
        is missing or cannot be configured against the cluster's topics; Assigning while the
        target assignment lags the group epoch; Reconciling while a member lags it."""
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.topology is None or not topology_ready:
            return StreamsGroupState.NOT_READY
        if self.assignment_epoch != self.group_epoch:
            return StreamsGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    @property
    def num_classic_members(self) -> int:
        return sum(1 for m in self.members.values() if m.classic is not None)

    def can_be_deleted(self) -> bool:
        return not self.members and not self.targets

    def is_subscribed_to(self, topic: str) -> bool:
        """Kafka `StreamsGroup.isSubscribedToTopic`: offsets of the topics the topology reads
        do not expire while the group has members."""
        if not self.members or self.topology is None:
            return False
        for sub in self.topology.subtopologies:
            if topic in sub.source_topics or any(i.name == topic for i in sub.repartition_source_topics):
                return True
        return False

    def holders(self, process_id: str) -> TaskHolders:
        """The tasks the members hold: active anywhere, and every role on `process_id` (live
        maps: read them before the next record is replayed)."""
        active, standby, warmup = self._held_on.get(process_id, ({}, {}, {}))
        return TaskHolders(self._active_held, active, standby, warmup)

    def _hold(self, m: StreamsMember, delta: int) -> None:
        """Counts `m`'s current tasks in (1) or out of (-1) the holder maps."""
        roles = self._held_on.setdefault(m.process_id, ({}, {}, {}))
        for tasks in (m.active, m.active_pending_revocation):
            _count(self._active_held, tasks, delta)
            _count(roles[0], tasks, delta)
        for held, tasks in (
            (roles[1], m.standby),
            (roles[1], m.standby_pending_revocation),
            (roles[2], m.warmup),
            (roles[2], m.warmup_pending_revocation),
        ):
            _count(held, tasks, delta)
        if not any(roles):
            del self._held_on[m.process_id]

    # --- replay (engine.replay calls these) -------------------------------------------------

    def replay_metadata(
        self,
        epoch: int,
        metadata_hash: int,
        validated_topology_epoch: int,
        last_assignment_configs: tuple[KeyValue, ...] | None = None,
    ) -> None:
        self.group_epoch = shared_epoch(epoch)
        self.metadata_hash = metadata_hash
        self.validated_topology_epoch = validated_topology_epoch
        self.last_assignment_configs = last_assignment_configs
        self.created = True

    def replay_topology(self, value: StreamsGroupTopologyValue | None) -> None:
        self.topology = value

    def replay_member_metadata(self, member_id: str, value: StreamsGroupMemberMetadataValue | None) -> None:
        if value is None:
            gone = self.members.pop(member_id, None)
            if gone is not None:
                self._hold(gone, -1)
            self.task_offsets.pop(member_id, None)
            if not self.members:
                self.shutdown_requested_by = None
            return
        m = self.members.get(member_id)
        if m is None:
            m = self.members[member_id] = StreamsMember(member_id)
        elif m.process_id != value.process_id:
            self._hold(m, -1)
            m.process_id = value.process_id
            self._hold(m, 1)
        m.instance_id = value.instance_id
        m.rack_id = value.rack_id
        m.client_id = value.client_id
        m.client_host = value.client_host
        m.rebalance_timeout_ms = value.rebalance_timeout_ms
        m.topology_epoch = value.topology_epoch
        m.process_id = value.process_id
        m.user_endpoint = value.user_endpoint
        m.client_tags = value.client_tags
        m.classic = value.classic_member_metadata

    def replay_current_assignment(
        self, member_id: str, value: StreamsGroupCurrentMemberAssignmentValue | None
    ) -> None:
        m = self.members.get(member_id)
        if m is not None:
            self._hold(m, -1)
        if value is None:
            if m is not None:
                m.member_epoch, m.previous_member_epoch = 0, -1
                m.state = MemberState.STABLE
                m.active, m.standby, m.warmup, m.active_pending_revocation = {}, {}, {}, {}
                m.standby_pending_revocation, m.warmup_pending_revocation = {}, {}
                m.active_epochs = {}
            return
        if m is None:
            # Kafka creates the member from either of its records, whichever comes first.
            m = self.members[member_id] = StreamsMember(member_id)
        # Epochs as the process's one int object per value (`engine.assignment.shared_epoch`).
        m.member_epoch = shared_epoch(value.member_epoch)
        m.previous_member_epoch = shared_epoch(value.previous_member_epoch)
        m.state = MemberState(value.state) if value.state in _STATE_VALUES else MemberState.UNKNOWN
        m.active = tasks_from(value.active_tasks)
        m.standby = tasks_from(value.standby_tasks)
        m.warmup = tasks_from(value.warmup_tasks)
        m.active_pending_revocation = tasks_from(value.active_tasks_pending_revocation)
        m.standby_pending_revocation = tasks_from(value.standby_tasks_pending_revocation)
        m.warmup_pending_revocation = tasks_from(value.warmup_tasks_pending_revocation)
        m.active_epochs = shared_epochs(
            epochs_from_records((*value.active_tasks, *value.active_tasks_pending_revocation), m.member_epoch)
        )
        self._hold(m, 1)

    def replay_target_member(
        self, member_id: str, tasks: Tasks | None, standby: Tasks | None = None, warmup: Tasks | None = None
    ) -> None:
        if tasks is None:
            self.targets.pop(member_id, None)
            self.standby_targets.pop(member_id, None)
            self.warmup_targets.pop(member_id, None)
        else:
            self.targets[member_id] = tasks
            self.standby_targets[member_id] = standby or {}
            self.warmup_targets[member_id] = warmup or {}

    def replay_assignment_epoch(self, epoch: int | None, timestamp: int = 0) -> None:
        self.assignment_epoch = -1 if epoch is None else shared_epoch(epoch)
        self.assignment_timestamp = timestamp

    # --- comparison of live and replayed state ----------------------------------------------

    def persisted_state(self) -> dict[str, Any]:
        return {
            "epoch": self.group_epoch,
            "metadata_hash": self.metadata_hash,
            "validated_topology_epoch": self.validated_topology_epoch,
            "last_assignment_configs": self.last_assignment_configs,
            "topology": self.topology,
            "assignment_epoch": self.assignment_epoch,
            "assignment_timestamp": self.assignment_timestamp,
            "targets": {
                mid: (
                    task_ids(t),
                    task_ids(self.standby_targets.get(mid, {})),
                    task_ids(self.warmup_targets.get(mid, {})),
                )
                for mid, t in sorted(self.targets.items())
            },
            "members": {
                mid: (m.metadata_value(), m.assignment_value()) for mid, m in sorted(self.members.items())
            },
        }
