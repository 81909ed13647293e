"""The server assignors on worked examples: the KIP-848 case studies (uniform, topic `foo`, members
in join order), Kafka's range examples, and the edge cases of the assignor contract."""

from __future__ import annotations

import uuid

import pytest

from engine import assignors
from engine.assignors.base import (
    GroupSpec,
    MapTopicDescriber,
    PartitionAssignorError,
    SubscriptionType,
)
from engine.assignors.range import RangeAssignor
from engine.assignors.uniform import UniformAssignor
from tests.assignor_specs import BAR, BAZ, FOO, Member, group, lists

UNIFORM = UniformAssignor()
RANGE = RangeAssignor()
HETEROGENEOUS = SubscriptionType.HETEROGENEOUS


def foo(partitions: int) -> MapTopicDescriber:
    return MapTopicDescriber({FOO: partitions})


# ------------------------------------------------------------------- KIP-848 case studies


def test_basic_case_study_first_member_gets_all_three_partitions() -> None:
    result = UNIFORM.assign(group(Member("A")), foo(3))
    assert lists(result) == {"A": [0, 1, 2]}


def test_basic_case_study_second_member_takes_foo_2_from_a() -> None:
    spec = group(Member("A", previous={FOO: [0, 1, 2]}), Member("B"))
    assert lists(UNIFORM.assign(spec, foo(3))) == {"A": [0, 1], "B": [2]}


def test_basic_case_study_third_member_takes_foo_1_from_a() -> None:
    spec = group(Member("A", previous={FOO: [0, 1]}), Member("B", previous={FOO: [2]}), Member("C"))
    result = UNIFORM.assign(spec, foo(3))
    assert lists(result) == {"A": [0], "B": [2], "C": [1]}
    assert result["B"] is spec.members["B"].assignment


def test_incremental_case_study_c_gets_the_newest_of_a_and_b() -> None:
    spec = group(
        Member("A", previous={FOO: [0, 1, 2]}),
        Member("B", previous={FOO: [3, 4, 5]}),
        Member("C"),
    )
    assert lists(UNIFORM.assign(spec, foo(6))) == {"A": [0, 1], "B": [3, 4], "C": [2, 5]}


def test_member_failure_case_study_survivors_split_the_orphaned_partitions() -> None:
    spec = group(Member("B", previous={FOO: [3, 4]}), Member("C", previous={FOO: [2, 5]}))
    assert set(spec.inverted[FOO].values()) == {"B", "C"}
    assert lists(UNIFORM.assign(spec, foo(6))) == {"B": [3, 4, 0], "C": [2, 5, 1]}


def test_partition_added_case_study_new_partition_goes_to_the_empty_member() -> None:
    spec = group(Member("A", previous={FOO: [0]}), Member("B", previous={}))
    result = UNIFORM.assign(spec, foo(2))
    assert lists(result) == {"A": [0], "B": [1]}
    assert result["A"] is spec.members["A"].assignment


def test_online_migration_case_study_newest_partitions_move_back_to_the_returning_member() -> None:
    after_b_left = group(Member("A", previous={FOO: [0, 1]}), Member("C", previous={FOO: [2, 5]}))
    first = UNIFORM.assign(after_b_left, foo(6))
    assert lists(first) == {"A": [0, 1, 3], "C": [2, 5, 4]}

    b_is_back = group(Member("A", previous=first["A"]), Member("C", previous=first["C"]), Member("B"))
    second = UNIFORM.assign(b_is_back, foo(6))
    assert lists(second) == {"A": [0, 1], "C": [2, 5], "B": [3, 4]}


# ------------------------------------------------------------------------ uniform, homogeneous


def test_uniform_balanced_group_gets_back_every_members_own_object() -> None:
    spec = group(
        Member("A", previous={FOO: [4, 0]}),
        Member("B", previous={FOO: [1, 2]}),
        Member("C", previous={FOO: [3, 5]}),
    )
    result = UNIFORM.assign(spec, foo(6))
    assert all(result[m] is spec.members[m].assignment for m in "ABC")


def test_uniform_over_quota_member_keeps_the_first_partitions_of_its_tuple_not_the_lowest() -> None:
    spec = group(Member("A", previous={FOO: [3, 1, 0, 2]}), Member("B"))
    assert lists(UNIFORM.assign(spec, foo(4))) == {"A": [3, 1], "B": [0, 2]}


