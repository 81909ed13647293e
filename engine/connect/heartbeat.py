"""ConnectGroupHeartbeat (the Connect draft summarised in docs/connect-groups.md, "ConnectGroupHeartbeat API",
"Request Handling", "Member Reconciliation") and the departures of workers: leave, session
timeout, revocation timeout, assignment timeout, and the release of a departed worker's work
once `scheduled.rebalance.max.delay.ms` has passed ("Triggering Rebalances").

Every change is records (types 10000-10005) replayed into the group by `engine.replay`; the
handler computes on a copy of the worker and never writes the group. Reconciliation is KIP-848's,
for connectors and tasks: a worker first gives up what is no longer in its target (it stays at
its epoch, told to keep only current ∩ target, until its heartbeat reports it no longer owns the
rest), then moves to the assignment epoch and receives what its target adds as soon as no other
worker owns it or is revoking it. A heartbeat never revokes and assigns at once.
docs/connect-groups.md has the state diagram.
"""

from __future__ import annotations

from dataclasses import replace

from engine.connect import record_builders as rb
from engine.connect.assignment import assigning_member
from engine.connect.group import NO_TARGET, NO_WORK, ConnectGroup, ConnectWorker, Delayed, Work, WorkerState
from engine.context import RequestContext
from engine.errors import CoordinatorError, Errors
from engine.ids import consumer_member_id
from engine.operation import Operation
from engine.state import ShardState
from engine.timers import TimerKind, TimerTask
from protocol import connect_wire as cw
from records.coordinator import CoordinatorRecord

K = TimerKind
LEAVE_EPOCH = -1


def _invalid(message: str) -> CoordinatorError:
    return CoordinatorError(Errors.INVALID_REQUEST, message)


def validate(req: cw.ConnectHeartbeatRequest) -> None:
    """The draft's "Request Validation" (INVALID_REQUEST)."""
    if not req.group_id:
        raise _invalid("GroupId can't be empty.")
    if req.member_epoch < LEAVE_EPOCH:
        raise _invalid(f"MemberEpoch {req.member_epoch} is invalid.")
    if req.member_epoch != 0 and not req.member_id:
        raise _invalid("MemberId can't be empty.")
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms <= 0:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.url is None:
            raise _invalid("Url must be provided in first request.")
        if not req.assignors:
            raise _invalid(
                "Assignors must be provided in first request (a connect group has no server assignor)."
            )
    for a in req.assignors or ():
        if not a.name:
            raise _invalid("Assignor names can't be empty.")
        if a.minimum_version < -1 or a.maximum_version < 0 or a.maximum_version < a.minimum_version:
            raise _invalid(
                f"Assignor {a.name}: bad version range [{a.minimum_version}, {a.maximum_version}]."
            )
        if not a.minimum_version <= a.metadata_version <= a.maximum_version:
            raise _invalid(f"Assignor {a.name}: MetadataVersion {a.metadata_version} outside its range.")
    if req.assignors is not None and len({a.name for a in req.assignors}) != len(req.assignors):
        raise _invalid("An assignor is listed twice.")


