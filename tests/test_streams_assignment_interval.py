"""The assignment interval of streams groups (Kafka 4.4 `maybeUpdateStreamsTargetAssignment` and
`canComputeNextTargetAssignment`): once a target is computed, the next one waits until
`group.streams.assignment.interval.ms` (or the group's `streams.assignment.interval.ms`) has
passed since the recorded assignment timestamp (type 20); meanwhile a heartbeat that needs one is
answered ASSIGNMENT_DELAYED and reconciles towards the target there is, and the first heartbeat
after the interval computes it. e2e/test_streams_differential.py compares the same with Kafka 4.4
over the wire (`assignment-interval`)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from engine.classic.member import Protocol
from engine.config import CoordinatorConfig, GroupConfig
from engine.errors import Errors
from engine.ids import SeededIds
from engine.shard import Shard
from engine.streams.api import ASSIGNMENT_DELAYED, StreamsGroupHeartbeatResponse
from engine.streams.group import StreamsGroup, StreamsGroupState
from records.streams_group import StreamsGroupTargetAssignmentMetadataValue
from tests.test_streams_groups import Streams, owned_tasks
from tests.test_streams_online_migration import ALL_TASKS as ALL_TASK_SET
from tests.test_streams_online_migration import Roll, classic_metadata

INTERVAL = "Assignment delayed due to the configured assignment interval."
ALL_TASKS = 8  # the word count's two subtopologies over four partitions


def delayed(r: StreamsGroupHeartbeatResponse) -> bool:
    return any(s.code == ASSIGNMENT_DELAYED and s.detail == INTERVAL for s in r.status)


def interval_group(ms: int = 1000) -> Streams:
    """A group whose first member holds every task, its target computed at `h.now`."""
    h = Streams(group_streams_assignment_interval_ms=ms)
    first = h.join("m1")
    assert not delayed(first) and len(owned_tasks(first.active_tasks or ())) == ALL_TASKS
    return h


def test_the_default_is_kafkas_one_second_within_its_bounds() -> None:
    config = CoordinatorConfig()
    assert config.streams_assignment_interval_ms == 1000
    assert config.streams_min_assignment_interval_ms == 0
    assert config.streams_max_assignment_interval_ms == 15000


def test_a_member_joining_within_the_interval_waits_then_the_next_heartbeat_assigns() -> None:
    h = interval_group()
    computed_at = h.group.assignment_timestamp
    assert computed_at == h.now
    r = h.join("m2")
    # Kafka 4.4: no target yet; the joining member is moved to the assignment epoch there is,
    # with no tasks, and told why.
    assert delayed(r) and owned_tasks(r.active_tasks or ()) == set()
    assert r.member_epoch == h.group.assignment_epoch < h.group.group_epoch
    assert h.group.state() == StreamsGroupState.ASSIGNING
    kept = h.beat("m1")
    assert delayed(kept) and len(owned_tasks(h.owned["m1"])) == ALL_TASKS
    assert h.group.assignment_timestamp == computed_at  # nothing computed while waiting
    h.now = computed_at + 1000 - 2  # the next heartbeat is 1 ms short of the interval
    assert delayed(h.beat("m2"))
    after = h.beat("m1")  # exactly the interval: computed
    assert not delayed(after) and h.group.assignment_epoch == h.group.group_epoch
    assert h.group.assignment_timestamp == h.now
    h.converge("m1", "m2")
    one, two = owned_tasks(h.owned["m1"]), owned_tasks(h.owned["m2"])
    assert one and two and not one & two and len(one | two) == ALL_TASKS
    assert not delayed(h.beat("m1"))


def test_steady_heartbeats_within_the_interval_are_not_delayed() -> None:
    h = interval_group()
    for _ in range(3):
        assert h.beat("m1").status == ()


def test_the_target_record_carries_the_time_it_was_computed_and_replay_keeps_it() -> None:
    h = Streams(group_streams_assignment_interval_ms=1000)
    h.records = []
    h.join("m1")
    stamps = [r.value for r in h.records if isinstance(r.value, StreamsGroupTargetAssignmentMetadataValue)]
    assert [s.assignment_timestamp for s in stamps] == [h.now]
    h.join("m2")
    h.now += 1000
    h.converge("m1", "m2")
    replayed = h.replayed()
    assert h.shard.persisted_state()["groups"] == replayed.persisted_state()["groups"]
    group = replayed.groups["app"]
    assert isinstance(group, StreamsGroup)
    assert group.assignment_timestamp == h.group.assignment_timestamp > 0


def test_a_shard_loaded_within_the_interval_still_waits() -> None:
    """The timestamp is in the record, so a restart does not shorten the wait (Kafka keeps it in
    the same record)."""
    h = Streams(group_streams_assignment_interval_ms=1000)
    h.records = []
    h.join("m1")
    config = CoordinatorConfig.from_kafka(
        {"group.streams.assignment.interval.ms": 1000, "group.streams.initial.rebalance.delay.ms": 0}
    )
    loaded = Shard(config, SeededIds(7), h.shard.image)
    loaded.apply(h.records)
    h.shard = loaded
    assert delayed(h.join("m2"))
    h.now += 1000
    assert not delayed(h.beat("m2"))


def test_a_leave_within_the_interval_leaves_the_target_to_a_later_heartbeat() -> None:
    h = interval_group()
    h.join("m2")
    h.now += 1000
    h.converge("m1", "m2")
    half = owned_tasks(h.owned["m1"])
    assert len(half) == ALL_TASKS // 2
    assert h.hb(member_id="m2", member_epoch=-1).error_code == 0
    # Kafka 4.4's fence writes no target; the remaining member's next heartbeat computes it,
    # once the interval has passed.
    assert h.group.assignment_epoch < h.group.group_epoch and set(h.group.targets) == {"m1"}
    assert delayed(h.beat("m1")) and owned_tasks(h.owned["m1"]) == half
    h.now += 1000
    assert not delayed(h.beat("m1"))
    h.converge("m1")
    assert len(owned_tasks(h.owned["m1"])) == ALL_TASKS


def test_the_last_member_leaving_stamps_zero_so_the_next_first_member_is_assigned_at_once() -> None:
    h = interval_group()
    assert h.hb(member_id="m1", member_epoch=-1).error_code == 0
    assert h.group.assignment_timestamp == 0
    r = h.join("m2")  # well within the interval of the first target
    assert not delayed(r) and len(owned_tasks(r.active_tasks or ())) == ALL_TASKS


def test_the_group_config_overrides_the_broker_and_zero_turns_it_off() -> None:
    h = interval_group(ms=0)
    assert not delayed(h.join("m2"))  # the broker's 0: computed at once
    h.shard.set_group_config("app", GroupConfig.model_validate({"streams.assignment.interval.ms": 5000}))
    h.now += 10
    r = h.join("m3")
    assert delayed(r) and owned_tasks(r.active_tasks or ()) == set()
    h.now += 5000
    assert not delayed(h.beat("m3"))
    h.shard.set_group_config("app", GroupConfig.model_validate({"streams.assignment.interval.ms": 0}))
    assert not delayed(h.join("m4"))


def test_the_initial_rebalance_delay_is_not_held_back_by_the_interval() -> None:
    """The delay's end computes the first target even if it is shorter than the interval: no
    target was computed before it (Kafka's timestamp is 0 until then)."""
    h = Streams(group_streams_initial_rebalance_delay_ms=300, group_streams_assignment_interval_ms=5000)
    h.join("m1")
    h.join("m2")
    h.now += 300
    h.shard.expire(h.now)
    assert h.group.assignment_epoch == h.group.group_epoch and h.group.assignment_timestamp == h.now
    h.converge("m1", "m2")
    assert len(owned_tasks(h.owned["m1"]) | owned_tasks(h.owned["m2"])) == ALL_TASKS
    assert delayed(h.join("m3"))  # now the interval runs from the delay's target


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-1, "Invalid value -1 for configuration streams.assignment.interval.ms: Value must be at least 0"),
        (15001, "streams.assignment.interval.ms must be in the range 0 to 15000 inclusive."),
    ],
)
def test_group_config_refusals_are_kafkas(value: int, message: str) -> None:
    h = Streams()
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        h.shard.set_group_config("app", GroupConfig.model_validate({"streams.assignment.interval.ms": value}))


