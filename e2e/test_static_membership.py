"""Static membership (KIP-345) with librdkafka, in both protocols: a static member that restarts
within its session timeout gets its partitions back, and no other member's assignment changes
(no assign/revoke callback anywhere else, no new generation or group epoch on the gateway).

Classic: `group.instance.id` + `session.timeout.ms`; the closing member sends no LeaveGroup and
its replacement JoinGroups with the same instance id (both the leader and a follower restart).
Consumer protocol: the closing member leaves with member epoch -2 (its partitions stay assigned
to the instance) and its replacement joins with epoch 0 and the same instance id.
"""

from __future__ import annotations

import time

import pytest

from e2e.conftest import Gateways
from e2e.expected import COUNT, PARTITIONS, PER_PARTITION
from e2e.groups import (
    FAST_GROUP_SETTINGS,
    ConfluentMember,
    Ledger,
    PacedProducer,
    committed_offsets,
    create_topic,
    wait_partitioned,
    wait_until,
)

SESSION_MS = 10_000


def group_events(gw, group: str, name: str, since: int = 0) -> list[dict]:
    return [e for e in gw.events(name, since=since) if e.get("group") == group]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_static_member_restart_keeps_every_assignment(gateways: Gateways, protocol: str) -> None:
    sets = [*FAST_GROUP_SETTINGS, f"group.consumer.session.timeout.ms={SESSION_MS}"]
    gw = gateways.start(f"static-{protocol}", sets=sets)
    topic, group = f"static-{protocol}", f"static-group-{protocol}"
    create_topic(gw, topic)
    ledger = Ledger(topic)
    config = (
        {"group.protocol": "consumer"}
        if protocol == "consumer"
        else {"session.timeout.ms": SESSION_MS, "partition.assignment.strategy": "range"}
    )

    def member(name: str, instance: str) -> ConfluentMember:
        return ConfluentMember(
            name, ledger, gw.bootstrap, group, **{"group.instance.id": instance, **config}
        ).start()

    members = {i: member(f"m{i}", f"instance-{i}") for i in (1, 2, 3)}
    producer = PacedProducer(gw, topic, seconds=5.0)
    producer.start()
    try:
        first = wait_partitioned(list(members.values()), "three static members")
        log_mark, stable_at = gw.log_path.stat().st_size, time.monotonic()
        producer.go()
        wait_until(lambda: ledger.distinct() >= COUNT // 6, 30, "consumption to start")

        if protocol == "classic":
            leader = group_events(gw, group, "group.generation_started")[-1]["leader"]
            leader_instance = int(leader.split("-")[1])
            order = [leader_instance, next(i for i in (1, 2, 3) if i != leader_instance)]
        else:
            order = [2]
        for restarts, i in enumerate(order, 1):
            old = members[i]
            old.stop()
            new = member(f"m{i}-restart{restarts}", f"instance-{i}")
            members[i] = new
            wait_until(lambda new=new: new.assignment, 30, f"restarted instance-{i} to be assigned")
            assert new.assignment == first[old.name], (new.assignment, first[old.name])
            for j, m in members.items():
                if j != i:
                    assert m.assignment == first[f"m{j}"], (m.name, m.assignment)
        # the others never saw an assign or revoke callback once the group was stable
        for j in (1, 2, 3):
            if j not in order:
                assert ledger.callbacks_of(f"m{j}", since=stable_at) == [], f"m{j}"
                assert members[j].assignment == first[f"m{j}"]
        # and the gateway neither rebalanced nor bumped the group epoch
        assert group_events(gw, group, "group.generation_started", since=log_mark) == []
        assert group_events(gw, group, "group.rebalance_prepared", since=log_mark) == []
        assert group_events(gw, group, "group.epoch_bumped", since=log_mark) == []
        replaced = group_events(gw, group, "member.replaced", since=log_mark)
        assert [e["instance_id"] for e in replaced] == [f"instance-{i}" for i in order]
        if protocol == "consumer":
            left = group_events(gw, group, "member.left_temporarily", since=log_mark)
            assert [e["instance_id"] for e in left] == ["instance-2"]

        wait_until(lambda: producer.finished, 30, "the producer")
        assert producer.error is None
        wait_until(lambda: ledger.distinct() >= COUNT, 60, "every record to be consumed")
        end = dict.fromkeys(range(PARTITIONS), PER_PARTITION)
        wait_until(
            lambda: committed_offsets(gw, group, topic) == end, 20, "the end offsets committed", interval=0.3
        )
        ledger.check_consumed()
        for m in members.values():
            assert not m.errors, (m.name, m.errors)
    finally:
        for m in members.values():
            if m.live:
                m.stop()
