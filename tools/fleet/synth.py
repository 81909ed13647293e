"""`groupshift fleet synth`: a realistic fleet of groupshift data dirs, written by the real engine.

Nothing here writes a coordinator record by hand. Every cluster is a set of shards opened with
`CoordinatorStorage` on `<out>/<cluster>/coordinator/__consumer_offsets-N` (the gateway's own
layout and journal), each an engine shard with the translation layer's hooks, and simulated clients
speak to it: classic members run JoinGroup -> SyncGroup -> Heartbeat (the leader computes the
assignment client-side, as Kafka's consumers do, with the range or round-robin assignor of
sim/client_assignors.py), KIP-848 members run ConsumerGroupHeartbeat (KIP-848 "Consumer Group
Heartbeat"), and both commit offsets. Online migrations (KIP-848
"Supporting Online Consumer Group Upgrade") happen because a consumer-protocol member joins a
classic group, exactly as on a gateway. Groups are routed to shards with Kafka's
`partitionFor`, so a data dir reads like a broker's `__consumer_offsets` partitions.

The events of every operation are logged to `<out>/<cluster>/events.jsonl` in the gateway's JSON
event-log format (`gateway.groups.events` completes them the way the runtime does), with the
simulated clock as timestamp, so the fleet report can measure rebalances. The broker settings a
cluster ran with are in `<out>/<cluster>/settings.json` (`groupshift fleet report` judges the
groups against them).

The mix (per group, drawn from a seeded RNG): classic groups with the range, round-robin or
cooperative-sticky assignors from Java, librdkafka and kafka-python clients, some with static
members; librdkafka cooperative-sticky leaders whose assignment carries userData (the upgrade
blocker of KAFKA-18134); Kafka Connect groups (protocol type `connect`); native KIP-848 groups
subscribing by names or by regular expression; classic groups upgraded online by a rolling
restart, groups half-way through one, groups rolled back to classic; groups with offsets only;
and large groups over the cluster's `group.consumer.max.size`. Offset commits then fill the log
up to the requested number of records.
"""

from __future__ import annotations

import datetime
import json
import os
import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from engine.classic.api import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
    SyncGroupResponse,
)
from engine.classic.member import Protocol
from engine.config import CoordinatorConfig
from engine.consumer.api import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from engine.context import RequestContext
from engine.errors import Errors
from engine.ids import SeededIds
from engine.metadata import MetadataImage, TopicImage, topic_id_for
from engine.offsets.api import CommitPartition, CommitTopic, OffsetCommitRequest
from engine.outcome import Event, Outcome, Pending
from gateway.coordinator_storage import CoordinatorStorage
from gateway.dataplane.topics import TOPICS_FILE, TopicInfo, TopicRegistry
from gateway.groups.events import WARNING_EVENTS, ClassicAssignments, annotate
from gateway.groups.routing import partition_for
from records.consumer_group import TopicPartitions
from sim.client_assignors import range_assign, roundrobin_assign
from translation.embedded_protocol import (
    Subscription,
    parse_assignment,
    parse_subscription,
    serialize_assignment,
    serialize_subscription,
)

T0_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the fleet's clock starts here
# Long sessions (the broker allows up to 30 minutes) so that a simulated hour costs few
# heartbeats: every live member heartbeats each KEEPALIVE_MS, time moves in STEP_MS steps and a
# group whose timers fired settles at once (its members rejoin, as real clients would).
SESSION_MS = 300_000
REBALANCE_MS = 30_000
KEEPALIVE_MS = 120_000
STEP_MS = 10_000
ROUND_MS = 300_000
CHURN_PER_ROUND = 0.04

TOPICS: dict[str, int] = {
    "orders": 12,
    "payments": 6,
    "events.click": 8,
    "events.view": 8,
    "events.search": 4,
    "logs-app": 3,
    "logs-audit": 3,
    "inventory": 6,
    "connect-configs": 1,
}
PLAIN_TOPICS = [t for t in TOPICS if not t.startswith("connect")]
REGEXES = ("events\\..*", "logs-.*", "orders|payments")

