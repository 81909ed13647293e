"""Classic Kafka Connect workers living inside a connect group (issue 32, point 2: the Connect
draft's "classic workers inside the connect group get Connect's own assignment format"; the
pattern of classic Kafka Streams instances in streams groups, translation/streams_classic_member.py,
with Connect's WorkerCoordinator protocol inside: docs/connect-groups.md, "Conversion with a real
Connect cluster").

A classic worker is a connect-group worker with `classic` set (tag 0 of record type 10001: its
JoinGroup protocols, session timeout, the group epoch it last joined at). It lists no assignor
and never computes: the SDK worker chosen by the coordinator places its connectors and tasks
with everyone else's, and the coordinator's revoke-before-assign reconciliation
(engine/connect/heartbeat.py `reconcile`) moves it, driven by its JoinGroups:

* JoinGroup: its metadata (Connect's `ExtendedWorkerState` for the group's sub-protocol) gives
  its URL, config offset and allocation, which is what it runs (`WorkerCoordinator.metadata`
  sends the accumulated `assignmentSnapshot`). The allocation acknowledges a revocation (it no
  longer lists the revoked work), and anything it runs the coordinator did not give it is taken
  as pending revocation (nobody else gets it before the worker drops it). Answered at once with
  its member epoch as the generation; the Connect leader (the longest-standing classic worker:
  Connect's `DistributedHerder.isLeader` is the assignment's `leader` field, and only the leader
  writes the config topic: connector and task configs, `sessioned`'s session key) is named leader
  and given every worker's metadata (SDK workers' synthesized from their URL and work, with the
  classic workers' config offset), so that its `IncrementalCooperativeAssignor.performAssignment`
  runs and its leader state (`WorkerCoordinator.ownerUrl`) is set; the assignment it then sends is
  ignored.
* SyncGroup: Connect's incremental assignment from the worker's current work in the group:
  `assignment` = what it is given minus what it runs, `revoked` = what it runs minus what it is
  given, `leader` / `leader-url` the Connect leader, `config-offset` the highest any classic
  worker has read (a worker behind reads the config topic up to it, as from a Connect leader),
  at the version of the group's sub-protocol (`build_assignment`: byte for byte what Connect's
  leader writes). Never something another worker runs: the reconciliation gives a worker only
  what no other worker runs or is revoking. A worker told to revoke rejoins at once
  (`DistributedHerder.handleRebalanceCompleted` requests a rejoin after revocations), and its
  next JoinGroup releases the work.
* Heartbeat: REBALANCE_IN_PROGRESS whenever the group epoch moved since its JoinGroup, it lags
  the assignment epoch, is revoking, or waits for work that is free now.
* LeaveGroup and an expired session (its own session timeout) are departures like an SDK
  worker's: its work is held for `scheduled.rebalance.max.delay.ms`.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from engine.classic.api import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    JoinGroupResponseMember,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from engine.connect import record_builders as rb
from engine.connect.group import NO_TARGET, NO_WORK, ConnectGroup, ConnectWorker, Work, WorkerState
from engine.connect.heartbeat import depart, in_use_by_others, reconcile
from engine.context import RequestContext
from engine.errors import CoordinatorError, Errors
from engine.ids import consumer_member_id
from engine.operation import Operation
from engine.replay import apply_connect_record
from engine.state import ShardState
from engine.timers import TimerKind
from records.connect_group import ConnectClassicWorker
from records.consumer_group import ClassicProtocol
from translation.connect_classic_protocol import (
    COMPATIBLE,
    PROTOCOL_TYPE,
    SESSIONED,
    SUB_PROTOCOL_VERSIONS,
    ConnectProtocolError,
    ConnectWorkerMetadata,
    build_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)

KNOWN_MEMBER_ID_REQUIRED_VERSION = 4
# The sub-protocols a classic worker may speak inside a connect group: the incremental ones
# (`default`, Connect's eager protocol, has no `revoked` list: docs/connect-groups.md).
INCREMENTAL = (SESSIONED, COMPATIBLE)


# --- what a classic worker is and runs -----------------------------------------------------------


def metadata_of(protocols: Sequence[ClassicProtocol], protocol: str) -> ConnectWorkerMetadata:
    """The worker's metadata for `protocol`, decoded (ConnectProtocolError if it does not)."""
    for p in protocols:
        if p.name == protocol:
            return decode_metadata(p.metadata)
    raise ConnectProtocolError(f"no {protocol!r} protocol")


