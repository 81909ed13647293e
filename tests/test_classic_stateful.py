"""Stateful property test of classic groups (Kafka's classic group protocol; KIP-345).

Random joins (dynamic and static, with the v4 member-id round trip), syncs, heartbeats,
leaves, static restarts under a new member id, and clock advances that expire sessions and
join/sync phases. Invariants after every step:

* one leader: the group's leader is one of its members, and every client holding a JoinGroup
  response of the current generation names the same leader;
* a Stable group's members hold the assignment the leader sent for the current generation, and
  a member whose SyncGroup completed in generation g got exactly the leader's assignment for it;
* no parked request is orphaned: every handle not yet answered is still parked on its member
  (so a timer or the next phase will answer it);
* records are the truth: when the group is at rest (Stable or Empty), replaying the GroupMetadata
  records written so far rebuilds what the live group would persist.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from engine.classic.api import JoinGroupResponse, SyncGroupResponse
from engine.classic.records import persisted_view
from engine.classic.state import ClassicGroupState as S
from engine.errors import Errors
from engine.outcome import Pending
from engine.shard import Shard
from tests.classic_harness import ClassicHarness
from tests.stateful_settings import stateful_settings

NAMES = ["d0", "d1", "d2", "s0", "s1"]
STATIC = {"s0": "inst-0", "s1": "inst-1"}
SESSION = 3000
REBALANCE = 2000


@dataclass
class Client:
    name: str
    member_id: str = ""
    generation: int = -1
    leader: str = ""
    members: list[str] = field(default_factory=list)
    join: Pending | None = None
    sync: Pending | None = None
    synced_generation: int = -1


class ClassicGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = ClassicHarness(group_initial_rebalance_delay_ms=500)
        self.clients: dict[str, Client] = {}
        self.plans: dict[int, dict[str, bytes]] = {}
        self.handles: dict[Pending, str] = {}  # every handle ever issued -> client name
        # instance id -> every member id it has had (a replacement inherits the assignment)
        self.lineage: dict[str, list[str]] = {i: [] for i in STATIC.values()}

    # --- plumbing -------------------------------------------------------------------------

    @property
    def group(self) -> Any:
        return self.h.shard.classic_group("g")

    def _deliver(self) -> None:
        """Clients read the responses of their parked requests once they are answered."""
        for c in self.clients.values():
            if c.join is not None and c.join in self.h.completed:
                self._on_join(c, self.h.completed[c.join])
                c.join = None
            if c.sync is not None and c.sync in self.h.completed:
                self._on_sync(c, self.h.completed[c.sync])
                c.sync = None

    def _on_join(self, c: Client, r: JoinGroupResponse) -> None:
        if r.error_code == 0:
            c.member_id, c.generation, c.leader = r.member_id, r.generation_id, r.leader
            c.members = [m.member_id for m in r.members]
            if c.name in STATIC and r.member_id not in self.lineage[STATIC[c.name]]:
                self.lineage[STATIC[c.name]].append(r.member_id)
        elif r.error_code in (Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_INSTANCE_ID):
            c.member_id, c.generation = "", -1
        elif r.error_code == Errors.MEMBER_ID_REQUIRED:
            c.member_id = r.member_id
        else:
            assert r.error_code == Errors.REBALANCE_IN_PROGRESS, r

    def _on_sync(self, c: Client, r: SyncGroupResponse) -> None:
        if r.error_code == 0:
            assert r.assignment in self._allowed(c.name, c.member_id, c.generation), (
                f"{c.name} got {r.assignment!r} in generation {c.generation}, "
                f"plan {self.plans.get(c.generation)}"
            )
            c.synced_generation = c.generation
        elif r.error_code in (Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_INSTANCE_ID):
            c.member_id, c.generation = "", -1

    def _allowed(self, name: str | None, member_id: str, generation: int) -> set[bytes]:
        """The leader's assignment of this generation for the member, or (a static member that
        replaced another) for any earlier incarnation of its instance."""
        plan = self.plans.get(generation, {})
        ids = [member_id]
        if name in STATIC:
            ids += self.lineage[STATIC[name]]
        return {plan.get(i, b"") for i in ids}

    def _track(self, c: Client, result: Any, kind: str) -> Any:
        if isinstance(result, Pending):
            self.handles[result] = c.name
            if kind == "join":
                c.join = result
            else:
                c.sync = result
        self._deliver()
        return result

    # --- rules ----------------------------------------------------------------------------

    @rule(name=st.sampled_from(NAMES))
    def join(self, name: str) -> None:
        c = self.clients.setdefault(name, Client(name))
        if c.join is not None:
            return
        r = self.h.join(
            member_id=c.member_id,
            instance_id=STATIC.get(name),
            session=SESSION,
            rebalance=REBALANCE,
            version=9,
            client_id=name,
        )
        if isinstance(r, JoinGroupResponse):
            self._on_join(c, r)
            if r.error_code == Errors.MEMBER_ID_REQUIRED:
                r = self.h.join(
                    member_id=c.member_id, session=SESSION, rebalance=REBALANCE, version=9, client_id=name
                )
                if isinstance(r, JoinGroupResponse):
                    self._on_join(c, r)
        self._track(c, r, "join")

    @rule(name=st.sampled_from(NAMES))
    def sync(self, name: str) -> None:
        c = self.clients.get(name)
        if c is None or c.generation < 0 or c.sync is not None or c.join is not None:
            return
        assignments = None
        if c.leader == c.member_id and c.members:
            assignments = {m: f"{c.generation}:{m}".encode() for m in c.members}
            self.plans.setdefault(c.generation, assignments)
        r = self.h.sync(c.member_id, c.generation, assignments, instance_id=STATIC.get(name))
        if isinstance(r, SyncGroupResponse):
            self._on_sync(c, r)
        self._track(c, r, "sync")

    @rule(name=st.sampled_from(NAMES))
    def heartbeat(self, name: str) -> None:
        c = self.clients.get(name)
        if c is None or not c.member_id or c.generation < 0:
            return
        code = self.h.heartbeat(c.member_id, c.generation, instance_id=STATIC.get(name))
        if code in (Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_INSTANCE_ID):
            c.member_id, c.generation = "", -1
        self._deliver()

    @rule(name=st.sampled_from(NAMES))
    def leave(self, name: str) -> None:
        c = self.clients.get(name)
        if c is None or not c.member_id or name in STATIC:  # static members never send LeaveGroup
            return
        self.h.leave((c.member_id, None))
        self._deliver()
        del self.clients[name]

    @rule(name=st.sampled_from(sorted(STATIC)))
    def static_restart(self, name: str) -> None:
        c = self.clients.get(name)
        if c is None:
            return
        # The old process is gone: its parked requests will be answered FENCED_INSTANCE_ID.
        fresh = Client(name)
        self.clients[name] = fresh
        r = self.h.join(
            instance_id=STATIC[name], session=SESSION, rebalance=REBALANCE, version=9, client_id=name
        )
        if isinstance(r, JoinGroupResponse):
            self._on_join(fresh, r)
        self._track(fresh, r, "join")

    @rule(ms=st.sampled_from([100, 600, 1500, 2100, 3500]))
    def advance(self, ms: int) -> None:
        self.h.advance(ms)
        self._deliver()

    # --- invariants -----------------------------------------------------------------------

    @invariant()
    def one_leader(self) -> None:
        """The group has one leader, a member; clients of the current generation agree on it, or
        name a superseded incarnation of it (KIP-345 moves leadership without a new generation)."""
        g = self.group
        if g is None:
            return
        event(f"state {g.state.value}, generation>1: {g.generation_id > 1}")
        if g.members:
            assert g.leader_id in g.members
        named = {
            c.leader
            for c in self.clients.values()
            if c.generation == g.generation_id and c.member_id in g.members and c.leader
        }
        live = {leader for leader in named if leader in g.members}
        assert live <= {g.leader_id}, (live, g.leader_id)

    @invariant()
    def stable_assignments_come_from_the_current_generations_leader(self) -> None:
        g = self.group
        if g is None or g.state is not S.STABLE or g.generation_id not in self.plans:
            return
        for mid, m in g.members.items():
            name = next((n for n, i in STATIC.items() if i == m.group_instance_id), None)
            assert m.assignment in self._allowed(name, mid, g.generation_id), (mid, m.assignment)

    @invariant()
    def no_parked_request_is_orphaned(self) -> None:
        g = self.group
        parked = set()
        if g is not None:
            for m in g.members.values():
                if m.awaiting_join is not None:
                    parked.add(m.awaiting_join)
                if m.awaiting_sync is not None:
                    parked.add(m.awaiting_sync)
        for handle in self.handles:
            assert handle in self.h.completed or handle in parked, f"{handle} will never be answered"

    @invariant()
    def replay_equals_live_when_at_rest(self) -> None:
        g = self.group
        if g is None or g.state not in (S.STABLE, S.EMPTY):
            return
        fresh = Shard(self.h.shard.config)
        fresh.apply(self.h.log)
        replayed = fresh.classic_group("g")
        assert replayed is not None
        assert persisted_view(replayed) == persisted_view(g)


TestClassicGroupStateMachine = ClassicGroupMachine.TestCase
TestClassicGroupStateMachine.settings = stateful_settings(400, 50)
