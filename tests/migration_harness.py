"""A shard with the translation layer installed, driven by both protocols: KIP-848 members
(ConsumerGroupHeartbeat) and classic members (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) carrying
real embedded consumer protocol bytes. Appends are acknowledged at once, unless a test sets
`append_error`: the shard's journal then refuses the next operations' records, as a broker whose
log append fails (Kafka's "rollback" tests).

Groups are seeded through records (`seed_classic`, `seed_consumer_group`), exactly as a shard
loads them, so every seeded state is one a replay can rebuild. `PreparedAssignor` plays Kafka's
`MockPartitionAssignor` (a prepared target) and `NoOpPartitionAssignor` (nothing prepared: every
member keeps its previous target)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine import assignors
from engine.assignment import EMPTY, Assignment
from engine.assignors.base import GroupSpec, TopicDescriber
from engine.classic.api import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
)
from engine.classic.member import Protocol
from engine.config import CoordinatorConfig
from engine.consumer import record_builders as rb
from engine.consumer.api import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from engine.consumer.member import ConsumerGroupMember
from engine.consumer.membership import subscription_metadata
from engine.context import RequestContext
from engine.errors import AppendError, Errors
from engine.ids import SeededIds
from engine.metadata import MetadataImage, TopicImage, topic_id_for
from engine.outcome import Outcome, Pending
from engine.shard import Shard
from records.classic_group import GroupMemberMetadata, GroupMetadataKey, GroupMetadataValue
from records.consumer_group import TopicPartitions
from records.coordinator import CoordinatorRecord
from translation.embedded_protocol import (
    Subscription,
    parse_assignment,
    serialize_assignment,
    serialize_subscription,
)
from translation.migration import Migration

FOO = topic_id_for("foo")
BAR = topic_id_for("bar")
ZAR = topic_id_for("zar")

CLASSIC_CLIENT = ("classic", "/h")  # client id and host of the harness's classic requests
KIP848_CLIENT = ("kip848", "/h")  # ... and of its ConsumerGroupHeartbeats


def sub(
    *topics: str,
    version: int = 0,
    owned: dict[str, list[int]] | None = None,
    user_data: bytes | None = None,
    rack: str | None = None,
) -> bytes:
    return serialize_subscription(
        Subscription(
            version,
            tuple(topics),
            user_data,
            tuple((t, tuple(p)) for t, p in (owned or {}).items()),
            rack_id=rack,
        )
    )


def assignment(version: int = 0, user_data: bytes | None = None, **topics: list[int]) -> bytes:
    """A ConsumerProtocolAssignment: `assignment(foo=[0, 1])`."""
    return serialize_assignment({t: p for t, p in topics.items()}, version, user_data)


def by_id(**topics: Sequence[int]) -> dict[Any, tuple[int, ...]]:
    """An engine assignment from topic names: `by_id(foo=[0], bar=[1])`."""
    return {topic_id_for(t): tuple(p) for t, p in topics.items() if p}


class PreparedAssignor:
    """Kafka's MockPartitionAssignor / NoOpPartitionAssignor for the engine's assignor registry.

    With `prepared` set, every member gets its prepared target (nothing when absent); without,
    every member keeps its previous target. Registered under one name; each harness registers
    its own instance, so the harness built last is the one whose preparations apply."""

    name = "prepared"

    def __init__(self) -> None:
        self.prepared: Mapping[str, Assignment] | None = None
        self.calls = 0

    def assign(self, spec: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
        self.calls += 1
        if self.prepared is None:
            return {mid: m.assignment for mid, m in spec.members.items()}
        return {mid: self.prepared.get(mid, EMPTY) for mid in spec.members}


@dataclass(frozen=True)
class ClassicSeed:
    """One member of a seeded classic group (what its GroupMetadata record holds)."""

    member_id: str
    subscription: bytes
    assignment: bytes
    instance_id: str | None = None
    session_timeout_ms: int = 5000
    rebalance_timeout_ms: int = 10000
    client_id: str = "client-id"
    client_host: str = "client-host"


class MigrationHarness:
    def __init__(
        self, topics: dict[str, int] | None = None, *, prepared_assignor: bool = False, **config: Any
    ) -> None:
        cfg: dict[str, Any] = {
            "group.initial.rebalance.delay.ms": 0,
            "group.min.session.timeout.ms": 10,
            "group.consumer.session.timeout.ms": 45000,
            "group.consumer.min.session.timeout.ms": 100,
            "group.consumer.heartbeat.interval.ms": 5000,
            "group.consumer.min.heartbeat.interval.ms": 10,
        }
        if prepared_assignor:
            self.assignor = PreparedAssignor()
            assignors.register(self.assignor)
            cfg["group.consumer.assignors"] = (PreparedAssignor.name, "uniform", "range")
        cfg.update({k.replace("_", "."): v for k, v in config.items()})
        image = MetadataImage(
            [TopicImage(topic_id_for(n), n, c) for n, c in ({"foo": 6} if topics is None else topics).items()]
        )
        self.shard = Shard(CoordinatorConfig.from_kafka(cfg), SeededIds(21), image, migration=Migration)
        self.coordinator = self.shard
        self.now = 10_000
        self.completed: dict[Pending, Any] = {}
        self.log: list[CoordinatorRecord] = []
        self.last: Outcome[Any] | None = None
        # When set, the journal refuses every operation's records with this append error.
        self.append_error: Errors | None = None
        self.shard.journal = self._journal

    def _journal(self, records: Sequence[CoordinatorRecord]) -> None:
        if self.append_error is not None:
            raise AppendError(self.append_error, f"injected {self.append_error.name}")

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
        rebalance: int = 30000,
        assignor: str | None = None,
        version: int = 1,
    ) -> ConsumerGroupHeartbeatResponse:
        if epoch == 0:
            req = ConsumerGroupHeartbeatRequest(
                group,
                member_id,
                0,
                instance_id=instance_id,
                rebalance_timeout_ms=rebalance,
                subscribed_topic_names=topics or ["foo"],
                server_assignor=assignor,
                topic_partitions=[],
            )
        else:
            req = ConsumerGroupHeartbeatRequest(
                group,
                member_id,
                epoch,
                instance_id=instance_id,
                subscribed_topic_names=topics,
                server_assignor=assignor,
                topic_partitions=owned,
            )
        r = self.process(
            self.coordinator.consumer_group_heartbeat(
                req, RequestContext(*KIP848_CLIENT, version), self.tick()
            )
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
            self.coordinator.join_group(req, RequestContext(*CLASSIC_CLIENT, version), self.tick())
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
        protocol_type: str | None = "consumer",
        version: int = 5,
    ) -> Any:
        req = SyncGroupRequest(
            group,
            generation,
            member_id,
            instance_id,
            protocol_type,
            protocol_name,
            list((assignments or {}).items()),
        )
        return self.process(
            self.coordinator.sync_group(req, RequestContext(*CLASSIC_CLIENT, version), self.tick())
        )

    def heartbeat(
        self, member_id: str, generation: int, *, instance_id: str | None = None, group: str = "g"
    ) -> int:
        r = self.process(
            self.coordinator.heartbeat(
                HeartbeatRequest(group, generation, member_id, instance_id),
                RequestContext(*CLASSIC_CLIENT, 4),
                self.tick(),
            )
        )
        return int(r.error_code)

    def leave(self, *members: tuple[str, str | None], group: str = "g") -> Any:
        req = LeaveGroupRequest(group, [MemberIdentity(m, i) for m, i in members])
        return self.process(
            self.coordinator.leave_group(req, RequestContext(*CLASSIC_CLIENT, 5), self.tick())
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

    def seed_classic(
        self,
        generation: int,
        members: Sequence[ClassicSeed],
        *,
        protocol: str | None = "range",
        protocol_type: str = "consumer",
        leader: str | None = None,
        group: str = "g",
    ) -> None:
        """A classic group as loaded from its GroupMetadata record (Stable with members, Empty
        without); the first member leads unless `leader` says otherwise."""
        value = GroupMetadataValue(
            protocol_type,
            generation,
            protocol,
            leader if leader is not None else (members[0].member_id if members else None),
            self.now,
            tuple(
                GroupMemberMetadata(
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.subscription,
                    m.assignment,
                )
                for m in members
            ),
        )
        self._seed([CoordinatorRecord(GroupMetadataKey(group), value)])

    def seed_consumer_group(
        self,
        epoch: int,
        members: Sequence[ConsumerGroupMember],
        *,
        targets: Mapping[str, Assignment] | None = None,
        assignment_epoch: int | None = None,
        metadata: Iterable[str] | None = None,
        group: str = "g",
    ) -> None:
        """A consumer group as loaded from its records (Kafka's `ConsumerGroupBuilder`): every
        member's k5, k3, the subscription metadata k4 when `metadata` names topics, every
        member's target k7 (its assigned partitions unless `targets` says otherwise), k6, and
        every member's k8."""
        records = [rb.member_metadata(group, m) for m in members]
        records.append(rb.group_epoch(group, epoch))
        if metadata is not None:
            counts = dict.fromkeys(metadata, 1)
            records.append(
                rb.subscription_metadata(group, subscription_metadata(self.shard.image, counts).values())
            )
        for m in members:
            target = m.assigned_partitions if targets is None else targets.get(m.member_id, EMPTY)
            records.append(rb.target_member(group, m.member_id, target))
        records.append(rb.target_epoch(group, epoch if assignment_epoch is None else assignment_epoch))
        records.extend(rb.current_assignment(group, m) for m in members)
        self._seed(records)

    def _seed(self, records: list[CoordinatorRecord]) -> None:
        self.shard.apply(records)
        self.log.extend(records)

    # --- reads -------------------------------------------------------------------------------

    def deadline(self, key: str) -> int | None:
        return self.shard.timers.deadline(key)

    def events(self, name: str) -> list[dict[str, Any]]:
        """The fields of every `name` event of the last outcome."""
        assert self.last is not None
        return [fields for n, fields in self.last.events if n == name]

    def replayed(self) -> Shard:
        """A fresh shard (same config and topics) that replayed `self.log`."""
        shard = Shard(self.shard.config, SeededIds(0), self.shard.image)
        shard.apply(self.log)
        return shard

    @staticmethod
    def assignment_partitions(data: bytes) -> dict[str, tuple[int, ...]]:
        return dict(parse_assignment(data).partitions)
