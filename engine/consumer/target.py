"""Target assignment computation (KIP-848 "Assignment Process"; Kafka `TargetAssignmentBuilder`).

Builds the assignor's input from the group (with the members an operation adds, updates or
removes), runs the assignor, and writes the delta: one k7 record per member whose target changed,
then k6 with the new assignment epoch. Members are given to the assignor in the group's member
order, new members last, which is what makes "which member gets the extra partition" stable.
"""

from __future__ import annotations

from collections.abc import Mapping

from engine import assignors
from engine.assignment import EMPTY, Assignment
from engine.assignors.base import (
    GroupSpec,
    MapTopicDescriber,
    MemberSubscription,
    PartitionAssignorError,
    SubscriptionType,
)
from engine.consumer import record_builders as rb
from engine.consumer.group import ConsumerGroup, ResolvedRegex
from engine.consumer.member import ConsumerGroupMember
from engine.errors import CoordinatorError, Errors
from engine.metadata import TopicId
from records.consumer_group import TopicMetadata
from records.coordinator import CoordinatorRecord


def member_topic_names(
    member: ConsumerGroupMember, resolved: Mapping[str, ResolvedRegex]
) -> set[str] | tuple[str, ...]:
    regex = member.subscribed_topic_regex
    if regex:
        r = resolved.get(regex)
        if r is not None:
            return set(member.subscribed_topic_names) | r.topics
    return member.subscribed_topic_names


def _static_members_first(specs: dict[str, MemberSubscription]) -> dict[str, MemberSubscription]:
    """Static members first, by instance id, then dynamic members in join order.

    Member order decides which members take the extra partitions and which fill up first. A
    static member that restarts comes back under a new member id, at the end of the join order;
    ordering static members by instance id keeps their place, so a rolling bounce of static
    members moves no partition (KIP-345's promise). Kafka's range assignor orders static members
    the same way; its uniform assignor uses HashMap order, which no client can rely on."""
    static = [s for s in specs.values() if s.instance_id is not None]
    if not static:
        return specs
    static.sort(key=lambda s: s.instance_id or "")
    ordered = {s.member_id: s for s in static}
    ordered.update((mid, s) for mid, s in specs.items() if s.instance_id is None)
    return ordered


def subscription_type_of(specs: Mapping[str, MemberSubscription]) -> SubscriptionType:
    """HOMOGENEOUS when every member subscribes to the same resolved topics.

    Computed from the members themselves rather than from per-topic subscriber counts: a member
    subscribed to a topic both by name and through a regex would be counted twice, and a wrong
    HOMOGENEOUS makes the assignor give every member the first member's topics."""
    first: frozenset[TopicId] | None = None
    for spec in specs.values():
        if first is None:
            first = spec.subscribed_topic_ids
        elif spec.subscribed_topic_ids != first:
            return SubscriptionType.HETEROGENEOUS
    return SubscriptionType.HOMOGENEOUS


def build_target_assignment(
    group: ConsumerGroup,
    epoch: int,
    assignor_name: str,
    subscription_metadata: Mapping[str, TopicMetadata],
    updated_members: Mapping[str, ConsumerGroupMember | None],
    resolved_regexes: Mapping[str, ResolvedRegex],
    records: list[CoordinatorRecord],
) -> dict[str, Assignment]:
    """The new target of every member; appends the k7 delta and the k6 record to `records`."""
    ids_by_name = {name: t.topic_id for name, t in subscription_metadata.items()}
    counts: dict[TopicId, int] = {t.topic_id: t.num_partitions for t in subscription_metadata.values()}

    def spec_for(m: ConsumerGroupMember, previous: Assignment) -> MemberSubscription:
        ids = frozenset(ids_by_name[n] for n in member_topic_names(m, resolved_regexes) if n in ids_by_name)
        return MemberSubscription(m.member_id, m.instance_id, m.rack_id, ids, previous)

    targets = group.target_assignment
    # Existing members keep their place in the order (updated in place); new members go last;
    # a static member taking over an instance id replaces the previous member's entry.
    replaced: dict[str, str] = {}  # previous member id -> new member id
    for mid, m in updated_members.items():
        if m is not None and m.instance_id is not None and mid not in group.members:
            prev_id = group.static_members.get(m.instance_id)
            if prev_id is not None and prev_id != mid:
                replaced[prev_id] = mid
    specs: dict[str, MemberSubscription] = {}
    for mid, m in group.members.items():
        if mid in replaced:
            new_id = replaced[mid]
            nm = updated_members[new_id]
            assert nm is not None
            specs[new_id] = spec_for(nm, targets.get(mid, EMPTY))
            continue
        if mid in updated_members:
            um = updated_members[mid]
            if um is not None:
                specs[mid] = spec_for(um, targets.get(mid, EMPTY))
            continue
        specs[mid] = spec_for(m, targets.get(mid, EMPTY))
    for mid, m in updated_members.items():
        if m is not None and mid not in specs:
            specs[mid] = spec_for(m, targets.get(mid, EMPTY))
    specs = _static_members_first(specs)

    if specs:
        try:
            result = assignors.get(assignor_name).assign(
                GroupSpec(specs, subscription_type_of(specs), group.inverted_target()),
                MapTopicDescriber(counts),
            )
        except PartitionAssignorError as e:
            raise CoordinatorError(
                Errors.UNKNOWN_SERVER_ERROR,
                f"Failed to compute a new target assignment for epoch {epoch}: {e}",
            ) from e
    else:
        result = {}

    new_targets: dict[str, Assignment] = {}
    for mid in specs:
        new = result.get(mid, EMPTY)
        new_targets[mid] = new
        old = targets.get(mid)
        if old is None or (new is not old and new != old):
            records.append(rb.target_member(group.group_id, mid, new))
    records.append(rb.target_epoch(group.group_id, epoch))
    return new_targets
