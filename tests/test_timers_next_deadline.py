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
