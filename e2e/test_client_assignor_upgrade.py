"""The KAFKA-18134 upgrade through the client-side `cooperative-sticky` adapter, end to end.

Kafka 4.x refuses to move a classic group whose members run a client-side assignor onto KIP-848
(KAFKA-18134); on groupshift, with `group.consumer.client.assignors.enable=true`, a
`consumer_membership` member whose client assignor is `cooperative-sticky` and reads metadata
version -1 joins the classic group of two librdkafka (confluent-kafka) `cooperative-sticky`
consumers: the group converts, that member computes the whole group's assignment from the
librdkafka members' subscriptions (their owned partitions and userData), and everyone goes on
consuming while a continuous producer writes. Then a librdkafka member is replaced by a second
client-assignor member. The migration checkers of `e2e.migration` judge the run: no partition
owned by two members at once, every acknowledged record consumed, duplicates only where a
hand-over allows them, commits never backwards.

The same group on a real Apache Kafka 4.4 node pins the refusal: once librdkafka's assignments
carry its sticky userData, the same client-assignor member's ConsumerGroupHeartbeat (its tag is
one Kafka skips) is answered GROUP_ID_NOT_FOUND with Kafka's message, and the group stays
classic. Kafka 4.4's `ConsumerGroup.fromClassicGroup` throws "userData from a custom assignor
would be lost" for a member whose assignment has userData, and `convertToConsumerGroup` turns it
into that GroupIdNotFoundException (KAFKA-18134).

The client-assignor member reads records too, to take part in the checks: `consumer_membership`
is a membership client (it fetches nothing), so its callbacks drive a confluent-kafka consumer
by manual assignment, starting at the group's committed offsets, and commit with its own member
id and epoch (OffsetCommit v9) before each revocation returns.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from consumer_membership import (
    ConsumerMembership,
    ConsumerMembershipThread,
    CooperativeStickyAdapter,
    GroupAssignment,
    GroupState,
)
from consumer_membership.cooperative_sticky import read_classic_claim
from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from e2e.migration import (
    Member,
    committed_offsets,
    group_type,
    librdkafka_config,
    observer,
    scenario,
)
from protocol.client import WireClient, make_request
from translation.embedded_protocol import parse_assignment

pytestmark = pytest.mark.e2e

SETTINGS = ("group.consumer.client.assignors.enable=true",)


class RecordingAdapter(CooperativeStickyAdapter):
    """The adapter, remembering what each computation was given (classic members seen)."""

    def __init__(self) -> None:
        super().__init__()
        # (epoch, members, classic members, classic members whose metadata claims partitions)
        self.computations: list[tuple[int, int, int, int]] = []

    def assign(self, group: GroupState) -> GroupAssignment:
        classic = [m for m in group.members if m.is_classic]
        claims = [read_classic_claim(m.metadata) for m in classic]
        owning = sum(1 for c in claims if c is not None and c.owned and c.generation >= 0)
        self.computations.append((group.group_epoch, len(group.members), len(classic), owning))
        return super().assign(group)


def describe_classic(port: int, group: str) -> tuple[str, str, list[bytes | None]]:
    """(state, protocol, each member's assignment user data) from DescribeGroups v5."""
    with WireClient(port) as c:
        r = c.request(make_request(15, 5, groups=[group], include_authorized_operations=False))
    g = r.groups[0]
    users = [
        parse_assignment(bytes(m.member_assignment)).user_data if m.member_assignment else None
        for m in g.members
    ]
    return g.group_state, g.protocol_data, users


def classic_user_data(gw: GatewayProcess, group: str) -> list[bytes | None]:
    """Each classic member's assignment user data (DescribeGroups)."""
    return describe_classic(gw.port, group)[2]


def topic_id(gw: GatewayProcess, topic: str) -> uuid.UUID:
    with observer(gw) as c:
        r = c.request(
            make_request(
                3,
                12,
                topics=[{"name": topic, "topic_id": uuid.UUID(int=0)}],
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
    return uuid.UUID(str(r.topics[0].topic_id))


class ClientAssignorMember(Member):
    """A `consumer_membership` member with the adapter, reading its partitions with a manually
    assigned confluent-kafka consumer and committing as itself (member id and epoch)."""

    kind = "groupshift-client-cooperative-sticky"
    protocol = "consumer"

    def __init__(self, name: str, s: Any) -> None:
        super().__init__(name, s.timeline, s.gw.bootstrap, s.group)
        self.gw = s.gw
        self.adapter = RecordingAdapter()
        self.topic_id = topic_id(s.gw, s.topic)
        self.io = threading.Lock()  # the reader and the callbacks share the consumer
        self.consumer: Any = None
        self.membership: ConsumerMembership | None = None

    def _partitions(self, tps: frozenset[tuple[uuid.UUID, int]]) -> list[int]:
        return sorted(p for t, p in tps if t == self.topic_id)

    def _commit(self, offsets: dict[int, int]) -> None:
        m = self.membership
        if not offsets or m is None:
            return
        with observer(self.gw) as c:
            r = c.request(
                make_request(
                    8,
                    9,
                    group_id=self.group,
                    generation_id_or_member_epoch=m.epoch,
                    member_id=m.member_id,
                    group_instance_id=None,
                    topics=[
                        {
                            "name": self.topic,
                            "partitions": [
                                {
                                    "partition_index": p,
                                    "committed_offset": o,
                                    "committed_leader_epoch": -1,
                                    "committed_metadata": "",
                                }
                                for p, o in offsets.items()
                            ],
                        }
                    ],
                )
            )
        ok = {p.partition_index for t in r.topics for p in t.partitions if p.error_code == 0}
        failed = {p.partition_index: p.error_code for t in r.topics for p in t.partitions if p.error_code}
        if failed:
            self.client_errors.append(("commit", False, f"{failed}"))
        self._committed_ok({p: o for p, o in offsets.items() if p in ok})

    def _on_assigned(self, tps: frozenset[tuple[uuid.UUID, int]]) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        t = time.time()
        ps = self._partitions(tps)
        if not ps:
            return
        committed = committed_offsets(self.gw, self.group, self.topic)
        with self.io:
            self.consumer.incremental_assign(
                [
                    TopicPartition(
                        self.topic, p, committed.get(p, -1) if committed.get(p, -1) >= 0 else OFFSET_BEGINNING
                    )
                    for p in ps
                ]
            )
        self._assigned(ps, t)

    def _on_revoked(self, tps: frozenset[tuple[uuid.UUID, int]], lost: bool) -> None:
        from confluent_kafka import TopicPartition

        t = time.time()
        ps = self._partitions(tps)
        with self.io:
            self.consumer.incremental_unassign([TopicPartition(self.topic, p) for p in ps])
            if not lost:
                self._commit(self._to_commit(ps))
        self._released("lost" if lost else "revoked", ps, t)

    def run(self) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer(
            {
                **librdkafka_config(self.bootstrap),
                "group.id": f"{self.group}-reader-{self.name}",  # never joined: manual assignment
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
            }
        )
        self.membership = ConsumerMembership(
            self.bootstrap,
            self.group,
            [self.topic],
            [self.adapter],
            on_assigned=self._on_assigned,
            on_revoked=self._on_revoked,
            rebalance_timeout_ms=20000,
            client_id=self.name,  # the scenario's describe names members by client id
        )
        thread = ConsumerMembershipThread(self.membership, name=f"{self.name}-membership")
        thread.start()
        self._note_member_id(self.membership.member_id)
        self.timeline.mark(self.name, "started", self.kind)
        self.running.set()
        try:
            while not self._stop.is_set():
                with self.io:
                    batch = self.consumer.consume(num_messages=500, timeout=0.05)
                    for msg in batch:
                        if msg.error() is None and msg.topic() == self.topic:
                            self._record(msg.partition(), msg.offset(), msg.value())
                    if self._periodic_commit_due():
                        self._commit(self._to_commit())
                time.sleep(0.005)
            with self.io:
                self._commit(self._to_commit())
        finally:
            self.timeline.mark(self.name, "closing")
            thread.close(10.0)
            self.consumer.close()
            self.timeline.mark(self.name, "closed")


def test_librdkafka_cooperative_sticky_group_upgrades_through_the_adapter(gateways: Gateways) -> None:
    with scenario(gateways, "csa-upgrade", SETTINGS) as s:
        first = s.cast.classic("confluent-cooperative-sticky")
        s.cast.classic("confluent-cooperative-sticky")
        s.step("classic", "two librdkafka cooperative-sticky members")
        third = s.cast.classic("confluent-cooperative-sticky")
        s.step("classic", "three")
        third.stop()
        s.step("classic", "two again")
        # after rebalances librdkafka's assignments carry its sticky user data: the custom-assignor
        # state KAFKA-18134 refuses to drop on Kafka
        assert all(classic_user_data(s.gw, s.group)), classic_user_data(s.gw, s.group)

        n1 = ClientAssignorMember("csa-1", s)
        s.cast.add(n1)
        s.step("consumer", "a client-assignor member joined: converted")
        assert ("classic", "consumer") in s.conversions()
        # the adapter computed with the two librdkafka members in the group (version -1)
        assert any(members == 3 and classic == 2 for _, members, classic, _ in n1.adapter.computations), (
            n1.adapter.computations
        )
        # and it read their claims (owned partitions at their generation) from that metadata
        assert any(claims == 2 for *_, claims in n1.adapter.computations), n1.adapter.computations

        first.stop()
        n2 = ClientAssignorMember("csa-2", s)
        s.cast.add(n2)
        s.step("consumer", "a librdkafka member replaced by a second client-assignor member")
        assert group_type(s.gw, s.group) == "consumer"
        assert n1.adapter.computations[-1][1:3] == (3, 1), n1.adapter.computations[-3:]
        assert not n2.adapter.computations  # n1 stays the assigning member (first in order)

        report = s.finish()
    assert report.records > 0 and report.handovers > 0, report


KAFKA_REFUSAL = (
    "ConsumerGroupHeartbeat failed: GROUP_ID_NOT_FOUND Cannot upgrade classic group {group} to "
    "consumer group because an unsupported custom assignor is in use. Please refer to the "
    "documentation or switch to a default assignor before re-attempting the upgrade."
)


def test_kafka_4_4_refuses_the_same_upgrade(kafka4: Any) -> None:
    """KAFKA-18134 on a real Kafka 4.4 node: two librdkafka cooperative-sticky members whose
    assignments carry userData; the client-assignor member that upgrades this group on groupshift
    is refused with Kafka's error and message, computes nothing, and the group stays classic."""
    import asyncio

    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    from consumer_membership import ConsumerMembershipError

    assert str(kafka4.version).startswith("4.4"), kafka4.version
    run = uuid.uuid4().hex[:6]
    topic, group = f"csa-kafka-{run}-topic", f"csa-kafka-{run}-group"
    admin = AdminClient({"bootstrap.servers": kafka4.bootstrap})  # kept: its futures need it
    for f in admin.create_topics([NewTopic(topic, 6, 1)]).values():
        f.result(timeout=30)
    consumers: list[Any] = []
    try:
        for n in (1, 2):  # the second joins a stable group: the first one's 2nd generation
            c = Consumer(
                {
                    **librdkafka_config(kafka4.bootstrap),
                    "group.id": group,
                    "group.protocol": "classic",
                    "partition.assignment.strategy": "cooperative-sticky",
                    "heartbeat.interval.ms": 500,
                    "session.timeout.ms": 45000,
                    "enable.auto.commit": False,
                }
            )
            c.subscribe([topic])
            consumers.append(c)
            deadline = time.monotonic() + 60
            while True:
                for each in consumers:
                    each.poll(0.1)
                state, protocol, users = describe_classic(kafka4.port(), group)
                if state == "Stable" and len(users) == n and (n == 1 or all(users)):
                    break
                assert time.monotonic() < deadline, (n, state, users)
        assert protocol == "cooperative-sticky" and all(users), users  # the custom assignor's state

        adapter = RecordingAdapter()
        member = ConsumerMembership(kafka4.bootstrap, group, [topic], [adapter], client_id="csa-kafka")
        with pytest.raises(ConsumerMembershipError) as refused:
            asyncio.run(asyncio.wait_for(member.run(), 60))
        assert refused.value.code == 69, refused.value  # GROUP_ID_NOT_FOUND
        assert str(refused.value) == KAFKA_REFUSAL.format(group=group), str(refused.value)
        assert not adapter.computations
        for each in consumers:
            each.poll(0.1)
        state, protocol, users = describe_classic(kafka4.port(), group)
        assert (state, protocol, len(users)) == ("Stable", "cooperative-sticky", 2), (state, users)
    finally:
        for c in consumers:  # librdkafka consumers left open block the interpreter's exit
            c.close()
