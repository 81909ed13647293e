"""Properties of the server assignors over random groups, topics and previous targets.

Previous targets are drawn two ways: arbitrary (any partition to any member or to nobody, in any
order, including topics a member no longer subscribes to or that no longer exist), and realistic
(the assignor's own output for an earlier membership, then members leave, join and topics grow).
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.assignment import Assignment, same
from engine.assignors.base import (
    Assignor,
    GroupSpec,
    MapTopicDescriber,
    MemberSubscription,
    SubscriptionType,
)
from engine.assignors.range import RangeAssignor
from engine.assignors.uniform import LoadRanges, UniformAssignor, deal
from engine.metadata import TopicId
from tests.assignor_specs import invert

UNIFORM = UniformAssignor()
RANGE = RangeAssignor()
HOMOGENEOUS = SubscriptionType.HOMOGENEOUS
HETEROGENEOUS = SubscriptionType.HETEROGENEOUS

# Ids on both sides of Kafka's signed comparison, plus one topic that is never in the metadata.
TOPICS = [uuid.UUID(int=(i << 120) | (0x80 << 56) | i) for i in (0x01, 0x95, 0x42, 0xF0)]
GONE = uuid.UUID(int=0xDEAD)

Case = tuple[GroupSpec, MapTopicDescriber]


def kind_of(subscriptions: Sequence[frozenset[TopicId]]) -> SubscriptionType:
    return HOMOGENEOUS if len(set(subscriptions)) <= 1 else HETEROGENEOUS


def make_spec(
    ids: Sequence[str],
    subscriptions: Sequence[frozenset[TopicId]],
    previous: Sequence[Assignment],
    instance_ids: Sequence[str | None] | None = None,
    kind: SubscriptionType | None = None,
) -> GroupSpec:
    instance_ids = instance_ids or [None] * len(ids)
    members = {
        mid: MemberSubscription(mid, iid, None, subs, prev)
        for mid, iid, subs, prev in zip(ids, instance_ids, subscriptions, previous, strict=True)
    }
    targets = {mid: m.assignment for mid, m in members.items()}
    return GroupSpec(members, kind or kind_of(subscriptions), invert(targets))


@st.composite
def arbitrary_groups(draw: st.DrawFn, homogeneous: bool | None = None) -> Case:
    topics = TOPICS[: draw(st.integers(1, len(TOPICS)))]
    counts = {t: draw(st.integers(0, 12)) for t in topics}
    n = draw(st.integers(1, 8))
    ids = draw(st.permutations([f"m{i}" for i in range(n)]))
    instance_ids = [draw(st.none() | st.just(f"i{(i * 7) % n}")) for i in range(n)]
    if homogeneous is None:
        homogeneous = draw(st.booleans())
    if homogeneous:
        everyone = frozenset(draw(st.sets(st.sampled_from(topics))))
        subscriptions = [everyone] * n
    else:
        subscriptions = [frozenset(draw(st.sets(st.sampled_from(topics)))) for _ in range(n)]

    # Previous owners: any member, subscribed or not, or nobody; some of a vanished topic too.
    owned: list[dict[TopicId, list[int]]] = [{} for _ in range(n)]
    for topic_id, count in [*counts.items(), (GONE, 2)]:
        for p in range(count):
            owner = draw(st.integers(-1, n - 1))
            if owner >= 0:
                owned[owner].setdefault(topic_id, []).append(p)
    previous: list[Assignment] = []
    for parts_by_topic in owned:
        topic_order = draw(st.permutations(list(parts_by_topic)))
        previous.append({t: tuple(draw(st.permutations(parts_by_topic[t]))) for t in topic_order})
    spec = make_spec(ids, subscriptions, previous, instance_ids)
    return spec, MapTopicDescriber(counts)


@st.composite
def evolved_groups(draw: st.DrawFn, assignor: Assignor, homogeneous: bool) -> Case:
    """The assignor's own target for one group, then some leave, some join, topics grow."""
    spec, topics = draw(arbitrary_groups(homogeneous=homogeneous))
    first = assignor.assign(spec, topics)
    members = list(spec.members.values())
    staying = [m for m in members if draw(st.booleans())] or members[:1]
    joining = draw(st.integers(0, 3))
    subs = members[0].subscribed_topic_ids
    new = [
        MemberSubscription(
            f"new{i}",
            None,
            None,
            subs if homogeneous else frozenset(draw(st.sets(st.sampled_from(TOPICS[:4])))),
            {},
        )
        for i in range(joining)
    ]
    everyone = [*staying, *new]
    counts = {t: topics.num_partitions(t) for t in TOPICS if topics.num_partitions(t) >= 0}
    for m in new:
        for t in m.subscribed_topic_ids:
            counts.setdefault(t, 3)
    counts = {t: c + draw(st.integers(0, 3)) for t, c in counts.items()}
    later = make_spec(
        [m.member_id for m in everyone],
        [m.subscribed_topic_ids for m in everyone],
        [first.get(m.member_id, {}) for m in everyone],
    )
    return later, MapTopicDescriber(counts)


