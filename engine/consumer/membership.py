"""Membership operations shared by every path that changes a consumer group (KIP-848
"Rebalance Process"; Kafka GMM steps 1-3 of `consumerGroupHeartbeat`, `consumerGroupFenceMember`,
`replaceMember`, `removeMember`).

The ConsumerGroupHeartbeat path uses them directly; the translation layer uses the same functions
for classic members living in consumer groups, so both protocols bump epochs, compute targets and
reconcile in exactly one way. Every function appends records and timer changes to an
`Operation` and never changes the group or its timers: the shard applies both afterwards, once
the records are in the journal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from engine.assignment import EMPTY, Assignment
from engine.consumer import record_builders as rb
from engine.consumer import regex as regexes
from engine.consumer.api import LEAVE_GROUP_STATIC_MEMBER_EPOCH
from engine.consumer.group import ConsumerGroup, ResolvedRegex
from engine.consumer.member import ConsumerGroupMember, MemberState
from engine.consumer.reconcile import OwnedPartitions, pending_assignment, reconcile
from engine.consumer.target import build_target_assignment
from engine.errors import CoordinatorError, Errors
from engine.metadata import MetadataImage
from engine.operation import Operation
from engine.timers import SCHEDULE, TimerKind, TimerTask
from records.consumer_group import PartitionMetadata, TopicMetadata

if TYPE_CHECKING:
    from engine.state import ShardState


# --- subscription: regexes, topic counts, subscription metadata, epoch ------------------------


def update_regexes(
    shard: ShardState,
    group: ConsumerGroup,
    old: ConsumerGroupMember | None,
    new: ConsumerGroupMember | None,
    refresh: bool,
    op: Operation,
) -> tuple[bool, Mapping[str, ResolvedRegex]]:
    """Regex bookkeeping for one member change; returns (bump needed, resolved regexes after).

    A regex nobody used yet is validated and resolved now (INVALID_REGULAR_EXPRESSION when it does
    not compile); the last member leaving a regex deletes its record. With `refresh`, every regex
    in use is resolved again against the current image (topics created or deleted)."""
    resolved: Mapping[str, ResolvedRegex] = group.resolved_regexes
    old_r = (old.subscribed_topic_regex if old is not None else None) or None
    new_r = (new.subscribed_topic_regex if new is not None else None) or None
    if old_r == new_r and not refresh:
        return False, resolved
    bump = False
    in_use = dict(group.subscribed_regexes)
    if old_r != new_r:
        copy = dict(resolved)
        if old_r is not None:
            in_use[old_r] -= 1
            if in_use[old_r] == 0:
                del in_use[old_r]
                if old_r in copy:
                    del copy[old_r]
                    op.records.append(rb.regex_tombstone(group.group_id, old_r))
                bump = True
        if new_r is not None:
            if new_r not in in_use:
                regexes.validate(new_r)
                if not refresh:
                    copy[new_r] = _resolve(shard, group, new_r, op)
            in_use[new_r] = in_use.get(new_r, 0) + 1
            bump = True
        resolved = copy
    if refresh and in_use:
        copy = dict(resolved)
        for r in in_use:
            fresh = _visible(shard, regexes.resolve_image(r, shard.image))
            current = copy.get(r)
            if current is None or current.topics != fresh:
                copy[r] = _resolve(shard, group, r, op, fresh)
                bump = True
        resolved = copy
    return bump, resolved


def _visible(shard: ShardState, topics: frozenset[str]) -> frozenset[str]:
    """The topics the heartbeating client may DESCRIBE (all without an authorizer)."""
    keep = shard.regex_topic_filter
    return topics if keep is None else frozenset(t for t in topics if keep(t))


def _resolve(
    shard: ShardState,
    group: ConsumerGroup,
    pattern: str,
    op: Operation,
    topics: frozenset[str] | None = None,
) -> ResolvedRegex:
    if topics is None:
        topics = _visible(shard, regexes.resolve_image(pattern, shard.image))
    r = ResolvedRegex(topics, shard.image.version, shard.now_ms)
    op.records.append(rb.regex(group.group_id, pattern, topics, r.version, r.timestamp))
    op.event("group.regex_resolved", group=group.group_id, regex=pattern, topics=sorted(topics))
    return r


def topic_counts(
    group: ConsumerGroup,
    old: ConsumerGroupMember | None,
    new: ConsumerGroupMember | None,
    resolved: Mapping[str, ResolvedRegex],
) -> dict[str, int]:
    """Subscriber count per topic name after replacing `old` by `new` (either may be None)."""
    names = group.subscribed_name_counts()
    regex_counts = dict(group.subscribed_regexes)
    for m, delta in ((old, -1), (new, 1)):
        if m is None:
            continue
        for t in m.subscribed_topic_names:
            n = names.get(t, 0) + delta
            if n:
                names[t] = n
            else:
                names.pop(t, None)
        if m.subscribed_topic_regex:
            r = m.subscribed_topic_regex
            n = regex_counts.get(r, 0) + delta
            if n:
                regex_counts[r] = n
            else:
                regex_counts.pop(r, None)
    for r, n in regex_counts.items():
        rr = resolved.get(r)
        if rr is None:
            continue
        for t in rr.topics:
            names[t] = names.get(t, 0) + n
    return names


def subscription_metadata(image: MetadataImage, counts: Mapping[str, int]) -> dict[str, TopicMetadata]:
    """What the group knows of each subscribed topic that exists (k4 contents), by name."""
    out: dict[str, TopicMetadata] = {}
    for name in sorted(counts):
        t = image.topic(name)
        if t is None:
            continue
        racks = tuple(
            PartitionMetadata(p, tuple(sorted(r))) for p, r in sorted(t.partition_racks.items()) if r
        )
        out[name] = TopicMetadata(t.topic_id, name, t.num_partitions, racks)
    return out


class SubscriptionUpdate:
    """The group-level result of a member change: epoch, subscription metadata, regexes."""

    __slots__ = ("group_epoch", "metadata", "resolved")

    def __init__(
        self,
        group_epoch: int,
        metadata: Mapping[str, TopicMetadata],
        resolved: Mapping[str, ResolvedRegex],
    ) -> None:
        self.group_epoch = group_epoch
        self.metadata = metadata
        self.resolved = resolved


def update_subscription(
    shard: ShardState,
    group: ConsumerGroup,
    old: ConsumerGroupMember | None,
    new: ConsumerGroupMember,
    op: Operation,
) -> SubscriptionUpdate:
    """Steps 1 of Kafka's heartbeat: member record, regexes, subscription metadata, group epoch.

    `old` is the member before this request (None for a brand-new member); `new` the member with
    the request's changes."""
    gid = group.group_id
    refresh = group.metadata_refresh_needed
    if new is old and not refresh and group.group_epoch != 0:
        # Nothing about the member or the topics changed (every steady heartbeat).
        return SubscriptionUpdate(group.group_epoch, group.subscription_metadata, group.resolved_regexes)
    bump = False
    if old is None or not new.subscription_equals(old):
        op.records.append(rb.member_metadata(gid, new))
        # Kafka 4.3 `hasMemberSubscriptionChanged`: only the topic names (and a regex, below)
        # bump the epoch; a new member without topics, a rack or an assignor change do not (they
        # count at the next bump).
        old_names = old.subscribed_topic_names if old is not None else ()
        old_regex = old.subscribed_topic_regex if old is not None else None
        if new.subscribed_topic_names != old_names or (new.subscribed_topic_regex or None) != (
            old_regex or None
        ):
            bump = True
        if old is not None and new.client_assignors != old.client_assignors:
            bump = True  # new assignor metadata asks for a new assignment (KIP-848 "Streams")
    if group.group_epoch == 0:
        bump = True  # a new group must leave epoch 0 (Kafka 4.0)

    regex_bump, resolved = update_regexes(shard, group, old, new, refresh, op)
    bump = bump or regex_bump

    epoch = group.group_epoch
    metadata: Mapping[str, TopicMetadata] = group.subscription_metadata
    if bump or refresh:
        counts = topic_counts(group, old, new, resolved)
        metadata = subscription_metadata(shard.image, counts)
        if metadata != group.subscription_metadata:
            bump = True
            op.records.append(rb.subscription_metadata(gid, metadata.values()))
        if bump:
            epoch += 1
            op.records.append(rb.group_epoch(gid, epoch))
            op.event(
                "group.epoch_bumped",
                group=gid,
                group_epoch=epoch,
                member=new.member_id,
                reason="member joined" if old is None else "subscription or metadata changed",
            )
        op.after(lambda: _refreshed(group))
    return SubscriptionUpdate(epoch, metadata, resolved)


