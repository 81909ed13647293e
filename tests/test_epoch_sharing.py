"""Epochs past Python's small-int cache are one int object per value (`engine.assignment.
shared_epoch`): members of different groups at the same epoch, a member's previous epoch and
its partitions' assignment epochs hold the object the group holds, not copies decoded from
records or computed by a handler (issue 27: the soak's memory rose as group epochs passed 256),
and the table behind it stays bounded."""

from __future__ import annotations

from engine import assignment
from engine.assignment import EPOCH_INTERN_MAX, shared_epoch
from engine.consumer.group import ConsumerGroup
from engine.metadata import topic_id_for
from records.consumer_group import ConsumerGroupCurrentMemberAssignmentValue, TopicPartitions


def _fresh(n: int) -> int:
    """An int object of its own, as a decoded record field is."""
    return int(str(n))


def test_members_of_different_groups_share_one_object_per_epoch() -> None:
    tid = topic_id_for("t")
    groups = [ConsumerGroup("a"), ConsumerGroup("b")]
    for g in groups:
        g.replay_group_epoch(_fresh(70_001))
        g.replay_assignment_epoch(_fresh(70_001))
        for i, mid in enumerate(("m1", "m2")):
            g.replay_current_assignment(
                mid,
                ConsumerGroupCurrentMemberAssignmentValue(
                    member_epoch=_fresh(70_001),
                    previous_member_epoch=_fresh(70_000),
                    state=0,
                    assigned_partitions=(
                        TopicPartitions(tid, (2 * i, 2 * i + 1), (_fresh(70_000), _fresh(70_001))),
                    ),
                ),
            )
    epoch = groups[0].group_epoch
    previous = groups[0].members["m1"].previous_member_epoch
    assert epoch == 70_001 and previous == 70_000
    for g in groups:
        assert g.group_epoch is epoch and g.assignment_epoch is epoch
        for m in g.members.values():
            assert m.member_epoch is epoch
            assert m.previous_member_epoch is previous
            held = m.assignment_epochs[tid]
            assert sorted(held.values()) == [70_000, 70_001]
            assert all(e is epoch or e is previous for e in held.values())
    # the values themselves are what the records said
    assert groups[1].members["m2"].assignment_epochs[tid] == {2: 70_000, 3: 70_001}


def test_the_table_is_bounded_and_forgets_the_first_value_it_learned() -> None:
    first = shared_epoch(_fresh(9_000_000))
    for n in range(9_000_001, 9_000_001 + EPOCH_INTERN_MAX):
        shared_epoch(_fresh(n))
    assert len(assignment._epochs) <= EPOCH_INTERN_MAX
    latest = shared_epoch(_fresh(9_000_000 + EPOCH_INTERN_MAX))
    assert shared_epoch(_fresh(9_000_000 + EPOCH_INTERN_MAX)) is latest
    again = shared_epoch(_fresh(9_000_000))  # forgotten: a new object, the same value
    assert again == first and again is not first
    assert shared_epoch(-1) == -1 and shared_epoch(256) == 256
