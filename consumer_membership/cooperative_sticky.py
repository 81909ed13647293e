"""`cooperative-sticky` as a client-side assignor: the KAFKA-18134 online upgrade.

A classic consumer group whose members use the `cooperative-sticky` protocol (Java's
`CooperativeStickyAssignor`, librdkafka's `cooperative-sticky`) cannot move to KIP-848 on Kafka
4.x when it relies on the assignor's client-side state: Kafka refuses the upgrade (KAFKA-18134).
On groupshift (KIP-848's "Supporting Online Consumer Group Upgrade" with a client assignor) a
consumer-protocol member whose client assignor is named `cooperative-sticky` and reads metadata
version -1 joins the classic group, the group converts, and this member computes the assignment
of the whole group, classic members included, which keep consuming until they are replaced.

What it reads of a classic member (metadata version -1: its ConsumerProtocolSubscription, the
`Subscription` of Kafka's ConsumerProtocol, v0-v3):

* the owned partitions (v1+) and the generation (v2+), or, from a subscription without them,
  the assignor's `userData`: the generation alone (Java's CooperativeStickyAssignor: an int32),
  or the previous assignment and the generation (librdkafka's and Java's `StickyAssignor`
  StickyAssignorUserData v1: [topic [partition]] generation; v0 has no generation);
* the rack id (v3), when PrepareAssignment names none.

A member's current target (PrepareAssignment) comes first; what a classic member claims counts
only for a partition no target holds, the highest generation first (as the classic assignor
resolves two members claiming one partition). The rest is `sticky.balanced_sticky`.
Consumer-protocol members of this assignor send metadata version 0, empty: their stickiness is
their target.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from consumer_membership.assignor import Assignor, GroupAssignment, GroupState, MemberAssignment, MemberInfo
from consumer_membership.sticky import Partition, balanced_sticky
from translation.embedded_protocol import SchemaError, parse_subscription

NAME = "cooperative-sticky"
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class ClassicClaim:
    """What a classic member's subscription says it owns, and at which generation."""

    owned: tuple[tuple[str, tuple[int, ...]], ...]
    generation: int
    rack_id: str | None


def read_sticky_user_data(data: bytes) -> tuple[tuple[tuple[str, tuple[int, ...]], ...], int] | None:
    """(previous assignment, generation) from a sticky assignor's userData, None when the bytes
    are none of its formats. 4 bytes: the generation alone (CooperativeStickyAssignor); otherwise
    StickyAssignorUserData: [topic string, [int32]] then, in v1, the generation (-1 in v0)."""
    if len(data) == 4:
        return (), int(_I32.unpack(data)[0])
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(data):
            raise ValueError("short")
        out = data[pos : pos + n]
        pos += n
        return out

    try:
        topics = []
        for _ in range(int(_I32.unpack(take(4))[0])):
            name = take(int(_I16.unpack(take(2))[0])).decode()
            n = int(_I32.unpack(take(4))[0])
            topics.append((name, tuple(int(_I32.unpack(take(4))[0]) for _ in range(n))))
        generation = int(_I32.unpack(take(4))[0]) if pos + 4 <= len(data) else -1
    except (ValueError, UnicodeDecodeError, struct.error):
        return None
    if pos != len(data):
        return None
    return tuple(topics), generation


def read_classic_claim(metadata: bytes) -> ClassicClaim | None:
    """A classic member's claim from its ConsumerProtocolSubscription; None when unreadable (the
    member then keeps only its target)."""
    try:
        sub = parse_subscription(metadata)
    except SchemaError:
        return None
    owned, generation = sub.owned_partitions, sub.generation_id
    if sub.user_data and (not owned or generation < 0):
        from_user_data = read_sticky_user_data(sub.user_data)
        if from_user_data is not None:
            owned = owned or from_user_data[0]
            generation = generation if generation >= 0 else from_user_data[1]
    return ClassicClaim(tuple(owned), generation, sub.rack_id)


class CooperativeStickyAdapter(Assignor):
    """The client-side `cooperative-sticky`: reads classic members' metadata (version -1) and its
    own members' (version 0); `rack_aware` as in `StickyAssignor`."""

    name = NAME
    minimum_version = -1
    maximum_version = 0
    metadata_version = 0

    def __init__(self, *, rack_aware: bool = False) -> None:
        self.rack_aware = rack_aware
        self.uses_partition_racks = rack_aware

    def assign(self, group: GroupState) -> GroupAssignment:
        by_name = {t.name: tid for tid, t in group.topics.items()}
        keep: list[tuple[str, Partition]] = [
            (m.member_id, (tid, p))
            for m in group.members
            for tid, parts in sorted(m.target.items(), key=lambda kv: str(kv[0]))
            for p in parts
        ]
        racks = {m.member_id: m.rack_id for m in group.members}
        claims: list[tuple[int, int, str, Partition]] = []
        for i, m in enumerate(group.members):
            claim = _claim(m)
            if claim is None:
                continue
            if racks[m.member_id] is None:
                racks[m.member_id] = claim.rack_id
            for topic, parts in claim.owned:
                tid = by_name.get(topic)
                if tid is not None:
                    claims += [(-claim.generation, i, m.member_id, (tid, p)) for p in parts]
        # Two members claiming one partition: only the highest generation's claim counts (the
        # other member's is stale, as the classic assignor decides).
        newest: dict[Partition, int] = {}
        for neg_generation, _, _, p in claims:
            newest[p] = min(newest.get(p, neg_generation), neg_generation)
        keep += [
            (mid, p)
            for neg_generation, _, mid, p in sorted(claims, key=lambda c: (c[0], c[1], c[3][1]))
            if neg_generation == newest[p]
        ]
        plan = balanced_sticky(
            [m.member_id for m in group.members],
            {m.member_id: m.subscribed_topic_ids for m in group.members},
            group.topics,
            keep,
            member_racks=racks if self.rack_aware else None,
        )
        return {m: MemberAssignment(parts, self.metadata_version) for m, parts in plan.items()}


def _claim(member: MemberInfo) -> ClassicClaim | None:
    return read_classic_claim(member.metadata) if member.is_classic else None


__all__ = ["NAME", "ClassicClaim", "CooperativeStickyAdapter", "read_classic_claim", "read_sticky_user_data"]
