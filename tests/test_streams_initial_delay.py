"""The initial rebalance delay of streams groups (Kafka 4.4 `streamsGroupHeartbeat` and
`computeDelayedTargetAssignment`): a member joining an empty group starts
`group.streams.initial.rebalance.delay.ms` (or the group's `streams.initial.rebalance.delay.ms`);
until it ends no target is computed and every heartbeat carries status ASSIGNMENT_DELAYED; at its
end the members that joined meanwhile share one assignment. e2e/test_streams_differential.py
compares the same with Kafka 4.4 over the wire (`initial-rebalance-delay`)."""

from __future__ import annotations

from engine.config import GroupConfig
from engine.streams.api import ASSIGNMENT_DELAYED, StreamsGroupHeartbeatResponse
from tests.test_streams_groups import Streams, owned_tasks

DELAYED = "Assignment delayed due to the configured initial rebalance delay."
ALL_TASKS = 8  # the word count's two subtopologies over four partitions


def delayed(r: StreamsGroupHeartbeatResponse) -> bool:
    return any(s.code == ASSIGNMENT_DELAYED and s.detail == DELAYED for s in r.status)


def test_members_joining_during_the_delay_share_the_first_assignment() -> None:
    h = Streams(group_streams_initial_rebalance_delay_ms=3000)
    first = h.join("m1")
    assert delayed(first) and owned_tasks(first.active_tasks or ()) == set()
    # Kafka 4.4 (measured): the group starts at assignment epoch 1, where its members wait.
    assert first.member_epoch == 1 and h.group.assignment_epoch == 1
    h.now += 1000
    assert delayed(h.join("m2"))
    assert delayed(h.beat("m1"))
    assert h.group.assignment_epoch < h.group.group_epoch  # nothing computed yet
    h.now = 1000 + 3000 + 1
    h.shard.expire(h.now)
    assert h.group.assignment_epoch == h.group.group_epoch
    h.converge("m1", "m2")
    one, two = owned_tasks(h.owned["m1"]), owned_tasks(h.owned["m2"])
    # One assignment for both: neither took every task first and gave half of them back.
    assert one and two and not one & two and len(one | two) == ALL_TASKS
    assert not delayed(h.beat("m1"))


def test_a_member_leaving_during_the_delay_is_left_out_of_the_first_assignment() -> None:
    h = Streams(group_streams_initial_rebalance_delay_ms=3000)
    h.join("m1")
    h.join("m2")
    r = h.hb(member_id="m2", member_epoch=-1)
    assert r.error_code == 0
    assert h.group.assignment_epoch < h.group.group_epoch  # the leave computed nothing either
    h.now += 3000
    h.shard.expire(h.now)
    h.converge("m1")
    assert len(owned_tasks(h.owned["m1"])) == ALL_TASKS and set(h.group.targets) == {"m1"}


def test_an_emptied_group_delays_again_and_the_group_config_overrides_the_broker() -> None:
    h = Streams(group_streams_initial_rebalance_delay_ms=3000)
    h.join("m1")
    h.now += 3000
    h.shard.expire(h.now)
    h.converge("m1")
    assert len(owned_tasks(h.owned["m1"])) == ALL_TASKS
    assert h.hb(member_id="m1", member_epoch=-1).error_code == 0
    assert delayed(h.join("m2"))  # empty again: the next first member waits again
    h.now += 3000
    h.shard.expire(h.now)
    h.hb(member_id="m2", member_epoch=-1)
    h.shard.set_group_config("app", GroupConfig.model_validate({"streams.initial.rebalance.delay.ms": 0}))
    r = h.join("m3")
    assert not delayed(r) and len(owned_tasks(r.active_tasks or ())) == ALL_TASKS


def test_without_a_delay_the_first_member_is_assigned_at_once() -> None:
    r = Streams(group_streams_initial_rebalance_delay_ms=0).join("m1")
    assert not delayed(r) and len(owned_tasks(r.active_tasks or ())) == ALL_TASKS


def test_replay_after_the_delay_equals_the_live_state() -> None:
    h = Streams(group_streams_initial_rebalance_delay_ms=3000)
    h.records = []
    h.join("m1")
    h.join("m2")
    h.now += 3000
    for outcome in h.shard.expire(h.now):
        h.records.extend(outcome.records)
    h.converge("m1", "m2")
    assert h.group.assignment_epoch == h.group.group_epoch
    assert h.shard.persisted_state()["groups"] == h.replayed().persisted_state()["groups"]
