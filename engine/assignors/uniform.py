"""The `uniform` server assignor (KIP-848 "Assignment Process"; Kafka's `UniformAssignor` with its
`UniformHomogeneousAssignmentBuilder` and the KAFKA-17710 `UniformHeterogeneousAssignmentBuilder`).

`uniform` is the default server assignor, so it runs on every rebalance of every consumer group
and a 10,000-member group must get its new target in tens of milliseconds of pure Python. That is
why both builders move whole runs of partitions (ranges and tuple slices) instead of single
partitions, look at a member's previous target only to decide how much of it the member keeps,
and hand a member whose target does not change its own object back, so the caller writes no
record for it and nothing is copied.

Balance comes before stickiness, as in Kafka: the target is as even as the subscriptions allow,
and within that every member keeps what it already had, its oldest partitions first.

Previous targets are trusted to name existing partitions only (`partition < num_partitions`):
Kafka never shrinks a topic, and a re-created topic gets a new id.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import chain

from engine.assignment import Assignment, same
from engine.assignors.base import (
    GroupSpec,
    MemberSubscription,
    PartitionAssignorError,
    SubscriptionType,
    TopicDescriber,
)
from engine.metadata import TopicId

# A run of partitions of one topic waiting for an owner: a `range` when it is contiguous (always
# the case for a topic nobody held before), otherwise a tuple. Slicing either is C-speed.
Run = tuple[TopicId, Sequence[int]]

# Kafka's heterogeneous builder gives up after this many balancing passes over the topics: with
# overlapping, non-identical subscriptions each pass roughly halves the imbalance, and the last
# few partitions are not worth an unbounded loop.
MAX_BALANCING_PASSES = 16

# Kafka orders topic ids as two *signed* 64-bit halves (`Uuid.compareTo`). Flipping the sign bit
# of both halves turns that order into plain unsigned order on the 128-bit integer.
_SIGNED_HALVES = (1 << 127) | (1 << 63)


def kafka_topic_order(topic_id: TopicId) -> int:
    """Sort key giving topic ids in Kafka's `Uuid.compareTo` order."""
    return topic_id.int ^ _SIGNED_HALVES