# (client id prefix, client host, classic assignor names offered, userData in the assignment)
CLASSIC_CLIENTS: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("java-consumer", ("range",), False),
    ("java-consumer", ("cooperative-sticky", "range"), False),
    ("kafka-python", ("range", "roundrobin"), False),
    ("rdkafka", ("range",), False),
    ("rdkafka", ("cooperative-sticky",), True),
)

KINDS: tuple[tuple[str, int], ...] = (
    ("classic", 30),
    ("classic-static", 8),
    ("classic-userdata", 6),
    ("connect", 4),
    ("consumer", 16),
    ("consumer-regex", 6),
    ("migrated", 12),
    ("migrating", 5),
    ("downgraded", 3),
    ("offsets-only", 6),
    ("large", 4),
)


def cluster_settings(index: int) -> dict[str, str]:
    """The broker settings of cluster `index`: most allow both conversions, one in five only
    upgrades, one in seven none; every cluster caps consumer groups at 24 members."""
    policy = "bidirectional"
    if index % 7 == 6:
        policy = "disabled"
    elif index % 5 == 4:
        policy = "upgrade"
    return {
        "group.consumer.migration.policy": policy,
        "group.consumer.max.size": "24",
        "group.max.size": "1000",
        "offsets.topic.num.partitions": "4",
    }


