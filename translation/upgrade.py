"""Upgrade: a classic group becomes a consumer group when a ConsumerGroupHeartbeat joins it
(KIP-848 "Supporting Online Consumer Group Upgrade"; KIP-848 "Supporting Online Consumer Group Upgrade";
Kafka `validateOnlineUpgrade`,
`convertToConsumerGroup`, `ConsumerGroup.fromClassicGroup`).

Conditions (all, else GROUP_ID_NOT_FOUND "Group X is not a consumer group" and a
`group.conversion_refused` event naming the reason): the policy allows upgrades; the group's
protocol type is `consumer`; it has at most `group.consumer.max.size` members (the joiner is not
counted here); every member's embedded subscription and assignment parse (an empty assignment,
from a member that joined but never synced, counts as no partitions: KAFKA-17733); no member's
assignment carries user data, which would mean a custom client-side assignor the server cannot
replace (KAFKA-18134), unless `group.consumer.client.assignors.enable` is on and the joining
member brings a client assignor named as the group's protocol that reads metadata version -1
(the classic members' metadata): that assignor replaces the custom one, which is the upgrade
KAFKA-18134 refuses on Kafka (docs/client-side-assignors.md). The group's state does not matter.

Procedure: parked JoinGroups and SyncGroups are answered REBALANCE_IN_PROGRESS so those members
rejoin; a GroupMetadata tombstone; then, per Kafka's order, every member's k5, k3 at the classic
generation, every member's k7, k6 at the generation, every member's k8: each member keeps its
assignment as its target, Stable at epoch = generation, with its classic session timeout and
protocols in ClassicMemberMetadata. A cooperative member whose subscription still claims
partitions no stored assignment has (withheld from it by the leader, or reset by a rebalance) is
converted in UNREVOKED_PARTITIONS with those pending revocation; Kafka drops them, and they went
to another member while their owner still processed them. The subscription metadata (k4) is left
to the joiner's heartbeat, which then sees it changed and bumps the epoch. The classic group's
timers (join, sync, member heartbeats) are cancelled: Kafka leaves them to a group-type check,
which fails once the group is downgraded again before they fire. The consumer group the
heartbeat continues with is built by replaying those records, so it is what a restart would load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.classic.api import JoinGroupResponse, SyncGroupResponse
from engine.classic.group import ClassicGroup
from engine.consumer import record_builders as rb
from engine.consumer.client_assignment import CLASSIC_METADATA_VERSION
from engine.consumer.group import ConsumerGroup
from engine.consumer.member import ConsumerGroupMember, MemberState, normalize_topic_names
from engine.consumer.membership import schedule_session_timeout
from engine.errors import CoordinatorError, Errors
from engine.metadata import MetadataImage, TopicId
from engine.operation import Operation
from engine.replay import apply_record
from engine.timers import TimerKind
from records.classic_group import GroupMetadataKey
from records.consumer_group import ClassicMemberMetadata, ClassicProtocol, ClientAssignorMetadata
from records.coordinator import CoordinatorRecord
from translation.embedded_protocol import SchemaError, Subscription, parse_assignment, parse_subscription
from translation.policy import refused, upgrade_enabled

if TYPE_CHECKING:
    from engine.state import ShardState


def not_a_consumer_group(group_id: str) -> CoordinatorError:
    return CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group")


def cannot_upgrade(group_id: str, because: str) -> CoordinatorError:
    """Kafka 4.3's refusal (`GroupMetadataManager.validateOnlineUpgrade`), word for word."""
    return CoordinatorError(
        Errors.GROUP_ID_NOT_FOUND,
        f"Cannot upgrade classic group {group_id} to consumer group because {because}",
    )