def groups(assignor: Assignor, homogeneous: bool | None = None) -> st.SearchStrategy[Case]:
    if homogeneous is None:
        return arbitrary_groups() | evolved_groups(assignor, True) | evolved_groups(assignor, False)
    return arbitrary_groups(homogeneous) | evolved_groups(assignor, homogeneous)


# ------------------------------------------------------------------------------- checks


def owners(spec: GroupSpec, topics: MapTopicDescriber, result: Mapping[str, Assignment]) -> None:
    """Every subscribed partition goes to exactly one subscriber of its topic; nothing else."""
    seen: dict[tuple[TopicId, int], str] = {}
    for member_id, assignment in result.items():
        subscribed = spec.members[member_id].subscribed_topic_ids
        for topic_id, parts in assignment.items():
            assert isinstance(parts, tuple)
            if not parts:
                continue
            assert topic_id in subscribed, f"{member_id} got {topic_id} it does not subscribe to"
            for p in parts:
                assert 0 <= p < topics.num_partitions(topic_id)
                assert (topic_id, p) not in seen, f"{topic_id}-{p} assigned twice"
                seen[(topic_id, p)] = member_id
    if spec.subscription_type is HOMOGENEOUS:
        subscribed_topics = next(iter(spec.members.values())).subscribed_topic_ids
    else:
        subscribed_topics = frozenset().union(*(m.subscribed_topic_ids for m in spec.members.values()))
    for topic_id in subscribed_topics:
        for p in range(topics.num_partitions(topic_id)):
            assert (topic_id, p) in seen, f"{topic_id}-{p} left unassigned"


def contract(spec: GroupSpec, result: Mapping[str, Assignment]) -> None:
    """An entry per member, in group order; unchanged members get their own object back."""
    assert list(result) == list(spec.members)
    for member_id, member in spec.members.items():
        if same(member.assignment, result[member_id]):
            assert result[member_id] is member.assignment, f"{member_id} unchanged but copied"


def kept_first_in_previous_order(spec: GroupSpec, result: Mapping[str, Assignment]) -> None:
    """Within a topic the partitions a member keeps lead, in their previous order."""
    for member_id, member in spec.members.items():
        for topic_id, parts in result[member_id].items():
            before = member.assignment.get(topic_id, ())
            kept = [p for p in parts if p in before]
            assert list(parts[: len(kept)]) == kept
            assert kept == list(before[: len(kept)]), f"{member_id} kept newer, dropped older"


def snapshot(spec: GroupSpec) -> object:
    return copy.deepcopy(
        (
            [(k, m.subscribed_topic_ids, dict(m.assignment)) for k, m in spec.members.items()],
            {t: dict(parts) for t, parts in spec.inverted.items()},
        )
    )


def rebuilt(spec: GroupSpec) -> GroupSpec:
    """An equal spec made of fresh objects (even fresh UUIDs), to catch identity-dependence."""

    def fresh(t: TopicId) -> TopicId:
        return uuid.UUID(int=t.int)

    members = {
        k: MemberSubscription(
            m.member_id,
            m.instance_id,
            m.rack_id,
            frozenset(fresh(t) for t in m.subscribed_topic_ids),
            {fresh(t): tuple(p) for t, p in m.assignment.items()},
        )
        for k, m in spec.members.items()
    }
    targets = {k: m.assignment for k, m in members.items()}
    return GroupSpec(members, spec.subscription_type, invert(targets))


