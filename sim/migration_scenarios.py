"""Migration scenarios for `groupshift simulate` (KIP-848 "Online Migration" case study, rolling
upgrade, rolling downgrade), printed step by step like the engine's case studies
(sim/scenarios.py).

The engine's simulator drives KIP-848 members only; a migration also needs classic members and
the translation layer, which live here: the simulator's shard has the migration hooks installed,
and a classic client runs the real JoinGroup → SyncGroup → Heartbeat loop against it with eager
`range` semantics (it gives up everything it owns before rejoining, and its leader computes the
assignment when the group is classic). Each step prints the group as it stands after the step:
a classic group as the KIP draws a "Generic Group" (generation, members, assignment), a consumer
group as in the other case studies, each member marked with the protocol it speaks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
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
from engine.classic.group import ClassicGroup
from engine.classic.member import Protocol
from engine.consumer.group import ConsumerGroup
from engine.context import RequestContext
from engine.errors import Errors
from engine.outcome import Outcome, Pending
from records.classic_group import GroupMemberMetadata, GroupMetadataKey, GroupMetadataValue
from records.coordinator import CoordinatorRecord
from sim.client_assignors import range_assign
from sim.scenarios import Simulator, format_view, view
from translation.embedded_protocol import (
    Subscription,
    parse_assignment,
    parse_subscription,
    serialize_assignment,
    serialize_subscription,
)
from translation.migration import Migration

CLASSIC_CTX = RequestContext("sim-classic", "/127.0.0.1", 5)
SESSION_MS = 45_000
REBALANCE_MS = 30_000


@dataclass
class ClassicClient:
    """What a classic (eager `range`) consumer keeps."""

    name: str
    topics: tuple[str, ...] = ("foo",)
    member_id: str = ""
    generation: int = -1
    owned: dict[str, tuple[int, ...]] = field(default_factory=dict)


class MigrationSimulator(Simulator):
    def __init__(self, topics: dict[str, int] | None = None, config: dict[str, Any] | None = None) -> None:
        super().__init__(
            topics, {"group.initial.rebalance.delay.ms": 0, **(config or {})}, migration=Migration
        )
        self.coordinator = self.shard
        self.classic: dict[str, ClassicClient] = {}
        self._parked: dict[Pending, ClassicClient] = {}
        self.steps: list[tuple[str, str]] = []
        self._text: str | None = None
        self._type: str | None = None

    # --- printing -----------------------------------------------------------------------------

    def _run(self, text: str, outcome: Outcome[Any]) -> Outcome[Any]:
        """KIP-848 member steps (the base class's `_send`) also land here."""
        self._complete(outcome)
        self.note(self._text or text)
        self._text = None
        return outcome

    def kip848_join(self, member_id: str, text: str | None = None) -> None:
        """A KIP-848 member joins (the base class's `join`), with the step's text."""
        self._text = text
        self.join(member_id)

    def note(self, text: str) -> None:
        rendered = self.render()
        if text.endswith(" heartbeats") and self.steps and self.steps[-1][1] == rendered:
            return  # a heartbeat that changed nothing is not a step worth printing
        kind = self.group_type()
        if self._type is not None and kind != self._type and kind is not None:
            text += f" (the group is converted to a {kind} group)"
        self._type = kind
        self.steps.append((text, rendered))

    def group_type(self) -> str | None:
        g = self.shard.groups.get(self.group_id)
        if isinstance(g, ConsumerGroup):
            return "consumer"
        return "classic" if isinstance(g, ClassicGroup) else None

    def render(self) -> str:
        g = self.shard.groups.get(self.group_id)
        if isinstance(g, ClassicGroup):
            lines = [f"  • Classic Group (generation={g.generation_id}, state={g.state.value})"]
            lines += [f"    • {self._name(m)} (classic)" for m in g.members] or ["    • Empty"]
            lines.append("  • Assignment")
            for mid, m in g.members.items():
                parts = _names(parse_assignment(m.assignment).partitions) if m.assignment else []
                lines.append(f"    • {self._name(mid)} - partitions=[{', '.join(parts)}]")
            return "\n".join(lines)
        v = view(self.shard, self.group_id)
        if isinstance(g, ConsumerGroup):
            marks = {
                mid: "classic" if m.uses_classic_protocol else "consumer" for mid, m in g.members.items()
            }
            v = replace(v, members=tuple(f"{self._name(m)} ({marks[m]})" for m in v.members))
        rendered = format_view(v)
        for client in self.classic.values():
            if client.member_id:
                rendered = rendered.replace(client.member_id, client.name)
        return rendered

    def _name(self, member_id: str) -> str:
        for c in self.classic.values():
            if c.member_id == member_id:
                return c.name
        return member_id

    # --- classic members ---------------------------------------------------------------------

    def _complete(self, outcome: Outcome[Any]) -> None:
        """Hand parked JoinGroup/SyncGroup answers to their clients (which may send more)."""
        if outcome.on_append is not None:
            self._complete(outcome.on_append(Errors.NONE))
        for handle, response in outcome.completions:
            client = self._parked.pop(handle, None)
            if client is not None:
                self._answer(client, response)

    def _classic(self, client: ClassicClient, out: Outcome[Any]) -> Any:
        self._complete(out)
        if isinstance(out.response, Pending):
            self._parked[out.response] = client
            return None
        return out.response

    def _answer(self, client: ClassicClient, response: Any) -> None:
        if isinstance(response, JoinGroupResponse):
            self._joined(client, response)
        elif isinstance(response, SyncGroupResponse):
            self._synced(client, response)

    def classic_join(self, name: str, text: str | None = None) -> None:
        """An eager classic member (re)joins: it gives up what it owns, then JoinGroup."""
        client = self.classic.setdefault(name, ClassicClient(name))
        client.owned = {}
        sub = serialize_subscription(Subscription(0, client.topics))
        req = JoinGroupRequest(
            self.group_id, SESSION_MS, REBALANCE_MS, client.member_id, "consumer", (Protocol("range", sub),)
        )
        self.now += 1
        r = self._classic(client, self.coordinator.join_group(req, CLASSIC_CTX, self.now))
        if isinstance(r, JoinGroupResponse) and r.error_code == Errors.MEMBER_ID_REQUIRED:
            client.member_id = r.member_id
            req.member_id = r.member_id
            self.now += 1
            r = self._classic(client, self.coordinator.join_group(req, CLASSIC_CTX, self.now))
        if isinstance(r, JoinGroupResponse):
            self._joined(client, r)
        self._timers()
        self.note(text or f"{name} sends JoinGroup")

    def _timers(self) -> None:
        """Fire what is due now (a join that completes on the initial-rebalance-delay timer)."""
        for out in self.shard.expire(self.now):
            self._complete(out)

    def _joined(self, client: ClassicClient, r: JoinGroupResponse) -> None:
        if r.error_code != 0:
            return
        client.member_id, client.generation = r.member_id, r.generation_id
        assignments: list[tuple[str, bytes]] = []
        if r.leader == r.member_id and r.members:
            subs = {m.member_id: parse_subscription(m.metadata).topics for m in r.members}
            counts = {t.name: t.num_partitions for t in self.shard.image.topics()}
            plan = range_assign(subs, counts)
            assignments = [(m, serialize_assignment(plan[m], 0)) for m in subs]
        req = SyncGroupRequest(
            self.group_id, client.generation, client.member_id, None, "consumer", "range", assignments
        )
        self.now += 1
        s = self._classic(client, self.coordinator.sync_group(req, CLASSIC_CTX, self.now))
        if isinstance(s, SyncGroupResponse):
            self._synced(client, s)

    def _synced(self, client: ClassicClient, s: SyncGroupResponse) -> None:
        if s.error_code == 0 and s.assignment:
            client.owned = dict(parse_assignment(s.assignment).partitions)

    def classic_heartbeat(self, name: str) -> None:
        """Heartbeat; when told to rebalance, rejoin (eager: revoking everything first)."""
        client = self.classic[name]
        self.now += 1
        req = HeartbeatRequest(self.group_id, client.generation, client.member_id)
        out = self.coordinator.heartbeat(req, CLASSIC_CTX, self.now)
        self._complete(out)
        assert isinstance(out.response, HeartbeatResponse)
        code = out.response.error_code
        if code == Errors.REBALANCE_IN_PROGRESS:
            self.note(f"{name} heartbeats and is told to rejoin (REBALANCE_IN_PROGRESS)")
            self.classic_join(name, f"{name} gives up its partitions and rejoins (JoinGroup, SyncGroup)")
        elif code in (Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID):
            if code == Errors.UNKNOWN_MEMBER_ID:
                client.member_id = ""
            self.note(f"{name} heartbeats: {Errors(code).name}")
            self.classic_join(name, f"{name} rejoins")
        elif code != 0:
            self.note(f"{name} heartbeats: {Errors(code).name}")
        else:
            self.note(f"{name} heartbeats")

    def classic_leave(self, name: str) -> None:
        client = self.classic.pop(name)
        self.now += 1
        req = LeaveGroupRequest(self.group_id, [MemberIdentity(client.member_id, None)])
        self._complete(self.coordinator.leave_group(req, CLASSIC_CTX, self.now))
        self.note(f"{name} leaves the group (LeaveGroup)")

    def seed_classic(self, generation: int, owned: dict[str, list[int]], topic: str = "foo") -> None:
        """A Stable classic group as loaded from its GroupMetadata record (the KIP's start)."""
        members = []
        for name, parts in owned.items():
            self.classic[name] = ClassicClient(name, (topic,), name, generation, {topic: tuple(parts)})
            members.append(
                GroupMemberMetadata(
                    name,
                    None,
                    "sim-classic",
                    "/127.0.0.1",
                    REBALANCE_MS,
                    SESSION_MS,
                    serialize_subscription(Subscription(0, (topic,))),
                    serialize_assignment({topic: parts}, 0),
                )
            )
        value = GroupMetadataValue(
            "consumer", generation, "range", members[0].member_id, self.now, tuple(members)
        )
        self.shard.apply([CoordinatorRecord(GroupMetadataKey(self.group_id), value)])

    # --- helpers ------------------------------------------------------------------------------

    def settle(self, rounds: int = 6) -> None:
        """Every member heartbeats, round after round, until a round changes nothing."""
        for _ in range(rounds):
            self._timers()
            before, shown = self.render(), len(self.steps)
            for name in sorted(self.classic):
                self.classic_heartbeat(name)
            for mid in sorted(self.clients):
                self.heartbeat(mid)
            if self.render() == before:
                del self.steps[shown:]  # a round that changed nothing: nothing new to show
                return


def _names(parts: Iterable[tuple[str, Iterable[int]]]) -> list[str]:
    return [f"{t}-{p}" for t, ps in parts for p in ps]


# --- scenarios ---------------------------------------------------------------------------------


def scenario_online_migration(sim: MigrationSimulator) -> None:
    """KIP-848 "Online Migration": a classic group at generation 22; A restarts with the new
    protocol, then B leaves."""
    sim.set_topic("foo", 6)
    sim.seed_classic(22, {"A": [0, 1], "B": [3, 4], "C": [2, 5]})
    sim.note("We start with a classic group at generation 22")
    sim.classic_leave("A")
    sim.kip848_join("A", text="A rejoins with group.protocol=consumer")
    sim.settle()
    sim.classic_leave("B")
    sim.settle()


def scenario_rolling_upgrade(sim: MigrationSimulator) -> None:
    """Three classic members; each in turn is replaced by a KIP-848 member (new one first)."""
    sim.set_topic("foo", 6)
    for name in ("C1", "C2", "C3"):
        sim.classic_join(name, f"{name} joins (classic)")
    sim.settle()
    for old, new in (("C1", "K1"), ("C2", "K2"), ("C3", "K3")):
        sim.kip848_join(new, text=f"{new} joins with group.protocol=consumer")
        sim.settle()
        sim.classic_leave(old)
        sim.settle()


def scenario_rolling_downgrade(sim: MigrationSimulator) -> None:
    """Three KIP-848 members; each in turn is replaced by a classic member; the last KIP-848
    member to leave converts the group back to classic."""
    sim.set_topic("foo", 6)
    for name in ("K1", "K2", "K3"):
        sim.join(name)
    sim.settle()
    for old, new in (("K1", "C1"), ("K2", "C2"), ("K3", "C3")):
        sim.classic_join(new, f"{new} joins (classic)")
        sim.settle()
        sim.leave(old)
        sim.settle()


SCENARIOS = {
    "online-migration": scenario_online_migration,
    "rolling-upgrade": scenario_rolling_upgrade,
    "rolling-downgrade": scenario_rolling_downgrade,
}


def run(name: str, assignor: str = "uniform") -> MigrationSimulator:
    sim = MigrationSimulator(
        config={"group.consumer.assignors": [assignor] + [a for a in ("uniform", "range") if a != assignor]}
    )
    SCENARIOS[name](sim)
    return sim


def main(name: str, *, assignor: str, out: IO[str]) -> int:
    sim = run(name, assignor)
    for i, (text, rendered) in enumerate(sim.steps):
        out.write(f"{i}. {text}\n{rendered}\n\n")
    return 0
