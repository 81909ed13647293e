"""A sticky, balanced client-side assignor with a rack-aware option.

What Kafka's server assignors do not offer (KAFKA-19387: no rack awareness in the uniform
assignor) and what its classic `StickyAssignor` / `CooperativeStickyAssignor` did (KIP-54,
KIP-429, rack awareness from KIP-881), computed from what PrepareAssignment returns:

1. every partition of a subscribed topic is assigned to exactly one member that subscribes to it;
2. a member keeps what its current target gives it (stickiness) while the topic and its
   subscription still hold;
3. the result is balanced: no partition could move from a member to another member that may take
   it and holds two or more fewer partitions;
4. rack-aware: a member's rack is its heartbeat's RackId (a classic member's, its subscription's
   RackId), a partition's racks are those of its replicas (TopicInfo.partition_racks, which the
   driver fills from a Metadata request: each replica's broker rack). A partition with racks, some
   eligible member in one of them, goes to such a member unless balance forbids it; a kept
   partition on a member in another rack is given up when a member in its rack can take it.
   Balance comes first (as in KIP-881). Partitions without racks, and clusters whose brokers name
   no rack (groupshift's own data plane), are assigned as without the option.

Deterministic: the same group state gives the same assignment on every member.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence

from consumer_membership.assignor import Assignor, GroupAssignment, GroupState, MemberAssignment, TopicInfo

Partition = tuple[uuid.UUID, int]


class _Placement:
    """The assignment under construction: member -> partitions, partition -> member."""

    def __init__(self, members: Sequence[str]) -> None:
        self.order = {m: i for i, m in enumerate(members)}
        self.of: dict[str, set[Partition]] = {m: set() for m in members}
        self.owner: dict[Partition, str] = {}

    def put(self, p: Partition, m: str) -> None:
        old = self.owner.get(p)
        if old is not None:
            self.of[old].discard(p)
        self.owner[p] = m
        self.of[m].add(p)

    def count(self, m: str) -> int:
        return len(self.of[m])


def balanced_sticky(
    members: Sequence[str],
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    topics: Mapping[uuid.UUID, TopicInfo],
    keep: Iterable[tuple[str, Partition]],
    *,
    member_racks: Mapping[str, str | None] | None = None,
) -> dict[str, dict[uuid.UUID, tuple[int, ...]]]:
    """The assignment of `topics`' partitions to `members` (group order). `keep`: (member,
    partition) claims in priority order, honoured when valid and not already taken. With
    `member_racks`, the rack-aware rules of the module docstring apply."""
    racks = member_racks or {}
    place = _Placement(members)
    eligible: dict[Partition, list[str]] = {}
    partition_racks: dict[Partition, frozenset[str]] = {}
    for tid in sorted(topics, key=lambda t: (topics[t].name, str(t))):
        info = topics[tid]
        subscribers = [m for m in members if tid in subscriptions.get(m, frozenset())]
        if not subscribers:
            continue
        for index in range(info.num_partitions):
            eligible[(tid, index)] = subscribers
            known = info.partition_racks
            rs = (
                known[index]
                if member_racks is not None and known is not None and index < len(known)
                else None
            )
            if rs is not None and any(racks.get(m) in rs for m in subscribers):
                partition_racks[(tid, index)] = rs

    def matches(m: str, p: Partition) -> bool:
        rs = partition_racks.get(p)
        return rs is None or racks.get(m) in rs

    total = len(eligible)
    ceiling = -(-total // len(members)) if members else 0
    for m, p in keep:
        valid = p in eligible and p not in place.owner and m in place.of and m in eligible[p]
        if valid and matches(m, p) and place.count(m) < ceiling:
            place.put(p, m)

    for p in sorted(set(eligible) - set(place.owner), key=lambda q: (topics[q[0]].name, q[1])):
        candidates = eligible[p]
        low = min(place.count(m) for m in candidates)
        best = min(
            candidates,
            key=lambda m: (place.count(m) > low, not matches(m, p), place.count(m), place.order[m]),
        )
        place.put(p, best)

    _balance(place, eligible, matches)
    if partition_racks:
        _place_by_rack(place, eligible, partition_racks, racks)
    return {
        m: {
            tid: tuple(sorted(p for t, p in place.of[m] if t == tid))
            for tid in sorted({t for t, _ in place.of[m]}, key=str)
        }
        for m in members
    }


def _balance(
    place: _Placement, eligible: Mapping[Partition, list[str]], matches: Callable[[str, Partition], bool]
) -> None:
    """Moves partitions from the fullest members to the emptiest ones that may take them until
    no move lowers a difference of two or more (each move lowers the sum of squared counts, so
    the loop ends)."""
    while True:
        by_count = sorted(place.of, key=lambda m: (-place.count(m), place.order[m]))
        moved = False
        for a in by_count:
            for b in reversed(by_count):
                if place.count(a) - place.count(b) <= 1:
                    break
                movable = [p for p in place.of[a] if b in eligible[p]]
                if movable:
                    p = min(movable, key=lambda q: (not matches(b, q), matches(a, q), q[1], str(q[0])))
                    place.put(p, b)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return


def _place_by_rack(
    place: _Placement,
    eligible: Mapping[Partition, list[str]],
    partition_racks: Mapping[Partition, frozenset[str]],
    racks: Mapping[str, str | None],
) -> None:
    """Swaps that raise the number of rack-local partitions without changing any count: a
    partition on a member outside its racks trades places with a partition of a member inside
    them, when each may take the other's. Bounded: each swap adds at least one local partition."""

    def local(m: str, p: Partition) -> bool:
        rs = partition_racks.get(p)
        return rs is not None and racks.get(m) in rs

    improved = True
    while improved:
        improved = False
        for p in sorted(partition_racks, key=lambda q: (str(q[0]), q[1])):
            a = place.owner.get(p)
            if a is None or local(a, p):
                continue
            for b in eligible[p]:
                if b == a or not local(b, p):
                    continue
                for q in sorted(place.of[b], key=lambda x: (str(x[0]), x[1])):
                    if a in eligible[q] and local(a, q) + 1 > local(b, q):
                        place.put(p, b)
                        place.put(q, a)
                        improved = True
                        break
                if improved:
                    break
            if improved:
                break


class StickyAssignor(Assignor):
    """`sticky` (the name may be changed): balanced, sticky over the current target, rack-aware
    when `rack_aware` (then the driver fetches partition racks before each computation).
    `minimum_version` / `maximum_version` / `metadata_version` are this member's range and the
    version of its (empty) metadata: the coordinator chooses the member whose range covers every
    member's version."""

    def __init__(
        self,
        *,
        rack_aware: bool = False,
        name: str = "sticky",
        minimum_version: int = 0,
        maximum_version: int = 0,
        metadata_version: int = 0,
    ) -> None:
        self.name = name
        self.rack_aware = rack_aware
        self.uses_partition_racks = rack_aware
        self.minimum_version = minimum_version
        self.maximum_version = maximum_version
        self.metadata_version = metadata_version
        self.check()

    def assign(self, group: GroupState) -> GroupAssignment:
        members = [m.member_id for m in group.members]
        keep = [
            (m.member_id, (tid, p))
            for m in group.members
            for tid, parts in sorted(m.target.items(), key=lambda kv: str(kv[0]))
            for p in parts
        ]
        plan = balanced_sticky(
            members,
            {m.member_id: m.subscribed_topic_ids for m in group.members},
            group.topics,
            keep,
            member_racks={m.member_id: m.rack_id for m in group.members} if self.rack_aware else None,
        )
        return {m: MemberAssignment(parts, self.metadata_version) for m, parts in plan.items()}
