"""A thin driver for rule tests of the consumer-group engine: one shard, a clock, request
builders. Tests assert on responses, the exact records written, and timers."""

from __future__ import annotations

from typing import Any

from engine.config import CoordinatorConfig
from engine.consumer.api import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from engine.consumer.group import ConsumerGroup
from engine.context import RequestContext
from engine.ids import SeededIds
from engine.metadata import MetadataImage, TopicImage, topic_id_for
from engine.outcome import Outcome
from engine.shard import Shard
from records.consumer_group import TopicPartitions
from records.coordinator import CoordinatorRecord

FAST = {
    "group.consumer.session.timeout.ms": 45000,
    "group.consumer.heartbeat.interval.ms": 5000,
    "group.consumer.min.session.timeout.ms": 100,
    "group.consumer.min.heartbeat.interval.ms": 10,
}

FOO = topic_id_for("foo")
BAR = topic_id_for("bar")


def tp(topic: Any, *parts: int) -> TopicPartitions:
    return TopicPartitions(topic, tuple(parts))


class Harness:
    def __init__(self, topics: dict[str, int] | None = None, **config: Any) -> None:
        cfg = dict(FAST)
        cfg.update({k.replace("_", "."): v for k, v in config.items()})
        topics = {"foo": 6, "bar": 3} if topics is None else topics
        image = MetadataImage([TopicImage(topic_id_for(n), n, c) for n, c in topics.items()])
        self.shard = Shard(CoordinatorConfig.from_kafka(cfg), SeededIds(7), image)
        self.now = 1000
        self.ctx = RequestContext("client-1", "/127.0.0.1", 1)
        self.last: Outcome[Any] | None = None

    # --- requests ---------------------------------------------------------------------------

    def hb(self, version: int = 1, **fields: Any) -> ConsumerGroupHeartbeatResponse:
        fields.setdefault("group_id", "g")
        req = ConsumerGroupHeartbeatRequest(**fields)
        self.now += 1
        self.last = self.shard.consumer_group_heartbeat(req, self.ctx.with_version(version), self.now)
        resp = self.last.response
        assert isinstance(resp, ConsumerGroupHeartbeatResponse)
        return resp

    def join(
        self, member_id: str, topics: tuple[str, ...] | None = ("foo",), **kw: Any
    ) -> ConsumerGroupHeartbeatResponse:
        kw.setdefault("rebalance_timeout_ms", 30000)
        kw.setdefault("topic_partitions", [])
        return self.hb(
            member_id=member_id,
            member_epoch=0,
            subscribed_topic_names=None if topics is None else list(topics),
            **kw,
        )

    def ack(
        self, member_id: str, resp: ConsumerGroupHeartbeatResponse, **kw: Any
    ) -> ConsumerGroupHeartbeatResponse:
        """Heartbeat reporting the assignment of `resp` as owned (a revocation acknowledgement)."""
        owned = list(resp.assignment or ())
        return self.hb(member_id=member_id, member_epoch=resp.member_epoch, topic_partitions=owned, **kw)

    def converge(self, *member_ids: str, rounds: int = 6) -> None:
        """Every member heartbeats and acknowledges until nothing changes."""
        epochs = {m: self.member(m).member_epoch for m in member_ids}
        for _ in range(rounds):
            for m in member_ids:
                cur = self.member(m)
                owned = [TopicPartitions(t, p) for t, p in cur.assigned_partitions.items()]
                r = self.hb(
                    member_id=m, member_epoch=epochs[m], topic_partitions=owned, instance_id=cur.instance_id
                )
                assert r.error_code == 0, r
                epochs[m] = r.member_epoch

    def advance(self, ms: int) -> list[Outcome[Any]]:
        self.now += ms
        return self.shard.expire(self.now)

    # --- reads ------------------------------------------------------------------------------

    @property
    def group(self) -> ConsumerGroup:
        g = self.shard.consumer_group("g")
        assert g is not None
        return g

    def member(self, member_id: str) -> Any:
        return self.group.members[member_id]

    @property
    def records(self) -> list[CoordinatorRecord]:
        assert self.last is not None
        return list(self.last.records)

    def record_types(self) -> list[str]:
        """`k5`, `k3`... with a `-` suffix for tombstones, in write order."""
        return [f"k{r.key.RECORD_TYPE}{'-' if r.value is None else ''}" for r in self.records]

    def timer_keys(self) -> set[str]:
        return set(self.shard.timers.keys())
