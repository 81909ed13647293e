"""A consumer group's member and target tables stay the size their members need under churn
(issue 27, the soak: CPython never shrinks a dict, and a churned table of 100 members settled at
twice the slots insertions alone give it, one step per group, minutes apart: a rising RSS;
docs/robustness.md). `engine.consumer.group.compacted` copies a table that outgrew its entries
by half, in insertion order, which is the member order the assignor is given."""

from __future__ import annotations

import sys

from engine.assignment import from_records
from engine.consumer.group import ConsumerGroup, compacted
from engine.metadata import topic_id_for
from records.consumer_group import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    TopicPartitions,
)

TID = topic_id_for("t")


def _join(g: ConsumerGroup, mid: str, partition: int) -> None:
    g.replay_member_metadata(mid, ConsumerGroupMemberMetadataValue(None, None, "c", "/h", ("t",), None))
    g.replay_current_assignment(
        mid,
        ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=2,
            previous_member_epoch=1,
            state=0,
            assigned_partitions=(TopicPartitions(TID, (partition,), (2,)),),
        ),
    )
    g.replay_target_member(mid, from_records((TopicPartitions(TID, (partition,)),)))


def _leave(g: ConsumerGroup, mid: str) -> None:
    """Kafka's tombstone order: current assignment, target, member."""
    g.replay_current_assignment(mid, None)
    g.replay_target_member(mid, None)
    g.replay_member_metadata(mid, None)


def _grown(n: int) -> int:
    return sys.getsizeof({f"k{i}": None for i in range(n)})


def test_churned_tables_keep_the_size_insertions_give_them_and_their_order() -> None:
    g = ConsumerGroup("g")
    live = [f"m{i}" for i in range(100)]
    for i, mid in enumerate(live):
        _join(g, mid, i)
    for n in range(2000):  # the oldest member leaves, a new one takes its partition
        gone = live.pop(0)
        partition = g.members[gone].assigned_partitions[TID]
        _leave(g, gone)
        # checked after each removal, where a table is compacted (a join may grow it a step
        # until the next removal)
        for table in (g.members, g.target_assignment):
            assert sys.getsizeof(table) * 2 <= _grown(len(table)) * 3, (n, sys.getsizeof(table))
        live.append(f"new{n}")
        _join(g, live[-1], next(iter(partition)))
    assert list(g.members) == live and list(g.target_assignment) == live
    # what the bound is for: without the copies the same churn leaves (nearly) twice the slots
    plain = {f"m{i}": i for i in range(100)}
    for n in range(2000):
        del plain[next(iter(plain))]
        plain[f"new{n}"] = n
    assert sys.getsizeof(plain) * 2 > sys.getsizeof(g.members) * 3


def test_compacted_keeps_a_table_that_fits_and_copies_one_that_does_not() -> None:
    fits = {f"k{i}": i for i in range(50)}
    assert compacted(fits) is fits
    grown = {f"k{i}": i for i in range(1000)}
    for i in range(990):
        del grown[f"k{i}"]
    copy = compacted(grown)
    assert copy is not grown and copy == grown and list(copy) == list(grown)
    assert sys.getsizeof(copy) < sys.getsizeof(grown)
    assert compacted({}) == {}