def test_uniform_quota_is_spent_on_topics_in_the_order_the_member_acquired_them() -> None:
    spec = group(
        Member("A", topics=(FOO, BAR), previous={BAR: [0, 1], FOO: [0, 1]}),
        Member("B", topics=(FOO, BAR)),
    )
    result = UNIFORM.assign(spec, MapTopicDescriber({FOO: 2, BAR: 2}))
    assert result == {"A": {BAR: (0, 1)}, "B": {FOO: (0, 1)}}


def test_uniform_drops_partitions_of_topics_the_group_no_longer_subscribes_to() -> None:
    spec = group(
        Member("A", topics=(FOO,), previous={FOO: [0, 1], BAR: [0]}),
        Member("B", topics=(FOO,), previous={BAR: [1]}),
    )
    result = UNIFORM.assign(spec, MapTopicDescriber({FOO: 2, BAR: 2}))
    assert result == {"A": {FOO: (0,)}, "B": {FOO: (1,)}}


def test_uniform_extra_partitions_go_to_the_first_members_in_group_order() -> None:
    spec = group(Member("C"), Member("A"), Member("B"))
    assert lists(UNIFORM.assign(spec, foo(5))) == {"C": [0, 1], "A": [2, 3], "B": [4]}


def test_uniform_more_members_than_partitions_leaves_the_last_members_empty() -> None:
    spec = group(*(Member(f"M{i}") for i in range(4)))
    result = UNIFORM.assign(spec, foo(2))
    assert result == {"M0": {FOO: (0,)}, "M1": {FOO: (1,)}, "M2": {}, "M3": {}}


def test_uniform_deals_topics_in_kafka_signed_uuid_order() -> None:
    negative = uuid.UUID(int=(1 << 127) | 5)  # most significant half < 0 as a Java long
    positive = uuid.UUID(int=7)
    spec = group(Member("A", topics=(negative, positive)), Member("B", topics=(negative, positive)))
    result = UNIFORM.assign(spec, MapTopicDescriber({negative: 1, positive: 1}))
    assert result == {"A": {negative: (0,)}, "B": {positive: (0,)}}


def test_uniform_fresh_partitions_come_before_revoked_ones() -> None:
    # B's over-quota partition 0 queues behind never-assigned 3, so C gets 3 and D gets 0.
    spec = group(
        Member("A", previous={FOO: [1]}),
        Member("B", previous={FOO: [2, 0]}),
        Member("C"),
        Member("D"),
    )
    result = UNIFORM.assign(spec, foo(4))
    assert lists(result) == {"A": [1], "B": [2], "C": [3], "D": [0]}


def test_uniform_partitions_still_inverted_to_a_departed_member_are_not_lost() -> None:
    # Deviation from Kafka, which trusts the inverted map and would leave foo-0 and foo-1 out.
    stale = {FOO: {0: "A", 1: "A", 2: "C", 3: "B", 4: "B", 5: "C"}}
    spec = group(Member("B", previous={FOO: [3, 4]}), Member("C", previous={FOO: [2, 5]}), inverted=stale)
    assert lists(UNIFORM.assign(spec, foo(6))) == {"B": [3, 4, 0], "C": [2, 5, 1]}


def test_uniform_without_members_returns_an_empty_result() -> None:
    spec = GroupSpec({}, SubscriptionType.HOMOGENEOUS, {})
    assert UNIFORM.assign(spec, foo(3)) == {}


def test_uniform_members_without_subscriptions_get_empty_assignments() -> None:
    spec = group(Member("A", topics=(), previous={FOO: [0]}), Member("B", topics=()))
    result = UNIFORM.assign(spec, foo(2))
    assert result == {"A": {}, "B": {}}
    assert result["B"] is spec.members["B"].assignment


@pytest.mark.parametrize("kind", list(SubscriptionType))
def test_uniform_topic_missing_from_metadata_raises(kind: SubscriptionType) -> None:
    spec = group(Member("A", topics=(FOO, BAR)), Member("B", topics=(FOO,)), kind=kind)
    with pytest.raises(PartitionAssignorError, match=str(BAR)):
        UNIFORM.assign(spec, foo(2))


# ---------------------------------------------------------------------- uniform, heterogeneous


def test_heterogeneous_topic_with_fewer_subscribers_is_dealt_first() -> None:
    # foo and bar both have 2 partitions per subscriber; bar has one subscriber, so it goes
    # first, B gets both of its partitions and foo then mostly goes to A.
    spec = group(Member("A", topics=(FOO,)), Member("B", topics=(FOO, BAR)))
    result = UNIFORM.assign(spec, MapTopicDescriber({FOO: 4, BAR: 2}))
    assert result == {"A": {FOO: (0, 1, 2)}, "B": {BAR: (0, 1), FOO: (3,)}}


