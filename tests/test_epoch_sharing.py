"""Epochs past Python's small-int cache are one int object per value (`engine.assignment.
shared_epoch`): members of different groups at the same epoch, a member's previous epoch and
its partitions' assignment epochs hold the object the group holds, not copies decoded from
records or computed by a handler (issue 27: the soak's memory rose as group epochs passed 256),
and the table behind it stays bounded.

The same tests run against the compiled build (scripts/compiled_tests.sh), where an `int`
attribute of a compiled class is a native integer inside the instance: it holds no int object at
all, and each read from Python boxes a new one, so identity through an attribute (or through
`shared_epoch`'s `int` return) cannot be observed there. What must hold in both builds is checked
on the objects a member does hold, the epochs in its partition-epoch dicts, against the table's
own objects; the pure build's attributes are, in addition, the table's objects too."""

from __future__ import annotations

from engine import assignment
from engine.assignment import EPOCH_INTERN_MAX, carry_epochs, shared_epoch, shared_epochs
from engine.consumer import group as consumer_group
from engine.consumer.group import ConsumerGroup
from engine.metadata import topic_id_for
from engine.streams.group import StreamsMember
from engine.streams.heartbeat import _carried_epochs
from records.consumer_group import ConsumerGroupCurrentMemberAssignmentValue, TopicPartitions

COMPILED = not (consumer_group.__file__ or "").endswith(".py")
"""The engine is the compiled build's (setup.py compiles engine/consumer/group.py)."""


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
    # the table's objects for the two values: every epoch held as an object is one of them
    epoch, previous = assignment._epochs[70_001], assignment._epochs[70_000]
    assert epoch == 70_001 and previous == 70_000
    for g in groups:
        assert g.group_epoch == epoch and g.assignment_epoch == epoch
        for m in g.members.values():
            assert m.member_epoch == epoch and m.previous_member_epoch == previous
            held = m.assignment_epochs[tid]
            assert sorted(held.values()) == [70_000, 70_001]
            assert all(e is epoch or e is previous for e in held.values())
            if COMPILED:
                # a native integer in the instance: no object held, a new one per read
                assert m.member_epoch is not m.member_epoch
            else:
                assert g.group_epoch is epoch and g.assignment_epoch is epoch
                assert m.member_epoch is epoch
                assert m.previous_member_epoch is previous
    # the values themselves are what the records said
    assert groups[1].members["m2"].assignment_epochs[tid] == {2: 70_000, 3: 70_001}


def _held(n: int) -> int:
    """The object a partition-epoch dict given a fresh `n` holds: `shared_epochs`'s, observable in
    both builds."""
    return shared_epochs({"t": {0: _fresh(n)}})["t"][0]


def test_the_table_is_bounded_and_forgets_the_first_value_it_learned() -> None:
    first = _held(9_000_000)
    assert assignment._epochs[9_000_000] is first
    for n in range(9_000_001, 9_000_001 + EPOCH_INTERN_MAX):
        if n % 2:
            shared_epoch(_fresh(n))
        else:
            _held(n)
    assert len(assignment._epochs) <= EPOCH_INTERN_MAX
    assert 9_000_000 not in assignment._epochs
    latest = _held(9_000_000 + EPOCH_INTERN_MAX)
    assert _held(9_000_000 + EPOCH_INTERN_MAX) is latest
    assert assignment._epochs[9_000_000 + EPOCH_INTERN_MAX] is latest
    again = _held(9_000_000)  # forgotten: a new object, the same value
    assert again == first and again is not first
    if not COMPILED:
        latest = shared_epoch(_fresh(9_000_000 + 2 * EPOCH_INTERN_MAX))
        assert shared_epoch(_fresh(9_000_000 + 2 * EPOCH_INTERN_MAX)) is latest
        assert shared_epoch(_fresh(9_000_000 + 2 * EPOCH_INTERN_MAX)) is assignment._epochs[latest]
    assert shared_epoch(-1) == -1 and shared_epoch(256) == 256


def test_a_member_given_partitions_holds_the_objects_it_held_and_the_tables() -> None:
    """The live path (`carry_epochs`, a heartbeat changing a member's assignment): a partition it
    kept keeps the object its dict held, a new one gets the table's object for the member's new
    epoch, not a copy per entry."""
    tid = topic_id_for("t")
    had = shared_epochs({tid: {0: _fresh(80_000)}})
    out = carry_epochs(had, {tid: (0, 1, 2)}, {}, _fresh(80_001))
    assert out == {tid: {0: 80_000, 1: 80_001, 2: 80_001}}
    assert out[tid][0] is had[tid][0] is assignment._epochs[80_000]
    assert out[tid][1] is out[tid][2] is assignment._epochs[80_001]


def test_a_streams_member_given_tasks_holds_the_objects_it_held_and_the_tables() -> None:
    """The same for a streams member's active-task epochs (its heartbeat's `_carried_epochs`),
    a held task without an epoch of its own counting as given at the member's epoch."""
    old = StreamsMember("m", member_epoch=_fresh(90_000))
    old.active = {"s": frozenset((0, 1))}
    old.active_epochs = shared_epochs({"s": {0: _fresh(89_999)}})
    new = StreamsMember("m", member_epoch=_fresh(90_001))
    new.active = {"s": frozenset((0, 1, 2, 3))}
    out = _carried_epochs(old, new)
    assert out == {"s": {0: 89_999, 1: 90_000, 2: 90_001, 3: 90_001}}
    assert out["s"][0] is old.active_epochs["s"][0] is assignment._epochs[89_999]
    assert out["s"][1] is assignment._epochs[90_000]
    assert out["s"][2] is out["s"][3] is assignment._epochs[90_001]
