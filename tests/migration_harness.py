"""A shard with the translation layer installed, driven by both protocols: KIP-848 members
(ConsumerGroupHeartbeat) and classic members (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) carrying
real embedded consumer protocol bytes. Appends are acknowledged at once."""

from __future__ import annotations

from typing import Any

from engine.classic.api import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
)
from engine.classic.member import Protocol
from engine.config import CoordinatorConfig
from engine.consumer.api import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from engine.context import RequestContext
from engine.errors import Errors
from engine.ids import SeededIds
from engine.metadata import MetadataImage, TopicImage, topic_id_for
from engine.outcome import Outcome, Pending
from engine.shard import Shard
from records.classic_group import GroupMemberMetadata, GroupMetadataKey, GroupMetadataValue
from records.consumer_group import TopicPartitions
from records.coordinator import CoordinatorRecord
from translation.coordinator import Coordinator
from translation.embedded_protocol import (
    Subscription,
    parse_assignment,
    serialize_assignment,
    serialize_subscription,
)

FOO = topic_id_for("foo")


def sub(
    *topics: str, version: int = 0, owned: dict[str, list[int]] | None = None, user_data: bytes | None = None
) -> bytes:
    return serialize_subscription(
        Subscription(
            version, tuple(topics), user_data, tuple((t, tuple(p)) for t, p in (owned or {}).items())
        )
    )


class MigrationHarness:
    def __init__(self, topics: dict[str, int] | None = None, **config: Any) -> None:
        cfg = {
            "group.initial.rebalance.delay.ms": 0,
            "group.min.session.timeout.ms": 10,
            "group.consumer.session.timeout.ms": 45000,
            "group.consumer.min.session.timeout.ms": 100,
            "group.consumer.heartbeat.interval.ms": 5000,
            "group.consumer.min.heartbeat.interval.ms": 10,
        }
        cfg.update({k.replace("_", "."): v for k, v in config.items()})
        image = MetadataImage([TopicImage(topic_id_for(n), n, c) for n, c in (topics or {"foo": 6}).items()])
        self.shard = Shard(CoordinatorConfig.from_kafka(cfg), SeededIds(21), image)
        self.coordinator = Coordinator(self.shard)
        self.now = 10_000
        self.completed: dict[Pending, Any] = {}
        self.log: list[CoordinatorRecord] = []
        self.last: Outcome[Any] | None = None

    # --- plumbing -------------------------------------------------------------------------

    def process(self, out: Outcome[Any]) -> Any:
        self.last = out
        for h, r in out.completions:
            self.completed[h] = r
        self.log.extend(out.records)
        if out.on_append is not None:
            self.process(out.on_append(Errors.NONE))
        return out.response

    def result(self, r: Any) -> Any:
        return self.completed.get(r) if isinstance(r, Pending) else r

    def tick(self) -> int:
        self.now += 1
        return self.now

    def advance(self, ms: int) -> list[Outcome[Any]]:
        self.now += ms
        outs = self.shard.expire(self.now)
        for o in outs:
            self.process(o)
        return outs

    # --- KIP-848 members ---------------------------------------------------------------------

    def cgh(
        self,
        member_id: str,
        epoch: int,
        *,
        topics: list[str] | None = None,
        owned: Any = None,
        instance_id: str | None = None,
        full: bool = False,
        group: str = "g",
    ) -> ConsumerGroupHeartbeatResponse:
        if epoch == 0:
            req = ConsumerGroupHeartbeatRequest(
                group,
                member_id,
                0,
                instance_id=instance_id,
                rebalance_timeout_ms=30000,
                subscribed_topic_names=topics or ["foo"],
                topic_partitions=[],
            )
        else:
            req = ConsumerGroupHeartbeatRequest(
                group, member_id, epoch, instance_id=instance_id, topic_partitions=owned
            )
        r = self.process(
            self.coordinator.consumer_group_heartbeat(req, RequestContext("kip848", "/h", 1), self.tick())
        )
        assert isinstance(r, ConsumerGroupHeartbeatResponse)
        return r

    def ack(
        self, member_id: str, r: ConsumerGroupHeartbeatResponse, instance_id: str | None = None
    ) -> ConsumerGroupHeartbeatResponse:
        owned = list(r.assignment or ())
        return self.cgh(member_id, r.member_epoch, owned=owned, instance_id=instance_id)

    def owned_of(self, member_id: str, group: str = "g") -> list[TopicPartitions]:
        g = self.shard.consumer_group(group)
        assert g is not None
        return [TopicPartitions(t, p) for t, p in g.members[member_id].assigned_partitions.items()]

    # --- classic members ---------------------------------------------------------------------

    def join(
        self,
        member_id: str = "",
        *,
        metadata: bytes | None = None,
        protocols: tuple[Protocol, ...] | None = None,
        instance_id: str | None = None,
        version: int = 5,
        session: int = 10_000,
        rebalance: int = 10_000,
        group: str = "g",
        protocol_type: str = "consumer",
    ) -> Any:
        protocols = protocols or (Protocol("range", metadata if metadata is not None else sub("foo")),)
        req = JoinGroupRequest(group, session, rebalance, member_id, protocol_type, protocols, instance_id)
        return self.process(
            self.coordinator.join_group(req, RequestContext("classic", "/h", version), self.tick())
        )

    def sync(
        self,
        member_id: str,
        generation: int,
        *,
        instance_id: str | None = None,
        group: str = "g",
        assignments: dict[str, bytes] | None = None,
        protocol_name: str | None = "range",
    ) -> Any:
        req = SyncGroupRequest(
            group,
            generation,
            member_id,
            instance_id,
            "consumer",
            protocol_name,
            list((assignments or {}).items()),
        )
        return self.process(self.coordinator.sync_group(req, RequestContext("classic", "/h", 5), self.tick()))

    def heartbeat(
        self, member_id: str, generation: int, *, instance_id: str | None = None, group: str = "g"
    ) -> int:
        r = self.process(
            self.coordinator.heartbeat(
                HeartbeatRequest(group, generation, member_id, instance_id),
                RequestContext("classic", "/h", 4),
                self.tick(),
            )
        )
        return int(r.error_code)

    def leave(self, *members: tuple[str, str | None], group: str = "g") -> Any:
        req = LeaveGroupRequest(group, [MemberIdentity(m, i) for m, i in members])
        return self.process(
            self.coordinator.leave_group(req, RequestContext("classic", "/h", 5), self.tick())
        )

    # --- seeding -----------------------------------------------------------------------------

    def seed_classic_group(
        self,
        generation: int,
        assignments: dict[str, list[int]],
        *,
        protocol: str = "range",
        instance_ids: dict[str, str] | None = None,
        version: int = 0,
        group: str = "g",
        session: int = 10_000,
    ) -> None:
        """A Stable classic group, as loaded from its GroupMetadata record."""
        members = tuple(
            GroupMemberMetadata(
                mid,
                (instance_ids or {}).get(mid),
                "classic",
                "/h",
                10_000,
                session,
                sub("foo", version=version),
                serialize_assignment({"foo": parts}, version),
            )
            for mid, parts in assignments.items()
        )
        leader = next(iter(assignments))
        rec = CoordinatorRecord(
            GroupMetadataKey(group),
            GroupMetadataValue("consumer", generation, protocol, leader, self.now, members),
        )
        self.shard.apply([rec])
        self.log.append(rec)

    @staticmethod
    def assignment_partitions(data: bytes) -> dict[str, tuple[int, ...]]:
        return dict(parse_assignment(data).partitions)