def _refreshed(group: ConsumerGroup) -> None:
    group.metadata_refresh_needed = False


# --- target assignment and reconciliation ------------------------------------------------------


def preferred_assignor(
    shard: ShardState, group: ConsumerGroup, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None
) -> str:
    counts = group.server_assignor_counts()
    for m, delta in ((old, -1), (new, 1)):
        if m is not None and m.server_assignor is not None:
            n = counts.get(m.server_assignor, 0) + delta
            if n:
                counts[m.server_assignor] = n
            else:
                counts.pop(m.server_assignor, None)
    best, best_n = None, 0
    for name, n in counts.items():
        if n > best_n:
            best, best_n = name, n
    return best if best is not None else shard.config.consumer_assignors[0]


def update_target(
    shard: ShardState,
    group: ConsumerGroup,
    sub: SubscriptionUpdate,
    old: ConsumerGroupMember | None,
    new: ConsumerGroupMember,
    op: Operation,
    client_computes: bool = False,
) -> tuple[int, Assignment]:
    """Step 2: a new target when the group epoch moved past the assignment epoch, unless a
    client-side assignor computes it (`client_computes`, engine/consumer/client_assignment.py):
    then every member keeps the current target until the assigning member installs one.

    Returns (target epoch, this member's target)."""
    if sub.group_epoch > group.assignment_epoch and not client_computes:
        assignor = preferred_assignor(shard, group, old, new)
        targets = build_target_assignment(
            group,
            sub.group_epoch,
            assignor,
            sub.metadata,
            {new.member_id: new},
            sub.resolved,
            op.records,
        )
        op.event(
            "group.target_assignment_computed",
            group=group.group_id,
            assignment_epoch=sub.group_epoch,
            assignor=assignor,
            members=len(targets),
        )
        return sub.group_epoch, targets.get(new.member_id, EMPTY)
    target = group.target_assignment.get(new.member_id)
    if target is None and new.instance_id is not None:
        prev = group.static_members.get(new.instance_id)
        if prev is not None:
            target = group.target_assignment.get(prev)
    return group.assignment_epoch, target if target is not None else EMPTY