def test_the_group_config_bounds_follow_the_broker() -> None:
    h = Streams(
        group_streams_assignment_interval_ms=100,
        group_streams_min_assignment_interval_ms=100,
        group_streams_max_assignment_interval_ms=2000,
    )
    with pytest.raises(ValueError, match="in the range 100 to 2000 inclusive"):
        h.shard.set_group_config("app", GroupConfig.model_validate({"streams.assignment.interval.ms": 50}))
    h.shard.set_group_config("app", GroupConfig.model_validate({"streams.assignment.interval.ms": 2000}))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"group.streams.min.assignment.interval.ms": 10, "group.streams.max.assignment.interval.ms": 5},
            "group.streams.max.assignment.interval.ms must be greater than or equal to "
            "group.streams.min.assignment.interval.ms",
        ),
        (
            {"group.streams.min.assignment.interval.ms": 2000},
            "group.streams.assignment.interval.ms must be greater than or equal to "
            "group.streams.min.assignment.interval.ms",
        ),
        (
            {"group.streams.assignment.interval.ms": 16000},
            "group.streams.assignment.interval.ms must be less than or equal to "
            "group.streams.max.assignment.interval.ms",
        ),
    ],
)
def test_broker_settings_out_of_bounds_refuse_the_start(settings: dict[str, int], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        CoordinatorConfig.from_kafka(settings)


def test_a_classic_instance_is_told_to_rejoin_once_a_delayed_target_may_be_computed() -> None:
    """A classic Kafka Streams instance inside a streams group (the online migration) joining
    within the interval gets the target there is; once the interval has passed its Heartbeat
    answers REBALANCE_IN_PROGRESS, and its JoinGroup computes the target (no streams heartbeat
    is needed for it)."""
    h = Roll(**{"group.streams.assignment.interval.ms": 1000})
    h.seed({"a": ALL_TASK_SET})
    h.streams_join("s")
    h.settle()
    j = h.join("", protocols=(Protocol("stream", classic_metadata(9, set())),), group="app", version=9)
    assert j.error_code == int(Errors.MEMBER_ID_REQUIRED)
    c = j.member_id
    h.pid[c] = 9
    h.classic_tasks[c] = set()
    h.classic_rejoin(c)
    assert h.classic_tasks[c] == set() and h.group.assignment_epoch < h.group.group_epoch
    assert h.classic_beat(c) == 0  # within the interval: nothing to rejoin for yet
    h.advance(1000)
    assert h.classic_beat(c) == int(Errors.REBALANCE_IN_PROGRESS)
    h.classic_rejoin(c)
    assert h.group.assignment_epoch == h.group.group_epoch
    h.settle()
    assert all(h.classic_tasks.values()) and h.streams_tasks["s"]
    h.assert_replay_equals_live()
