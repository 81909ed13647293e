"""Online conversion of a classic Kafka Connect group (distributed workers on JoinGroup/SyncGroup,
protocol type `connect`) to a connect group when the first SDK worker joins it (issue 32,
point 2; the pattern of translation/streams_upgrade.py; docs/connect-groups.md, "Conversion with
a real Connect cluster"). Kafka has nothing like it.

A classic group of another protocol type gets GROUP_ID_NOT_FOUND "Group X is not a connect
group." (what a ConnectGroupHeartbeat got before the conversion existed). Conditions (all, else
GROUP_ID_NOT_FOUND "Cannot convert classic Kafka Connect group ..." with the reason, and a
`group.conversion_refused` event naming the check): the migration policy allows upgrades; no
rule of translation/connect_conversion_rules.py (the rules `check upgrade` reports) blocks it:
the sub-protocol is `sessioned` or `compatible` (not Connect's eager `default`), every worker's
metadata and assignment decode at its version, the leader's assignment reports no error, and no
connector or task is run by two workers.

What each worker runs is what `check upgrade` reads (tools/groups/connect_classic.py): its
allocation (the metadata of its latest JoinGroup) without what the leader's last assignment
revoked, plus what it assigned (`WorkerCoordinator.onJoinComplete`).

Procedure (records only, so replay equals live): parked JoinGroups and SyncGroups are answered
REBALANCE_IN_PROGRESS; the GroupMetadata tombstone; each worker's member record (type 10001,
classic tag: its protocols and session timeout; the classic group's leader first in seniority,
so it stays the Connect leader); the group epoch at the classic generation; each worker's target
and current work = what it runs, the assignment epoch at the generation (Stable). The heartbeat
then continues on the connect group those records build: the joining SDK worker bumps the epoch,
is asked to compute, and every classic worker is told to rejoin. Each worker gets a session
timer of its classic session timeout; the classic group's timers are cancelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.classic.api import JoinGroupResponse, SyncGroupResponse
from engine.classic.group import ClassicGroup
from engine.connect import record_builders as rb
from engine.connect.group import NO_WORK, ConnectGroup, ConnectWorker, Target, Work, WorkerState
from engine.errors import CoordinatorError, Errors
from engine.operation import Operation
from engine.replay import apply_connect_record
from engine.state import ShardState
from engine.timers import TimerKind
from protocol.connect_wire import ConnectHeartbeatRequest
from records.classic_group import GroupMetadataKey
from records.connect_group import ConnectClassicWorker
from records.consumer_group import ClassicProtocol
from records.coordinator import CoordinatorRecord
from translation.connect_classic_protocol import (
    CONNECT_PROTOCOL_V0,
    PROTOCOL_TYPE,
    decode_assignment,
    decode_metadata,
    task_name,
)
from translation.connect_conversion_rules import conversion_blockers
from translation.embedded_protocol import SchemaError
from translation.policy import refused, upgrade_enabled


@dataclass
class _Facts:
    """One worker as the conversion rules read it (ConnectWorkerFacts)."""

    member_id: str
    client_id: str
    decode_error: str | None = None
    metadata_version: int | None = None
    assignment_error: int = 0
    url: str = ""
    config_offset: int = -1
    work: Work = NO_WORK

    @property
    def running(self) -> tuple[str, ...]:
        return tuple(sorted(self.work.connectors)) + tuple(task_name(t) for t in sorted(self.work.tasks))


def _facts(member_id: str, client_id: str, metadata: bytes | None, assignment: bytes) -> _Facts:
    f = _Facts(member_id, client_id)
    try:
        if metadata is None:
            raise SchemaError("the worker does not offer the group's protocol")
        m = decode_metadata(metadata)
        f.metadata_version, f.url, f.config_offset = m.version, m.url, m.config_offset
        connectors, tasks = set(m.connectors), set(m.tasks)
        if assignment:
            a = decode_assignment(assignment)
            f.assignment_error = a.error
            if a.version == CONNECT_PROTOCOL_V0:
                connectors, tasks = set(), set()
            connectors = (connectors - set(a.revoked_connectors)) | set(a.connectors)
            tasks = (tasks - set(a.revoked_tasks)) | set(a.tasks)
        f.work = Work(frozenset(connectors), frozenset(tasks))
    except SchemaError as e:
        f.decode_error = str(e) or type(e).__name__
    return f


def cannot_convert(group_id: str, because: str) -> CoordinatorError:
    return CoordinatorError(
        Errors.GROUP_ID_NOT_FOUND,
        f"Cannot convert classic Kafka Connect group {group_id} to a connect group because {because}",
    )


def upgrade(st: ShardState, group: ClassicGroup, req: ConnectHeartbeatRequest, op: Operation) -> ConnectGroup:
    """Convert `group` (writing the records into `op`); return the connect group to join."""
    gid = group.group_id
    if group.protocol_type != PROTOCOL_TYPE:
        refused(op, gid, "upgrade", "not a Kafka Connect group", protocol_type=group.protocol_type)
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {gid} is not a connect group.")
    if not upgrade_enabled(st.config):
        refused(op, gid, "upgrade", "policy", policy=st.config.consumer_migration_policy)
        raise cannot_convert(gid, "online upgrade is disabled.")
    protocol = group.protocol_name
    facts: list[_Facts] = []
    for m in group.members.values():
        metadata = next((p.metadata for p in m.supported_protocols if p.name == protocol), None)
        facts.append(_facts(m.member_id, m.client_id, metadata, m.assignment))
    blockers = conversion_blockers(protocol, facts)
    if blockers:
        for check, reason in blockers:
            refused(op, gid, "upgrade", check, detail=reason)
        raise cannot_convert(gid, blockers[0][1] + ".")

    generation = group.generation_id
    by_id = {f.member_id: f for f in facts}
    # The classic leader first: it stays the Connect leader (the longest-standing classic worker).
    order = sorted(group.members.values(), key=lambda m: m.member_id != group.leader_id)
    workers: list[ConnectWorker] = []
    for m in order:
        f = by_id[m.member_id]
        since = generation - 1 if m.member_id == group.leader_id else generation
        workers.append(
            ConnectWorker(
                m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                url=f.url,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                config_offset=f.config_offset,
                member_epoch=generation,
                previous_member_epoch=generation,
                state=WorkerState.STABLE,
                assigned=f.work,
                classic=ConnectClassicWorker(
                    m.session_timeout_ms,
                    generation,
                    since,
                    tuple(ClassicProtocol(p.name, p.metadata) for p in m.supported_protocols),
                ),
            )
        )

    for m in group.members.values():
        group.complete_join(
            m, JoinGroupResponse(error_code=int(Errors.REBALANCE_IN_PROGRESS), member_id=m.member_id), op
        )
        if group.complete_sync(m, SyncGroupResponse(error_code=int(Errors.REBALANCE_IN_PROGRESS)), op):
            op.schedule_if_refused(TimerKind.CLASSIC_HEARTBEAT, gid, m.member_id, m.session_timeout_ms)

    records: list[CoordinatorRecord] = [rb.member(gid, w) for w in workers]
    records.append(rb.group_epoch(gid, generation))
    records.extend(rb.target(gid, w.member_id, Target(w.assigned)) for w in workers)
    records.append(rb.assignment_epoch(gid, generation))
    records.extend(rb.current(gid, w) for w in workers)
    op.records.append(CoordinatorRecord(GroupMetadataKey(gid), None))
    op.records.extend(records)
    converted = ConnectGroup(gid)
    for r in records:
        apply_connect_record(converted, r)

    op.cancel(TimerKind.CLASSIC_JOIN_PHASE, gid)
    op.cancel(TimerKind.CLASSIC_SYNC_PHASE, gid)
    for classic_id in [*group.members, *group.pending_join_members]:
        op.cancel(TimerKind.CLASSIC_HEARTBEAT, gid, classic_id)
    for w in workers:
        assert w.classic is not None
        op.schedule(TimerKind.CONNECT_SESSION, gid, w.member_id, w.classic.session_timeout_ms)
    op.event(
        "group.converted",
        group=gid,
        from_type="classic",
        to_type="connect",
        group_epoch=generation,
        members=len(workers),
        protocol=protocol,
        reason="an SDK worker joined a classic Kafka Connect group",
    )
    return converted