def test_heterogeneous_balancing_moves_partitions_to_a_new_subscriber() -> None:
    spec = group(
        Member("A", topics=(FOO,), previous={FOO: [0, 1, 2, 3, 4, 5]}),
        Member("B", topics=(FOO,)),
        Member("C", topics=(BAR,)),
    )
    result = UNIFORM.assign(spec, MapTopicDescriber({FOO: 6, BAR: 2}))
    assert result == {"A": {FOO: (0, 1, 2)}, "B": {FOO: (5, 4, 3)}, "C": {BAR: (0, 1)}}


def test_heterogeneous_giver_gives_up_its_most_recently_acquired_partitions() -> None:
    # Deviation from Kafka (which gives up the highest-numbered): the contract keeps the oldest.
    spec = group(
        Member("A", topics=(FOO,), previous={FOO: [3, 4, 5, 0, 1, 2]}),
        Member("B", topics=(FOO,)),
        Member("C", topics=(BAR,)),
    )
    result = UNIFORM.assign(spec, MapTopicDescriber({FOO: 6, BAR: 1}))
    assert lists(result) == {"A": [3, 4, 5], "B": [2, 1, 0], "C": []}


def test_heterogeneous_member_keeps_its_oldest_partition_when_balancing_passes_ping_pong() -> None:
    # Balancing takes baz-2 and baz-5 from m1 on one pass and hands baz-5 back on a later one;
    # Kafka would leave m1 with baz-5. We swap with m3, which held neither before.
    every = (FOO, BAR, BAZ)
    spec = group(
        Member("m0", topics=every, previous={FOO: [2, 3]}),
        Member("m1", topics=every, previous={FOO: [0, 1], BAR: [0, 1, 2, 4], BAZ: [2, 5]}),
        Member("m2", topics=(BAR,), previous={BAR: [3], BAZ: [0, 4]}),
        Member("m3", topics=every),
    )
    result = UNIFORM.assign(spec, MapTopicDescriber({FOO: 4, BAR: 5, BAZ: 6}))
    assert result == {
        "m0": {FOO: (2, 3, 1), BAZ: (4,)},
        "m1": {FOO: (0,), BAR: (0, 1), BAZ: (2,)},
        "m2": {BAR: (3, 4, 2)},
        "m3": {BAZ: (0, 1, 3, 5)},
    }


def test_heterogeneous_revokes_only_the_unsubscribed_topic() -> None:
    spec = group(
        Member("A", topics=(FOO,), previous={BAR: [0, 1], FOO: [0]}),
        Member("B", topics=(FOO, BAR)),
    )
    result = UNIFORM.assign(spec, MapTopicDescriber({FOO: 2, BAR: 2}))
    assert result == {"A": {FOO: (0, 1)}, "B": {BAR: (0, 1)}}


def test_heterogeneous_balanced_group_gets_back_every_members_own_object() -> None:
    spec = group(
        Member("A", topics=(FOO,), previous={FOO: [0, 1]}),
        Member("B", topics=(FOO, BAR), previous={FOO: [2], BAR: [0]}),
    )
    result = UNIFORM.assign(spec, MapTopicDescriber({FOO: 3, BAR: 1}))
    assert result["A"] is spec.members["A"].assignment
    assert result["B"] is spec.members["B"].assignment


def test_heterogeneous_member_that_dropped_every_topic_loses_its_partitions() -> None:
    spec = group(Member("A", topics=(FOO,)), Member("B", topics=(), previous={FOO: [1]}))
    result = UNIFORM.assign(spec, foo(2))
    assert result == {"A": {FOO: (0, 1)}, "B": {}}


# ------------------------------------------------------------------------------------ range


def test_range_co_partitions_topics_with_equal_partition_counts() -> None:
    spec = group(Member("M0", topics=(FOO, BAR)), Member("M1", topics=(FOO, BAR)))
    result = RANGE.assign(spec, MapTopicDescriber({FOO: 3, BAR: 3}))
    assert result == {"M0": {FOO: (0, 1), BAR: (0, 1)}, "M1": {FOO: (2,), BAR: (2,)}}


def test_range_orders_static_members_by_instance_id_then_dynamic_ones_by_member_id() -> None:
    spec = group(
        Member("d2"),
        Member("s-b", instance_id="i-1"),
        Member("d1"),
        Member("s-a", instance_id="i-2"),
    )
    result = RANGE.assign(spec, foo(8))
    assert lists(result) == {"s-b": [0, 1], "s-a": [2, 3], "d1": [4, 5], "d2": [6, 7]}