def running(meta: ConnectWorkerMetadata) -> Work:
    """What a worker's allocation says it runs."""
    return Work(frozenset(meta.connectors), frozenset(meta.tasks))


def select_protocol(workers: Sequence[Sequence[str]]) -> str | None:
    """Kafka's classic `selectProtocol` over the incremental sub-protocols: the candidates every
    worker offers; each worker votes for the first candidate in its own order; the most votes
    win (ties: sessioned before compatible). None: no common incremental sub-protocol."""
    if not workers:
        return None
    candidates = [p for p in INCREMENTAL if all(p in names for names in workers)]
    if not candidates:
        return None
    votes: Counter[str] = Counter()
    for names in workers:
        votes[next(p for p in names if p in candidates)] += 1
    return max(candidates, key=lambda p: (votes[p], -INCREMENTAL.index(p)))


def group_protocol(members: Sequence[ConnectWorker]) -> str | None:
    return select_protocol([[p.name for p in m.classic.protocols] for m in members if m.classic is not None])


def leader_of(group: ConnectGroup) -> ConnectWorker | None:
    """The Connect leader: the longest-standing classic worker (an SDK worker cannot write
    Connect's config topic)."""
    classic = group.classic_workers()
    return classic[0] if classic else None


def config_offset(group: ConnectGroup) -> int:
    """The offset of the config topic the assignments carry: the highest any classic worker has
    read (Connect's leader reads up to the highest offset among the workers)."""
    return max((m.config_offset for m in group.classic_workers()), default=-1)


def worker_metadata(group: ConnectGroup, m: ConnectWorker, protocol: str) -> bytes:
    """A worker's metadata as the Connect leader reads it: a classic worker's own bytes, an SDK
    worker's synthesized from its URL and current work."""
    if m.classic is not None:
        for p in m.classic.protocols:
            if p.name == protocol:
                return p.metadata
    # An SDK worker does not read Connect's config topic: it is given the offset the classic
    # workers are at, so that the leader's assignor never takes it for a worker ahead of it.
    version = SUB_PROTOCOL_VERSIONS[protocol]
    leader = leader_of(group)
    offset = config_offset(group)
    allocation = build_assignment(
        version,
        leader.member_id if leader else "",
        leader.url if leader else "",
        offset,
        sorted(m.assigned.connectors),
        sorted(m.assigned.tasks),
    )
    return encode_metadata(ConnectWorkerMetadata(version, m.url, offset, allocation))


def assignment_of(group: ConnectGroup, m: ConnectWorker, protocol: str, incremental: bool = True) -> bytes:
    """Connect's assignment for classic worker `m`: what it is given beyond what it runs and
    what it runs beyond what it is given (revoked); `incremental=False`: all it is given (the
    assignment a classic group stores after the conversion back)."""
    assert m.classic is not None
    version = SUB_PROTOCOL_VERSIONS[protocol]
    try:
        runs = running(metadata_of(m.classic.protocols, protocol)) if incremental else NO_WORK
    except ConnectProtocolError:
        runs = NO_WORK
    given = m.assigned - runs
    revoked = runs - m.assigned
    leader = leader_of(group)
    return encode_assignment(
        build_assignment(
            version,
            leader.member_id if leader else "",
            leader.url if leader else "",
            config_offset(group),
            sorted(given.connectors),
            sorted(given.tasks),
            sorted(revoked.connectors),
            sorted(revoked.tasks),
        )
    )


def must_rejoin(group: ConnectGroup, m: ConnectWorker) -> bool:
    assert m.classic is not None
    if m.classic.joined_group_epoch != group.group_epoch or m.member_epoch != group.assignment_epoch:
        return True
    if m.state is WorkerState.UNREVOKED:
        return True
    if m.state is WorkerState.UNRELEASED:
        missing = group.targets.get(m.member_id, NO_TARGET).work - m.assigned
        return bool(missing - in_use_by_others(group, m.member_id))
    return False


# --- the classic APIs ----------------------------------------------------------------------------


def _inconsistent(why: str) -> CoordinatorError:
    return CoordinatorError(Errors.INCONSISTENT_GROUP_PROTOCOL, why)