def check_upgrade(shard: ShardState, group: ClassicGroup, op: Operation) -> None:
    gid = group.group_id
    if not upgrade_enabled(shard.config):
        refused(op, gid, "upgrade", "policy", policy=shard.config.consumer_migration_policy)
        raise cannot_upgrade(gid, "online upgrade is disabled.")
    if not group.uses_consumer_protocol():
        refused(op, gid, "upgrade", "protocol type", protocol_type=group.protocol_type)
        raise cannot_upgrade(gid, "the group does not use the consumer embedded protocol.")
    if group.num_members > shard.config.consumer_max_size:
        refused(
            op, gid, "upgrade", "size", members=group.num_members, max_size=shard.config.consumer_max_size
        )
        raise cannot_upgrade(gid, "the group size exceeds the consumer group maximum size.")


def _assigned(data: bytes, image: MetadataImage) -> tuple[dict[TopicId, tuple[int, ...]], bytes | None]:
    if not data:
        return {}, None  # joined but never synced: no partitions (KAFKA-17733)
    a = parse_assignment(data)
    out: dict[TopicId, tuple[int, ...]] = {}
    for topic, parts in a.partitions:
        t = image.topic(topic)
        if t is None or not parts:
            continue  # topics unknown to the metadata are dropped, as Kafka does
        held = out.get(t.topic_id, ())
        out[t.topic_id] = held + tuple(p for p in dict.fromkeys(parts) if p not in held)
    return out, a.user_data