def test_range_static_member_restarting_under_a_new_member_id_keeps_its_range() -> None:
    before = RANGE.assign(group(Member("x1", instance_id="a"), Member("x2", instance_id="b")), foo(4))
    restarted = group(
        Member("zz", instance_id="a", previous=before["x1"]),
        Member("aa", instance_id="b", previous=before["x2"]),
    )
    result = RANGE.assign(restarted, foo(4))
    assert lists(result) == {"zz": [0, 1], "aa": [2, 3]}
    assert result["zz"] is restarted.members["zz"].assignment


def test_range_is_not_sticky_for_dynamic_members() -> None:
    spec = group(Member("m1", previous={FOO: [0, 1]}), Member("m0", previous={FOO: [2, 3]}))
    assert lists(RANGE.assign(spec, foo(4))) == {"m0": [0, 1], "m1": [2, 3]}


def test_range_heterogeneous_divides_each_topic_among_its_own_subscribers() -> None:
    spec = group(Member("A", topics=(FOO,)), Member("B", topics=(FOO, BAR)), Member("C", topics=(BAR,)))
    result = RANGE.assign(spec, MapTopicDescriber({FOO: 4, BAR: 3}))
    assert result == {"A": {FOO: (0, 1)}, "B": {FOO: (2, 3), BAR: (0, 1)}, "C": {BAR: (2,)}}


def test_range_returns_the_previous_object_when_the_same_partitions_come_in_another_order() -> None:
    spec = group(Member("M0", previous={FOO: [1, 0]}), Member("M1", previous={FOO: [3, 2]}))
    result = RANGE.assign(spec, foo(4))
    assert result["M0"] is spec.members["M0"].assignment
    assert result["M1"] is spec.members["M1"].assignment


def test_range_more_members_than_partitions_leaves_the_last_members_empty() -> None:
    spec = group(Member("a"), Member("b"), Member("c"))
    assert RANGE.assign(spec, foo(2)) == {"a": {FOO: (0,)}, "b": {FOO: (1,)}, "c": {}}


def test_range_compares_ids_like_java_strings_outside_the_basic_plane() -> None:
    # Java compares UTF-16 code units: U+10000 is D800 DC00, which sorts before U+FFFF.
    spec = group(Member("m1", instance_id="\uffff"), Member("m2", instance_id="\U00010000"))
    assert lists(RANGE.assign(spec, foo(2))) == {"m2": [0], "m1": [1]}


def test_range_members_without_subscriptions_get_empty_assignments() -> None:
    spec = group(Member("A", topics=(FOO,)), Member("B", topics=(), previous={FOO: [1]}), kind=HETEROGENEOUS)
    assert RANGE.assign(spec, foo(2)) == {"A": {FOO: (0, 1)}, "B": {}}


def test_range_without_members_returns_an_empty_result() -> None:
    assert RANGE.assign(GroupSpec({}, SubscriptionType.HOMOGENEOUS, {}), foo(1)) == {}


@pytest.mark.parametrize("kind", list(SubscriptionType))
def test_range_topic_missing_from_metadata_raises(kind: SubscriptionType) -> None:
    spec = group(Member("A", topics=(FOO, BAR)), Member("B", topics=(FOO, BAR)), kind=kind)
    with pytest.raises(PartitionAssignorError, match=str(BAR)):
        RANGE.assign(spec, foo(2))


# --------------------------------------------------------------------------------- registry


def test_registry_serves_uniform_and_range_under_their_kafka_names() -> None:
    assert isinstance(assignors.get("uniform"), UniformAssignor)
    assert isinstance(assignors.get("range"), RangeAssignor)
    assert {"uniform", "range"} <= set(assignors.names())


# -------------------------------------------------------------------------------- benchmark


def test_benchmark_heterogeneous_inputs_use_kafkas_five_buckets_and_add_one_member() -> None:
    from bench.assignors import Case, build_inputs, inverted

    spec, topics = build_inputs(Case("uniform", HETEROGENEOUS, True, 100, 10, 10))
    members = list(spec.members.values())
    assert len(members) == 100 and members[-1].member_id == "newMember"
    buckets = {m.subscribed_topic_ids for m in members}
    assert len(buckets) == 5 and all(len(b) == 2 for b in buckets)
    assert members[-1].subscribed_topic_ids == spec.members["member98"].subscribed_topic_ids
    assert members[-1].assignment == {} and all(m.assignment for m in members[:-1])
    assert spec.inverted == inverted({m.member_id: m.assignment for m in members})
    assert all(topics.num_partitions(t) == 100 for b in buckets for t in b)