Ordered = list[tuple[str, list[tuple[TopicId, tuple[int, ...]]]]]


def ordered(result: Mapping[str, Assignment]) -> Ordered:
    """The result with its dict orders made visible (members, and topics within a member)."""
    return [(k, [(t, p) for t, p in a.items() if p]) for k, a in result.items()]


def loads(result: Mapping[str, Assignment]) -> dict[str, int]:
    return {m: sum(map(len, a.values())) for m, a in result.items()}


# ------------------------------------------------------------------------------ uniform


@settings(max_examples=300, deadline=None)
@given(groups(UNIFORM))
def test_uniform_assigns_every_subscribed_partition_once_to_a_subscriber(case: Case) -> None:
    spec, topics = case
    result = UNIFORM.assign(spec, topics)
    owners(spec, topics, result)
    contract(spec, result)
    kept_first_in_previous_order(spec, result)


@settings(max_examples=300, deadline=None)
@given(groups(UNIFORM, homogeneous=True))
def test_uniform_homogeneous_loads_differ_by_at_most_one(case: Case) -> None:
    spec, topics = case
    sizes = loads(UNIFORM.assign(spec, topics)).values()
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=300, deadline=None)
@given(groups(UNIFORM, homogeneous=True))
def test_uniform_homogeneous_member_keeps_as_much_of_its_target_as_its_quota_allows(
    case: Case,
) -> None:
    spec, topics = case
    result = UNIFORM.assign(spec, topics)
    subscribed = next(iter(spec.members.values())).subscribed_topic_ids
    total = sum(topics.num_partitions(t) for t in subscribed)
    quota, extra = divmod(total, len(spec.members))
    for index, (member_id, member) in enumerate(spec.members.items()):
        held = {(t, p) for t, parts in member.assignment.items() if t in subscribed for p in parts}
        now = {(t, p) for t, parts in result[member_id].items() for p in parts}
        allowed = quota + 1 if index < extra else quota
        assert len(held & now) == min(len(held), allowed)


@settings(max_examples=200, deadline=None)
@given(groups(UNIFORM, homogeneous=True))
def test_uniform_homogeneous_second_run_changes_nobody(case: Case) -> None:
    spec, topics = case
    first = UNIFORM.assign(spec, topics)
    again = make_spec(
        list(spec.members),
        [m.subscribed_topic_ids for m in spec.members.values()],
        [first[k] for k in spec.members],
    )
    second = UNIFORM.assign(again, topics)
    assert all(second[k] is again.members[k].assignment for k in spec.members)


@st.composite
def bucketed_groups(draw: st.DrawFn) -> Case:
    """Kafka's benchmark shape: members in buckets, each bucket on its own topics."""
    buckets = draw(st.integers(1, 3))
    topic_sets = [frozenset(TOPICS[b::buckets]) for b in range(buckets)]
    n = draw(st.integers(1, 9))
    bucket_of = [draw(st.integers(0, buckets - 1)) for _ in range(n)]
    counts = {t: draw(st.integers(0, 15)) for t in TOPICS}
    previous: list[dict[TopicId, list[int]]] = [{} for _ in range(n)]
    for t, count in counts.items():
        for p in range(count):
            owner = draw(st.integers(-1, n - 1))
            if owner >= 0:
                previous[owner].setdefault(t, []).append(p)
    spec = make_spec(
        [f"m{i}" for i in range(n)],
        [topic_sets[b] for b in bucket_of],
        [{t: tuple(p) for t, p in prev.items()} for prev in previous],
        kind=HETEROGENEOUS,
    )
    return spec, MapTopicDescriber(counts)


