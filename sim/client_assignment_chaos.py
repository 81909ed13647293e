"""The chaos simulator with client-side assignors (KIP-848 as designed: "Client-Side Assignor",
"Assignor Selection", "Member Selection", ConsumerGroupPrepareAssignment /
ConsumerGroupInstallAssignment; groupshift's extension, docs/client-side-assignors.md).

`ClientAssignorMachine` is `sim.chaos.SimMachine` (the real shard runtime on a simulated loop
and disk, the migration world's classic and consumer-protocol clients, every fault of
docs/simulation.md) with `group.consumer.client.assignors.enable=true`, and most consumer-protocol
clients announcing client assignors in their heartbeats: `cooperative-sticky` (the adapter of
`consumer_membership`, which reads classic members' metadata at version -1) and/or `sticky`
(`consumer_membership.StickyAssignor`), in a random priority order, each with a random
[minimum, maximum] version range and metadata version, so the group mixes version ranges, classic
members and members without client assignors (the server assignor then computes).

A client told COMPUTE_ASSIGNMENT calls PrepareAssignment and InstallAssignment through the
shard's entry points, the ones the gateway's handlers call (`Shard.prepare_assignment` /
`install_assignment` inside `ShardRuntime.run`), and runs the assignor on what Prepare returned.
Faults of its own, besides the chaos simulator's (lost and delayed answers, crashes, failed
appends and fsyncs, server crashes, clock jumps):

* the computation is held over: the client prepares in one step and installs in a later one,
  while others join, leave, crash or change subscriptions (a stale install:
  REBALANCE_IN_PROGRESS, then the current epoch is asked for);
* an old install is sent again (a retried request) for an older epoch;
* the assigning member hangs (keeps heartbeating, never installs) until its rebalance timeout
  fences it and another member is chosen; or it dies (the chaos simulator's client crash);
* the assignor fails: the install reports an error (1-127) and the group keeps its target.

Invariants checked after every step, besides the chaos simulator's (no partition owned twice
by the clients or in the coordinator, every acknowledged commit kept, replay equals live, no lost
expiry timer):

* the chosen assigning member supports every metadata version in the group, and is the one
  KIP-848's rules name (an oracle written from the rules, not the engine's function): the first
  name of the first member's list that every member supports, then the first consumer-protocol
  member whose range covers every version in use (-1 for classic members);
* a member told COMPUTE_ASSIGNMENT is that member, its range covering every version in use;
* an install that reports an assignor error keeps every member's target and moves the assignment
  epoch to the group epoch; an install refused as stale changes no target; a valid install at
  the group epoch is the group's target exactly.

Liveness at the end is the chaos simulator's (every subscribed partition owned once), except
while the group's target is one an assignor error kept: then the coordinator asks nobody again
until the group changes (as KIP-848 and consumer_membership do), so only "owned at most once"
holds.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any, TextIO

from consumer_membership.assignor import (
    Assignor,
    GroupState,
    MemberInfo,
    TopicInfo,
)
from consumer_membership.cooperative_sticky import CooperativeStickyAdapter
from consumer_membership.sticky import StickyAssignor
from engine.assignment import EMPTY, Assignment
from engine.config import CoordinatorConfig
from engine.consumer.api import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from engine.consumer.client_assignment import (
    InstallAssignmentRequest,
    InstallAssignmentResponse,
    PrepareAssignmentRequest,
    PrepareAssignmentResponse,
    choose,
)
from engine.consumer.group import ConsumerGroup
from engine.consumer.member import ConsumerGroupMember
from engine.errors import Errors
from records.consumer_group import ClientAssignmentMetadata, ClientAssignorMetadata
from sim import chaos
from sim.chaos import SimMachine
from sim.migration_clients import CONSUMER, GROUP, Client, config

PRINCIPAL = "User:ANONYMOUS"  # the simulated clients' (member ids are bound to it)
COOPERATIVE_STICKY, STICKY = "cooperative-sticky", "sticky"
WITH_ASSIGNORS = 0.85  # share of consumer-protocol clients that announce client assignors
HOLD_COMPUTATION = 0.4  # share of computations installed in a later step than their prepare
Target = dict[str, dict[Any, tuple[int, ...]]]


@dataclass(eq=False)
class AssigningSide:
    """A consumer-protocol client's client-assignor state (what consumer_membership keeps)."""

    assignors: tuple[ClientAssignorMetadata, ...]
    plugins: dict[str, Assignor]
    announce: bool = True  # the next heartbeat carries the list
    asked: int = -1  # the last COMPUTE_ASSIGNMENT epoch
    done: int = -1  # the last epoch installed (or reported failed) by this member
    prepared: PrepareAssignmentResponse | None = None  # a computation held over
    prepared_epoch: int = -1  # the member epoch it was prepared with
    last_install: InstallAssignmentRequest | None = None
    hanging: bool = False  # never installs until fenced
    fail_next: bool = False  # the next computation's assignor raises
    metadata_seq: int = 0

    def forget(self) -> None:
        """Rejoining: a computation in progress is no longer this member's."""
        self.prepared = None
        self.asked = -1
        self.hanging = False

    def new_membership(self) -> None:
        """Fenced or the member unknown: the group may be another one by now (converted to
        classic and back, deleted and created again), whose epochs start lower, so what this
        member installed before says nothing (consumer_membership resets it too)."""
        self.forget()
        self.done = -1


