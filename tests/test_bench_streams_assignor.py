"""bench.streams_assignor: groupshift's streams task assignor timed at a tiny size, the validity
check that keeps a row from comparing unlike assignments, and (e2e, a JVM) Kafka 4.4's own
StickyTaskAssignor on the same inputs."""

from __future__ import annotations

import pytest

from bench.kafka_assignors import KafkaTaskAssignor
from bench.streams_assignor import (
    Case,
    Placed,
    build_inputs,
    build_members,
    measure,
    placed_from_groupshift,
    placed_from_kafka,
    problems,
    run_groupshift,
)

TINY = Case(members=8, subtopologies=2, partitions=6, standby=1, sticky=False, members_per_process=2)


def test_rows_time_a_valid_assignment() -> None:
    for case in (TINY, Case(8, 2, 6, 2, True, 2)):
        row = measure(case, 0.01)
        assert row.tasks == 12 and row.runs >= 5 and row.median_ms > 0
        assert (row.active_min, row.active_max) == (1, 2)
        assert row.kafka_median_ms is None and row.versus_kafka is None
    sticky = measure(Case(8, 2, 6, 0, True, 2), 0.01)
    assert sticky.moved is not None and 1 <= sticky.moved <= 2  # the joining member's share


def test_invalid_assignments_are_named() -> None:
    members = build_members(TINY.members, TINY.members_per_process)
    good = placed_from_groupshift(run_groupshift(TINY, build_inputs(TINY)))
    assert problems(TINY, members, good) == []

    def edited(mid: str, active: dict[str, frozenset[int]], standby: dict[str, frozenset[int]]) -> Placed:
        return {**good, mid: (active, standby)}

    holder = next(m for m, (a, _) in good.items() if a)
    sid, parts = next(iter(good[holder][0].items()))
    # a second member of another process runs the same task
    other = next(m for m in members if members[m] != members[holder])
    twice = edited(
        other, {**good[other][0], sid: good[other][0].get(sid, frozenset()) | parts}, good[other][1]
    )
    assert any("not active exactly once" in p for p in problems(TINY, members, twice))
    # the holder's process mate keeps a standby of it
    mate = next(m for m in members if members[m] == members[holder] and m != holder)
    beside = edited(mate, good[mate][0], {**good[mate][1], sid: parts})
    assert any("two copies on one process" in p for p in problems(TINY, members, beside))
    # standbys dropped
    bare = {m: (a, {}) for m, (a, _) in good.items()}
    assert any("without 1 standby replicas" in p for p in problems(TINY, members, bare))
    # a task given to a stranger
    assert any("non-members" in p for p in problems(TINY, members, {**good, "stranger": ({}, {})}))


@pytest.mark.e2e
def test_kafka_sticky_task_assignor_times_the_same_inputs() -> None:
    with KafkaTaskAssignor("4.4.0") as kafka:
        assert kafka.version == "4.4.0"
        for case in (TINY, Case(8, 2, 6, 2, True, 2)):
            row = measure(case, 0.05, kafka, kafka_first=case.sticky)
            assert row.kafka_median_ms is not None and row.kafka_median_ms > 0
            assert row.versus_kafka == pytest.approx(row.median_ms / row.kafka_median_ms)
            assert (row.kafka_active_min, row.kafka_active_max) == (1, 2)
            assert (row.kafka_moved is None) == (not case.sticky)


@pytest.mark.e2e
def test_kafka_sticky_task_assignor_gives_the_same_assignment() -> None:
    """Issue 31: with the ties Kafka's (its priority queues over its hash maps), groupshift's
    assignment is Kafka 4.4.0's exactly, fresh and sticky, with and without standbys, one or
    several members per process."""
    cases = [
        Case(members, subtopologies, partitions, standby, sticky, per_process)
        for members, subtopologies, partitions, per_process in (
            (4, 2, 2, 1),
            (8, 2, 6, 2),
            (9, 3, 5, 3),
            (12, 2, 7, 1),
        )
        for standby in (0, 1, 2)
        for sticky in (False, True)
    ]
    with KafkaTaskAssignor("4.4.0") as kafka:
        for case in cases:
            run = kafka.measure(
                case.members,
                case.members_per_process,
                case.subtopologies,
                case.partitions,
                case.standby,
                case.sticky,
                0.001,
            )
            ours = placed_from_groupshift(run_groupshift(case, build_inputs(case)))
            assert placed_from_kafka(run.assignment) == ours, case
