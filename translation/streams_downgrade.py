"""Conversion back: a streams group whose last `group.protocol=streams` member goes, while classic
Kafka Streams instances remain in it, becomes a classic group again, which those instances keep
using (issue 31, part 3; Kafka has nothing like it: docs/streams-classic-groups.md). The pattern
of the consumer groups' downgrade (translation/downgrade.py).

Triggers: the last streams-protocol member leaves (epoch -1), or its session or rebalance
timeout fences it, while at least one classic member remains. Conditions: the migration policy
allows downgrades and the remaining members fit in `group.max.size`; otherwise the group stays a
streams group serving its classic instances (a `group.conversion_refused` event says why).

Procedure: the streams group's tombstones (Kafka's `createGroupTombstoneRecords` order), then one
GroupMetadata record of the classic group: Stable at generation = the group epoch, protocol type
`consumer`, protocol `stream`, leader = the first member, and each member's *current* tasks as the
AssignmentInfo groupshift would send it (its current, not target, tasks: a target task may still
run elsewhere). The records are replayed like any operation's; once accepted, the classic group
built here replaces the replayed copy, and a rebalance is prepared so the instances rejoin and
their leader's StreamsPartitionAssignor assigns again.
"""

from __future__ import annotations

from engine.classic.group import CONSUMER_PROTOCOL_TYPE, ClassicGroup
from engine.classic.member import ClassicGroupMember, Protocol
from engine.classic.rebalance import prepare_rebalance, reschedule_heartbeat
from engine.classic.records import group_metadata_record
from engine.classic.state import ClassicGroupState
from engine.operation import Operation
from engine.state import ShardState
from engine.streams.group import StreamsGroup
from engine.streams.heartbeat import streams_group_tombstones
from engine.timers import TimerKind
from translation.embedded_protocol import SchemaError
from translation.policy import downgrade_enabled, refused
from translation.streams_classic_member import assignment_of


def can_downgrade_after_leave(st: ShardState, group: StreamsGroup, leaving_id: str, op: Operation) -> bool:
    """The leaver is the last streams-protocol member and classic instances remain."""
    member = group.members.get(leaving_id)
    if member is None or member.classic is not None or group.topology is None:
        return False
    if group.num_classic_members != len(group.members) - 1 or len(group.members) <= 1:
        return False
    if not downgrade_enabled(st.config):
        refused(op, group.group_id, "downgrade", "policy", policy=st.config.consumer_migration_policy)
        return False
    if len(group.members) - 1 > st.config.max_size:
        refused(
            op,
            group.group_id,
            "downgrade",
            "size",
            members=len(group.members) - 1,
            max_size=st.config.max_size,
        )
        return False
    return True


def downgrade(st: ShardState, group: StreamsGroup, leaving_id: str, op: Operation, reason: str) -> bool:
    """Write the conversion's records into `op` and install the classic group once they are
    accepted; False (nothing written) when a member's stored metadata does not decode."""
    gid = group.group_id
    classic = ClassicGroup(
        gid,
        st.now_ms,
        state=ClassicGroupState.STABLE,
        generation_id=group.group_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        current_state_timestamp=st.now_ms,
    )
    try:
        for mid, m in group.members.items():
            if mid == leaving_id:
                continue
            assert m.classic is not None
            cm = ClassicGroupMember(
                mid,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.classic.session_timeout_ms,
                CONSUMER_PROTOCOL_TYPE,
                tuple(Protocol(p.name, p.metadata) for p in m.classic.supported_protocols),
            )
            cm.assignment = assignment_of(st, group, m)
            classic.add(cm)
    except (SchemaError, ValueError) as e:
        refused(op, gid, "downgrade", "streams-metadata", error=str(e))
        return False
    classic.protocol_name = classic.select_protocol()
    classic.subscribed_topics = classic.compute_subscribed_topics()
    op.records.extend(streams_group_tombstones(group))
    op.records.append(group_metadata_record(classic, classic.group_assignment()))
    op.put_group(classic)
    op.event(
        "group.converted",
        group=gid,
        from_type="streams",
        to_type="classic",
        generation=classic.generation_id,
        members=classic.num_members,
        reason=reason,
        protocol=classic.protocol_name,
        leader=classic.leader_id,
    )
    for mid in group.members:
        op.cancel(TimerKind.STREAMS_SESSION, gid, mid)
        op.cancel(TimerKind.STREAMS_REBALANCE, gid, mid)
    for cm in classic.members.values():
        reschedule_heartbeat(op, classic, cm)
    prepare_rebalance(st, classic, op, f"Downgrade group {gid} from streams to classic.")
    return True