def _draw_assignors(rng: random.Random) -> tuple[ClientAssignorMetadata, ...]:
    """A non-empty list of client assignors in priority order, each with its version range."""
    names = rng.choice(
        [[COOPERATIVE_STICKY], [STICKY], [COOPERATIVE_STICKY, STICKY], [STICKY, COOPERATIVE_STICKY]]
    )
    out = []
    for name in names:
        version = rng.randint(0, 3)
        lowest = -1 if name == COOPERATIVE_STICKY and rng.random() < 0.6 else rng.randint(0, version)
        highest = rng.randint(version, 4)
        meta = f"{name}@{version}".encode()
        out.append(ClientAssignorMetadata(name, lowest, highest, 0, version, meta))
    return tuple(out)


def _plugins(assignors: tuple[ClientAssignorMetadata, ...]) -> dict[str, Assignor]:
    out: dict[str, Assignor] = {}
    for a in assignors:
        out[a.name] = (
            CooperativeStickyAdapter()
            if a.name == COOPERATIVE_STICKY
            else StickyAssignor(
                name=a.name,
                minimum_version=a.minimum_version,
                maximum_version=a.maximum_version,
                metadata_version=a.metadata_version,
            )
        )
    return out


# --- the rules, as an oracle ----------------------------------------------------------------


@dataclass(frozen=True)
class ExpectedChoice:
    name: str
    versions: frozenset[int]
    assigning: str | None


def expected_choice(members: list[ConsumerGroupMember]) -> ExpectedChoice | None:
    """docs/client-side-assignors.md "Coordinator rules", written from the text: a client
    assignor when every consumer-protocol member lists one and a name is supported by all (classic
    members: their protocols' names, version -1); the first such name in the first member's order;
    then the first consumer-protocol member whose range covers every version in use."""
    consumers = [m for m in members if not m.uses_classic_protocol]
    classics = [m for m in members if m.uses_classic_protocol]
    if not consumers or not all(m.client_assignors for m in consumers):
        return None
    for first in consumers[0].client_assignors:
        listed = [{a.name: a for a in m.client_assignors}.get(first.name) for m in consumers]
        entries = [a for a in listed if a is not None]
        if len(entries) != len(consumers):
            continue
        if any(
            m.classic_member_metadata is None
            or first.name not in {p.name for p in m.classic_member_metadata.supported_protocols}
            for m in classics
        ):
            continue
        versions = {a.metadata_version for a in entries} | ({-1} if classics else set())
        covering = [
            m.member_id
            for m, a in zip(consumers, entries, strict=True)
            if all(a.minimum_version <= v <= a.maximum_version for v in versions)
        ]
        return ExpectedChoice(first.name, frozenset(versions), covering[0] if covering else None)
    return None


_REFUSALS = (
    "is not a member",
    "which it does not subscribe to",
    "does not exist",
    "is given to both",
    "is listed twice",
)


def _refusal(message: str | None) -> str:
    """The validation an INVALID_REQUEST install failed, without the ids in its message."""
    text = message or ""
    return next((r for r in _REFUSALS if r in text), text)


def _targets(g: ConsumerGroup) -> Target:
    return {
        mid: {t: tuple(sorted(ps)) for t, ps in a.items() if ps} for mid, a in g.target_assignment.items()
    }


