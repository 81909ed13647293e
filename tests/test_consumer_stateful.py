"""Stateful property test of consumer groups (KIP-848 "Rebalance Process", "Reconciliation").

Random joins (dynamic, static, regex), heartbeats with and without revocation acknowledgements,
lost responses, leaves (-1 and static -2), topic changes, and clock advances that fence silent
members. After every step the protocol's guarantees are checked:

* safety: no partition is owned (assigned or pending revocation) by two members, neither in the
  coordinator's view nor in the view of the clients that are still members;
* epochs: no member is ahead of the group epoch;
* the target: once computed, it assigns every partition of the group's subscribed topics exactly
  once, and only to members subscribed to the topic;
* records are the truth: a replica that only replays the records written so far holds the same
  state as the live shard (and at the end, so does a replay from an empty shard);
* liveness (at the end): once changes stop and members keep heartbeating, the group is STABLE
  and every member holds exactly its target.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from engine.config import CoordinatorConfig
from engine.consumer.api import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from engine.consumer.group import ConsumerGroup, ConsumerGroupState
from engine.context import RequestContext
from engine.errors import Errors
from engine.ids import SeededIds
from engine.metadata import MetadataImage, TopicImage, topic_id_for
from engine.outcome import Outcome
from engine.shard import Shard
from records.consumer_group import TopicPartitions
from records.coordinator import CoordinatorRecord
from tests.stateful_settings import stateful_settings

CONFIG = CoordinatorConfig.from_kafka(
    {
        "group.consumer.session.timeout.ms": 3000,
        "group.consumer.min.session.timeout.ms": 100,
        "group.consumer.heartbeat.interval.ms": 1000,
        "group.consumer.min.heartbeat.interval.ms": 10,
    }
)
NAMES = ["m0", "m1", "m2", "m3", "m4"]
STATIC = {"m3": "inst-3", "m4": "inst-4"}
SUBSCRIPTIONS = [("foo",), ("bar",), ("foo", "bar"), ("foo", "baz")]
TOPICS = ["foo", "bar", "baz"]


@dataclass
class Client:
    name: str
    member_id: str
    topics: tuple[str, ...]
    regex: str | None = None
    epoch: int = 0
    owned: dict[Any, tuple[int, ...]] = field(default_factory=dict)
    generation: int = 0  # bumps on each restart of a static member (new member id)
    needs_release: bool = False
    full_next: bool = False  # after a lost response a client sends a full heartbeat


class ConsumerGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        image = MetadataImage(
            [TopicImage(topic_id_for("foo"), "foo", 4), TopicImage(topic_id_for("bar"), "bar", 3)]
        )
        self.shard = Shard(CONFIG, SeededIds(3), image)
        self.replica = Shard(CONFIG, SeededIds(3), image)
        self.log: list[CoordinatorRecord] = []
        self.clients: dict[str, Client] = {}
        self.now = 0
        self.topic_generation = 0

    # --- plumbing -------------------------------------------------------------------------

    def _record(self, out: Outcome[Any]) -> None:
        self.log.extend(out.records)
        self.replica.apply(out.records)

    def _send(
        self, c: Client, req: ConsumerGroupHeartbeatRequest, lose: bool = False
    ) -> ConsumerGroupHeartbeatResponse:
        self.now += 1
        out = self.shard.consumer_group_heartbeat(req, RequestContext("c", "h", 1), self.now)
        self._record(out)
        resp = out.response
        assert isinstance(resp, ConsumerGroupHeartbeatResponse)
        if lose:
            c.full_next = True  # the request timed out: the next heartbeat is a full one
            return resp
        if resp.error_code in (Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID):
            c.epoch, c.owned = 0, {}  # the client abandons its partitions and will rejoin
            if c.name in STATIC and resp.error_code == Errors.FENCED_MEMBER_EPOCH:
                c.needs_release = True  # its instance id is still held by its old self
        elif resp.error_code == 0 and req.member_epoch >= 0:
            c.epoch = resp.member_epoch
            if resp.assignment is not None:
                c.owned = {tp.topic_id: tp.partitions for tp in resp.assignment}
        else:
            assert resp.error_code == 0 or req.member_epoch < 0, resp
        return resp

    def _join(self, c: Client) -> ConsumerGroupHeartbeatResponse:
        if c.needs_release:
            # A static member whose instance is still held (Kafka would answer
            # UNRELEASED_INSTANCE_ID): it releases it (-2) and comes back as a new incarnation.
            self._send(
                c,
                ConsumerGroupHeartbeatRequest(
                    group_id="g", member_id=c.member_id, member_epoch=-2, instance_id=STATIC[c.name]
                ),
            )
            c.generation += 1
            c.member_id = f"{c.name}-gen{c.generation}"
            c.needs_release = False
        c.epoch, c.owned = 0, {}
        return self._send(
            c,
            ConsumerGroupHeartbeatRequest(
                group_id="g",
                member_id=c.member_id,
                member_epoch=0,
                instance_id=STATIC.get(c.name),
                rebalance_timeout_ms=2000,
                subscribed_topic_names=list(c.topics),
                subscribed_topic_regex=c.regex,
                topic_partitions=[],
            ),
        )

    def _heartbeat(self, c: Client, ack: bool, lose: bool = False) -> None:
        if c.epoch == 0:
            self._join(c)
            return
        full = c.full_next
        owned = [TopicPartitions(t, p) for t, p in c.owned.items()] if ack or full else None
        self._send(
            c,
            ConsumerGroupHeartbeatRequest(
                group_id="g",
                member_id=c.member_id,
                member_epoch=c.epoch,
                instance_id=STATIC.get(c.name),
                topic_partitions=owned,
                rebalance_timeout_ms=2000 if full else -1,
                subscribed_topic_names=list(c.topics) if full else None,
            ),
            lose=lose,
        )
        if full and not lose:
            c.full_next = False

    @property
    def group(self) -> ConsumerGroup | None:
        return self.shard.consumer_group("g")

    # --- rules ----------------------------------------------------------------------------

    @rule(name=st.sampled_from(NAMES), subs=st.sampled_from(SUBSCRIPTIONS), use_regex=st.booleans())
    def join(self, name: str, subs: tuple[str, ...], use_regex: bool) -> None:
        c = self.clients.get(name)
        if c is None:
            c = Client(name, name, subs, "ba.*" if use_regex and name == "m2" else None)
            self.clients[name] = c
        elif name in STATIC and c.epoch > 0:
            c.needs_release = True  # a live static member "rejoining" is a restart
        self._join(c)

    @rule(name=st.sampled_from(NAMES), ack=st.booleans())
    def heartbeat(self, name: str, ack: bool) -> None:
        c = self.clients.get(name)
        if c is not None:
            self._heartbeat(c, ack)

    @rule(name=st.sampled_from(NAMES), ack=st.booleans())
    def heartbeat_with_lost_response(self, name: str, ack: bool) -> None:
        c = self.clients.get(name)
        if c is not None and c.epoch > 0:
            self._heartbeat(c, ack, lose=True)

    @rule(name=st.sampled_from(NAMES))
    def leave(self, name: str) -> None:
        c = self.clients.pop(name, None)
        if c is not None and c.epoch > 0:
            self._send(
                c,
                ConsumerGroupHeartbeatRequest(
                    group_id="g", member_id=c.member_id, member_epoch=-1, instance_id=STATIC.get(name)
                ),
            )

    @rule(name=st.sampled_from(sorted(STATIC)))
    def static_restart(self, name: str) -> None:
        """A static member leaves temporarily (-2) and comes back as a new process."""
        c = self.clients.get(name)
        if c is None or c.epoch <= 0:
            return
        self._send(
            c,
            ConsumerGroupHeartbeatRequest(
                group_id="g", member_id=c.member_id, member_epoch=-2, instance_id=STATIC[name]
            ),
        )
        c.generation += 1
        c.member_id = f"{name}-gen{c.generation}"
        self._join(c)

    @rule(topic=st.sampled_from(TOPICS), partitions=st.integers(0, 5))
    def change_topic(self, topic: str, partitions: int) -> None:
        """Delete a topic, create it (a new topic id each time, as Kafka does), or add
        partitions; Kafka never lets a topic id lose partitions."""
        image = self.shard.image
        current = image.topic(topic)
        if partitions == 0:
            image = image.without_topic(topic)
        elif current is None:
            self.topic_generation += 1
            image = image.with_topic(
                TopicImage(topic_id_for(f"{topic}#{self.topic_generation}"), topic, partitions)
            )
        elif partitions > current.num_partitions:
            image = image.with_topic(TopicImage(current.topic_id, topic, partitions))
        else:
            return
        self.shard.update_metadata(image)
        self.replica.update_metadata(image)

    @rule(ms=st.sampled_from([10, 500, 1500, 3500]))
    def advance(self, ms: int) -> None:
        self.now += ms
        for out in self.shard.expire(self.now):
            self._record(out)

    # --- invariants -----------------------------------------------------------------------

    @invariant()
    def no_partition_owned_twice_by_the_coordinator(self) -> None:
        g = self.group
        if g is None:
            return
        seen: dict[tuple[Any, int], str] = {}
        for mid, m in g.members.items():
            for source in (m.assigned_partitions, m.partitions_pending_revocation):
                for t, parts in source.items():
                    for p in parts:
                        assert (t, p) not in seen, f"{t}-{p} owned by {seen[(t, p)]} and {mid}"
                        seen[(t, p)] = mid

    @invariant()
    def no_partition_owned_twice_by_live_clients(self) -> None:
        g = self.group
        if g is None:
            return
        seen: dict[tuple[Any, int], str] = {}
        for c in self.clients.values():
            if c.member_id not in g.members or c.epoch <= 0:
                continue  # a fenced zombie: Kafka cannot stop it either
            for t, parts in c.owned.items():
                for p in parts:
                    assert (t, p) not in seen, f"{t}-{p} owned by clients {seen[(t, p)]} and {c.name}"
                    seen[(t, p)] = c.name

    @invariant()
    def no_member_is_ahead_of_the_group_epoch(self) -> None:
        g = self.group
        if g is None:
            return
        for m in g.members.values():
            assert m.member_epoch <= g.group_epoch
        assert g.assignment_epoch <= g.group_epoch

    @invariant()
    def target_assigns_each_subscribed_partition_exactly_once(self) -> None:
        g = self.group
        if g is None or not g.members or g.group_epoch != g.assignment_epoch:
            return
        expected = {
            (t.topic_id, p) for t in g.subscription_metadata.values() for p in range(t.num_partitions)
        }
        got: list[tuple[Any, int]] = []
        for mid, a in g.target_assignment.items():
            subscribed = {
                g.subscription_metadata[n].topic_id
                for n in g.member_subscribed_topics(g.members[mid])
                if n in g.subscription_metadata
            }
            for t, parts in a.items():
                assert t in subscribed, f"{mid} is given a topic it does not subscribe to"
                got.extend((t, p) for p in parts)
        assert len(got) == len(set(got)), "a partition is in two targets"
        assert set(got) == expected

    @invariant()
    def replica_replaying_the_records_equals_the_live_state(self) -> None:
        live = {k: g.persisted_state() for k, g in self.shard.groups.items()}
        replayed = {k: g.persisted_state() for k, g in self.replica.groups.items()}
        assert live == replayed

    def teardown(self) -> None:
        # Replay from an empty shard gives the live state.
        fresh = Shard(CONFIG, SeededIds(3), self.shard.image)
        fresh.apply(self.log)
        assert {k: g.persisted_state() for k, g in fresh.groups.items()} == {
            k: g.persisted_state() for k, g in self.shard.groups.items()
        }
        # Liveness: with no more changes and everyone heartbeating, the group settles.
        for _ in range(12):
            for c in list(self.clients.values()):
                self._heartbeat(c, ack=True)
        g = self.group
        if g is None or not g.members:
            return
        assert g.state() is ConsumerGroupState.STABLE, g.state()
        for mid, m in g.members.items():
            assert m.assigned_partitions == g.target(mid) or (
                {t: set(p) for t, p in m.assigned_partitions.items() if p}
                == {t: set(p) for t, p in g.target(mid).items() if p}
            ), mid
        for c in self.clients.values():
            assert c.owned == {t: p for t, p in g.members[c.member_id].assigned_partitions.items()}


TestConsumerGroupStateMachine = ConsumerGroupMachine.TestCase
TestConsumerGroupStateMachine.settings = stateful_settings(150, 40)