def heartbeat(
    st: ShardState,
    group: ConnectGroup | None,
    req: cw.ConnectHeartbeatRequest,
    ctx: RequestContext,
    op: Operation,
) -> cw.ConnectHeartbeatResponse:
    validate(req)
    gid = req.group_id
    if group is None:
        if req.member_epoch != 0:
            raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {gid} not found.")
        group = ConnectGroup(gid)  # a view: the records below create the group on replay
    old = group.members.get(req.member_id) if req.member_id else None
    if old is not None and old.classic is not None:
        # A classic Kafka Connect worker's member id: it speaks JoinGroup/SyncGroup only.
        raise CoordinatorError(
            Errors.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is a classic worker of group {gid}."
        )
    if req.member_epoch == LEAVE_EPOCH:
        if old is None:
            raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not in group {gid}.")
        depart(st, group, old.member_id, op, "the worker left the group.")
        return cw.ConnectHeartbeatResponse(member_id=old.member_id, member_epoch=LEAVE_EPOCH)
    owned = None if req.owned is None else Work.of(req.owned)
    if req.member_epoch == 0:
        member_id = req.member_id or consumer_member_id(st.ids)
    else:
        if old is None:
            raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not in group {gid}.")
        member_id = old.member_id
        if req.member_epoch != old.member_epoch and not (
            # the draft's lost-response case: the worker still owns a subset of what it had
            req.member_epoch == old.previous_member_epoch
            and owned is not None
            and owned.issubset(old.assigned)
        ):
            raise CoordinatorError(
                Errors.FENCED_MEMBER_EPOCH,
                f"The member epoch {req.member_epoch} is not the current one ({old.member_epoch}).",
            )
    new = ConnectWorker(member_id) if old is None else replace(old)
    reset = req.member_epoch == 0 and old is not None and (old.member_epoch != 0 or bool(old.assigned))
    if reset:
        # A known worker rejoining with epoch 0 has dropped everything it ran (fenced, restarted).
        new.member_epoch, new.previous_member_epoch, new.state = 0, -1, WorkerState.STABLE
        new.assigned = new.pending_revocation = NO_WORK
        op.cancel(K.CONNECT_REBALANCE, gid, member_id)
    new.client_id, new.client_host = ctx.client_id, ctx.client_host
    if req.url is not None:
        new.url = req.url
    if req.rebalance_timeout_ms > 0:
        new.rebalance_timeout_ms = req.rebalance_timeout_ms
    if req.config_offset >= 0:
        new.config_offset = req.config_offset
    if req.assignors is not None:
        new.assignors = req.assignors
    bump = (
        reset
        or old is None
        or (old.url, old.config_offset, old.assignors) != (new.url, new.config_offset, new.assignors)
    )
    members_after = dict(group.members)
    members_after[member_id] = new
    if bump and assigning_member(members_after.values()) is None:
        raise CoordinatorError(
            Errors.UNSUPPORTED_ASSIGNOR,
            "No assignor common to every worker, or no worker reads every metadata version in use.",
        )
    group_epoch = group.group_epoch + 1 if bump else group.group_epoch
    if bump:
        op.records.append(rb.group_epoch(gid, group_epoch))
    if old is None or old.metadata_value() != new.metadata_value():
        op.records.append(rb.member(gid, new))
    if old is None:
        op.event("member.joined", group=gid, member=member_id, protocol="connect", url=new.url)
    before = (new.member_epoch, new.previous_member_epoch, new.state, new.assigned, new.pending_revocation)
    _reconcile(st, group, new, owned, op)
    after = (new.member_epoch, new.previous_member_epoch, new.state, new.assigned, new.pending_revocation)
    changed = old is None or reset or after != before
    if changed:
        op.records.append(rb.current(gid, new))
    op.schedule(K.CONNECT_SESSION, gid, member_id, st.config.connect_session_timeout_ms)
    compute = cw.NO_COMPUTE
    if group_epoch > group.assignment_epoch:
        chosen = assigning_member(members_after.values())
        if chosen is not None and chosen[1].member_id == member_id:
            compute = group_epoch
            op.schedule_if_absent(K.CONNECT_ASSIGNMENT, gid, member_id, new.rebalance_timeout_ms, group_epoch)
    assignment = None
    if changed or req.member_epoch == 0 or (owned is not None and owned != new.assigned):
        t = group.targets.get(member_id, NO_TARGET)
        assignment = cw.WireConnectAssignment(new.assigned.wire(), t.metadata_version, t.metadata)
    return cw.ConnectHeartbeatResponse(
        member_id=member_id,
        member_epoch=new.member_epoch,
        heartbeat_interval_ms=st.config.connect_heartbeat_interval_ms,
        compute_assignment=compute,
        assignment=assignment,
    )


def _in_use_by_others(group: ConnectGroup, member_id: str) -> Work:
    out = NO_WORK
    for mid, m in group.members.items():
        if mid != member_id:
            out = out | m.assigned | m.pending_revocation
    return out


def _reconcile(
    st: ShardState, group: ConnectGroup, m: ConnectWorker, owned: Work | None, op: Operation
) -> None:
    """Moves `m` (a copy) one step towards its target: revoke first, then assign what is free."""
    gid, mid = group.group_id, m.member_id
    target = group.targets.get(mid, NO_TARGET).work
    target_epoch = group.assignment_epoch
    if m.state is WorkerState.UNREVOKED:
        if owned is None or owned & m.pending_revocation:
            return  # not acknowledged yet: the response repeats current ∩ target
        m.pending_revocation = NO_WORK
        m.state = WorkerState.STABLE
        op.cancel(K.CONNECT_REBALANCE, gid, mid)
    if m.member_epoch == target_epoch and m.state is WorkerState.STABLE:
        return
    revoke = m.assigned - target
    if revoke:
        m.assigned = m.assigned & target
        m.pending_revocation = revoke
        m.state = WorkerState.UNREVOKED
        op.schedule(
            K.CONNECT_REBALANCE, gid, mid, m.rebalance_timeout_ms, m.member_epoch, m.rebalance_timeout_ms
        )
        return
    if m.member_epoch != target_epoch:
        m.previous_member_epoch, m.member_epoch = m.member_epoch, target_epoch
    m.assigned = m.assigned | (target - _in_use_by_others(group, mid))
    m.state = WorkerState.UNRELEASED if target - m.assigned else WorkerState.STABLE


def in_use_by_others(group: ConnectGroup, member_id: str) -> Work:
    """What the other workers run or are revoking (translation/connect_classic_worker.py)."""
    return _in_use_by_others(group, member_id)


def reconcile(
    st: ShardState, group: ConnectGroup, m: ConnectWorker, owned: Work | None, op: Operation
) -> None:
    """`_reconcile` for a classic worker's JoinGroup (translation/connect_classic_worker.py),
    whose allocation is its `owned`."""
    _reconcile(st, group, m, owned, op)


