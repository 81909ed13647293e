"""A Connect group's state as its records rebuild it (the Connect draft summarised in docs/connect-groups.md,
"Worker Group and Worker"): the group epoch (record type 10000), the workers (10001), the target
assignment (10002, 10003), each worker's current assignment (10004) and the work held for
departed workers during `scheduled.rebalance.max.delay.ms` (10005). docs/connect-groups.md.

Connectors and tasks are kept as `Work`: a set of connector names and a set of
`(connector, task number)` pairs, Connect's `ConnectorTaskId`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Final

from protocol.connect_wire import WireConnectAssignor, WireTask, WireWork
from records.connect_group import (
    ConnectClassicWorker,
    ConnectGroupCurrentMemberAssignmentValue,
    ConnectGroupDelayedWorkValue,
    ConnectGroupMemberMetadataValue,
    ConnectGroupTargetAssignmentMemberValue,
)

TaskId = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Work:
    """Connectors and tasks; set algebra over both at once."""

    connectors: frozenset[str] = frozenset()
    tasks: frozenset[TaskId] = frozenset()

    def __or__(self, o: Work) -> Work:
        return Work(self.connectors | o.connectors, self.tasks | o.tasks)

    def __sub__(self, o: Work) -> Work:
        return Work(self.connectors - o.connectors, self.tasks - o.tasks)

    def __and__(self, o: Work) -> Work:
        return Work(self.connectors & o.connectors, self.tasks & o.tasks)

    def __bool__(self) -> bool:
        return bool(self.connectors or self.tasks)

    def issubset(self, o: Work) -> bool:
        return self.connectors <= o.connectors and self.tasks <= o.tasks

    def wire(self) -> WireWork:
        """Sorted, so that equal work writes equal bytes."""
        return WireWork(tuple(sorted(self.connectors)), tuple(WireTask(c, t) for c, t in sorted(self.tasks)))

    @staticmethod
    def of(w: WireWork) -> Work:
        return Work(frozenset(w.connectors), frozenset((t.connector, t.task) for t in w.tasks))

    def describe(self) -> dict[str, list[Any]]:
        return {"connectors": sorted(self.connectors), "tasks": [list(t) for t in sorted(self.tasks)]}


NO_WORK = Work()


class WorkerState(IntEnum):
    """The byte of record type 10004 (KIP-848's member states, for connectors and tasks)."""

    STABLE = 0  # owns its whole target at the assignment epoch
    UNREVOKED = 1  # told to give up `pending_revocation`; stays at its epoch until it reports so
    UNRELEASED = 2  # at the assignment epoch, waiting for others to revoke the rest of its target


@dataclass(slots=True)
class ConnectWorker:
    member_id: str
    client_id: str = ""
    client_host: str = ""
    url: str = ""
    rebalance_timeout_ms: int = 0
    config_offset: int = -1
    assignors: tuple[WireConnectAssignor, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: WorkerState = WorkerState.STABLE
    assigned: Work = NO_WORK
    pending_revocation: Work = NO_WORK
    # A classic Kafka Connect worker (JoinGroup/SyncGroup) living in the group: it lists no
    # assignor and never computes (translation/connect_classic_worker.py).
    classic: ConnectClassicWorker | None = None

    def metadata_value(self) -> ConnectGroupMemberMetadataValue:
        return ConnectGroupMemberMetadataValue(
            self.client_id,
            self.client_host,
            self.url,
            self.rebalance_timeout_ms,
            self.config_offset,
            self.assignors,
            self.classic,
        )

    def current_value(self) -> ConnectGroupCurrentMemberAssignmentValue:
        return ConnectGroupCurrentMemberAssignmentValue(
            self.member_epoch,
            self.previous_member_epoch,
            int(self.state),
            self.assigned.wire(),
            self.pending_revocation.wire(),
        )

    def assignor(self, name: str) -> WireConnectAssignor | None:
        for a in self.assignors:
            if a.name == name:
                return a
        return None


@dataclass(frozen=True, slots=True)
class Target:
    work: Work
    metadata_version: int = 0
    metadata: bytes = b""

    def value(self) -> ConnectGroupTargetAssignmentMemberValue:
        return ConnectGroupTargetAssignmentMemberValue(self.work.wire(), self.metadata_version, self.metadata)


NO_TARGET = Target(NO_WORK)


@dataclass(frozen=True, slots=True)
class Delayed:
    """A departed worker's work, which only a worker with the same URL may get before
    `deadline_ms` (Connect's `scheduled.rebalance.max.delay.ms`)."""

    url: str
    deadline_ms: int
    work: Work

    def value(self) -> ConnectGroupDelayedWorkValue:
        return ConnectGroupDelayedWorkValue(self.url, self.deadline_ms, self.work.wire())


class ConnectGroupState:
    # Final: constants of the class (in the compiled build, mypyc makes a plain class attribute
    # an instance attribute, not readable through the class)
    EMPTY: Final = "Empty"
    ASSIGNING: Final = "Assigning"
    RECONCILING: Final = "Reconciling"
    STABLE: Final = "Stable"


@dataclass(slots=True)
class ConnectGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConnectWorker] = field(default_factory=dict)
    targets: dict[str, Target] = field(default_factory=dict)
    delayed: dict[str, Delayed] = field(default_factory=dict)

    def state(self) -> str:
        if not self.members:
            return ConnectGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConnectGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not WorkerState.STABLE:
                return ConnectGroupState.RECONCILING
        return ConnectGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    def can_be_deleted(self) -> bool:
        return not self.members and not self.targets and not self.delayed

    def sdk_workers(self) -> list[ConnectWorker]:
        """The workers on the new protocol (the only ones that can compute an assignment)."""
        return [m for m in self.members.values() if m.classic is None]

    def classic_workers(self) -> list[ConnectWorker]:
        """Classic Kafka Connect workers living in the group, longest-standing first (the first
        is the Connect leader their assignments name)."""
        out = [m for m in self.members.values() if m.classic is not None]
        out.sort(key=lambda m: (m.classic.since_epoch if m.classic else 0, m.member_id))
        return out

    def held_work(self) -> Work:
        out = NO_WORK
        for d in self.delayed.values():
            out = out | d.work
        return out

    # --- replay (engine.replay) -------------------------------------------------------------------

    def replay_member_metadata(self, member_id: str, value: ConnectGroupMemberMetadataValue | None) -> None:
        if value is None:
            self.members.pop(member_id, None)
            return
        m = self.members.get(member_id)
        if m is None:
            m = self.members[member_id] = ConnectWorker(member_id)
        m.client_id, m.client_host, m.url = value.client_id, value.client_host, value.url
        m.rebalance_timeout_ms, m.config_offset = value.rebalance_timeout_ms, value.config_offset
        m.assignors = value.assignors
        m.classic = value.classic

    def replay_current_assignment(
        self, member_id: str, value: ConnectGroupCurrentMemberAssignmentValue | None
    ) -> None:
        m = self.members.get(member_id)
        if m is None:
            return
        if value is None:
            m.member_epoch, m.previous_member_epoch, m.state = 0, -1, WorkerState.STABLE
            m.assigned = m.pending_revocation = NO_WORK
            return
        m.member_epoch, m.previous_member_epoch = value.member_epoch, value.previous_member_epoch
        m.state = WorkerState(value.state)
        m.assigned, m.pending_revocation = Work.of(value.assigned), Work.of(value.pending_revocation)

    def replay_target_member(
        self, member_id: str, value: ConnectGroupTargetAssignmentMemberValue | None
    ) -> None:
        if value is None:
            self.targets.pop(member_id, None)
        else:
            self.targets[member_id] = Target(Work.of(value.work), value.metadata_version, value.metadata)

    def replay_delayed(self, member_id: str, value: ConnectGroupDelayedWorkValue | None) -> None:
        if value is None:
            self.delayed.pop(member_id, None)
        else:
            self.delayed[member_id] = Delayed(value.url, value.deadline_ms, Work.of(value.work))

    def persisted_state(self) -> dict[str, Any]:
        """Everything the records determine (live state == replayed state)."""
        return {
            "group_epoch": self.group_epoch,
            "assignment_epoch": self.assignment_epoch,
            "members": {
                mid: (
                    m.client_id,
                    m.client_host,
                    m.url,
                    m.rebalance_timeout_ms,
                    m.config_offset,
                    m.assignors,
                    m.member_epoch,
                    m.previous_member_epoch,
                    int(m.state),
                    m.assigned,
                    m.pending_revocation,
                    m.classic,
                )
                for mid, m in sorted(self.members.items())
            },
            "targets": dict(sorted(self.targets.items())),
            "delayed": dict(sorted(self.delayed.items())),
        }