def partition_names(image: MetadataImage, a: Assignment, minus: Assignment = EMPTY) -> list[str]:
    """`topic-partition` names of `a` not in `minus`, for events an operator reads (computed only
    when an assignment changes, never for a steady heartbeat)."""
    out: list[str] = []
    for t, parts in a.items():
        gone = minus.get(t, ())
        topic = image.topic_by_id(t)
        name = topic.name if topic is not None else str(t)
        out.extend(f"{name}-{p}" for p in parts if p not in gone)
    return out


def maybe_reconcile(
    shard: ShardState,
    group: ConsumerGroup,
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    owned: OwnedPartitions,
    op: Operation,
) -> ConsumerGroupMember:
    """Step 3: move the member towards its target; write k8 and manage the rebalance timer."""
    if member.is_reconciled_to(target_epoch):
        return member
    updated = reconcile(member, target_epoch, target, group.current_partition_epoch, owned)
    if updated is member or updated.assignment_equals(member):
        return member
    op.records.append(rb.current_assignment(group.group_id, updated))
    image = shard.image
    op.event(
        "member.assignment_changed",
        group=group.group_id,
        member=updated.member_id,
        member_epoch=updated.member_epoch,
        previous_member_epoch=updated.previous_member_epoch,
        target_epoch=target_epoch,
        state=updated.state.name,
        added=partition_names(image, updated.assigned_partitions, member.assigned_partitions),
        revoked=partition_names(
            image, updated.partitions_pending_revocation, member.partitions_pending_revocation
        ),
        pending_revocation=partition_names(image, updated.partitions_pending_revocation),
        pending_assignment=partition_names(image, pending_assignment(updated, target)),
    )
    if not updated.uses_classic_protocol:
        if updated.state is MemberState.UNREVOKED_PARTITIONS:
            schedule_rebalance_timeout(op, group.group_id, updated)
        else:
            op.cancel(TimerKind.CONSUMER_REBALANCE, group.group_id, updated.member_id)
    return updated


