"""The client-side assignors of `consumer_membership` (docs/client-side-assignors.md, "The two
assignors"): the sticky one (balance, stickiness, heterogeneous subscriptions, the rack-aware
option) and the `cooperative-sticky` adapter reading classic members' metadata (version -1: the
KAFKA-18134 upgrade), with a property test that every assignment is complete, exclusive and
balanced."""

from __future__ import annotations

import struct
import uuid
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer_membership.assignor import GroupState, MemberInfo, TopicInfo
from consumer_membership.cooperative_sticky import (
    CooperativeStickyAdapter,
    read_classic_claim,
    read_sticky_user_data,
)
from consumer_membership.sticky import StickyAssignor
from translation.embedded_protocol import Subscription, serialize_subscription

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def member(
    mid: str,
    *topics: uuid.UUID,
    target: dict[uuid.UUID, tuple[int, ...]] | None = None,
    rack: str | None = None,
) -> MemberInfo:
    return MemberInfo(mid, None, rack, frozenset(topics or (T1,)), 0, b"", target or {})


def state(*members: MemberInfo, topics: tuple[TopicInfo, ...] = (TopicInfo(T1, "t1", 6),)) -> GroupState:
    return GroupState("g", 5, "sticky", members, {t.topic_id: t for t in topics})


def counts(plan: object) -> dict[str, int]:
    assert isinstance(plan, dict)
    return {m: sum(len(ps) for ps in a.partitions.values()) for m, a in plan.items()}


def owners(plan: object) -> Counter[tuple[uuid.UUID, int]]:
    assert isinstance(plan, dict)
    return Counter((t, p) for a in plan.values() for t, ps in a.partitions.items() for p in ps)


def test_sticky_balances_a_fresh_group_and_keeps_targets() -> None:
    plan = StickyAssignor().assign(state(member("a"), member("b"), member("c")))
    assert counts(plan) == {"a": 2, "b": 2, "c": 2}
    assert set(owners(plan)) == {(T1, p) for p in range(6)} and max(owners(plan).values()) == 1
    # a fourth member takes one partition from each of two members; nothing else moves
    before = {m: dict(a.partitions) for m, a in plan.items()}
    grown = StickyAssignor().assign(
        state(*(member(m, target=before[m]) for m in ("a", "b", "c")), member("d"))
    )
    assert sorted(counts(grown).values()) == [1, 1, 2, 2]
    for m in ("a", "b", "c"):
        assert set(grown[m].partitions.get(T1, ())) <= set(before[m][T1])


def test_sticky_with_heterogeneous_subscriptions() -> None:
    topics = (TopicInfo(T1, "t1", 4), TopicInfo(T2, "t2", 4))
    plan = StickyAssignor().assign(
        state(member("a", T1), member("b", T1, T2), member("c", T2), topics=topics)
    )
    assert set(plan["a"].partitions) <= {T1} and set(plan["c"].partitions) <= {T2}
    assert sorted(counts(plan).values()) == [2, 3, 3]
    assert len(owners(plan)) == 8 and max(owners(plan).values()) == 1


def test_sticky_drops_what_a_member_no_longer_subscribes_to() -> None:
    topics = (TopicInfo(T1, "t1", 2), TopicInfo(T2, "t2", 2))
    plan = StickyAssignor().assign(
        state(member("a", T1, target={T1: (0, 1), T2: (0, 1)}), member("b", T1, T2), topics=topics)
    )
    assert set(plan["a"].partitions) == {T1} and plan["b"].partitions == {T2: (0, 1)}


def test_rack_aware_places_partitions_in_their_racks() -> None:
    racks = tuple(frozenset({"r1" if p < 3 else "r2"}) for p in range(6))
    topics = (TopicInfo(T1, "t1", 6, racks),)
    group = state(member("a", rack="r1"), member("b", rack="r2"), topics=topics)
    plan = StickyAssignor(rack_aware=True).assign(group)
    assert plan["a"].partitions[T1] == (0, 1, 2) and plan["b"].partitions[T1] == (3, 4, 5)
    # without the option the same group is merely balanced (sorted order)
    plain = StickyAssignor().assign(group)
    assert plain["a"].partitions[T1] == (0, 2, 4)
    # kept partitions in the wrong rack move to a member of their rack
    misplaced = state(
        member("a", rack="r1", target={T1: (1, 3, 5)}),
        member("b", rack="r2", target={T1: (0, 2, 4)}),
        topics=topics,
    )
    fixed = StickyAssignor(rack_aware=True).assign(misplaced)
    assert fixed["a"].partitions[T1] == (0, 1, 2)


def test_rack_aware_keeps_balance_first() -> None:
    racks = tuple(frozenset({"r1"}) for _ in range(6))
    topics = (TopicInfo(T1, "t1", 6, racks),)
    plan = StickyAssignor(rack_aware=True).assign(
        state(member("a", rack="r1"), member("b", rack="r2"), topics=topics)
    )
    assert counts(plan) == {"a": 3, "b": 3}