class UniformAssignor:
    """Spreads partitions evenly over the members, sticking to the previous target."""

    name = "uniform"

    def assign(self, spec: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
        if not spec.members:
            return {}
        if spec.subscription_type is SubscriptionType.HOMOGENEOUS:
            return assign_homogeneous(spec, topics)
        return HeterogeneousBuilder(spec, topics).build()


def num_partitions(topics: TopicDescriber, topic_id: TopicId) -> int:
    count = topics.num_partitions(topic_id)
    if count < 0:
        raise PartitionAssignorError(
            f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata."
        )
    return count


def nothing_assigned(members: Mapping[str, MemberSubscription]) -> dict[str, Assignment]:
    """Everyone gets nothing; a member that already had nothing keeps its own object."""
    return {
        member_id: m.assignment if not any(m.assignment.values()) else {} for member_id, m in members.items()
    }


# --------------------------------------------------------------------------------------------
# Homogeneous groups: every member subscribes to the same topics.
# --------------------------------------------------------------------------------------------


def assign_homogeneous(spec: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
    """Quota first, then stickiness, then fill (Kafka's homogeneous builder).

    With `total` partitions and `n` members every member's quota is `total // n`, and the first
    `total % n` members in group order get one more: joiners come last in group order, so the
    members that have been there longest carry the extra partitions and a join does not move
    them around. Each member keeps up to its quota of what it held, in
    the order it acquired it; the excess joins the partitions nobody held, and those are dealt
    out, in order, to the members below quota, filling each one before moving on.

    Kafka walks the subscribed topics in hash-set order. We walk them in Kafka's topic-id order
    instead, so the same group always gets the same target.
    """
    members = spec.members
    subscribed = next(iter(members.values())).subscribed_topic_ids
    if not subscribed:
        return nothing_assigned(members)
    order = sorted(subscribed, key=kafka_topic_order)
    counts = [num_partitions(topics, t) for t in order]
    min_quota, extra = divmod(sum(counts), len(members))

    result: dict[str, Assignment] = {}
    revoked: list[Run] = []
    below_quota: list[tuple[str, Assignment, int]] = []
    held = 0
    quota = min_quota + 1
    for index, (member_id, member) in enumerate(members.items()):
        if index == extra:
            quota = min_quota
        kept, room, member_held = keep_within_quota(member.assignment, subscribed, quota, revoked)
        held += member_held
        result[member_id] = kept
        if room:
            below_quota.append((member_id, kept, room))

    previously_held = held_partitions(spec, order, held)
    runs = never_assigned(order, counts, previously_held)
    runs.extend(revoked)
    hand_out(runs, below_quota, result)
    return result


def keep_within_quota(
    previous: Assignment, subscribed: Collection[TopicId], quota: int, revoked: list[Run]
) -> tuple[Assignment, int, int]:
    """What a member keeps of its previous target: `(kept, room left, partitions it held)`.

    The member keeps partitions of subscribed topics in the order it acquired them (topics in
    its assignment's order, partitions in tuple order) until its quota is reached, so the ones it
    gives up are the ones it got last: a member that just received partitions is the one that
    gives them up again when the group grows back, which keeps the number of moves down (the
    KIP's "Online Migration" case). Partitions past the quota are appended to `revoked`;
    partitions of topics the group no longer subscribes to are dropped.

    Returns `previous` itself when nothing has to go, which is the common case.
    """
    if not previous:
        return previous, quota, 0
    room = quota
    held = 0
    must_change = False
    for topic_id, parts in previous.items():
        if topic_id in subscribed:
            count = len(parts)
            held += count
            if count <= room:
                room -= count
            else:
                room = 0
                must_change = True
        elif parts:
            must_change = True
    if not must_change:
        return previous, room, held

    kept: dict[TopicId, tuple[int, ...]] = {}
    room = quota
    for topic_id, parts in previous.items():
        if not parts or topic_id not in subscribed:
            continue
        if len(parts) <= room:
            kept[topic_id] = parts
            room -= len(parts)
        else:
            if room:
                kept[topic_id] = parts[:room]
            revoked.append((topic_id, parts[room:]))
            room = 0
    return kept, room, held


def held_partitions(spec: GroupSpec, order: Sequence[TopicId], held: int) -> list[Collection[int] | None]:
    """Per topic of `order`: the partitions some member held in the previous target.

    This is the inverted target (`GroupSpec.is_partition_assigned`, as Kafka uses it), which makes
    the common case free. The inverted target must agree with the members' previous targets; when
    it does not hold as many partitions as they do (for instance it still lists a member that is
    no longer in the spec), we rebuild the sets from the members instead, where Kafka would leave
    that member's partitions unassigned.
    """
    inverted: list[Collection[int] | None] = [spec.inverted.get(t) for t in order]
    if sum(len(parts) for parts in inverted if parts) == held:
        return inverted
    wanted = {t: i for i, t in enumerate(order)}
    rebuilt: list[set[int]] = [set() for _ in order]
    for member in spec.members.values():
        for topic_id, parts in member.assignment.items():
            index = wanted.get(topic_id)
            if index is not None:
                rebuilt[index].update(parts)
    return list(rebuilt)


def never_assigned(
    order: Sequence[TopicId], counts: Sequence[int], held: Sequence[Collection[int] | None]
) -> list[Run]:
    """The partitions nobody held, topic by topic in `order`, each in ascending order."""
    runs: list[Run] = []
    for topic_id, count, taken in zip(order, counts, held, strict=True):
        if not taken:
            if count:
                runs.append((topic_id, range(count)))
        elif len(taken) < count:
            missing = sorted(set(range(count)).difference(taken))
            if missing:
                runs.append((topic_id, tuple(missing)))
    return runs


def hand_out(
    runs: Sequence[Run],
    below_quota: Iterable[tuple[str, Assignment, int]],
    result: dict[str, Assignment],
) -> None:
    """Deal `runs` out in order to the members below quota, filling each before the next.

    A member's new partitions are appended after the ones it kept, in the order dealt.
    """
    run_index = 0
    offset = 0
    for member_id, kept, room in below_quota:
        if run_index == len(runs):
            break
        topic_id, parts = runs[run_index]
        if not kept and len(parts) - offset >= room:
            # The common case in a new or growing group: one slice of one run, one dict entry
            # built directly (one UUID hash, a Python call, instead of two).
            result[member_id] = {topic_id: tuple(parts[offset : offset + room])}
            offset += room
            if offset == len(parts):
                run_index += 1
                offset = 0
            continue
        target = dict(kept)
        while room and run_index < len(runs):
            topic_id, parts = runs[run_index]
            piece = tuple(parts[offset : offset + room])
            current = target.get(topic_id)
            target[topic_id] = current + piece if current else piece
            room -= len(piece)
            offset += len(piece)
            if offset == len(parts):
                run_index += 1
                offset = 0
        result[member_id] = target
    if run_index < len(runs):
        # Only possible when the inputs disagree, e.g. previous targets that overlap.
        raise PartitionAssignorError("Partitions were left unassigned")


# --------------------------------------------------------------------------------------------
# Heterogeneous groups: members subscribe to different topics.
# --------------------------------------------------------------------------------------------


class LoadRanges:
    """The least- and most-loaded subscribers of one topic (Kafka's `MemberAssignmentBalancer`).

    Subscribers are sorted by load (ties by member index). The least-loaded range is a prefix
    whose members all share one load: it hands out one partition to each in turn, and only when
    all of them are one higher does it grow to take in the next members with that load. The
    most-loaded range is the mirror image at the other end, giving partitions up. Taking turns
    like this keeps a topic's partitions spread instead of piling onto one member, and the loads
    of the two ranges tell when moving another partition would no longer improve balance.
    Loads are read live from `sizes`, which the caller updates as partitions move.
    """

    __slots__ = (
        "_high_end",
        "_high_level",
        "_high_next",
        "_high_start",
        "_low_end",
        "_low_level",
        "_low_next",
        "_order",
        "_sizes",
    )

    def __init__(self, sizes: list[int]) -> None:
        self._sizes = sizes
        self._order: list[int] = []
        self._low_end = self._low_level = self._low_next = 0
        self._high_start = self._high_end = self._high_level = self._high_next = 0

    def reset(self, subscribers: Sequence[int]) -> int:
        """Start over with `subscribers`; returns the load gap between the extremes."""
        sizes = self._sizes
        order = self._order = sorted(subscribers, key=sizes.__getitem__)
        lowest = sizes[order[0]]
        highest = sizes[order[-1]]
        self._low_end = 0
        self._low_level = lowest - 1
        self._low_next = 0
        self._high_start = self._high_end = len(order)
        self._high_level = highest + 1
        self._high_next = len(order) - 1
        return highest - lowest

    def next_least_loaded(self) -> int:
        """The member to receive the next partition (counts it as received)."""
        if self._low_next >= self._low_end:
            sizes, order = self._sizes, self._order
            self._low_level += 1
            end = self._low_end
            while end < len(order) and sizes[order[end]] == self._low_level:
                end += 1
            self._low_end = end
            self._low_next = 0
        member = self._order[self._low_next]
        self._low_next += 1
        return member

    def next_most_loaded(self) -> int:
        """The member to give up the next partition, or -1 when nobody is left to ask."""
        if self._high_next < self._high_start:
            sizes, order = self._sizes, self._order
            start = self._high_start
            if self._high_end <= start and start > 0:
                # Every member of the range was excluded: restart from the next lower load.
                self._high_level = sizes[order[start - 1]]
            else:
                self._high_level -= 1
            while start > 0 and sizes[order[start - 1]] == self._high_level:
                start -= 1
            self._high_start = start
            self._high_next = self._high_end - 1
        if self._high_next < 0:
            return -1
        member = self._order[self._high_next]
        self._high_next -= 1
        return member

    def exclude_most_loaded(self) -> None:
        """Drop the member `next_most_loaded` just returned: it has nothing left to give."""
        order = self._order
        at = self._high_next + 1
        last = self._high_end - 1
        order[at], order[last] = order[last], order[at]
        self._high_end = last

    def balanced(self) -> bool:
        return self._high_level - self._low_level <= 1


class HeterogeneousBuilder:
    """Kafka's KAFKA-17710 heterogeneous builder: revoke, deal out, then rebalance.

    1. A member loses the partitions of topics it no longer subscribes to and keeps the rest.
    2. Partitions nobody holds are dealt out topic by topic, the topics ordered by partitions per
       subscriber (descending), subscriber count (ascending), topic id: the topics with the least
       freedom go first. Within a topic the least-loaded subscribers take turns (`LoadRanges`).
    3. Partitions then move from the most- to the least-loaded subscribers of each topic until
       a whole pass over the topics moves nothing, or `MAX_BALANCING_PASSES` passes.
    4. (Ours, see below) members get back their oldest partitions where balancing left them
       newer ones instead (`restore_oldest`).

    Deviation from Kafka, forced by the assignor contract that a member keeps its oldest
    partitions: a giver gives up its most recently acquired partition, where Kafka (holding
    partitions in sets) gives up its highest-numbered one; and step 4. Neither changes how many
    partitions of which topic any member ends up with, only which ones.

    Members and subscribed topics are numbered (members by their position in the spec), so the
    bookkeeping is lists and int-keyed dicts: hashing a `UUID` is a Python call, which we pay
    once per entry of the result and not on every step. Loads (`sizes`) are indexed by member
    number; a topic's subscribers are ascending member numbers.
    """

    __slots__ = (
        "_added",
        "_base",
        "_counts",
        "_live",
        "_members",
        "_moved",
        "_sizes",
        "_subscribers",
        "_topics",
        "_version",
    )

    def __init__(self, spec: GroupSpec, topics: TopicDescriber) -> None:
        self._members = list(spec.members.items())
        self._sizes = [0] * len(self._members)
        by_topic = subscribers_by_topic([m for _, m in self._members])
        self._topics = list(by_topic)
        self._subscribers = list(by_topic.values())
        self._counts = [num_partitions(topics, t) for t in self._topics]
        # What each member holds: `_base` (its previous target minus unsubscribed topics), then
        # the runs dealt to it in step 2 (`_added`), and, once a topic of it takes part in step 3,
        # that topic's partitions as an ordered set (`_live`), which supersedes the other two.
        self._base: list[Assignment] = []
        self._added: list[dict[int, list[Sequence[int]]] | None] = [None] * len(self._sizes)
        self._live: list[dict[int, dict[int, None]] | None] = [None] * len(self._sizes)
        self._version = 0  # bumped on every move in step 3; invalidates cached balance checks
        self._moved: dict[int, None] = {}  # topics step 3 moved partitions of, in order

    def build(self) -> dict[str, Assignment]:
        if not self._topics:
            return nothing_assigned(dict(self._members))
        held = self.revoke_unsubscribed()
        unassigned = self.never_assigned(held)
        for topic in sorted(unassigned, key=self.topic_key):
            self.deal(topic, unassigned[topic])
        self.balance()
        for topic in self._moved:
            self.restore_oldest(topic)
        return self.result()

    def topic_key(self, topic: int) -> tuple[float, int, int]:
        subscribers = len(self._subscribers[topic])
        per_subscriber = self._counts[topic] / subscribers
        return (-per_subscriber, subscribers, kafka_topic_order(self._topics[topic]))

    # step 1

    def revoke_unsubscribed(self) -> dict[TopicId, list[tuple[int, ...]]]:
        """Fill `_base` and `_sizes`; returns the kept partitions by topic."""
        held: dict[TopicId, list[tuple[int, ...]]] = {}
        sizes = self._sizes
        for index, (_, member) in enumerate(self._members):
            previous = member.assignment
            subscribed = member.subscribed_topic_ids
            must_change = False
            for topic_id, parts in previous.items():
                if topic_id in subscribed:
                    if parts:
                        sizes[index] += len(parts)
                        kept = held.get(topic_id)
                        if kept is None:
                            held[topic_id] = [parts]
                        else:
                            kept.append(parts)
                elif parts:
                    must_change = True
            if must_change:
                previous = {t: p for t, p in previous.items() if p and t in subscribed}
            self._base.append(previous)
        return held

    def never_assigned(self, held: Mapping[TopicId, list[tuple[int, ...]]]) -> dict[int, Sequence[int]]:
        unassigned: dict[int, Sequence[int]] = {}
        for topic, (topic_id, count) in enumerate(zip(self._topics, self._counts, strict=True)):
            kept = held.get(topic_id)
            if not kept:
                if count:
                    unassigned[topic] = range(count)
            elif sum(map(len, kept)) < count:
                missing = sorted(set(range(count)).difference(*kept))
                if missing:
                    unassigned[topic] = tuple(missing)
        return unassigned

    # step 2

    def deal(self, topic: int, parts: Sequence[int]) -> None:
        added = self._added
        for member, piece in deal(self._sizes, self._subscribers[topic], parts):
            runs = added[member]
            if runs is None:
                added[member] = {topic: [piece]}
            else:
                pieces = runs.get(topic)
                if pieces is None:
                    runs[topic] = [piece]
                else:
                    pieces.append(piece)

    # step 3

    def balance(self) -> None:
        """Passes over the topics with two or more subscribers until one moves nothing.

        Like Kafka, a pass stops early when it comes back round to the last topic that moved
        something (or to the first topic, if nothing moved yet): every topic since then is
        known to be balanced.
        """
        order = sorted((t for t, subs in enumerate(self._subscribers) if len(subs) >= 2), key=self.topic_key)
        ranges = LoadRanges(self._sizes)
        checked: dict[int, tuple[int, int]] = {}
        last_moved = -1
        for _ in range(MAX_BALANCING_PASSES):
            for position, topic in enumerate(order):
                if position == last_moved:
                    return
                if self.balance_topic(topic, ranges, checked) or last_moved == -1:
                    last_moved = position

    def spread(self, subscribers: list[int], checked: dict[int, tuple[int, int]]) -> int:
        """Load gap between a topic's subscribers, cached per subscriber list until a move.

        Topics subscribed to by exactly the same members share one list, so a group with
        hundreds of topics per subscription checks each subscription once per pass.
        """
        cached = checked.get(id(subscribers))
        if cached is not None and cached[0] == self._version:
            return cached[1]
        loads = list(map(self._sizes.__getitem__, subscribers))
        gap = max(loads) - min(loads)
        checked[id(subscribers)] = (self._version, gap)
        return gap

    def balance_topic(self, topic: int, ranges: LoadRanges, checked: dict[int, tuple[int, int]]) -> int:
        """Move partitions of one topic from its most- to its least-loaded subscribers.

        A giver gives up only partitions it held when the topic's turn began, newest first.
        Returns the number of partitions moved.
        """
        subscribers = self._subscribers[topic]
        if self.spread(subscribers, checked) <= 1:
            return 0
        ranges.reset(subscribers)
        givable: dict[int, list[int]] = {}
        received: dict[int, set[int]] = {}
        moved = 0
        while not ranges.balanced():
            while True:
                giver = ranges.next_most_loaded()
                if giver < 0:
                    return moved
                parts = givable.get(giver)
                if parts is None:
                    parts = givable[giver] = self.givable(giver, topic, received.get(giver))
                if parts:
                    break
                ranges.exclude_most_loaded()
            partition = parts.pop()
            taker = ranges.next_least_loaded()
            if ranges.balanced():
                break
            self.move(topic, partition, giver, taker)
            got = received.get(taker)
            if got is None:
                received[taker] = {partition}
            else:
                got.add(partition)
            moved += 1
        return moved

    def givable(self, member: int, topic: int, received: set[int] | None) -> list[int]:
        held = self.live(member, topic)
        if not received:
            return list(held)
        return [p for p in held if p not in received]

    def live(self, member: int, topic: int) -> dict[int, None]:
        """The member's partitions of `topic` as an ordered set it can lose and gain."""
        live = self._live[member]
        if live is None:
            live = self._live[member] = {}
        parts = live.get(topic)
        if parts is None:
            added = self._added[member]
            runs = added.pop(topic, ()) if added else ()
            before = self._base[member].get(self._topics[topic], ())
            parts = live[topic] = dict.fromkeys(chain(before, *runs))
        return parts

    def move(self, topic: int, partition: int, giver: int, taker: int) -> None:
        del self.live(giver, topic)[partition]
        self.live(taker, topic)[partition] = None
        self._sizes[giver] -= 1
        self._sizes[taker] += 1
        self._version += 1
        self._moved[topic] = None

    # step 4

    def restore_oldest(self, topic: int) -> None:
        """Swap partitions so that every member keeps the oldest of its previous partitions.

        Balancing passes can take a partition from a member on one pass and hand another of
        its old partitions back on a later one, so it may end up keeping a newer partition
        while an older one went elsewhere. The member that holds the older one now did not
        hold either before (a partition had one previous owner), so swapping the two costs it
        nothing, keeps every load, and gives the member its oldest partitions back.
        """
        topic_id = self._topics[topic]
        holders = [m for m in self._subscribers[topic] if (live := self._live[m]) and topic in live]
        owner: dict[int, int] = {}
        for member in holders:
            owner.update(dict.fromkeys(self.live(member, topic), member))
        for member in holders:
            before = self._base[member].get(topic_id)
            if not before:
                continue
            parts = self.live(member, topic)
            keeps = sum(p in parts for p in before)
            lost = [p for p in before[:keeps] if p not in parts]
            newer = [p for p in before[keeps:] if p in parts]
            for old, new in zip(lost, newer, strict=False):  # same length unless input repeats
                if owner.get(old) is None:
                    continue  # only when previous targets overlapped: leave it be
                other = self.live(owner[old], topic)
                del other[old]
                other[new] = None
                owner[new] = owner[old]
                del parts[new]
                parts[old] = None
                owner[old] = member

    # result

    def result(self) -> dict[str, Assignment]:
        result: dict[str, Assignment] = {}
        topics = self._topics
        for index, (member_id, member) in enumerate(self._members):
            added = self._added[index]
            live = self._live[index]
            base = self._base[index]
            if not added and live is None:
                result[member_id] = base
                continue
            if not added:
                target = dict(base)
            elif not base:
                # A member that starts from nothing: one C-level pass over its new runs.
                target = dict(
                    zip(
                        map(topics.__getitem__, added),
                        map(tuple, map(chain.from_iterable, added.values())),
                        strict=True,
                    )
                )
            else:
                target = dict(base)
                for topic, runs in added.items():
                    topic_id = topics[topic]
                    piece = tuple(chain.from_iterable(runs))
                    current = target.get(topic_id)
                    target[topic_id] = current + piece if current else piece
            if live is not None:
                for topic, parts in live.items():
                    topic_id = topics[topic]
                    if parts:
                        target[topic_id] = oldest_first(base.get(topic_id, ()), parts)
                    else:
                        target.pop(topic_id, None)
                if same(member.assignment, target):
                    # Balancing gave back exactly what the member had.
                    result[member_id] = member.assignment
                    continue
            result[member_id] = target
        return result


def oldest_first(before: tuple[int, ...], parts: Mapping[int, None]) -> tuple[int, ...]:
    """`parts` with the ones also in `before` first, in `before`'s order, then the rest."""
    if not before:
        return tuple(parts)
    held = set(before)
    return tuple(chain((p for p in before if p in parts), (p for p in parts if p not in held)))


def deal(
    sizes: list[int], subscribers: Sequence[int], parts: Sequence[int]
) -> list[tuple[int, Sequence[int]]]:
    """Deal `parts` to `subscribers`, least-loaded first, taking turns; updates `sizes`.

    Same outcome as asking `LoadRanges.next_least_loaded` once per partition, computed per
    stretch between two growths of the least-loaded range instead: while that range is `width`
    members wide, the member in turn position `j` gets every `width`-th partition from `j`,
    which is one slice. Returns `(member, partitions)` pairs in dealing order.
    """
    order = sorted(subscribers, key=sizes.__getitem__)
    dealt_to: list[tuple[int, Sequence[int]]] = []
    total = len(parts)
    dealt = 0
    width = 0
    level = sizes[order[0]]
    while dealt < total:
        while width < len(order) and sizes[order[width]] == level:
            width += 1
        if width < len(order):
            next_level = sizes[order[width]]
            stop = min(total, dealt + (next_level - level) * width)
        else:
            next_level = level
            stop = total
        turns = min(width, stop - dealt)
        takers = order[:turns]
        pieces = [parts[first:stop:width] for first in range(dealt, dealt + turns)]
        dealt_to.extend(zip(takers, pieces, strict=True))
        rounds, extra = divmod(stop - dealt, width)
        for member in takers[:extra]:
            sizes[member] += rounds + 1
        if rounds:
            for member in takers[extra:]:
                sizes[member] += rounds
        dealt = stop
        level = next_level
    return dealt_to


def subscription_groups(
    members: Sequence[MemberSubscription],
) -> tuple[list[tuple[frozenset[TopicId], list[int]]], dict[TopicId, list[int]]]:
    """Members grouped by subscription `(topic ids, member numbers)`, and topic id -> the numbers
    of the groups subscribed to it, ascending.

    Grouping compares the identities of the topic-id objects (C-speed) rather than hashing
    `UUID`s (a Python call each): members whose equal subscriptions were built from different
    `UUID` objects land in different groups, which costs a little speed and nothing else.
    """
    groups: list[tuple[frozenset[TopicId], list[int]]] = []
    by_object: dict[int, list[int]] = {}
    by_identity: dict[frozenset[int], list[int]] = {}
    for index, member in enumerate(members):
        subscribed = member.subscribed_topic_ids
        if not subscribed:
            continue
        numbers = by_object.get(id(subscribed))
        if numbers is None:
            identity = frozenset(map(id, subscribed))
            numbers = by_identity.get(identity)
            if numbers is None:
                numbers = by_identity[identity] = []
                groups.append((subscribed, numbers))
            by_object[id(subscribed)] = numbers
        numbers.append(index)

    groups_of_topic: dict[TopicId, list[int]] = {}
    for group, (subscribed, _) in enumerate(groups):
        for topic_id in subscribed:
            of_topic = groups_of_topic.get(topic_id)
            if of_topic is None:
                groups_of_topic[topic_id] = [group]
            else:
                of_topic.append(group)

    return groups, groups_of_topic


def subscribers_by_topic(members: Sequence[MemberSubscription]) -> dict[TopicId, list[int]]:
    """Topic id -> the numbers of the members subscribed to it, ascending.

    Members are first grouped by subscription (`subscription_groups`), so the per-topic work is
    per distinct subscription rather than per member. Topics with the same subscribers share one
    list.
    """
    groups, groups_of_topic = subscription_groups(members)
    shared: dict[tuple[int, ...], list[int]] = {}
    subscribers: dict[TopicId, list[int]] = {}
    for topic_id, of_topic in groups_of_topic.items():
        key = tuple(of_topic)
        numbers = shared.get(key)
        if numbers is None:
            if len(of_topic) == 1:
                numbers = groups[of_topic[0]][1]
            else:
                numbers = sorted(chain.from_iterable(groups[g][1] for g in of_topic))
            shared[key] = numbers
        subscribers[topic_id] = numbers
    return subscribers
