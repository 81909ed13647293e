"""Conversion back: a connect group whose last SDK (new-protocol) worker goes, while classic Kafka
Connect workers remain in it, becomes a classic Kafka Connect group again, which those workers
keep using (issue 32, point 2; the pattern of translation/streams_downgrade.py; Kafka has nothing
like it: docs/connect-groups.md, "Conversion with a real Connect cluster").

Triggers: the last SDK worker leaves (epoch -1), or its session, revocation or assignment timeout
fences it, while at least one classic worker remains. Conditions: the migration policy allows
downgrades and the remaining workers fit in `group.max.size`; otherwise the group stays a connect
group serving its classic workers (a `group.conversion_refused` event says why), with no worker
to compute: their work stays where it is until an SDK worker joins.

Procedure: the connect group's tombstones (every worker's current and member records, targets,
held work, assignment epoch, the group), then one GroupMetadata record of the classic group as
Kafka's classic coordinator holds a Stable Connect group: generation = the group epoch, protocol
type `connect`, protocol the classic workers' common incremental sub-protocol, leader = the
Connect leader (the longest-standing classic worker), each worker's protocols as it joined with
them and, as its stored assignment, Connect's assignment of all it runs (what a leader's
assignment would show, `revoked` empty). Once the records are accepted, the classic group built
here replaces the replayed copy, and a rebalance is prepared: the workers rejoin with their
allocations, and their leader's IncrementalCooperativeAssignor assigns the departed SDK worker's
connectors and tasks as Connect does (it reads what each worker runs from its metadata).
"""

from __future__ import annotations

from engine.classic.group import ClassicGroup
from engine.classic.member import ClassicGroupMember, Protocol
from engine.classic.rebalance import prepare_rebalance, reschedule_heartbeat
from engine.classic.records import group_metadata_record
from engine.classic.state import ClassicGroupState
from engine.connect.group import ConnectGroup
from engine.connect.heartbeat import all_tombstones
from engine.operation import Operation
from engine.state import ShardState
from engine.timers import TimerKind
from translation.connect_classic_protocol import PROTOCOL_TYPE
from translation.connect_classic_worker import assignment_of, group_protocol
from translation.policy import downgrade_enabled, refused


def downgrade(st: ShardState, group: ConnectGroup, leaving_id: str, op: Operation, reason: str) -> bool:
    """Write the conversion's records into `op` and install the classic group once they are
    accepted; False (nothing written) when the policy or the size refuses it."""
    gid = group.group_id
    remaining = group.classic_workers()
    if not downgrade_enabled(st.config):
        refused(op, gid, "downgrade", "policy", policy=st.config.consumer_migration_policy)
        return False
    if len(remaining) > st.config.max_size:
        refused(op, gid, "downgrade", "size", members=len(remaining), max_size=st.config.max_size)
        return False
    protocol = group_protocol(remaining)
    if protocol is None:  # the joins keep a common one; a defensive stop
        refused(op, gid, "downgrade", "connect-sub-protocol")
        return False
    classic = ClassicGroup(
        gid,
        st.now_ms,
        state=ClassicGroupState.STABLE,
        generation_id=group.group_epoch,
        protocol_type=PROTOCOL_TYPE,
        protocol_name=protocol,
        current_state_timestamp=st.now_ms,
    )
    for m in remaining:
        assert m.classic is not None
        cm = ClassicGroupMember(
            m.member_id,
            None,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.classic.session_timeout_ms,
            PROTOCOL_TYPE,
            tuple(Protocol(p.name, p.metadata) for p in m.classic.protocols),
        )
        cm.assignment = assignment_of(group, m, protocol, incremental=False)
        classic.add(cm)  # the first added, the Connect leader, leads the classic group
    op.records.extend(all_tombstones(group))
    op.records.append(group_metadata_record(classic, classic.group_assignment()))
    op.put_group(classic)
    op.event(
        "group.converted",
        group=gid,
        from_type="connect",
        to_type="classic",
        generation=classic.generation_id,
        members=classic.num_members,
        reason=reason,
        protocol=protocol,
        leader=classic.leader_id,
    )
    for mid in group.members:
        for kind in (TimerKind.CONNECT_SESSION, TimerKind.CONNECT_REBALANCE, TimerKind.CONNECT_ASSIGNMENT):
            op.cancel(kind, gid, mid)
    for mid in group.delayed:
        op.cancel(TimerKind.CONNECT_DELAY, gid, mid)
    for cm in classic.members.values():
        reschedule_heartbeat(op, classic, cm)
    prepare_rebalance(st, classic, op, f"Downgrade group {gid} from connect to classic.")
    return True


def leaving(st: ShardState, group: ConnectGroup, member_id: str, op: Operation, reason: str) -> bool:
    """The hook: an SDK worker leaves; converts back when it is the last and classic workers
    remain."""
    m = group.members.get(member_id)
    if m is None or m.classic is not None or not group.classic_workers():
        return False
    if any(w.member_id != member_id for w in group.sdk_workers()):
        return False
    return downgrade(st, group, member_id, op, f"the last SDK worker left ({reason})")
