"""The client-side Connect assignor, driven by the coordinator (the Connect draft, "Assignment
Computation", "Worker Selection", ConnectGroupPrepareAssignment / ConnectGroupInstallAssignment).

A Connect group has no server assignor: every worker lists its Connect assignors, the
coordinator picks the assignor and the worker that runs it, asks that worker to compute
(`ComputeAssignment` in its heartbeat response) whenever the group epoch is ahead of the
assignment epoch, hands it the group (PrepareAssignment) and validates and persists what it
installs (InstallAssignment) as target-assignment records. docs/connect-groups.md.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.connect import record_builders as rb
from engine.connect.group import ConnectGroup, ConnectWorker, Target, Work
from engine.errors import CoordinatorError, Errors
from engine.operation import Operation
from engine.state import ShardState
from engine.timers import TimerKind
from protocol import connect_wire as cw


def chosen_assignor(members: Iterable[ConnectWorker]) -> str | None:
    """The first name in the first worker's priority order that every worker lists. Classic
    Kafka Connect workers living in the group list no assignor and are left out of the choice:
    they cannot compute (their assignments are written from the target)."""
    ms = [m for m in members if m.classic is None]
    if not ms:
        return None
    common = {a.name for a in ms[0].assignors}
    for m in ms[1:]:
        common &= {a.name for a in m.assignors}
    for a in ms[0].assignors:
        if a.name in common:
            return a.name
    return None


def assigning_member(members: Iterable[ConnectWorker]) -> tuple[str, ConnectWorker] | None:
    """(assignor, worker): the first worker (group order) whose version range of the chosen
    assignor covers every metadata version in use (the draft: A [1-5], B [3-4], C [2-4] -> A);
    None when no assignor is common or no worker covers them all. Classic workers are left out."""
    ms = [m for m in members if m.classic is None]
    name = chosen_assignor(ms)
    if name is None:
        return None
    versions = []
    for m in ms:
        a = m.assignor(name)
        assert a is not None
        versions.append(a.metadata_version)
    lo, hi = min(versions), max(versions)
    for m in ms:
        a = m.assignor(name)
        assert a is not None
        if a.minimum_version <= lo and hi <= a.maximum_version:
            return name, m
    return None


def _member_of(st: ShardState, group_id: str, member_id: str, member_epoch: int) -> tuple[ConnectGroup, str]:
    """The draft's checks of both APIs: the group, the member, its epoch, and that it is the
    worker chosen to compute. Returns (group, assignor name)."""
    if not group_id or not member_id or member_epoch < 0:
        raise CoordinatorError(
            Errors.INVALID_REQUEST, "GroupId and MemberId must be non-empty and MemberEpoch >= 0."
        )
    group = st.groups.get(group_id)
    if not isinstance(group, ConnectGroup):
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a connect group.")
    m = group.members.get(member_id)
    if m is None:
        raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not in group {group_id}.")
    if m.member_epoch != member_epoch:
        raise CoordinatorError(
            Errors.FENCED_MEMBER_EPOCH,
            f"The member epoch {member_epoch} is not the current one ({m.member_epoch}).",
        )
    chosen = assigning_member(group.members.values())
    if chosen is None or chosen[1].member_id != member_id:
        raise CoordinatorError(
            Errors.UNKNOWN_MEMBER_ID,
            f"Member {member_id} is not the member chosen to compute.",
        )
    return group, chosen[0]


def _member_of_with_assignor(
    st: ShardState, group_id: str, member_id: str, member_epoch: int
) -> tuple[ConnectGroup, str, cw.WireConnectAssignor]:
    group, name = _member_of(st, group_id, member_id, member_epoch)
    a = group.members[member_id].assignor(name)
    assert a is not None
    return group, name, a


def prepare(st: ShardState, req: cw.ConnectPrepareRequest, op: Operation) -> cw.ConnectPrepareResponse:
    group, name, computing = _member_of_with_assignor(st, req.group_id, req.member_id, req.member_epoch)
    workers = []
    for m in group.members.values():
        # A classic Kafka Connect worker has no assignor metadata: it is listed with the
        # computing worker's metadata version and empty metadata (the SDK's assignor reads no
        # configuration from it), its target being what it runs.
        a = m.assignor(name) or cw.WireConnectAssignor(name, 0, 0, 0, computing.metadata_version, b"")
        t = group.targets.get(m.member_id)
        workers.append(
            cw.PreparedWorker(
                m.member_id,
                m.member_epoch,
                m.url,
                m.config_offset,
                a.reason,
                a.metadata_version,
                a.metadata,
                (t.work if t else Work()).wire(),
            )
        )
    delayed = tuple(
        cw.DelayedWork(mid, d.url, max(0, d.deadline_ms - st.now_ms), d.work.wire())
        for mid, d in sorted(group.delayed.items())
    )
    return cw.ConnectPrepareResponse(
        group_epoch=group.group_epoch, assignor_name=name, members=tuple(workers), delayed=delayed
    )


def _invalid(message: str) -> CoordinatorError:
    return CoordinatorError(Errors.INVALID_REQUEST, f"Invalid assignment: {message}")


def install(st: ShardState, req: cw.ConnectInstallRequest, op: Operation) -> cw.ConnectInstallResponse:
    group, _ = _member_of(st, req.group_id, req.member_id, req.member_epoch)
    gid = group.group_id
    if req.group_epoch != group.group_epoch:
        # Computed for an older epoch: refused, and asked again for the current one with a fresh
        # timeout (answered, not raised, so that the timer change commits).
        m = group.members[req.member_id]
        op.schedule(TimerKind.CONNECT_ASSIGNMENT, gid, m.member_id, m.rebalance_timeout_ms, group.group_epoch)
        op.event("connect.assignment_stale", group=gid, member=m.member_id, installed_epoch=req.group_epoch)
        return cw.ConnectInstallResponse(
            int(Errors.REBALANCE_IN_PROGRESS),
            f"Computed for epoch {req.group_epoch}; the group is at epoch {group.group_epoch}.",
        )
    op.cancel(TimerKind.CONNECT_ASSIGNMENT, gid, req.member_id)
    if req.error != 0:
        # The assignor failed: the current target stays, and the group is not asked again until
        # it changes.
        op.records.append(rb.assignment_epoch(gid, group.group_epoch))
        op.event("connect.assignor_error", group=gid, member=req.member_id, error=req.error)
        return cw.ConnectInstallResponse()
    seen = Work()
    targets: dict[str, Target] = {}
    for w in req.members:
        if w.member_id not in group.members:
            raise _invalid(f"member {w.member_id} is not in the group.")
        if w.member_id in targets:
            raise _invalid(f"member {w.member_id} is listed twice.")
        work = Work.of(w.work)
        if len(work.connectors) != len(w.work.connectors) or len(work.tasks) != len(w.work.tasks):
            raise _invalid(f"member {w.member_id} is given a connector or task twice.")
        twice = work & seen
        if twice:
            raise _invalid(f"{twice.describe()} given to more than one member.")
        url = group.members[w.member_id].url
        for mid, d in group.delayed.items():
            held = work & d.work
            if held and d.url != url:
                raise _invalid(
                    f"{held.describe()} is held for departed worker {mid} ({d.url}) until "
                    f"scheduled.rebalance.max.delay.ms has passed."
                )
        seen = seen | work
        targets[w.member_id] = Target(work, w.metadata_version, w.metadata)
    for mid in group.members:
        new = targets.get(mid, Target(Work()))
        if group.targets.get(mid, Target(Work())) != new:
            op.records.append(rb.target(gid, mid, new))
    op.records.append(rb.assignment_epoch(gid, group.group_epoch))
    op.event("connect.assignment_installed", group=gid, member=req.member_id, epoch=group.group_epoch)
    return cw.ConnectInstallResponse()