@dataclass
class ClassicClient:
    name: str
    client_id: str
    topics: tuple[str, ...]
    assignors: tuple[str, ...]
    user_data: bool
    instance_id: str | None = None
    protocol_type: str = "consumer"
    member_id: str = ""
    generation: int = -1
    owned: dict[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass
class ConsumerClient:
    member_id: str
    client_id: str
    topics: tuple[str, ...] = ()
    regex: str | None = None
    assignor: str | None = None
    instance_id: str | None = None
    epoch: int = 0
    owned: tuple[TopicPartitions, ...] = ()


@dataclass
class GroupPlan:
    group_id: str
    kind: str
    classic: dict[str, ClassicClient] = field(default_factory=dict)
    consumer: dict[str, ConsumerClient] = field(default_factory=dict)


class ShardDriver:
    """One shard of one cluster: its storage, its engine shard, the clients of its groups."""

    def __init__(self, cluster: ClusterDriver, index: int, directory: str) -> None:
        self.cluster = cluster
        self.index = index
        self.storage = CoordinatorStorage.open(
            directory,
            config=cluster.config,
            ids=SeededIds(cluster.seed * 1000 + index),
            image=cluster.image,
            now_ms=cluster.now,
            fsync_policy="none",
        )
        self.shard = self.storage.shard
        self.assignments = ClassicAssignments()
        self.groups: dict[str, GroupPlan] = {}
        self._parked: dict[Pending, tuple[GroupPlan, ClassicClient]] = {}
        self.last_keepalive = cluster.now
        self._settling = False

    # --- plumbing --------------------------------------------------------------------------

    def run(self, out: Outcome[Any]) -> Any:
        """Acknowledge the outcome's append (the journal already wrote it), log its events,
        hand parked answers to their clients."""
        self._emit(out.events)
        if out.on_append is not None:
            self.run(out.on_append(Errors.NONE))
        for handle, response in out.completions:
            parked = self._parked.pop(handle, None)
            if parked is not None:
                self._answer(parked[0], parked[1], response)
        return out.response

    def _emit(self, events: list[Event] | tuple[Event, ...]) -> None:
        if not events:
            return
        shard = self.storage.shard
        annotate(shard, events)
        derived = self.assignments.derive(shard, events)
        for name, fields in (*events, *derived):
            self.cluster.log_event(name, self.index, fields)

    def expire(self) -> None:
        """Fire the timers due now; a group whose timers fired (a session expired, a rebalance
        timed out) settles at once, as its live members would on their next heartbeat."""
        touched: set[str] = set()
        for out in self.storage.shard.expire(self.cluster.now):
            touched |= {str(f.get("group")) for _, f in out.events}
            self.run(out)
        for gid in sorted(touched):
            plan = self.groups.get(gid)
            if plan is not None and not self._settling:
                self._settling = True
                try:
                    self.settle(plan)
                finally:
                    self._settling = False

    def ctx(self, client_id: str, version: int) -> RequestContext:
        return RequestContext(client_id, f"/10.{self.cluster.index % 250}.0.{self.index + 1}", version)

    # --- classic members -------------------------------------------------------------------

    def _classic(self, plan: GroupPlan, c: ClassicClient, out: Outcome[Any]) -> Any:
        response = self.run(out)
        if isinstance(response, Pending):
            self._parked[response] = (plan, c)
            return None
        return response

    def _answer(self, plan: GroupPlan, c: ClassicClient, response: Any) -> None:
        if isinstance(response, JoinGroupResponse):
            self._joined(plan, c, response)
        elif isinstance(response, SyncGroupResponse):
            self._synced(c, response)

    def classic_join(self, plan: GroupPlan, c: ClassicClient) -> None:
        self.cluster.tick()
        c.owned = {} if "cooperative-sticky" not in c.assignors else c.owned
        if c.protocol_type == "consumer":
            owned = tuple(sorted(c.owned.items())) if "cooperative-sticky" in c.assignors else ()
            meta = serialize_subscription(Subscription(1 if owned else 0, c.topics, None, owned))
        else:
            meta = json.dumps({"worker": c.name, "url": f"http://{c.name}:8083"}).encode()
        protocols = tuple(Protocol(a, meta) for a in c.assignors)
        req = JoinGroupRequest(
            plan.group_id, SESSION_MS, REBALANCE_MS, c.member_id, c.protocol_type, protocols, c.instance_id
        )
        ctx = self.ctx(c.client_id, 5)
        r = self._classic(plan, c, self.shard.join_group(req, ctx, self.cluster.now))
        if isinstance(r, JoinGroupResponse) and r.error_code == Errors.MEMBER_ID_REQUIRED:
            c.member_id = r.member_id
            req.member_id = r.member_id
            self.cluster.tick()
            r = self._classic(plan, c, self.shard.join_group(req, ctx, self.cluster.now))
        if isinstance(r, JoinGroupResponse):
            self._joined(plan, c, r)
        self.expire()

    def _joined(self, plan: GroupPlan, c: ClassicClient, r: JoinGroupResponse) -> None:
        if r.error_code != 0:
            if r.error_code == Errors.UNKNOWN_MEMBER_ID:
                c.member_id = ""
            return
        c.member_id, c.generation = r.member_id, r.generation_id
        assignments: list[tuple[str, bytes]] = []
        protocol = r.protocol_name or c.assignors[0]
        if r.leader == r.member_id and r.members:
            if c.protocol_type == "consumer":
                subs = {m.member_id: parse_subscription(m.metadata).topics for m in r.members}
                counts = {t: self.cluster.image_counts[t] for ts in subs.values() for t in ts}
                plan_ = (roundrobin_assign if protocol == "roundrobin" else range_assign)(subs, counts)
                user_data = b"\x00\x00\x00\x01" + r.generation_id.to_bytes(4, "big") if c.user_data else None
                version = 1 if protocol == "cooperative-sticky" else 0
                assignments = [(m, serialize_assignment(plan_[m], version, user_data)) for m in subs]
            else:
                assignments = [
                    (m.member_id, json.dumps({"tasks": [i]}).encode()) for i, m in enumerate(r.members)
                ]
        req = SyncGroupRequest(
            plan.group_id, c.generation, c.member_id, c.instance_id, c.protocol_type, protocol, assignments
        )
        self.cluster.tick()
        ctx = self.ctx(c.client_id, 5)
        s = self._classic(plan, c, self.shard.sync_group(req, ctx, self.cluster.now))
        if isinstance(s, SyncGroupResponse):
            self._synced(c, s)

    def _synced(self, c: ClassicClient, s: SyncGroupResponse) -> None:
        if s.error_code == 0 and s.assignment and c.protocol_type == "consumer":
            c.owned = dict(parse_assignment(s.assignment).partitions)

    def classic_heartbeat(self, plan: GroupPlan, c: ClassicClient) -> bool:
        """Heartbeat; rejoin when told to. True when the member had to rejoin."""
        if not c.member_id or c.generation < 0:  # never joined, or its JoinGroup still waits
            self.classic_join(plan, c)
            return True
        self.cluster.tick()
        req = HeartbeatRequest(plan.group_id, c.generation, c.member_id, c.instance_id)
        out = self.shard.heartbeat(req, self.ctx(c.client_id, 4), self.cluster.now)
        response = self.run(out)
        assert isinstance(response, HeartbeatResponse)
        code = response.error_code
        if code == Errors.REBALANCE_IN_PROGRESS:
            self.classic_join(plan, c)
            return True
        if code in (Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID):
            if code == Errors.UNKNOWN_MEMBER_ID and c.instance_id is None:
                c.member_id = ""
            self.classic_join(plan, c)
            return True
        return False

    def classic_leave(self, plan: GroupPlan, name: str) -> None:
        c = plan.classic.pop(name)
        self.cluster.tick()
        req = LeaveGroupRequest(plan.group_id, [MemberIdentity(c.member_id, c.instance_id)])
        self.run(self.shard.leave_group(req, self.ctx(c.client_id, 5), self.cluster.now))

    # --- KIP-848 members -------------------------------------------------------------------

    def consumer_heartbeat(self, plan: GroupPlan, c: ConsumerClient, *, leave: bool = False) -> bool:
        """One ConsumerGroupHeartbeat; True when the member's assignment or epoch changed."""
        self.cluster.tick()
        if leave:
            req = ConsumerGroupHeartbeatRequest(
                plan.group_id, c.member_id, -2 if c.instance_id else -1, instance_id=c.instance_id
            )
        elif c.epoch == 0:
            req = ConsumerGroupHeartbeatRequest(
                plan.group_id,
                c.member_id,
                0,
                instance_id=c.instance_id,
                rebalance_timeout_ms=REBALANCE_MS,
                subscribed_topic_names=None if c.regex else list(c.topics),
                subscribed_topic_regex=c.regex,
                server_assignor=c.assignor,
                topic_partitions=[],
            )
        else:
            req = ConsumerGroupHeartbeatRequest(
                plan.group_id, c.member_id, c.epoch, instance_id=c.instance_id, topic_partitions=list(c.owned)
            )
        response = self.run(
            self.shard.consumer_group_heartbeat(req, self.ctx(c.client_id, 1), self.cluster.now)
        )
        if leave:
            return True
        assert isinstance(response, ConsumerGroupHeartbeatResponse)
        if response.error_code in (Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_MEMBER_EPOCH):
            c.epoch, c.owned = 0, ()
            return True
        if response.error_code != 0:
            return False
        changed = response.member_epoch != c.epoch
        c.epoch = response.member_epoch
        if response.assignment is not None:
            changed = changed or tuple(response.assignment) != c.owned
            c.owned = tuple(response.assignment)
        return changed

    def consumer_leave(self, plan: GroupPlan, member_id: str) -> None:
        c = plan.consumer.pop(member_id)
        self.consumer_heartbeat(plan, c, leave=True)

    # --- whole groups ----------------------------------------------------------------------

    def settle(self, plan: GroupPlan, rounds: int = 8) -> None:
        """Heartbeat every member, round after round, until a round changes nothing."""
        for _ in range(rounds):
            self.expire()
            changed = False
            for c in list(plan.classic.values()):
                changed |= self.classic_heartbeat(plan, c)
            for k in list(plan.consumer.values()):
                changed |= self.consumer_heartbeat(plan, k)
            if not changed:
                return

    def keepalive(self) -> None:
        """Every member of every group of the shard heartbeats (time moves for all groups)."""
        self.last_keepalive = self.cluster.now
        for plan in list(self.groups.values()):
            for c in list(plan.classic.values()):
                self.classic_heartbeat(plan, c)
            for k in list(plan.consumer.values()):
                self.consumer_heartbeat(plan, k)

    def commit(self, plan: GroupPlan, rng: random.Random, counter: list[int]) -> int:
        """Each member commits an offset for every partition it owns (a group without members
        commits as an admin tool or a simple consumer does); returns the partitions committed."""
        batches: list[tuple[int, str, str | None, str, dict[str, tuple[int, ...]], int]] = []
        for c in plan.classic.values():
            if c.protocol_type == "consumer" and c.owned:
                batches.append((c.generation, c.member_id, c.instance_id, c.client_id, c.owned, 8))
        for k in plan.consumer.values():
            if k.owned:
                owned = {self.cluster.topic_names[tp.topic_id]: tuple(tp.partitions) for tp in k.owned}
                batches.append((k.epoch, k.member_id, k.instance_id, k.client_id, owned, 9))
        if not batches and plan.kind == "offsets-only":
            topic = PLAIN_TOPICS[zlib.crc32(plan.group_id.encode()) % len(PLAIN_TOPICS)]
            everything = tuple(range(self.cluster.image_counts[topic]))
            batches.append((-1, "", None, "admin", {topic: everything}, 8))
        written = 0
        for gen, mid, iid, client_id, owned, version in batches:  # KIP-848 members commit with v9+
            counter[0] += rng.randint(1, 500)
            topics = [
                CommitTopic(t, [CommitPartition(p, counter[0] + p, 0, "") for p in ps])
                for t, ps in sorted(owned.items())
                if ps
            ]
            self.cluster.tick()
            req = OffsetCommitRequest(plan.group_id, gen, mid, iid, -1, topics)
            self.run(self.shard.offset_commit(req, self.ctx(client_id, version), self.cluster.now))
            written += sum(len(t.partitions) for t in topics)
        return written

    def close(self) -> None:
        self.storage.close()


class ClusterDriver:
    def __init__(self, out_dir: str, name: str, index: int, seed: int) -> None:
        self.name = name
        self.index = index
        self.seed = seed
        self.dir = os.path.join(out_dir, name)
        self.settings = cluster_settings(index)
        self.num_partitions = int(self.settings["offsets.topic.num.partitions"])
        self.config = CoordinatorConfig.from_kafka(
            {
                "group.initial.rebalance.delay.ms": 0,
                "group.consumer.session.timeout.ms": SESSION_MS,
                "group.consumer.max.session.timeout.ms": 1_800_000,
                "group.consumer.migration.policy": self.settings["group.consumer.migration.policy"],
                "group.consumer.max.size": int(self.settings["group.consumer.max.size"]),
                "group.max.size": int(self.settings["group.max.size"]),
            }
        )
        self.image = MetadataImage([TopicImage(topic_id_for(n), n, c) for n, c in TOPICS.items()])
        self.image_counts = dict(TOPICS)
        self.topic_names = {topic_id_for(n): n for n in TOPICS}
        self.now = T0_MS + index * 7_919
        os.makedirs(os.path.join(self.dir, "coordinator"), exist_ok=True)
        with open(os.path.join(self.dir, "settings.json"), "w") as f:
            json.dump(self.settings, f, indent=2, sort_keys=True)
        # the server's own topic registry file (`{"version": 1, "topics": [...]}`), written by
        # its own code, so that a synthetic data dir reads like a real one
        registry = [TopicInfo(n, topic_id_for(n), c) for n, c in TOPICS.items()]
        TopicRegistry(Path(self.dir) / TOPICS_FILE, registry).persist()
        self.events: IO[str] = open(os.path.join(self.dir, "events.jsonl"), "w")  # noqa: SIM115
        self.shards = [
            ShardDriver(self, i, os.path.join(self.dir, "coordinator", f"__consumer_offsets-{i}"))
            for i in range(self.num_partitions)
        ]

    def tick(self, ms: int = 1) -> None:
        self.now += ms

    def advance(self, ms: int) -> None:
        """Move the clock in steps short enough that every live member heartbeats in time."""
        while ms > 0:
            step = min(ms, STEP_MS)
            self.now += step
            ms -= step
            for s in self.shards:
                s.expire()
                if self.now - s.last_keepalive >= KEEPALIVE_MS:
                    s.keepalive()

    def log_event(self, name: str, shard: int, fields: dict[str, Any]) -> None:
        ts = datetime.datetime.fromtimestamp(self.now / 1000, datetime.UTC)
        line = {
            "event": name,
            "level": "warning" if name in WARNING_EVENTS else "info",
            "timestamp": ts.isoformat().replace("+00:00", "Z"),
            "cluster": self.name,
            "shard": shard,
            **fields,
        }
        self.events.write(json.dumps(line, default=str) + "\n")

    def shard_for(self, group_id: str) -> ShardDriver:
        return self.shards[partition_for(group_id, self.num_partitions)]

    def records(self) -> int:
        return sum(s.storage.end_offset for s in self.shards)

    def close(self) -> None:
        for s in self.shards:
            s.close()
        self.events.close()


def _classic_client(rng: random.Random, name: str, topics: tuple[str, ...], kind: str) -> ClassicClient:
    if kind == "classic-userdata":
        prefix, assignors, user_data = CLASSIC_CLIENTS[4]
    else:
        prefix, assignors, user_data = rng.choice(CLASSIC_CLIENTS[:4])
    return ClassicClient(name, f"{prefix}-{name}", topics, assignors, user_data)


CLASSIC_KINDS = ("classic", "classic-static", "classic-userdata", "connect", "large", "migrated", "migrating")


class GroupBuilder:
    """Forms one group of a kind through the engine, then lives its life on the timeline:
    restarts, crashes (the member stops heartbeating and the coordinator expires it), and for
    the migration kinds a rolling restart onto the other protocol."""

    def __init__(self, cluster: ClusterDriver, rng: random.Random, group_id: str, kind: str) -> None:
        self.cluster = cluster
        self.rng = rng
        self.shard = cluster.shard_for(group_id)
        self.plan = GroupPlan(group_id, kind)
        self.shard.groups[group_id] = self.plan
        self.topics = tuple(sorted(rng.sample(PLAIN_TOPICS, rng.randint(1, 3))))
        self.size = rng.choice((1, 2, 2, 3, 3, 4, 5, 6, 8)) if kind != "large" else rng.randint(26, 40)
        self.member_kind = kind if kind in ("classic-static", "classic-userdata", "connect") else "classic"
        self.regex = kind == "consumer-regex"
        self.serial = 0

    def add_classic(self, n: int, member_kind: str, instance_id: str | None = None) -> None:
        plan = self.plan
        for i in range(n):
            self.serial += 1
            name = f"{plan.group_id}-c{self.serial}"
            c = _classic_client(self.rng, name, self.topics, member_kind)
            if member_kind == "classic-static":
                c.instance_id = instance_id or f"{plan.group_id}-instance-{i}"
            if member_kind == "connect":
                c.protocol_type, c.assignors, c.client_id = "connect", ("sessioned",), f"connect-{name}"
            plan.classic[name] = c
            self.shard.classic_join(plan, c)
            self.cluster.tick(self.rng.randint(5, 200))
        self.shard.settle(plan)

    def add_consumer(self, n: int) -> None:
        plan = self.plan
        for _ in range(n):
            self.serial += 1
            mid = f"{plan.group_id}-k{self.serial}-{self.rng.getrandbits(40):010x}"
            k = ConsumerClient(
                mid,
                f"{self.rng.choice(('java-consumer', 'rdkafka'))}-{mid[-6:]}",
                () if self.regex else self.topics,
                self.rng.choice(REGEXES) if self.regex else None,
                self.rng.choice((None, None, "uniform", "range")),
            )
            plan.consumer[mid] = k
            self.shard.consumer_heartbeat(plan, k)
            self.shard.settle(plan)
            self.cluster.tick(self.rng.randint(100, 3000))

    def form(self) -> None:
        kind = self.plan.kind
        if kind in (
            "classic",
            "classic-static",
            "classic-userdata",
            "connect",
            "large",
            "migrated",
            "migrating",
        ):
            self.add_classic(self.size, self.member_kind)
        elif kind == "offsets-only":
            self.shard.commit(self.plan, self.rng, [0])  # an admin tool's commit creates the group
        elif kind in ("consumer", "consumer-regex", "downgraded"):
            self.add_consumer(self.size)
        self.shard.settle(self.plan)

    def churn(self) -> None:
        """One member restarts (leaves, a new instance joins) or crashes (no leave: the
        coordinator fences it when its session times out; a new instance joins now)."""
        plan = self.plan
        crash = self.rng.random() < 0.3
        if plan.classic and (not plan.consumer or self.rng.random() < 0.5):
            name = self.rng.choice(sorted(plan.classic))
            instance_id = plan.classic[name].instance_id  # a static member comes back as itself
            kind = "classic-static" if instance_id else self.member_kind
            if plan.classic[name].protocol_type == "connect":
                kind = "connect"
            if crash:
                plan.classic.pop(name)
            else:
                self.shard.classic_leave(plan, name)
            self.shard.settle(plan)
            self.add_classic(1, kind, instance_id)
        elif plan.consumer:
            mid = self.rng.choice(sorted(plan.consumer))
            if crash:
                plan.consumer.pop(mid)
            else:
                self.shard.consumer_leave(plan, mid)
            self.shard.settle(plan)
            self.add_consumer(1)

    def migrate(self) -> None:
        """A rolling restart onto the other protocol, one member at a time, the new instance
        first (KIP-848's online migration): all of them, or half for the `migrating` kind."""
        plan = self.plan
        if plan.kind in ("migrated", "migrating"):
            names = sorted(plan.classic)
            steps = len(names) if plan.kind == "migrated" else max(1, len(names) // 2)
            for name in names[:steps]:
                self.add_consumer(1)
                self.shard.classic_leave(plan, name)
                self.shard.settle(plan)
                self.cluster.advance(self.rng.randint(5_000, 60_000))
        elif plan.kind == "downgraded":
            for mid in sorted(plan.consumer):
                self.add_classic(1, "classic")
                self.shard.consumer_leave(plan, mid)
                self.shard.settle(plan)
                self.cluster.advance(self.rng.randint(5_000, 60_000))


@dataclass
class SynthResult:
    clusters: list[str]
    groups: int
    records: int


def synth(
    out_dir: str,
    *,
    clusters: int,
    groups: int,
    records: int,
    hours: float = 4.0,
    seed: int = 1,
    progress: IO[str] | None = None,
) -> SynthResult:
    """Write `clusters` data dirs under `out_dir` with `groups` groups each and, all clusters
    together, at least `records` coordinator records (offset commits fill up to it), over
    `hours` of simulated time per cluster: groups form in the first tenth, then every
    `ROUND_MS` each group commits, now and then a member restarts or crashes, and the
    migration kinds roll over to the other protocol at a random point of the middle half."""
    rng = random.Random(seed)
    names = [f"cluster-{i:02d}" for i in range(clusters)]
    kinds = [k for k, _ in KINDS]
    weights = [w for _, w in KINDS]
    total_groups = 0
    total = 0
    per_cluster = max(1, records // max(1, clusters))
    counter = [0]
    for ci, name in enumerate(names):
        d = ClusterDriver(out_dir, name, ci, seed)
        try:
            span = int(hours * 3_600_000)
            rounds = max(4, span // ROUND_MS)
            builders = []
            for gi in range(groups):
                # every kind at least once per cluster (the first groups), then the weighted mix
                kind = kinds[(gi + ci) % len(kinds)] if gi < len(kinds) else rng.choices(kinds, weights)[0]
                b = GroupBuilder(d, rng, f"{kind}-{gi:04d}-{rng.getrandbits(24):06x}", kind)
                b.form()
                builders.append(b)
                d.advance(max(1, span // 10 // max(1, groups)))
            total_groups += len(builders)
            migrate_at = {id(b): rng.randint(rounds // 4, 3 * rounds // 4) for b in builders}
            for r in range(rounds):
                budget = max(0, per_cluster - d.records()) // max(1, rounds - r)
                goal = d.records() + budget
                for b in builders:
                    if r == migrate_at[id(b)]:
                        b.migrate()
                    elif rng.random() < CHURN_PER_ROUND:
                        b.churn()
                    if d.records() < goal:
                        b.shard.commit(b.plan, rng, counter)
                d.advance(ROUND_MS)
            while d.records() < per_cluster:  # the rest of the records, as more commits
                before = d.records()
                for b in builders:
                    b.shard.commit(b.plan, rng, counter)
                    if d.records() >= per_cluster:
                        break
                d.advance(ROUND_MS)
                if d.records() == before:
                    break  # nothing can commit (no owned partitions anywhere)
            total += d.records()
            if progress is not None:
                progress.write(f"{d.name}: {len(builders)} groups, {d.records()} records\n")
        finally:
            d.close()
    return SynthResult(names, total_groups, total)