@settings(max_examples=60, deadline=None)
@given(
    n_members=st.integers(1, 5),
    partitions=st.tuples(st.integers(0, 7), st.integers(0, 7)),
    subs=st.lists(st.sampled_from([(T1,), (T2,), (T1, T2)]), min_size=5, max_size=5),
    kept=st.lists(st.tuples(st.integers(0, 4), st.sampled_from([T1, T2]), st.integers(0, 9)), max_size=12),
    rack_aware=st.booleans(),
)
def test_every_assignment_is_complete_exclusive_and_balanced(
    n_members: int,
    partitions: tuple[int, int],
    subs: list[tuple[uuid.UUID, ...]],
    kept: list[tuple[int, uuid.UUID, int]],
    rack_aware: bool,
) -> None:
    topics = (
        TopicInfo(T1, "t1", partitions[0], tuple(frozenset({f"r{p % 2}"}) for p in range(partitions[0]))),
        TopicInfo(T2, "t2", partitions[1]),
    )
    targets: dict[int, dict[uuid.UUID, tuple[int, ...]]] = {}
    for i, t, p in kept:
        targets.setdefault(i, {})
        targets[i][t] = (*targets[i].get(t, ()), p)
    members = tuple(
        member(f"m{i}", *subs[i], target=targets.get(i), rack=f"r{i % 2}") for i in range(n_members)
    )
    plan = StickyAssignor(rack_aware=rack_aware).assign(state(*members, topics=topics))
    subscribed = {t for m in members for t in m.subscribed_topic_ids}
    expected = {(t.topic_id, p) for t in topics if t.topic_id in subscribed for p in range(t.num_partitions)}
    got = owners(plan)
    assert set(got) == expected and all(c == 1 for c in got.values())
    for m in members:
        assert set(plan[m.member_id].partitions) <= m.subscribed_topic_ids
    # balanced: no partition could move to a member holding two fewer that may take it
    c = counts(plan)
    for a in members:
        for b in members:
            if c[a.member_id] - c[b.member_id] >= 2:
                movable = [t for t in plan[a.member_id].partitions if t in b.subscribed_topic_ids]
                assert not movable, (a.member_id, b.member_id, c)


def classic(mid: str, metadata: bytes, rack: str | None = None) -> MemberInfo:
    return MemberInfo(mid, None, rack, frozenset({T1}), -1, metadata, {})


def test_adapter_keeps_classic_owned_partitions_by_generation() -> None:
    c1 = serialize_subscription(Subscription(2, ("t1",), None, (("t1", (0, 1, 2)),), generation_id=4))
    # a stale claim on partition 2 at an older generation loses to c1's
    c2 = serialize_subscription(Subscription(2, ("t1",), None, (("t1", (2, 3, 4, 5)),), generation_id=3))
    plan = CooperativeStickyAdapter().assign(
        GroupState(
            "g",
            5,
            "cooperative-sticky",
            (classic("c1", c1), classic("c2", c2), member("n")),
            {T1: TopicInfo(T1, "t1", 6)},
        )
    )
    assert set(plan["c1"].partitions[T1]) == {0, 1}
    assert set(plan["c2"].partitions[T1]) <= {3, 4, 5} and len(plan["c2"].partitions[T1]) == 2
    assert len(owners(plan)) == 6 and max(owners(plan).values()) == 1


def test_adapter_reads_sticky_user_data_formats() -> None:
    # Java CooperativeStickyAssignor: the generation alone
    assert read_sticky_user_data(struct.pack(">i", 9)) == ((), 9)
    # StickyAssignorUserData v1 (librdkafka, Java StickyAssignor): [topic [partition]] generation
    v1 = (
        struct.pack(">i", 1)
        + struct.pack(">h", 2)
        + b"t1"
        + struct.pack(">iii", 2, 4, 5)
        + struct.pack(">i", 7)
    )
    assert read_sticky_user_data(v1) == ((("t1", (4, 5)),), 7)
    assert read_sticky_user_data(v1[:-4]) == ((("t1", (4, 5)),), -1)  # v0: no generation
    assert read_sticky_user_data(b"\x00\x00\x00\x05garbage") is None
    # a v0 subscription carries its ownership in userData only
    sub = serialize_subscription(Subscription(0, ("t1",), v1))
    claim = read_classic_claim(sub)
    assert claim is not None and claim.owned == (("t1", (4, 5)),) and claim.generation == 7
    v3 = serialize_subscription(Subscription(3, ("t1",), None, (("t1", (1,)),), 2, "rack-x"))
    claim = read_classic_claim(v3)
    assert claim is not None and claim.rack_id == "rack-x" and claim.owned == (("t1", (1,)),)
    assert read_classic_claim(b"\xff\xff") is None


def test_assignor_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="minimum version above maximum"):
        StickyAssignor(minimum_version=3, maximum_version=1)
    with pytest.raises(ValueError, match="int16"):
        StickyAssignor(maximum_version=1 << 15)
