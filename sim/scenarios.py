"""A deterministic simulator for consumer groups (KIP-848 "Case Studies").

It drives a `Shard` the way a KIP-848 client does (join with epoch 0, heartbeat, acknowledge
revocations by reporting what it still owns, leave) on a virtual clock, and reports the group as
the KIP's case studies draw it: group epoch, target assignment, and per member its epoch, the
partitions it owns and the partitions it waits for.

The KIP draws one request as several tables (epoch bumped; target computed; member moved). The
engine does those in one operation, so the simulator replays each operation's records into a
shadow shard and takes a snapshot after the group-epoch record (k3), after the target-epoch
record (k6) and at the end. Because the state is made only of records, these are exactly the
intermediate states a restart in the middle of the operation's batch would see.

Used by `groupshift simulate` and by the case-study tests.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import IO, Any

from engine.assignment import Assignment
from engine.config import CoordinatorConfig
from engine.consumer.api import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from engine.consumer.group import ConsumerGroup
from engine.consumer.member import MemberState
from engine.consumer.reconcile import pending_assignment
from engine.context import RequestContext
from engine.hooks import MigrationHooks
from engine.ids import SeededIds
from engine.metadata import MetadataImage, TopicImage, topic_id_for
from engine.operation import Operation
from engine.outcome import Outcome
from engine.shard import Shard
from engine.state import ShardState
from records.consumer_group import (
    ConsumerGroupMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    TopicPartitions,
)
from records.coordinator import CoordinatorRecord

GROUP = "group"

# Settings for the demo: the Kafka defaults, with bounds lowered so steps can be short.
SIM_CONFIG = {
    "group.consumer.session.timeout.ms": 45000,
    "group.consumer.heartbeat.interval.ms": 5000,
    "group.consumer.min.session.timeout.ms": 1000,
    "group.consumer.min.heartbeat.interval.ms": 100,
}


# --- views (what the KIP tables show) ----------------------------------------------------------


@dataclass(frozen=True)
class MemberView:
    epoch: int
    partitions: tuple[str, ...]  # owned: assigned + pending revocation
    pending: tuple[str, ...]  # target partitions waiting to be released by their owner
    state: str = "STABLE"
    revoking: tuple[str, ...] = ()


@dataclass(frozen=True)
class GroupView:
    epoch: int
    members: tuple[str, ...]
    target_epoch: int
    target: dict[str, tuple[str, ...]]
    assignments: dict[str, MemberView]

    def kip(
        self,
    ) -> tuple[int, int, dict[str, tuple[str, ...]], dict[str, tuple[int, tuple[str, ...], tuple[str, ...]]]]:
        """(group epoch, target epoch, target, member -> (epoch, partitions, pending)): the
        fields the KIP's tables show, for comparisons in tests."""
        return (
            self.epoch,
            self.target_epoch,
            self.target,
            {m: (v.epoch, v.partitions, v.pending) for m, v in self.assignments.items()},
        )


def _names(shard: Shard, a: Assignment) -> tuple[str, ...]:
    out: list[str] = []
    for t, parts in a.items():
        topic = shard.image.topic_by_id(t)
        name = topic.name if topic is not None else str(t)
        out.extend(f"{name}-{p}" for p in parts)
    return tuple(out)


def view(shard: Shard, group_id: str = GROUP) -> GroupView:
    g = shard.groups.get(group_id)
    if not isinstance(g, ConsumerGroup):
        return GroupView(0, (), 0, {}, {})
    target = {mid: _names(shard, a) for mid, a in g.target_assignment.items()}
    members: dict[str, MemberView] = {}
    for mid, m in g.members.items():
        owned = dict(m.assigned_partitions)
        for t, parts in m.partitions_pending_revocation.items():
            owned[t] = owned.get(t, ()) + parts
        members[mid] = MemberView(
            epoch=m.member_epoch,
            partitions=_names(shard, owned),
            pending=_names(shard, pending_assignment(m, g.target(mid))),
            state=m.state.name,
            revoking=_names(shard, m.partitions_pending_revocation),
        )
    return GroupView(g.group_epoch, tuple(g.members), g.assignment_epoch, target, members)