@settings(max_examples=300, deadline=None)
@given(bucketed_groups())
def test_uniform_heterogeneous_balances_members_that_share_a_subscription(case: Case) -> None:
    spec, topics = case
    result = UNIFORM.assign(spec, topics)
    owners(spec, topics, result)
    by_subscription: dict[frozenset[TopicId], list[int]] = {}
    for member_id, member in spec.members.items():
        size = sum(map(len, result[member_id].values()))
        by_subscription.setdefault(member.subscribed_topic_ids, []).append(size)
    for sizes in by_subscription.values():
        assert max(sizes) - min(sizes) <= 1


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 6), min_size=1, max_size=7),
    st.data(),
)
def test_dealing_by_slices_matches_dealing_one_partition_at_a_time(
    sizes: list[int], data: st.DataObject
) -> None:
    subscribers = sorted(data.draw(st.sets(st.integers(0, len(sizes) - 1), min_size=1), label="subscribers"))
    count = data.draw(st.integers(0, 40), label="partitions")
    parts = data.draw(st.sampled_from([range(count), tuple(range(100, 100 + count))]))

    expected_sizes = list(sizes)
    ranges = LoadRanges(expected_sizes)
    ranges.reset(subscribers)
    expected: dict[int, list[int]] = {}
    for p in parts:
        member = ranges.next_least_loaded()
        expected.setdefault(member, []).append(p)
        expected_sizes[member] += 1

    got_sizes = list(sizes)
    got: dict[int, list[int]] = {}
    for member, piece in deal(got_sizes, subscribers, parts):
        got.setdefault(member, []).extend(piece)
    assert got == expected
    assert got_sizes == expected_sizes


# --------------------------------------------------------------------------------- range


@settings(max_examples=300, deadline=None)
@given(groups(RANGE))
def test_range_assigns_every_subscribed_partition_once_in_contiguous_even_ranges(
    case: Case,
) -> None:
    spec, topics = case
    result = RANGE.assign(spec, topics)
    owners(spec, topics, result)
    contract(spec, result)
    per_topic: dict[TopicId, list[int]] = {}
    for assignment in result.values():
        for topic_id, parts in assignment.items():
            if parts:
                assert sorted(parts) == list(range(min(parts), max(parts) + 1))
                per_topic.setdefault(topic_id, []).append(len(parts))
    for topic_id, sizes in per_topic.items():
        subscribers = sum(topic_id in m.subscribed_topic_ids for m in spec.members.values())
        if len(sizes) == subscribers:
            assert max(sizes) - min(sizes) <= 1


@settings(max_examples=200, deadline=None)
@given(groups(RANGE, homogeneous=True))
def test_range_homogeneous_co_partitions_topics_with_equal_counts(case: Case) -> None:
    spec, topics = case
    result = RANGE.assign(spec, topics)
    subscribed = next(iter(spec.members.values())).subscribed_topic_ids
    for assignment in result.values():
        for a in subscribed:
            for b in subscribed:
                if topics.num_partitions(a) == topics.num_partitions(b):
                    assert assignment.get(a, ()) == assignment.get(b, ())


@settings(max_examples=200, deadline=None)
@given(groups(RANGE))
def test_range_second_run_changes_nobody(case: Case) -> None:
    spec, topics = case
    first = RANGE.assign(spec, topics)
    again = make_spec(
        list(spec.members),
        [m.subscribed_topic_ids for m in spec.members.values()],
        [first[k] for k in spec.members],
        [m.instance_id for m in spec.members.values()],
        kind=spec.subscription_type,
    )
    second = RANGE.assign(again, topics)
    assert all(second[k] is again.members[k].assignment for k in spec.members)


# ---------------------------------------------------------------------------------- both


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([UNIFORM, RANGE]).flatmap(lambda a: st.tuples(st.just(a), groups(a))))
def test_assignors_leave_their_inputs_untouched(pair: tuple[Assignor, Case]) -> None:
    assignor, (spec, topics) = pair
    before = snapshot(spec)
    assignor.assign(spec, topics)
    assert snapshot(spec) == before


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([UNIFORM, RANGE]).flatmap(lambda a: st.tuples(st.just(a), groups(a))))
def test_assignors_give_equal_inputs_equal_outputs(pair: tuple[Assignor, Case]) -> None:
    assignor, (spec, topics) = pair
    first = ordered(assignor.assign(spec, topics))
    assert ordered(assignor.assign(spec, topics)) == first
    fresh = rebuilt(spec)
    counts = MapTopicDescriber(
        {uuid.UUID(int=t.int): topics.num_partitions(t) for t in TOPICS if topics.num_partitions(t) >= 0}
    )
    assert ordered(assignor.assign(fresh, counts)) == first