# --- static members (KIP-345, as KIP-848 keeps it) ------------------------------------------------


def known_static_member(group: ConsumerGroup, member_id: str, instance_id: str) -> ConsumerGroupMember:
    """The member that holds `instance_id`, which must be `member_id` (both protocols)."""
    existing = group.static_member(instance_id)
    if existing is None:
        raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
    if existing.member_id != member_id:
        raise CoordinatorError(
            Errors.FENCED_INSTANCE_ID,
            f"Static member {member_id} with instance id {instance_id} was fenced by member "
            f"{existing.member_id}.",
        )
    return existing


def joining_static_member(
    group: ConsumerGroup,
    member_id: str,
    instance_id: str,
    op: Operation,
    *,
    protocol: str,
    rejoin_by_id: bool,
    take_over_active: bool,
) -> tuple[ConsumerGroupMember | None, ConsumerGroupMember, ConsumerGroupMember | None]:
    """Kafka `getOrMaybeSubscribeStaticConsumerGroupMember` for both protocols: a static member
    joining under `member_id`. Returns (old, base, replaced): `old` is the member as the group
    counts it today (None when new), `base` the member the request then updates, `replaced` the
    member whose instance id it took over (its records are replaced in `op`).

    The protocols differ in two flags only: a consumer-protocol member may rejoin under its own
    id (`rejoin_by_id`, KAFKA-19233) and takes over an instance id only once its holder left with
    epoch -2 (else UNRELEASED_INSTANCE_ID), while a classic member takes it over at once
    (`take_over_active`), as a classic static member always could."""
    gid = group.group_id
    existing = group.static_member(instance_id)
    if existing is None:
        if rejoin_by_id:
            member = group.members.get(member_id)
            if member is not None:
                return member, member, None
        op.event("member.joined", group=gid, member=member_id, instance_id=instance_id, protocol=protocol)
        return None, ConsumerGroupMember(member_id=member_id), None
    if (
        not take_over_active
        and not existing.uses_classic_protocol
        and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH
    ):
        raise CoordinatorError(
            Errors.UNRELEASED_INSTANCE_ID,
            f"Static member {member_id} with instance id {instance_id} cannot join the "
            f"group because the instance id is owned by {existing.member_id} member.",
        )
    replacement = existing.with_changes(member_id=member_id, member_epoch=0, previous_member_epoch=0)
    replace_member_records(group, existing, replacement, op)
    op.event(
        "member.replaced",
        group=gid,
        member=member_id,
        replaced=existing.member_id,
        instance_id=instance_id,
        protocol=protocol,
    )
    return replacement, replacement, existing


# --- removal ----------------------------------------------------------------------------------


def remove_member_records(group_id: str, member_id: str, op: Operation) -> None:
    """Tombstones in the order replay needs: current assignment, target, then the member."""
    op.records.append(rb.current_assignment_tombstone(group_id, member_id))
    op.records.append(rb.target_member_tombstone(group_id, member_id))
    op.records.append(rb.member_metadata_tombstone(group_id, member_id))


def replace_member_records(
    group: ConsumerGroup, old: ConsumerGroupMember, new: ConsumerGroupMember, op: Operation
) -> None:
    """A static member taking over an instance id: the old member's records go, the new member
    arrives with the old one's target (Kafka `replaceMember`)."""
    gid = group.group_id
    remove_member_records(gid, old.member_id, op)
    op.records.append(rb.member_metadata(gid, new))
    op.records.append(rb.target_member(gid, new.member_id, group.target(old.member_id)))
    op.records.append(rb.current_assignment(gid, new))