def format_view(v: GroupView) -> str:
    def parts(p: Iterable[str]) -> str:
        return "[" + ", ".join(p) + "]"

    lines = [f"  • Group (epoch={v.epoch})"]
    lines += [f"    • {m}" for m in v.members] or ["    • Empty"]
    lines.append(f"  • Target Assignment (epoch={v.target_epoch})")
    lines += [f"    • {m} - partitions={parts(p)}" for m, p in v.target.items()] or ["    • Empty"]
    lines.append("  • Member Assignment")
    if not v.assignments:
        lines.append("    • Empty")
    for m, a in v.assignments.items():
        extra = ""
        if a.state != MemberState.STABLE.name:
            extra = f", state={a.state}"
            if a.revoking:
                extra += f", revoking={parts(a.revoking)}"
        lines.append(
            f"    • {m} - epoch={a.epoch}, partitions={parts(a.partitions)}, "
            f"pending-partitions={parts(a.pending)}{extra}"
        )
    return "\n".join(lines)


@dataclass
class Milestone:
    text: str
    view: GroupView


# --- the client side ---------------------------------------------------------------------------


@dataclass
class SimClient:
    """What a KIP-848 client keeps: its id, epoch, and the partitions it owns."""

    member_id: str
    topics: tuple[str, ...]
    regex: str | None = None
    instance_id: str | None = None
    assignor: str | None = None
    epoch: int = 0
    owned: dict[Any, tuple[int, ...]] = field(default_factory=dict)
    unacked: bool = False  # the owned set changed since we last reported it


class Simulator:
    def __init__(
        self,
        topics: dict[str, int] | None = None,
        config: dict[str, Any] | None = None,
        seed: int = 0,
        group_id: str = GROUP,
        migration: Callable[[ShardState], MigrationHooks] | None = None,
    ) -> None:
        cfg = dict(SIM_CONFIG)
        cfg.update(config or {})
        image = MetadataImage([TopicImage(topic_id_for(n), n, c) for n, c in (topics or {}).items()])
        self.shard = Shard(CoordinatorConfig.from_kafka(cfg), SeededIds(seed), image, migration)
        self.shadow = Shard(self.shard.config, SeededIds(seed), image)
        self.group_id = group_id
        self.now = 0
        self.clients: dict[str, SimClient] = {}
        self.milestones: list[Milestone] = []

    # --- driving ---------------------------------------------------------------------------

    def _run(self, text: str, outcome: Outcome[Any]) -> Outcome[Any]:
        """Replay the outcome's records into the shadow shard, recording milestone views."""
        marks: list[Milestone] = []
        for r in outcome.records:
            self.shadow.replay(r)
            if isinstance(r.key, ConsumerGroupMetadataKey) and r.value is not None:
                marks.append(
                    Milestone(f"{text}: the group epoch is bumped", view(self.shadow, self.group_id))
                )
            elif isinstance(r.key, ConsumerGroupTargetAssignmentMetadataKey) and r.value is not None:
                marks.append(
                    Milestone(f"{text}: the target assignment is computed", view(self.shadow, self.group_id))
                )
        final = view(self.shadow, self.group_id)
        if not marks or marks[-1].view != final:
            marks.append(Milestone(text, final))
        self.milestones.extend(marks)
        return outcome

    def seed_records(self, records: list[CoordinatorRecord]) -> None:
        """Start from a state given as records (how the KIP's later case studies begin)."""
        self.shard.apply(records)
        self.shadow.apply(records)

    def adopt(self, member_id: str, topics: Iterable[str]) -> SimClient:
        """A client for a member that already exists in seeded state."""
        m = self.shard.consumer_group(self.group_id).members[member_id]  # type: ignore[union-attr]
        c = SimClient(member_id, tuple(topics), epoch=m.member_epoch, owned=dict(m.assigned_partitions))
        self.clients[member_id] = c
        return c

    def advance(self, ms: int) -> list[Outcome[Any]]:
        self.now += ms
        outs = self.shard.expire(self.now)
        for o in outs:
            text = f"timers expire at t={self.now}ms"
            for name, fields in o.events:
                if name == "member.fenced":
                    text = f"{fields['member']} is fenced because {fields['reason']}"
            self._run(text, o)
        return outs

    def join(
        self,
        member_id: str,
        topics: Iterable[str] = ("foo",),
        regex: str | None = None,
        instance_id: str | None = None,
        assignor: str | None = None,
    ) -> ConsumerGroupHeartbeatResponse:
        c = SimClient(member_id, tuple(topics), regex, instance_id, assignor)
        self.clients[member_id] = c
        req = ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=member_id,
            member_epoch=0,
            instance_id=instance_id,
            rebalance_timeout_ms=30000,
            subscribed_topic_names=list(c.topics),
            subscribed_topic_regex=regex,
            server_assignor=assignor,
            topic_partitions=[],
        )
        return self._send(c, req, f"{member_id} joins")

    def heartbeat(self, member_id: str, text: str | None = None) -> ConsumerGroupHeartbeatResponse:
        c = self.clients[member_id]
        owned = None
        if c.unacked:
            owned = [TopicPartitions(t, p) for t, p in c.owned.items()]
        req = ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=member_id,
            member_epoch=c.epoch,
            instance_id=c.instance_id,
            topic_partitions=owned,
        )
        return self._send(c, req, text or f"{member_id} heartbeats")

    def leave(self, member_id: str, static_temporary: bool = False) -> ConsumerGroupHeartbeatResponse:
        c = self.clients.pop(member_id)
        req = ConsumerGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=member_id,
            member_epoch=-2 if static_temporary else -1,
            instance_id=c.instance_id,
        )
        return self._send(c, req, f"{member_id} leaves")

    def _send(
        self, c: SimClient, req: ConsumerGroupHeartbeatRequest, text: str
    ) -> ConsumerGroupHeartbeatResponse:
        self.now += 1
        out = self.shard.consumer_group_heartbeat(req, RequestContext("sim", "/127.0.0.1", 1), self.now)
        self._run(text, out)
        resp = out.response
        assert isinstance(resp, ConsumerGroupHeartbeatResponse)
        if resp.error_code == 0 and req.member_epoch >= 0:
            if req.topic_partitions is not None:
                c.unacked = False
            c.epoch = resp.member_epoch
            if resp.assignment is not None:
                new = {tp.topic_id: tp.partitions for tp in resp.assignment}
                if new != c.owned:
                    c.owned = new  # revoke what is gone, take what is new: then acknowledge
                    c.unacked = True
        elif resp.error_code != 0:
            c.epoch = 0
            c.owned = {}
        return resp

    # --- topics ------------------------------------------------------------------------------

    def set_topic(self, name: str, partitions: int) -> None:
        old = self.shard.image.topic(name)
        tid = old.topic_id if old is not None else topic_id_for(name)
        image = self.shard.image.with_topic(TopicImage(tid, name, partitions))
        self.shard.update_metadata(image)
        self.shadow.update_metadata(image)

    def delete_topic(self, name: str) -> None:
        image = self.shard.image.without_topic(name)
        self.shard.update_metadata(image)
        self.shadow.update_metadata(image)

    def view(self) -> GroupView:
        return view(self.shard, self.group_id)