def _still_revoking(
    members: list[ConsumerGroupMember], subscriptions: list[Subscription], image: MetadataImage
) -> list[ConsumerGroupMember]:
    """Members that still hold partitions their stored assignment omits, pending revocation.

    The stored assignment is not all a cooperative member holds: one that has not collected the
    SyncGroup answer of the current generation keeps the partitions the leader withheld from it
    (they change owner), and a rebalance that restarted from CompletingRebalance reset every
    stored assignment to empty. Its subscription (the owned partitions of its last JoinGroup)
    says what it holds. A claimed partition no stored assignment has stays pending revocation of
    its claimant (the highest generation claiming it), so that it moves only once the member has
    rejoined without it, as in the classic protocol. Kafka converts the stored assignment only,
    which hands such a partition to another member while its owner still processes it."""
    stored = {(t, p) for m in members for t, parts in m.assigned_partitions.items() for p in parts}
    claimant: dict[tuple[TopicId, int], tuple[int, int]] = {}  # partition -> (generation, index)
    for i, sub in enumerate(subscriptions):
        for topic, parts in sub.owned_partitions:
            t = image.topic(topic)
            if t is None:
                continue
            for p in parts:
                tp = (t.topic_id, p)
                if p >= t.num_partitions or tp in stored:
                    continue
                if tp not in claimant or sub.generation_id > claimant[tp][0]:
                    claimant[tp] = (sub.generation_id, i)
    if not claimant:
        return members
    pending: dict[int, dict[TopicId, list[int]]] = {}
    for (tid, p), (_, i) in sorted(claimant.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        pending.setdefault(i, {}).setdefault(tid, []).append(p)
    return [
        m.with_changes(
            state=MemberState.UNREVOKED_PARTITIONS,
            partitions_pending_revocation={t: tuple(ps) for t, ps in pending[i].items()},
        )
        if i in pending
        else m
        for i, m in enumerate(members)
    ]


def replaces_custom_assignor(
    shard: ShardState, protocol: str | None, client_assignors: tuple[ClientAssignorMetadata, ...]
) -> bool:
    """The joining member's client assignors include one for the classic protocol in use that
    reads classic metadata (version -1), with client assignors enabled: it can take over the
    custom assignor whose user data would otherwise refuse the upgrade."""
    return shard.config.consumer_client_assignors_enable and any(
        a.name == protocol and a.minimum_version <= CLASSIC_METADATA_VERSION <= a.maximum_version
        for a in client_assignors
    )


def upgrade(
    shard: ShardState,
    group: ClassicGroup,
    op: Operation,
    client_assignors: tuple[ClientAssignorMetadata, ...] = (),
) -> ConsumerGroup:
    """Convert `group` (writing the records into `op`); return the consumer group to join.
    `client_assignors`: the joining member's (see `replaces_custom_assignor`)."""
    check_upgrade(shard, group, op)
    gid = group.group_id
    protocol = group.protocol_name
    custom_assignor_replaced = replaces_custom_assignor(shard, protocol, client_assignors)
    members: list[ConsumerGroupMember] = []
    subscriptions: list[Subscription] = []
    for m in group.members.values():
        try:
            assigned, user_data = _assigned(m.assignment, shard.image)
            sub = parse_subscription(
                m.metadata(protocol) if protocol is not None else m.supported_protocols[0].metadata
            )
        except (SchemaError, ValueError) as e:
            refused(op, gid, "upgrade", "malformed embedded protocol", member=m.member_id, error=str(e))
            raise cannot_upgrade(gid, "the embedded consumer protocol is malformed.") from None
        if user_data and not custom_assignor_replaced:
            refused(op, gid, "upgrade", "custom assignor", member=m.member_id)
            raise cannot_upgrade(
                gid,
                "an unsupported custom assignor is in use. Please refer to the documentation or "
                "switch to a default assignor before re-attempting the upgrade.",
            )
        subscriptions.append(sub)
        members.append(
            ConsumerGroupMember(
                member_id=m.member_id,
                instance_id=m.group_instance_id,
                rack_id=sub.rack_id or None,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=normalize_topic_names(sub.topics),
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                classic_member_metadata=ClassicMemberMetadata(
                    m.session_timeout_ms,
                    tuple(ClassicProtocol(p.name, p.metadata) for p in m.supported_protocols),
                ),
                member_epoch=group.generation_id,
                previous_member_epoch=group.generation_id,
                state=MemberState.STABLE,
                assigned_partitions=assigned,
            )
        )

    members = _still_revoking(members, subscriptions, shard.image)

    # Members waiting in a join or sync phase must rejoin the consumer group.
    for m in group.members.values():
        group.complete_join(
            m, JoinGroupResponse(error_code=int(Errors.REBALANCE_IN_PROGRESS), member_id=m.member_id), op
        )
        if group.complete_sync(m, SyncGroupResponse(error_code=int(Errors.REBALANCE_IN_PROGRESS)), op):
            # Kept if the append fails and the classic group stays: its session, whose expiry
            # was ignored while the sync was parked, starts afresh, as `propagate_assignment`
            # does for the answers it gives (seed 6127).
            op.schedule_if_refused(TimerKind.CLASSIC_HEARTBEAT, gid, m.member_id, m.session_timeout_ms)

    generation = group.generation_id
    records: list[CoordinatorRecord] = [rb.member_metadata(gid, m) for m in members]
    records.append(rb.group_epoch(gid, generation))
    records.extend(rb.target_member(gid, m.member_id, m.assigned_partitions) for m in members)
    records.append(rb.target_epoch(gid, generation))
    records.extend(rb.current_assignment(gid, m) for m in members)
    op.records.append(CoordinatorRecord(GroupMetadataKey(gid), None))
    op.records.extend(records)

    converted = ConsumerGroup(gid)
    for r in records:
        apply_record(converted, r)
    # No subscription metadata was written: the joining heartbeat must compute it (and bump the
    # epoch), even when it brings no subscription change itself, e.g. a static member replacing
    # a classic one with the same topics. Kafka gets this from a new group's expired metadata
    # refresh deadline.
    converted.metadata_refresh_needed = True

    # The classic group is gone, and its timers with it. Kafka leaves them registered and relies
    # on their group-type check, which a later downgrade defeats: a join timer of this group
    # would then complete a join phase of the new classic group.
    op.cancel(TimerKind.CLASSIC_JOIN_PHASE, gid)
    op.cancel(TimerKind.CLASSIC_SYNC_PHASE, gid)
    for classic_id in [*group.members, *group.pending_join_members]:
        op.cancel(TimerKind.CLASSIC_HEARTBEAT, gid, classic_id)
    for converted_member in members:
        meta = converted_member.classic_member_metadata
        assert meta is not None
        schedule_session_timeout(op, gid, converted_member.member_id, meta.session_timeout_ms)
    op.event(
        "group.converted",
        group=gid,
        from_type="classic",
        to_type="consumer",
        group_epoch=generation,
        members=len(members),
        reason="a consumer-protocol member joined",
    )
    return converted
