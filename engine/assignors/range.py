"""The `range` server assignor (KIP-848 "Assignment Process"; Kafka's server-side `RangeAssignor`).

`range` exists for co-partitioning: consumers that join two topics need partition `i` of both on
the same member, which a balancing assignor does not promise. It is sticky only through its
deterministic member order: static members (sorted by instance id) come before dynamic ones
(sorted by member id), so a static member that restarts under a new member id gets its old
ranges back. It ignores previous targets otherwise, as Kafka's does; a dynamic member joining or
leaving can shift every range after it.

Members that subscribe to exactly the same topics get the same ranges of every topic with the
same partition count, so the work is done once per (subscription, partition count) and shared,
which keeps a 10,000-member group with hundreds of topics cheap in pure Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from operator import attrgetter

from engine.assignment import EMPTY, Assignment, same
from engine.assignors.base import (
    GroupSpec,
    MemberSubscription,
    PartitionAssignorError,
    SubscriptionType,
    TopicDescriber,
)
from engine.assignors.uniform import kafka_topic_order, subscription_groups
from engine.metadata import TopicId


class RangeAssignor:
    """Contiguous partition ranges per topic, members in static-then-dynamic order."""

    name = "range"

    def assign(self, spec: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
        if not spec.members:
            return {}
        members = list(spec.members.values())
        order = range_order(members)
        ranked = list(map(members.__getitem__, order))
        if spec.subscription_type is SubscriptionType.HOMOGENEOUS:
            # Kafka trusts the subscription type and reads the first sorted member's topics.
            everyone = list(range(len(ranked)))
            classes = [(everyone, sorted(ranked[0].subscribed_topic_ids, key=kafka_topic_order))]
        else:
            classes = topic_classes(ranked)
        targets: list[dict[TopicId, tuple[int, ...]]] = [{} for _ in ranked]
        for subscribers, topic_ids in classes:
            assign_class(subscribers, topic_ids, topics, targets)
        # Keyed in group order (updating a key keeps its place), filled in range order.
        member_ids = list(spec.members)
        result: dict[str, Assignment] = dict.fromkeys(member_ids, EMPTY)
        previous = map(attrgetter("assignment"), ranked)
        finals = map(keep_if_same, previous, targets)
        result.update(zip(map(member_ids.__getitem__, order), finals, strict=True))
        return result


def range_order(members: Sequence[MemberSubscription]) -> list[int]:
    """Indices of `members`: static members first by instance id, then dynamic by member id.

    Ids are compared as Java compares strings (UTF-16 code units), which differs from Python's
    code-point order only for characters outside the Basic Multilingual Plane.
    """
    static = [i for i, m in enumerate(members) if m.instance_id is not None]
    dynamic = [i for i, m in enumerate(members) if m.instance_id is None]
    return java_sorted(static, [members[i].instance_id or "" for i in static]) + java_sorted(
        dynamic, [members[i].member_id for i in dynamic]
    )


def java_sorted(items: list[int], ids: list[str]) -> list[int]:
    """`items` sorted by `ids` (parallel lists) in Java `String.compareTo` order."""
    keys: list[str] | list[bytes] = ids
    if not all(map(str.isascii, ids)) and any(max(i, default="") > "\uffff" for i in ids):
        # Java compares UTF-16 code units; big-endian UTF-16 bytes sort the same way.
        keys = [i.encode("utf-16-be") for i in ids]
    return [items[i] for i in sorted(range(len(items)), key=keys.__getitem__)]


def topic_classes(ranked: Sequence[MemberSubscription]) -> list[tuple[list[int], list[TopicId]]]:
    """Topics grouped by their exact set of subscribers: `(subscriber ranks, topic ids)`.

    Every topic of a class is divided among the same members in the same order, so a member's
    range of a topic depends only on the class and the topic's partition count. Classes and
    the topics within them come in Kafka's topic-id order, so equal inputs give equal dicts.
    """
    groups, groups_of_topic = subscription_groups(ranked)

    classes: dict[tuple[int, ...], list[TopicId]] = {}
    for topic_id in sorted(groups_of_topic, key=kafka_topic_order):
        classes.setdefault(tuple(groups_of_topic[topic_id]), []).append(topic_id)
    return [
        (sorted(chain.from_iterable(groups[g][1] for g in key)), topic_ids)
        for key, topic_ids in classes.items()
    ]


def assign_class(
    subscribers: Sequence[int],
    topic_ids: Sequence[TopicId],
    topics: TopicDescriber,
    targets: list[dict[TopicId, tuple[int, ...]]],
) -> None:
    """Give each subscriber, in order, its contiguous range of every topic of the class.

    With `n` partitions and `s` subscribers the first `n % s` subscribers get `n // s + 1`
    partitions and the rest `n // s`; the subscriber at position `i` therefore starts at
    `i * (n // s) + min(i, n % s)`. One tuple per distinct partition count is shared by all
    topics with that count.

    Topics of one count are kept as a template dict: `dict.fromkeys` and `dict.update` reuse
    the hashes a dict stores, while hashing a `UUID` afresh is a Python call.
    """
    by_count: dict[int, dict[TopicId, None]] = {}
    for topic_id in topic_ids:
        count = topics.num_partitions(topic_id)
        if count < 0:
            raise PartitionAssignorError(
                f"Member is subscribed to topic {topic_id} which doesn't exist in the topic metadata."
            )
        by_count.setdefault(count, {})[topic_id] = None
    members = len(subscribers)
    shapes = [(divmod(count, members), template) for count, template in by_count.items()]
    for position, member in enumerate(subscribers):
        target = targets[member]
        for (quota, extra), template in shapes:
            size = quota + 1 if position < extra else quota
            if size:
                start = position * quota + min(position, extra)
                ranges = dict.fromkeys(template, tuple(range(start, start + size)))
                if target:
                    target.update(ranges)
                else:
                    target = targets[member] = ranges


def keep_if_same(previous: Assignment, target: dict[TopicId, tuple[int, ...]]) -> Assignment:
    """The previous object when the member's partitions did not change (in any order).

    Previous targets computed by this assignor usually list the same topics in the same order,
    so the entries are compared pairwise first (no hashing, and since every new entry is a
    contiguous range, length and ends settle it); anything else takes the general comparison.
    """
    if previous == target:
        return previous
    if not previous:
        return target
    if len(previous) != len(target) and all(previous.values()):
        return target  # target has no empty entries either: the topics differ
    if len(previous) == len(target):
        pairs = zip(previous.items(), target.items(), strict=True)
        for (old_topic, old), (topic_id, parts) in pairs:
            if old_topic is not topic_id:
                break
            if old != parts and (len(old) != len(parts) or min(old) != parts[0] or max(old) != parts[-1]):
                # `parts` is a contiguous range, so equal length and ends mean equal sets.
                return target
        else:
            return previous
    return previous if same(previous, target) else target
