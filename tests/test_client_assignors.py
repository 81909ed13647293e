"""engine.classic.client_assignors: the examples of Kafka's RangeAssignor / RoundRobinAssignor javadoc."""

from __future__ import annotations

from sim.client_assignors import range_assign, roundrobin_assign

SUBS = {"C1": ("t0", "t1"), "C0": ("t0", "t1")}
COUNTS = {"t1": 3, "t0": 3}


def test_range_gives_each_subscriber_a_contiguous_range_per_topic() -> None:
    assert range_assign(SUBS, COUNTS) == {
        "C0": {"t0": [0, 1], "t1": [0, 1]},
        "C1": {"t0": [2], "t1": [2]},
    }


def test_roundrobin_deals_all_partitions_in_member_order() -> None:
    assert roundrobin_assign(SUBS, COUNTS) == {
        "C0": {"t0": [0, 2], "t1": [1]},
        "C1": {"t0": [1], "t1": [0, 2]},
    }


def test_members_without_a_topic_are_skipped_and_still_listed() -> None:
    subs = {"a": ("t0",), "b": ("t1",), "c": ()}
    counts = {"t0": 2, "t1": 1}
    assert range_assign(subs, counts) == {"a": {"t0": [0, 1]}, "b": {"t1": [0]}, "c": {}}
    assert roundrobin_assign(subs, counts) == {"a": {"t0": [0, 1]}, "b": {"t1": [0]}, "c": {}}