# --- scenarios (the KIP-848 case studies) --------------------------------------------------------


def seed_group(
    sim: Simulator,
    epoch: int,
    assignments: dict[str, list[int]],
    topic: str = "foo",
) -> None:
    """Records for a stable group at `epoch` where each member owns its target partitions."""
    from engine.consumer import record_builders as rb
    from engine.consumer.member import ConsumerGroupMember
    from engine.consumer.membership import schedule_session_timeout, subscription_metadata

    tid = topic_id_for(topic)
    gid = sim.group_id
    recs: list[CoordinatorRecord] = []
    members = {}
    for mid, parts in assignments.items():
        m = ConsumerGroupMember(
            member_id=mid,
            client_id="sim",
            client_host="/127.0.0.1",
            subscribed_topic_names=(topic,),
            rebalance_timeout_ms=30000,
            member_epoch=epoch,
            previous_member_epoch=epoch - 1,
            assigned_partitions={tid: tuple(parts)} if parts else {},
        )
        members[mid] = m
        recs.append(rb.member_metadata(gid, m))
    recs.append(
        rb.subscription_metadata(gid, subscription_metadata(sim.shard.image, {topic: len(members)}).values())
    )
    recs.append(rb.group_epoch(gid, epoch))
    for mid, m in members.items():
        recs.append(rb.target_member(gid, mid, m.assigned_partitions))
    recs.append(rb.target_epoch(gid, epoch))
    for m in members.values():
        recs.append(rb.current_assignment(gid, m))
    sim.seed_records(recs)
    timers = Operation()
    for mid in assignments:
        sim.adopt(mid, (topic,))
        schedule_session_timeout(timers, gid, mid, sim.shard.consumer_session_timeout_ms(gid))
    sim.shard.commit(timers, None)


def scenario_basic(sim: Simulator) -> None:
    sim.set_topic("foo", 3)
    sim.milestones.append(Milestone("Let's start with an empty group", sim.view()))
    sim.join("A")
    sim.join("B")
    sim.heartbeat("A", "A heartbeats: it is asked to revoke foo-2")
    sim.heartbeat("A", "A heartbeats and acknowledges the revocation: foo-2 is released")
    sim.heartbeat("B", "B heartbeats: it gets foo-2")
    sim.join("C")
    sim.heartbeat("B", "B heartbeats: it moves to epoch 3")
    sim.heartbeat("C", "C heartbeats: it still waits for foo-1")
    sim.heartbeat("A", "A heartbeats: it is asked to revoke foo-1")
    sim.heartbeat("A", "A heartbeats and acknowledges the revocation: foo-1 is released")
    sim.heartbeat("C", "C heartbeats: it gets foo-1")