# --- departures -----------------------------------------------------------------------------------


def depart(st: ShardState, group: ConnectGroup, member_id: str, op: Operation, reason: str) -> None:
    """A worker leaves the group (leave, or fenced by a timer): its records are deleted, the group
    epoch moves so that the assignor runs again, and the work no other worker's target holds is
    held for it for `scheduled.rebalance.max.delay.ms` (Connect's IncrementalCooperativeAssignor
    waits as long for a departed worker to come back)."""
    gid = group.group_id
    m = group.members[member_id]
    if (
        m.classic is None
        and group.classic_workers()
        and all(w.member_id == member_id for w in group.sdk_workers())
        and st.migration.connect_member_leaving(group, member_id, op, reason)
    ):
        return  # the last SDK worker: the group became a classic Kafka Connect group again
    others = NO_WORK
    for mid, t in group.targets.items():
        if mid != member_id:
            others = others | t.work
    # A piece of work is held for one departed worker at most: work this worker still ran while
    # its target had moved it to a worker that departed first is that worker's to get back
    # (two holds with different URLs would make every placement of it invalid until both end).
    for mid, d in group.delayed.items():
        if mid != member_id:
            others = others | d.work
    lost = (group.targets.get(member_id, NO_TARGET).work | m.assigned) - others
    previous = group.delayed.get(member_id)
    if previous is not None and lost:
        # The same worker (the SDK rejoins with its member id) departs again before its earlier
        # hold ended: what was held for it stays held, with the new deadline.
        lost = lost | previous.work
    op.records.append(rb.current_tombstone(gid, member_id))
    if member_id in group.targets:
        op.records.append(rb.target_tombstone(gid, member_id))
    op.records.append(rb.member_tombstone(gid, member_id))
    op.records.append(rb.group_epoch(gid, group.group_epoch + 1))
    delay = st.config.connect_scheduled_rebalance_max_delay_ms
    if lost and delay > 0:
        op.records.append(rb.delayed(gid, member_id, Delayed(m.url, st.now_ms + delay, lost)))
        op.schedule(K.CONNECT_DELAY, gid, member_id, delay)
    for kind in (K.CONNECT_SESSION, K.CONNECT_REBALANCE, K.CONNECT_ASSIGNMENT):
        op.cancel(kind, gid, member_id)
    op.event("member.left", group=gid, member=member_id, reason=reason, held=lost.describe() if delay else {})


def _group(st: ShardState, t: TimerTask) -> ConnectGroup | None:
    g = st.groups.get(t.group_id)
    return g if isinstance(g, ConnectGroup) else None


def expire_session(st: ShardState, t: TimerTask, op: Operation) -> None:
    g = _group(st, t)
    if g is not None and t.member_id in g.members:
        depart(st, g, t.member_id, op, "the worker session expired.")


def expire_revocation(st: ShardState, t: TimerTask, op: Operation) -> None:
    g = _group(st, t)
    m = None if g is None else g.members.get(t.member_id)
    if g is not None and m is not None and m.state is WorkerState.UNREVOKED and m.member_epoch == t.epoch:
        depart(st, g, t.member_id, op, f"it failed to revoke from epoch {t.epoch} within {t.data}ms.")


def expire_assignment(st: ShardState, t: TimerTask, op: Operation) -> None:
    g = _group(st, t)
    if g is None or t.member_id not in g.members or g.group_epoch <= g.assignment_epoch:
        return
    chosen = assigning_member(g.members.values())
    if chosen is not None and chosen[1].member_id == t.member_id:
        depart(st, g, t.member_id, op, "it failed to install an assignment within its rebalance timeout.")


def release_delayed(st: ShardState, t: TimerTask, op: Operation) -> None:
    """`scheduled.rebalance.max.delay.ms` has passed: the held work is free for any worker."""
    g = _group(st, t)
    d = None if g is None else g.delayed.get(t.member_id)
    if g is None or d is None or d.deadline_ms > st.now_ms:
        return
    op.records.append(rb.delayed_tombstone(g.group_id, t.member_id))
    op.records.append(rb.group_epoch(g.group_id, g.group_epoch + 1))
    op.event("connect.delay_expired", group=g.group_id, departed=t.member_id, work=d.work.describe())


def all_tombstones(group: ConnectGroup) -> list[CoordinatorRecord]:
    """The records that delete the group with its workers (a conversion back to classic)."""
    gid = group.group_id
    out: list[CoordinatorRecord] = []
    for mid in group.members:
        out.append(rb.current_tombstone(gid, mid))
        out.append(rb.member_tombstone(gid, mid))
    return out + tombstones(group)


def tombstones(group: ConnectGroup) -> list[CoordinatorRecord]:
    """The records that delete an empty group (DeleteGroups)."""
    gid = group.group_id
    out = [rb.delayed_tombstone(gid, mid) for mid in group.delayed]
    out += [rb.target_tombstone(gid, mid) for mid in group.targets]
    out += [rb.assignment_epoch_tombstone(gid), rb.group_tombstone(gid)]
    return out
