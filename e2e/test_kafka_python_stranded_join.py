"""kafka-python 3.0.12's stranded leader, and the test members' way out of it
(`e2e.migration.unstrand_kafka_python_join`).

A kafka-python leader rejoins when the topic's metadata changes. If poll()'s timeout expires
while that JoinGroup waits, and the metadata changes back before the next poll, the client never
awaits the join again: the leader stays silent (no heartbeat), its session expires and the
others get its partitions while it still believes it holds them. In CI this happened in front of
a 3-broker Kafka 3.9 cluster (a broker that did not know a just-created topic yet), in
e2e/test_upstream_kafka.py's rolling upgrade.

Here a real client is put in that state against `groupshift serve`: two cooperative-sticky
members are stable; the other member stops polling, so a join phase waits for it; the leader's
metadata snapshot is changed and changed back around one poll. Without the rule the leader is
stranded (its session expires, the other member takes every partition); with it, both end with
half of the partitions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from e2e.migration import FAST_GROUP_SETTINGS, create_topic, unstrand_kafka_python_join, wait_until

pytestmark = pytest.mark.e2e

kafka = pytest.importorskip("kafka")

TOPIC = "t"


def consumer(gw: GatewayProcess, name: str) -> Any:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor

    c = KafkaConsumer(
        bootstrap_servers=gw.bootstrap,
        group_id="g",
        client_id=name,
        enable_auto_commit=False,
        heartbeat_interval_ms=250,
        session_timeout_ms=6000,
        max_poll_interval_ms=20000,
        partition_assignment_strategy=[CooperativeStickyAssignor],
    )
    c.subscribe([TOPIC])
    return c


def owned(c: Any) -> list[int]:
    return sorted(tp.partition for tp in c.assignment())


class Poller:
    """Polls a consumer in a thread while `active` is set."""

    def __init__(self, c: Any) -> None:
        self.c = c
        self.active = threading.Event()
        self.active.set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            if self.active.wait(0.05):
                self.c.poll(timeout_ms=100)

    def pause(self) -> None:
        self.active.clear()
        time.sleep(0.3)  # a poll in progress ends

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)


@pytest.fixture
def pair(gateways: Gateways) -> Iterator[tuple[Any, Any, Poller, Poller]]:
    gw = gateways.start("stranded", sets=list(FAST_GROUP_SETTINGS))
    create_topic(gw, TOPIC, 6)
    leader = consumer(gw, "leader")
    wait_until(lambda: leader._coordinator._metadata_snapshot.get(TOPIC), 30, "the leader's metadata")
    lp = Poller(leader)
    wait_until(lambda: len(owned(leader)) == 6, 30, "the leader to hold every partition")
    other = consumer(gw, "other")
    op = Poller(other)
    wait_until(lambda: owned(leader) == [0, 1, 2] and owned(other) == [3, 4, 5], 30, "a balanced pair")
    try:
        yield leader, other, lp, op
    finally:
        lp.close()
        op.close()
        leader.close(autocommit=False)
        other.close(autocommit=False)


def strand(leader: Any, lp: Poller, op: Poller) -> None:
    """The leader's JoinGroup left in flight while no rejoin is needed (the CI failure's state)."""
    lp.pause()
    op.pause()
    coordinator = leader._coordinator
    real = coordinator._metadata_snapshot
    coordinator._metadata_snapshot = {TOPIC: set()}  # the topic "disappears": the leader rejoins
    leader.poll(timeout_ms=100)  # the join phase waits for the other member: the timeout expires
    assert coordinator._join_task is not None and coordinator.need_rejoin()
    coordinator._metadata_snapshot = real  # ... and comes back
    assert coordinator._join_task is not None and not coordinator.need_rejoin()
    op.active.set()


def test_a_stranded_leader_loses_its_partitions_without_the_rule(
    pair: tuple[Any, Any, Poller, Poller],
) -> None:
    leader, other, lp, op = pair
    strand(leader, lp, op)
    lp.active.set()
    # Its session expires (6 s); the other member is given every partition, the leader never knows.
    wait_until(lambda: owned(other) == [0, 1, 2, 3, 4, 5], 30, "the other member to take every partition")
    assert owned(leader) == [0, 1, 2]
    assert leader._coordinator._join_task is not None


def test_the_rule_takes_a_stranded_leader_back_into_the_group(pair: tuple[Any, Any, Poller, Poller]) -> None:
    leader, other, lp, op = pair
    strand(leader, lp, op)
    applied = 0
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        leader.poll(timeout_ms=100)
        applied += unstrand_kafka_python_join(leader._coordinator)
    assert applied >= 1
    assert owned(leader) == [0, 1, 2] and owned(other) == [3, 4, 5]
    assert leader._coordinator._join_task is None