def join(
    st: ShardState, group: ConnectGroup, req: JoinGroupRequest, ctx: RequestContext, op: Operation
) -> JoinGroupResponse:
    gid = group.group_id
    names = [p.name for p in req.protocols]
    if req.protocol_type != PROTOCOL_TYPE:
        op.explain(
            "request.protocols_not_supported", group=gid, protocol_type=req.protocol_type, protocols=names
        )
        raise _inconsistent(f"Group {gid} is a connect group: only Kafka Connect workers join it.")
    if not any(p in INCREMENTAL for p in names):
        op.explain("group.conversion_refused", group=gid, direction="join", reason="connect-sub-protocol")
        raise _inconsistent(
            f"Group {gid} is a connect group: a classic worker must offer Connect's `sessioned` or "
            "`compatible` protocol (connect.protocol=sessioned), not only the eager `default`."
        )
    member_id = req.member_id
    unknown = member_id == ""
    if unknown:
        member_id = consumer_member_id(st.ids)
        st.bind_created(op, gid, member_id, ctx.principal)
    old = group.members.get(member_id)
    if old is not None and old.classic is None:
        raise CoordinatorError(
            Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} does not use the classic protocol."
        )
    if unknown and req.group_instance_id is None and ctx.api_version >= KNOWN_MEMBER_ID_REQUIRED_VERSION:
        return JoinGroupResponse(error_code=int(Errors.MEMBER_ID_REQUIRED), member_id=member_id)
    protocols = tuple(ClassicProtocol(p.name, p.metadata) for p in req.protocols)
    others = [m for mid, m in group.members.items() if mid != member_id]
    protocol = select_protocol(
        [names] + [[p.name for p in m.classic.protocols] for m in others if m.classic is not None]
    )
    if protocol is None:
        op.explain("group.conversion_refused", group=gid, direction="join", reason="connect-sub-protocol")
        raise _inconsistent(
            f"Member {member_id} shares no Connect sub-protocol with the group's classic workers."
        )
    try:
        meta = metadata_of(protocols, protocol)
    except ConnectProtocolError as e:
        op.explain(
            "group.conversion_refused", group=gid, direction="join", reason="connect-metadata", error=str(e)
        )
        raise _inconsistent(f"Member {member_id}'s Kafka Connect metadata does not decode: {e}") from None
    runs = running(meta)
    new = ConnectWorker(member_id) if old is None else replace(old)
    new.client_id, new.client_host = ctx.client_id, ctx.client_host
    new.url, new.config_offset = meta.url, meta.config_offset
    new.rebalance_timeout_ms = (
        req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0 else req.session_timeout_ms
    )
    before_protocol = group_protocol(list(group.members.values()))
    bump = (
        old is None
        or (old.url, old.config_offset) != (new.url, new.config_offset)
        or before_protocol != protocol
    )
    group_epoch = group.group_epoch + 1 if bump else group.group_epoch
    if bump:
        op.records.append(rb.group_epoch(gid, group_epoch))
    since = old.classic.since_epoch if old is not None and old.classic is not None else group_epoch
    new.classic = ConnectClassicWorker(req.session_timeout_ms, group_epoch, since, protocols)
    if old is None or old.metadata_value() != new.metadata_value():
        op.records.append(rb.member(gid, new))
    if old is None:
        op.event("member.joined", group=gid, member=member_id, protocol="classic", url=new.url)
    before = (new.member_epoch, new.previous_member_epoch, new.state, new.assigned, new.pending_revocation)
    # What it runs that the group did not give it (a SyncGroup answer it never read, a worker
    # back with work): pending revocation, so nobody gets it before the worker drops it.
    stray = runs - new.assigned - new.pending_revocation - in_use_by_others(group, member_id)
    if stray:
        new.pending_revocation = new.pending_revocation | stray
        if new.state is not WorkerState.UNREVOKED:
            new.state = WorkerState.UNREVOKED
            op.schedule(
                TimerKind.CONNECT_REBALANCE, gid, member_id, new.rebalance_timeout_ms,
                new.member_epoch, new.rebalance_timeout_ms,
            )  # fmt: skip
    reconcile(st, group, new, runs, op)
    after = (new.member_epoch, new.previous_member_epoch, new.state, new.assigned, new.pending_revocation)
    if old is None or after != before:
        op.records.append(rb.current(gid, new))
    op.schedule(TimerKind.CONNECT_SESSION, gid, member_id, req.session_timeout_ms)
    # The group as it is once these records are applied: the leader and the member list.
    view = _view(group)
    view.members[member_id] = new
    view.group_epoch = group_epoch
    leader = leader_of(view)
    members: list[JoinGroupResponseMember] = []
    if leader is not None and leader.member_id == member_id:
        members = [
            JoinGroupResponseMember(m.member_id, None, worker_metadata(view, m, protocol))
            for m in view.members.values()
        ]
    return JoinGroupResponse(
        member_id=member_id,
        generation_id=new.member_epoch,
        protocol_type=PROTOCOL_TYPE,
        protocol_name=protocol,
        leader=leader.member_id if leader is not None else "",
        skip_assignment=False,
        members=members,
    )