def scenario_incremental(sim: Simulator) -> None:
    sim.set_topic("foo", 6)
    seed_group(sim, 21, {"A": [0, 1, 2], "B": [3, 4, 5]})
    sim.milestones.append(Milestone("A group with two members and six partitions", sim.view()))
    sim.join("C")
    sim.heartbeat("A", "A heartbeats: it is asked to revoke foo-2")
    sim.heartbeat("B", "B heartbeats: it is asked to revoke foo-5")
    sim.heartbeat("C", "C heartbeats: no change")
    sim.heartbeat("A", "A heartbeats and acknowledges the revocation: foo-2 is released")
    sim.heartbeat("C", "C heartbeats: it gets foo-2, still waits for foo-5")
    sim.heartbeat("B", "B heartbeats and acknowledges the revocation: foo-5 is released")
    sim.heartbeat("C", "C heartbeats: it gets foo-5")


def scenario_member_failure(sim: Simulator) -> None:
    sim.set_topic("foo", 6)
    seed_group(sim, 22, {"A": [0, 1], "B": [3, 4], "C": [2, 5]})
    sim.milestones.append(Milestone("A group with three members and six partitions", sim.view()))
    # B and C heartbeat shortly before A's session ends; A stays silent.
    session = sim.shard.consumer_session_timeout_ms(sim.group_id)
    sim.advance(session - 1000)
    sim.heartbeat("B", "B heartbeats")
    sim.heartbeat("C", "C heartbeats")
    del sim.milestones[1:]
    sim.advance(1000)  # A's session expires: A is fenced and the group epoch bumped
    sim.heartbeat("B", "B heartbeats: it moves to epoch 23")
    sim.heartbeat("C", "C heartbeats: it moves to epoch 23")


def scenario_partition_added(sim: Simulator) -> None:
    sim.set_topic("foo", 1)
    seed_group(sim, 22, {"A": [0], "B": []})
    sim.milestones.append(Milestone("A group with two members and one partition", sim.view()))
    sim.set_topic("foo", 2)
    sim.heartbeat("A", "A heartbeats: the coordinator sees foo-1")
    sim.heartbeat("B", "B heartbeats: it gets foo-1")


def scenario_random(sim: Simulator, seed: int, steps: int) -> None:
    rng = random.Random(seed)
    sim.set_topic("foo", 6)
    sim.set_topic("bar", 3)
    names = [chr(ord("A") + i) for i in range(6)]
    for _ in range(steps):
        action = rng.random()
        idle = [n for n in names if n not in sim.clients]
        if (action < 0.25 or not sim.clients) and idle:
            n = rng.choice(idle)
            sim.join(n, rng.choice([("foo",), ("foo", "bar"), ("bar",)]))
        elif action < 0.35 and sim.clients:
            sim.leave(rng.choice(sorted(sim.clients)))
        elif action < 0.40:
            t = rng.choice(["foo", "bar"])
            cur = sim.shard.image.topic(t)
            sim.set_topic(t, (cur.num_partitions if cur else 0) + 1)
            sim.milestones.append(Milestone(f"topic {t} grows", sim.view()))
        elif action < 0.45:
            sim.advance(rng.choice([1000, 20000, 50000]))
        else:
            sim.heartbeat(rng.choice(sorted(sim.clients)))


SCENARIOS = {
    "basic": scenario_basic,
    "incremental": scenario_incremental,
    "member-failure": scenario_member_failure,
    "partition-added": scenario_partition_added,
}


def run(name: str, seed: int = 1, steps: int = 30, assignor: str = "uniform") -> Simulator:
    sim = Simulator(
        config={"group.consumer.assignors": [assignor] + [a for a in ("uniform", "range") if a != assignor]}
    )
    if name == "random":
        scenario_random(sim, seed, steps)
    else:
        try:
            SCENARIOS[name](sim)
        except KeyError:
            raise SystemExit(
                f"unknown scenario {name!r}; choose from {sorted(SCENARIOS)} or random"
            ) from None
    return sim


def main(name: str, *, seed: int, steps: int, assignor: str, out: IO[str]) -> int:
    sim = run(name, seed, steps, assignor)
    for i, m in enumerate(sim.milestones):
        out.write(f"{i}. {m.text}\n{format_view(m.view)}\n\n")
    return 0