def fence_member(
    shard: ShardState,
    group: ConsumerGroup,
    member: ConsumerGroupMember,
    op: Operation,
    reason: str,
    event: str = "member.fenced",
) -> None:
    """Remove a member and bump the group epoch (leave -1, session or rebalance timeout).

    `event` names the log line: `member.left` for a leave the member asked for, `member.fenced`
    for a removal the coordinator decided (expiry, timeout).

    The translation layer may turn this into a downgrade to a classic group
    (`MigrationHooks.consumer_member_fenced` returns True when it handled the fence)."""
    gid = group.group_id
    if shard.migration.consumer_member_fenced(group, member, op, reason):
        # The fence converted the group to a classic group instead (`group.converted`); the
        # fenced member is still one event, as Kafka logs the fence before converting.
        op.event(
            event,
            group=gid,
            member=member.member_id,
            member_epoch=member.member_epoch,
            group_epoch=group.group_epoch,
            reason=reason,
        )
        return
    remove_member_records(gid, member.member_id, op)
    _, resolved = update_regexes(shard, group, member, None, False, op)
    metadata = subscription_metadata(shard.image, topic_counts(group, member, None, resolved))
    if metadata != group.subscription_metadata:
        op.records.append(rb.subscription_metadata(gid, metadata.values()))
    epoch = group.group_epoch + 1
    op.records.append(rb.group_epoch(gid, epoch))
    cancel_member_timers(op, gid, member.member_id)
    op.event(
        event,
        group=gid,
        member=member.member_id,
        member_epoch=member.member_epoch,
        group_epoch=epoch,
        reason=reason,
    )


def cancel_member_timers(op: Operation, group_id: str, member_id: str) -> None:
    op.cancel(TimerKind.CONSUMER_SESSION, group_id, member_id)
    op.cancel(TimerKind.CONSUMER_REBALANCE, group_id, member_id)
    op.cancel(TimerKind.CLIENT_ASSIGNMENT, group_id, member_id)
    op.cancel(TimerKind.CLASSIC_MEMBER_JOIN, group_id, member_id)
    op.cancel(TimerKind.CLASSIC_MEMBER_SYNC, group_id, member_id)


# --- timers -----------------------------------------------------------------------------------


def schedule_session_timeout(op: Operation, group_id: str, member_id: str, timeout_ms: int) -> None:
    # Inlined `op.schedule` (every heartbeat): the key is `timer_key(CONSUMER_SESSION, ...)`.
    key = f"session-timeout-{group_id}-{member_id}"
    op.timers.append((SCHEDULE, key, TimerKind.CONSUMER_SESSION, group_id, member_id, 0, 0, timeout_ms))


def schedule_rebalance_timeout(op: Operation, group_id: str, member: ConsumerGroupMember) -> None:
    """Fences the member if it is still at this epoch when the timer fires (KIP-848 "Rebalance
    Timeout"); `data` keeps the timeout for the fence's reason."""
    timeout = member.rebalance_timeout_ms
    op.schedule(
        TimerKind.CONSUMER_REBALANCE,
        group_id,
        member.member_id,
        max(timeout, 0),
        member.member_epoch,
        timeout,
    )


def fence_expired_member(
    shard: ShardState, task: TimerTask, op: Operation, reason: str, only_at_epoch: int | None = None
) -> None:
    """A consumer-group member's timer fired (session, rebalance, classic join or sync timeout):
    fence it, or nothing when it is already gone (or moved past `only_at_epoch`)."""
    group = shard.consumer_group(task.group_id)
    if group is None:
        return
    member = group.members.get(task.member_id)
    if member is None:
        return
    if only_at_epoch is not None and member.member_epoch != only_at_epoch:
        return
    fence_member(shard, group, member, op, reason)  # a CoordinatorError drops the operation
