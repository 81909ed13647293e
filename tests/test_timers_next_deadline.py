"""`Timers.next_deadline()` is cached; whatever the sequence of schedules, reschedules (same or
another timeout), cancels and pops, it equals the earliest deadline of the timers that exist."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.timers import Timers

KEYS = st.sampled_from([f"k{i}" for i in range(6)])
TIMEOUTS = st.sampled_from([0, 5, 10, 45])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("schedule"), KEYS, TIMEOUTS),
        st.tuples(st.just("schedule_if_absent"), KEYS, TIMEOUTS),
        st.tuples(st.just("reschedule"), KEYS, TIMEOUTS),
        st.tuples(st.just("cancel"), KEYS, TIMEOUTS),
        st.tuples(st.just("pop_due"), KEYS, TIMEOUTS),
        st.tuples(st.just("tick"), KEYS, st.integers(0, 20)),
        st.tuples(st.just("ask"), KEYS, TIMEOUTS),
    ),
    max_size=60,
)


@settings(max_examples=400)
@given(OPS)
def test_next_deadline_is_always_the_earliest(ops: list[tuple[str, str, int]]) -> None:
    t = Timers()
    now = 100
    for name, key, n in ops:
        if name == "schedule":
            t.schedule(key, n, now, lambda _now: None)
        elif name == "schedule_if_absent":
            t.schedule_if_absent(key, n, now, lambda _now: None)
        elif name == "reschedule":
            t.reschedule(key, n, now)
        elif name == "cancel":
            t.cancel(key)
        elif name == "pop_due":
            t.pop_due(now)
        elif name == "tick":
            now += n
        else:  # ask now and then, so several changes may pile up between two asks
            assert_earliest(t)
    assert_earliest(t)


def assert_earliest(t: Timers) -> None:
    scheduled = t.keys()  # (Timers is not iterable)
    deadlines = [t.deadline(k) for k in scheduled]
    assert t.next_deadline() == (min(deadlines) if deadlines else None)


@settings(max_examples=400)
@given(OPS, st.data())
def test_none_set_before_the_mark_means_no_timer_is_due_earlier(
    ops: list[tuple[str, str, int]], data: st.DataObject
) -> None:
    """What the runtime relies on to leave its event-loop timer armed (gateway/groups/runtime.py):
    after `mark()` returned m, `none_set_before(d)` for a d at or before m is True only while
    every timer that exists is due at d or later."""
    t = Timers()
    now = 100
    marked: int | None = None
    for name, key, n in ops:
        if name == "schedule":
            t.schedule(key, n, now, lambda _now: None)
        elif name == "schedule_if_absent":
            t.schedule_if_absent(key, n, now, lambda _now: None)
        elif name == "reschedule":
            t.reschedule(key, n, now)
        elif name == "cancel":
            t.cancel(key)
        elif name == "pop_due":
            t.pop_due(now)
        elif name == "tick":
            now += n
        elif marked is None or not t.none_set_before(marked):
            marked = t.mark()  # what the runtime does when it cannot keep its timer
            assert_earliest(t)
        if marked is not None:
            d = data.draw(st.integers(0, marked))
            if t.none_set_before(d):
                scheduled = t.keys()
                deadlines = [t.deadline(k) for k in scheduled]
                assert all(x is not None and x >= d for x in deadlines)


def test_a_fresh_structure_knows_nothing_before_its_first_mark() -> None:
    """A reopened shard's timers: the runtime's timer armed for the old one must be re-armed."""
    t = Timers()
    assert not t.none_set_before(1)
    t.schedule("k", 10, 100, None)
    assert t.mark() == 110
    assert t.none_set_before(110)
    t.reschedule("k", 10, 105)  # pushed later: the armed timer may stay (it fires early)
    assert t.none_set_before(110)
    t.schedule("j", 5, 105, None)  # due at 110: not before
    assert t.none_set_before(110)
    t.schedule("i", 1, 105, None)  # due at 106, before the armed 110
    assert not t.none_set_before(110)
    assert t.mark() == 106
