"""Downgrade: a consumer group whose last consumer-protocol member goes becomes a classic group
again (KIP-848 "Supporting Online Consumer Group Upgrade"; KIP-848 "Supporting Online Consumer Group
Upgrade"; Kafka
`validateOnlineDowngradeWithFencedMember`, `validateOnlineDowngradeWithReplacedMemberId`,
`convertToClassicGroup`, `ClassicGroup.fromConsumerGroup`).

Triggers: (a) the last consumer-protocol member is fenced (leave -1, static leave -1, session or
rebalance timeout) while at least one classic member remains; (b) a classic static member takes
over, through JoinGroup, the instance id of the last consumer-protocol member. Classic LeaveGroup
and classic timeouts never downgrade (the member leaving is classic). Conditions: the policy
allows downgrades and the remaining members fit in `group.max.size`.

Procedure: tombstones in Kafka's order (k8*, k7*, k6, k5*, k16*, k4, k3; in case (b) the
replaced member's tombstones carry the joiner's id), then one GroupMetadata record of the classic
group: Stable at generation = the group epoch, protocol type `consumer`, the members' own classic
protocols (the vote picks the group's protocol), leader = the first member, and each member's
current assigned partitions serialized in its own subscription's version (the joiner of case (b):
its own, reconciled from the replaced member's). Kafka writes the target assignment instead; a
target partition may still be owned by a member that has not revoked it, so a SyncGroup answered
from that record (case (b) without a rebalance, or any classic group after a restart) gave one
partition to two members. The records are replayed like any operation's, so a failed append
leaves the consumer group as it was (Kafka reverts its snapshot); once they are accepted, the
classic group built here replaces the replayed one (replay keeps only each member's selected
protocol, the live group keeps all of them). Then a rebalance is prepared so the classic members
rejoin (next generation = epoch + 1), in both cases. Kafka rebalances in case (b) only if the
joiner's subscription differs from the member it replaces (KAFKA-19546, back-ported to 4.0.x);
without a rebalance no client knows it is the classic group's leader, and partitions added
afterwards, or still moving at the conversion, are never assigned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.classic.group import CONSUMER_PROTOCOL_TYPE, ClassicGroup
from engine.classic.member import ClassicGroupMember, Protocol
from engine.classic.rebalance import prepare_rebalance, reschedule_heartbeat
from engine.classic.records import group_metadata_record
from engine.classic.state import ClassicGroupState
from engine.consumer import record_builders as rb
from engine.consumer.group import ConsumerGroup
from engine.consumer.member import ConsumerGroupMember
from engine.consumer.membership import cancel_member_timers
from engine.errors import CoordinatorError, Errors
from engine.operation import Operation
from translation.embedded_protocol import SchemaError, read_version, serialize_assignment
from translation.policy import downgrade_enabled, refused

if TYPE_CHECKING:
    from engine.state import ShardState


def all_members_use_classic_except(group: ConsumerGroup, member_id: str) -> bool:
    member = group.members.get(member_id)
    return (
        member is not None
        and not member.uses_classic_protocol
        and group.num_classic_members == group.num_members - 1
    )


def can_downgrade_after_fence(shard: ShardState, group: ConsumerGroup, fenced_id: str, op: Operation) -> bool:
    if not all_members_use_classic_except(group, fenced_id):
        return False
    if group.num_members <= 1:
        return False  # the group just becomes an empty consumer group
    if not downgrade_enabled(shard.config):
        refused(op, group.group_id, "downgrade", "policy", policy=shard.config.consumer_migration_policy)
        return False
    if group.num_members - 1 > shard.config.max_size:
        refused(
            op,
            group.group_id,
            "downgrade",
            "size",
            members=group.num_members - 1,
            max_size=shard.config.max_size,
        )
        return False
    return True


def can_downgrade_after_replacement(
    shard: ShardState, group: ConsumerGroup, replaced_id: str, op: Operation
) -> bool:
    if not all_members_use_classic_except(group, replaced_id):
        return False
    if not downgrade_enabled(shard.config):
        refused(op, group.group_id, "downgrade", "policy", policy=shard.config.consumer_migration_policy)
        return False
    if group.num_members > shard.config.max_size:
        refused(
            op, group.group_id, "downgrade", "size", members=group.num_members, max_size=shard.config.max_size
        )
        return False
    return True


def _classic_member(m: ConsumerGroupMember) -> ClassicGroupMember:
    meta = m.classic_member_metadata
    assert meta is not None, f"member {m.member_id} does not use the classic protocol"
    return ClassicGroupMember(
        m.member_id,
        m.instance_id,
        m.client_id,
        m.client_host,
        m.rebalance_timeout_ms,
        meta.session_timeout_ms,
        CONSUMER_PROTOCOL_TYPE,
        tuple(Protocol(p.name, p.metadata) for p in meta.supported_protocols),
    )


def build_classic_group(
    shard: ShardState,
    group: ConsumerGroup,
    leaving_id: str,
    joining: ConsumerGroupMember | None,
) -> ClassicGroup:
    gid = group.group_id
    classic = ClassicGroup(
        gid,
        shard.now_ms,
        state=ClassicGroupState.STABLE,
        generation_id=group.group_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        current_state_timestamp=shard.now_ms,
    )
    for mid, m in group.members.items():
        if mid != leaving_id:
            classic.add(_classic_member(m))
    if joining is not None:
        classic.add(_classic_member(joining))
    classic.protocol_name = classic.select_protocol()
    classic.subscribed_topics = classic.compute_subscribed_topics()
    image = shard.image
    for cm in classic.members.values():
        # The member's current assigned partitions, not its target: a target partition may still
        # be owned by another member that has not revoked it yet, and a Stable classic group (a
        # restart loads it Stable) hands this assignment to the member's next SyncGroup.
        source = (
            joining
            if joining is not None and cm.member_id == joining.member_id
            else group.members[cm.member_id]
        )
        by_name: list[tuple[str, list[int]]] = []
        for tid, parts in source.assigned_partitions.items():
            t = image.topic_by_id(tid)
            if t is not None:
                by_name.append((t.name, sorted(parts)))
        cm.assignment = serialize_assignment(
            sorted(by_name), read_version(cm.metadata(classic.protocol_name))
        )
    return classic


def downgrade(
    shard: ShardState,
    group: ConsumerGroup,
    leaving_id: str,
    joining: ConsumerGroupMember | None,
    op: Operation,
    reason: str,
) -> ClassicGroup:
    """Write the conversion's records into `op` and install the classic group once they are
    accepted; returns the classic group."""
    gid = group.group_id
    try:
        classic = build_classic_group(shard, group, leaving_id, joining)
    except (SchemaError, ValueError) as e:
        refused(op, gid, "downgrade", "malformed embedded protocol", error=str(e))
        raise CoordinatorError(
            Errors.GROUP_ID_NOT_FOUND, f"Cannot downgrade the classic group {gid}: {e}."
        ) from None

    def renamed(member_id: str) -> str:
        return joining.member_id if joining is not None and member_id == leaving_id else member_id

    consumer_ids = list(group.members)  # before the tombstones below empty the group
    ids = [renamed(mid) for mid in consumer_ids]
    op.records.extend(rb.current_assignment_tombstone(gid, mid) for mid in ids)
    op.records.extend(rb.target_member_tombstone(gid, mid) for mid in ids)
    op.records.append(rb.target_epoch_tombstone(gid))
    op.records.extend(rb.member_metadata_tombstone(gid, mid) for mid in ids)
    op.records.extend(rb.regex_tombstone(gid, r) for r in group.resolved_regexes)
    op.records.append(rb.subscription_metadata_tombstone(gid))
    op.records.append(rb.group_epoch_tombstone(gid))
    op.records.append(group_metadata_record(classic, classic.group_assignment()))
    # Installed over the replayed copy once the records are accepted (replay keeps only each
    # member's selected protocol; the live group keeps all of them).
    op.put_group(classic)
    op.event(
        "group.converted",
        group=gid,
        from_type="consumer",
        to_type="classic",
        generation=classic.generation_id,
        members=classic.num_members,
        reason=reason,
        protocol=classic.protocol_name,
        leader=classic.leader_id,
    )
    # The consumer group's member timers (session, rebalance, classic join/sync) end with it, as
    # Kafka's `convertToClassicGroup` cancels them. The classic group is not installed yet (the
    # shard does it once the records are in the journal), so its members' timers and its
    # rebalance are computed on it here, into `op`.
    for mid in consumer_ids:
        cancel_member_timers(op, gid, mid)
    for cm in classic.members.values():
        reschedule_heartbeat(op, classic, cm)
    # Both cases rebalance. In case (b) Kafka rebalances only when the joiner's subscription
    # differs (KAFKA-19546), but without a rebalance no client knows it leads the classic group
    # (each learnt leader "" from its consumer-group JoinGroup), so nobody assigns partitions
    # that are added later, nor the partitions still moving at the conversion.
    prepare_rebalance(shard, classic, op, f"Downgrade group {gid} from consumer to classic.")
    return classic