def _same_targets(a: Target, b: Target) -> bool:
    keys = set(a) | set(b)
    return all(a.get(k, {}) == b.get(k, {}) for k in keys)


class ClientAssignorMachine(SimMachine):
    """The chaos machine with client-side assignors on (see the module docstring)."""

    CLI_FLAG = " --client-assignors"

    def __init__(self, rng: random.Random) -> None:
        self.sides: dict[Client, AssigningSide] = {}
        self.kept_epoch: int | None = None  # the assignment epoch an assignor error kept
        super().__init__(rng)

    def config_for(self, policy: str) -> CoordinatorConfig:
        return config(policy).model_copy(update={"consumer_client_assignors_enable": True})

    # --- clients ------------------------------------------------------------------------------

    def _spawn(self, name: str, kind: str, topics: tuple[str, ...], version: int) -> Client:
        c = super()._spawn(name, kind, topics, version)
        if kind == CONSUMER and self.rng.random() < WITH_ASSIGNORS:
            assignors = _draw_assignors(self.rng)
            self.sides[c] = AssigningSide(assignors, _plugins(assignors))
            self._note("client with client assignors")
        return c

    def _kill(self, c: Client) -> None:
        super()._kill(c)
        self.sides.pop(c, None)

    def _cgh(self, c: Client, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        side = self.sides.get(c)
        if side is not None and req.member_epoch == 0 and side.prepared is None:
            side.forget()  # a (re)join: what the coordinator asked of the old membership is over
        if (
            side is not None
            and req.member_epoch >= 0
            and (side.announce or req.member_epoch == 0 or req.rebalance_timeout_ms != -1)
        ):
            req = dataclasses.replace(req, client_assignors=side.assignors)
            side.announce = False
        r = super()._cgh(c, req)
        if side is not None and not c.deaf and r.error_code == 0 and r.compute_assignment_epoch is not None:
            self._check_asked(c, side, r.compute_assignment_epoch)
            side.asked = r.compute_assignment_epoch
        return r

    def _on_cgh(
        self, c: Client, req: ConsumerGroupHeartbeatRequest, r: ConsumerGroupHeartbeatResponse
    ) -> None:
        side = self.sides.get(c)
        if self.clients.get(c.name) is c and not c.deaf and side is not None:
            code = Errors(r.error_code)
            if code is Errors.UNSUPPORTED_ASSIGNOR:
                # consumer_membership: fatal (no member could run the group's assignor with this
                # member's versions; a classic member in the group counts as version -1)
                self._note("join refused UNSUPPORTED_ASSIGNOR")
                self._kill(c)
                return
            if code in (Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID):
                if side.hanging:
                    self._note("hung assigning member fenced")
                side.new_membership()
            elif code is Errors.GROUP_ID_NOT_FOUND:
                side.new_membership()
        super()._on_cgh(c, req, r)

    def _consumer_step(self, c: Client, ack: bool = True) -> None:
        side = self.sides.get(c)
        if side is None:
            super()._consumer_step(c, ack)
            return
        if side.prepared is not None:
            self._install(c, side)
            return
        if side.asked > side.done and not side.hanging and c.epoch >= 0:
            self._prepare(c, side)
            if side.prepared is not None and (self.disk.quiet or self.rng.random() >= HOLD_COMPUTATION):
                self._install(c, side)
            elif side.prepared is not None:
                self._note("computation held over a step")
            return
        super()._consumer_step(c, ack)

    # --- PrepareAssignment / InstallAssignment ------------------------------------------------

    def _prepare(self, c: Client, side: AssigningSide) -> None:
        req = PrepareAssignmentRequest(GROUP, c.member_id, c.epoch)
        self._acting = c
        r = self._request(lambda: self.coordinator.prepare_assignment(req, self._tick(), PRINCIPAL))
        if self.clients.get(c.name) is not c or c.deaf:
            return  # the connection failed: the computation is dropped (asked again)
        assert isinstance(r, PrepareAssignmentResponse), r
        self._note("PrepareAssignment")
        if r.error_code != 0:
            self._note(f"PrepareAssignment {Errors(r.error_code).name}")
            side.asked = -1  # no longer this member's to do; the coordinator asks again if it is
            return
        side.prepared, side.prepared_epoch = r, c.epoch

    def _compute(
        self, c: Client, side: AssigningSide, prepared: PrepareAssignmentResponse
    ) -> InstallAssignmentRequest:
        """Run the chosen assignor on what Prepare returned (or fail, when told to)."""
        if side.fail_next:
            side.fail_next = False
            self._note("assignor error")
            code = self.rng.randint(1, 127)
            return InstallAssignmentRequest(
                GROUP, c.member_id, side.prepared_epoch, prepared.group_epoch, code, {}
            )
        plugin = side.plugins[prepared.assignor_name]
        group = GroupState(
            GROUP,
            prepared.group_epoch,
            prepared.assignor_name,
            tuple(
                MemberInfo(
                    m.member_id,
                    m.instance_id,
                    m.rack_id,
                    frozenset(m.subscribed_topic_ids),
                    m.metadata_version,
                    m.metadata,
                    dict(m.target),
                    m.reason,
                )
                for m in prepared.members
            ),
            {t.topic_id: TopicInfo(t.topic_id, t.topic_name, t.num_partitions) for t in prepared.topics},
        )
        plan = plugin.assign(group)
        members: dict[str, Assignment] = {
            mid: {t: tuple(sorted(ps)) for t, ps in a.partitions.items() if ps} for mid, a in plan.items()
        }
        side.metadata_seq += 1
        tag = f"{prepared.group_epoch}:{side.metadata_seq}".encode()
        metadata = {mid: ClientAssignmentMetadata(a.metadata_version, tag) for mid, a in plan.items()}
        return InstallAssignmentRequest(
            GROUP, c.member_id, side.prepared_epoch, prepared.group_epoch, 0, members, metadata
        )

    def _install(self, c: Client, side: AssigningSide, req: InstallAssignmentRequest | None = None) -> None:
        if req is None:
            prepared, side.prepared = side.prepared, None
            assert prepared is not None
            req = self._compute(c, side, prepared)
            side.last_install = req
        g = self.group
        before = _targets(g) if isinstance(g, ConsumerGroup) else None
        epoch_before = g.group_epoch if isinstance(g, ConsumerGroup) else None
        self._acting = c
        r = self._request(lambda: self.coordinator.install_assignment(req, self._tick(), PRINCIPAL))
        if c.deaf or r is None:
            return  # lost: installed or not, the next heartbeat tells
        assert isinstance(r, InstallAssignmentResponse), r
        code = Errors(r.error_code)
        self._note(f"InstallAssignment {code.name}{' (assignor error)' if req.error else ''}")
        if code is Errors.INVALID_REQUEST:
            # Which validation refused it (KIP-848 "Assignment Validation"), for the summary.
            self._note(f"InstallAssignment INVALID_REQUEST: {_refusal(r.error_message)}")
        if code is Errors.REBALANCE_IN_PROGRESS and req.group_epoch == epoch_before:
            self._note("install naming a replaced static member computed again")
        if code is Errors.NONE:
            side.done = max(side.done, req.group_epoch)
        g = self.group
        if before is None or not isinstance(g, ConsumerGroup) or g.group_epoch != epoch_before:
            return  # the group changed under the request (a timer fired): nothing to compare
        after = _targets(g)
        if code is Errors.NONE and req.error:
            assert _same_targets(before, after), (
                f"an install reporting assignor error {req.error} changed the target: {before} -> {after}"
            )
            assert g.assignment_epoch == req.group_epoch, (g.assignment_epoch, req.group_epoch)
            self.kept_epoch = req.group_epoch
        elif code is Errors.NONE:
            want: Target = {
                mid: {t: ps for t, ps in req.members.get(mid, EMPTY).items() if ps} for mid in g.members
            }
            assert _same_targets(after, want), f"installed {want}, the group's target is {after}"
            assert g.assignment_epoch == req.group_epoch, (g.assignment_epoch, req.group_epoch)
            self.kept_epoch = None
        else:
            assert _same_targets(before, after), f"a refused install ({code.name}) changed the target"
            if code is Errors.REBALANCE_IN_PROGRESS:
                # stale: for an older epoch, or naming a static member replaced since Prepare
                assert req.group_epoch != g.group_epoch or any(m not in g.members for m in req.members), (
                    "an install at the group epoch, naming only members of the group, refused as stale"
                )

    # --- invariants ---------------------------------------------------------------------------

    def _check_asked(self, c: Client, side: AssigningSide, epoch: int) -> None:
        """A member told COMPUTE_ASSIGNMENT is the member the rules choose, and its range covers
        every metadata version in use."""
        self._note("COMPUTE_ASSIGNMENT")
        g = self.group
        if not isinstance(g, ConsumerGroup) or g.group_epoch != epoch or c.member_id not in g.members:
            return  # a timer moved the group on after the answer was written
        exp = expected_choice(list(g.members.values()))
        assert exp is not None and exp.assigning == c.member_id, (
            f"{c.member_id} asked to compute epoch {epoch}; the rules choose {exp}"
        )
        mine = next(a for a in side.assignors if a.name == exp.name)
        assert all(mine.minimum_version <= v <= mine.maximum_version for v in exp.versions), (mine, exp)

    def check(self, full_replay: bool) -> None:
        super().check(full_replay)
        self.check_choice()

    def check_choice(self) -> None:
        g = self.group
        if not isinstance(g, ConsumerGroup):
            return
        members = list(g.members.values())
        exp = expected_choice(members)
        got = choose(members)
        if exp is None:
            assert got is None, f"the engine chose {got}; the rules choose no client assignor"
            return
        assert got is not None and (got.name, got.assigning_member, got.versions) == (
            exp.name,
            exp.assigning,
            exp.versions,
        ), f"the engine chose {got}; the rules choose {exp}"
        if got.assigning_member is not None:
            entry = next(a for a in g.members[got.assigning_member].client_assignors if a.name == got.name)
            assert all(entry.minimum_version <= v <= entry.maximum_version for v in got.versions), (
                f"assigning member {got.assigning_member} ({entry}) does not read every version in use "
                f"{sorted(got.versions)}"
            )
            self._note("step with a client assignor chosen")

    def _settled(self) -> bool:
        g = self.group
        kept = (
            isinstance(g, ConsumerGroup)
            and self.kept_epoch is not None
            and g.assignment_epoch == self.kept_epoch == g.group_epoch
        )
        saved = self.unwatched
        self.unwatched = saved or kept
        try:
            return super()._settled()
        finally:
            self.unwatched = saved

    # --- faults -------------------------------------------------------------------------------

    def extra_actions(self, faults: bool) -> list[tuple[str, float]]:
        if not self.sides or not faults:
            return []
        return [
            ("hang_assignor", 1.0),
            ("assignor_error", 1.0),
            ("stale_install", 1.5),
            ("assignor_metadata_change", 1.0),
        ]

    def extra_action(self, name: str, i: int) -> None:
        sides = [(c, s) for c, s in self.sides.items() if self.clients.get(c.name) is c]
        if not sides:
            return
        c, side = sides[i % len(sides)]
        if name == "hang_assignor":
            side.hanging = True
        elif name == "assignor_error":
            side.fail_next = True
        elif name == "assignor_metadata_change":
            # The member's assignor metadata changes (a new version within its range, new
            # bytes): the next heartbeat carries the list, the group epoch moves, and a version
            # nobody else reads may be refused UNSUPPORTED_ASSIGNOR.
            k = self.rng.randrange(len(side.assignors))
            a = side.assignors[k]
            version = self.rng.randint(max(a.minimum_version, 0), a.maximum_version)
            changed = dataclasses.replace(
                a,
                reason=(a.reason + 1) % 128,
                metadata_version=version,
                metadata=f"{a.name}@{version}+".encode(),
            )
            side.assignors = (*side.assignors[:k], changed, *side.assignors[k + 1 :])
            side.announce = True
        elif name == "stale_install" and side.last_install is not None and c.epoch >= 0:
            self._note("old install sent again")
            self._install(c, side, dataclasses.replace(side.last_install, member_epoch=c.epoch))


def run_seed(seed: int, steps: int) -> chaos.SeedResult:
    """One seed of the client-assignor machine (`groupshift simulate --chaos --client-assignors`)."""
    return chaos.run_seed(seed, steps, ClientAssignorMachine)


def main(seed: int, steps: int, seeds: int, out: TextIO, keep_going: bool = False) -> int:
    return chaos.main(seed, steps, seeds, out, keep_going, machine=ClientAssignorMachine)