def _view(group: ConnectGroup) -> ConnectGroup:
    """A copy of the group to compute an answer on (the group itself is never written)."""
    view = copy.copy(group)
    view.members = {mid: replace(m) for mid, m in group.members.items()}
    view.targets = dict(group.targets)
    view.delayed = dict(group.delayed)
    return view


def _classic_worker(group: ConnectGroup, member_id: str, generation: int) -> ConnectWorker:
    m = group.members.get(member_id)
    if m is None or m.classic is None:
        raise CoordinatorError(
            Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a classic worker of group {group.group_id}."
        )
    if m.member_epoch != generation:
        raise CoordinatorError(
            Errors.ILLEGAL_GENERATION,
            f"The request generation id {generation} is not equal to the member epoch "
            f"{m.member_epoch} of member {member_id}.",
        )
    return m


def _no_classic_workers(group: ConnectGroup, member_id: str) -> bool:
    """No classic worker in the group and the member unknown: the engine's own answer stands
    (GROUP_ID_NOT_FOUND, "not a classic group"), as before classic workers could join."""
    return not group.classic_workers() and member_id not in group.members


def sync(st: ShardState, group: ConnectGroup, req: SyncGroupRequest, op: Operation) -> SyncGroupResponse:
    if _no_classic_workers(group, req.member_id):
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group.group_id} is not a classic group.")
    m = _classic_worker(group, req.member_id, req.generation_id)
    assert m.classic is not None
    protocol = group_protocol(list(group.members.values()))
    if protocol is None:  # the joins keep a common one; records that do not are refused here
        raise _inconsistent(f"Group {group.group_id}'s classic workers share no Connect sub-protocol.")
    if req.protocol_type is not None and req.protocol_type != PROTOCOL_TYPE:
        raise _inconsistent(f"The protocol type {req.protocol_type} is not {PROTOCOL_TYPE}.")
    op.schedule(TimerKind.CONNECT_SESSION, group.group_id, m.member_id, m.classic.session_timeout_ms)
    if req.protocol_name is not None and req.protocol_name != protocol:
        # The group's sub-protocol changed since its JoinGroup (a worker offering fewer joined).
        return SyncGroupResponse(error_code=int(Errors.REBALANCE_IN_PROGRESS))
    return SyncGroupResponse(
        protocol_type=PROTOCOL_TYPE, protocol_name=protocol, assignment=assignment_of(group, m, protocol)
    )


def heartbeat(st: ShardState, group: ConnectGroup, req: HeartbeatRequest, op: Operation) -> HeartbeatResponse:
    if _no_classic_workers(group, req.member_id):
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group.group_id} is not a classic group.")
    m = _classic_worker(group, req.member_id, req.generation_id)
    assert m.classic is not None
    op.schedule(TimerKind.CONNECT_SESSION, group.group_id, m.member_id, m.classic.session_timeout_ms)
    if must_rejoin(group, m):
        return HeartbeatResponse(int(Errors.REBALANCE_IN_PROGRESS))
    return HeartbeatResponse(0)


def leave(st: ShardState, group: ConnectGroup, req: LeaveGroupRequest, op: Operation) -> LeaveGroupResponse:
    out: list[MemberResponse] = []
    view = _view(group)
    for ident in req.members:
        m = view.members.get(ident.member_id)
        if m is None or m.classic is None:
            out.append(
                MemberResponse(ident.member_id, ident.group_instance_id, int(Errors.UNKNOWN_MEMBER_ID))
            )
            continue
        start = len(op.records)
        depart(st, view, m.member_id, op, "the classic worker left the group (LeaveGroup).")
        for r in op.records[start:]:
            apply_connect_record(view, r)
        out.append(MemberResponse(m.member_id, ident.group_instance_id))
    return LeaveGroupResponse(members=out)
