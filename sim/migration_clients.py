"""The client models of the migration world (KIP-848 "Supporting Online Consumer Group Upgrade"):
three kinds of clients that share one group, as a rolling upgrade or downgrade mixes them.

* classic **eager** members (range / roundrobin first): they revoke everything before every
  JoinGroup, own exactly what their last SyncGroup gave them, and report no owned partitions;
* classic **cooperative** members (cooperative-sticky only): they keep what they own across a
  rejoin, report it (with their generation) in the embedded Subscription, and after a SyncGroup
  answer that shrank their assignment they revoke the difference and rejoin;
* **consumer-protocol** members (ConsumerGroupHeartbeat): they adopt the assignment of a response
  when it arrives and release a removed partition only when they send the next heartbeat that
  acknowledges it (owned partitions in the request).

Classic groups need a client-side leader: the leader client runs the assignor the group selected
(`range`, `roundrobin`, or a sticky cooperative assignor that withholds partitions changing owner
and, like Kafka's `AbstractStickyAssignor`, believes the claim with the highest generation) and
rejoins when the partition counts it assigned from change. Eager clients list
`cooperative-sticky` second, as in the first bounce of an eager->cooperative upgrade (Java picks
the EAGER protocol when any listed assignor is eager), so every kind can share a group.

Client reactions follow the Java consumer:
* classic: UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION lose every partition and rejoin (without or
  with the member id); REBALANCE_IN_PROGRESS rejoins; FENCED_INSTANCE_ID is fatal;
  INCONSISTENT_GROUP_PROTOCOL on JoinGroup leaves the client out (a member reloaded from the log
  keeps only the group's selected protocol, so a newcomer may share none with it, as in Kafka)
  and on SyncGroup makes it rejoin; an assignment for topics it does not subscribe to is not
  adopted and it rejoins (`checkAssignmentMatchedSubscription`). After a coordinator restart an
  in-flight JoinGroup or SyncGroup fails, and the client restarts its rebalance from JoinGroup.
* consumer protocol: FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID lose everything and rejoin with
  epoch 0; GROUP_ID_NOT_FOUND (a refused upgrade) leaves it out until it retries;
  UNRELEASED_INSTANCE_ID / FENCED_INSTANCE_ID are fatal.

The reactions themselves (what a client sends next) are `MigrationWorld`'s (sim/migration_world.py);
here: the kinds, the settings, the classic leader's client-side assignors and what a client keeps.
Used by the hypothesis machine (tests/test_migration_stateful.py) and the chaos simulator
(sim/chaos.py).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from engine.classic.member import Protocol
from engine.config import CoordinatorConfig
from engine.outcome import Pending
from translation.embedded_protocol import Subscription, serialize_subscription

GROUP = "g"

TOPICS = ("foo", "bar")
INITIAL_PARTITIONS = {"foo": 3, "bar": 2}
MAX_PARTITIONS = 7
SUBSCRIPTIONS = [("foo",), ("foo", "bar"), ("bar",)]
NAMES = ["a", "b", "c", "d", "e"]
STATIC = {"d": "inst-d", "e": "inst-e"}
POLICIES = ["bidirectional", "upgrade", "downgrade", "disabled"]

EAGER_RANGE, EAGER_RR, COOP, CONSUMER = "eager-range", "eager-roundrobin", "cooperative", "consumer"
KINDS = [EAGER_RANGE, EAGER_RR, COOP, CONSUMER]
CLASSIC_KINDS = {EAGER_RANGE, EAGER_RR, COOP}

SESSION_MS = 3000  # classic session timeout (JoinGroup) and consumer-group session timeout
REBALANCE_MS = 2000
SETTLE_ROUNDS = 100
SETTLE_STEP_MS = 200

Owned = dict[str, set[int]]  # topic name -> partitions


def config(policy: str) -> CoordinatorConfig:
    return CoordinatorConfig.from_kafka(
        {
            "group.consumer.migration.policy": policy,
            "group.consumer.session.timeout.ms": SESSION_MS,
            "group.consumer.min.session.timeout.ms": 100,
            "group.consumer.heartbeat.interval.ms": 1000,
            "group.consumer.min.heartbeat.interval.ms": 10,
            "group.min.session.timeout.ms": 10,
            "group.initial.rebalance.delay.ms": 50,
        }
    )


def pairs(owned: Owned) -> set[tuple[str, int]]:
    return {(t, p) for t, ps in owned.items() for p in ps}


def from_pairs(ps: set[tuple[str, int]]) -> Owned:
    out: Owned = defaultdict(set)
    for t, p in ps:
        out[t].add(p)
    return dict(out)


def sorted_owned(owned: Owned) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(owned.items()) if ps)


# --- the classic leader's client-side assignors -------------------------------------------------


def assign(
    protocol: str, members: list[tuple[str, Subscription]], counts: dict[str, int]
) -> dict[str, set[tuple[str, int]]]:
    """What a classic leader computes for `protocol` (member order = the JoinGroup answer's)."""
    subs = {mid: set(s.topics) for mid, s in members}
    order = sorted(subs)
    topics = sorted(set().union(*subs.values())) if subs else []
    out: dict[str, set[tuple[str, int]]] = {mid: set() for mid in order}
    if protocol == "range":
        for t in topics:
            takers = [m for m in order if t in subs[m]]
            n = counts.get(t, 0)
            per, extra = divmod(n, len(takers))
            start = 0
            for i, m in enumerate(takers):
                k = per + (1 if i < extra else 0)
                out[m].update((t, p) for p in range(start, start + k))
                start += k
        return out
    if protocol == "roundrobin":
        i = 0
        for t in topics:
            for p in range(counts.get(t, 0)):
                while t not in subs[order[i % len(order)]]:
                    i += 1
                out[order[i % len(order)]].add((t, p))
                i += 1
        return out
    assert protocol == "cooperative-sticky", protocol
    return cooperative_sticky(members, counts)


def cooperative_sticky(
    members: list[tuple[str, Subscription]], counts: dict[str, int]
) -> dict[str, set[tuple[str, int]]]:
    """Sticky and balanced, then the cooperative adjustment: a partition whose (believed) owner
    changes is given to nobody in this generation. Claims: the highest generation wins; two
    claims at the same generation are both disbelieved and the partition is withheld."""
    subs = {mid: set(s.topics) for mid, s in members}
    order = sorted(subs)
    claims: dict[tuple[str, int], list[tuple[int, str]]] = defaultdict(list)
    for mid, s in members:
        for t, ps in s.owned_partitions:
            for p in ps:
                claims[(t, p)].append((s.generation_id, mid))
    owner: dict[tuple[str, int], str] = {}
    contested: set[tuple[str, int]] = set()
    for tp, cl in claims.items():
        best = max(g for g, _ in cl)
        winners = [m for g, m in cl if g == best]
        if len(winners) == 1:
            owner[tp] = winners[0]
        else:
            contested.add(tp)
    out: dict[str, set[tuple[str, int]]] = {mid: set() for mid in order}
    for (t, p), m in owner.items():
        if t in subs[m] and p < counts.get(t, 0):
            out[m].add((t, p))
    taken = set().union(*out.values()) if out else set()
    topics = sorted(set().union(*subs.values())) if subs else []
    every = [(t, p) for t in topics for p in range(counts.get(t, 0))]
    for tp in every:
        if tp in taken:
            continue
        eligible = [m for m in order if tp[0] in subs[m]]
        m = min(eligible, key=lambda x: (len(out[x]), order.index(x)))
        out[m].add(tp)
    for _ in range(len(every) + 1):  # balance: move from the fullest to an eligible emptier one
        moved = False
        for a in sorted(order, key=lambda x: (-len(out[x]), x)):
            for tp in sorted(out[a], reverse=True):
                cands = [b for b in order if b != a and tp[0] in subs[b] and len(out[b]) + 1 < len(out[a])]
                if cands:
                    b = min(cands, key=lambda x: (len(out[x]), x))
                    out[a].discard(tp)
                    out[b].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    for m in order:
        out[m] = {tp for tp in out[m] if tp not in contested and owner.get(tp, m) == m}
    return out


# --- clients ---------------------------------------------------------------------------------


@dataclass(eq=False)
class Client:
    name: str
    kind: str
    topics: tuple[str, ...]
    version: int  # embedded subscription version (classic members)
    instance_id: str | None
    incarnation: int
    member_id: str = ""
    owned: Owned = field(default_factory=dict)  # what the client processes now
    disowned: set[tuple[str, int]] = field(default_factory=set)  # ownership ended by a fencing
    # classic members
    phase: str = "unjoined"  # unjoined | joining | joined (must sync) | syncing | stable
    rejoin: bool = False
    generation: int = -1
    protocol: str | None = None
    leader_members: list[tuple[str, Subscription]] | None = None
    skip_assignment: bool = False
    snapshot: dict[str, int] | None = None  # partition counts the leader assigned from
    join_handle: Pending | None = None
    sync_handle: Pending | None = None
    # consumer-protocol members
    epoch: int = 0
    releasing: Owned = field(default_factory=dict)
    refused: bool = False  # its last join was answered GROUP_ID_NOT_FOUND
    full_next: bool = False  # after a lost answer the next heartbeat is a full one
    topics_changed: bool = False  # its next heartbeat carries its new subscription
    # the answer to the request being sent will be lost (the client times the request out)
    deaf: bool = False

    @property
    def classic(self) -> bool:
        return self.kind in CLASSIC_KINDS

    @property
    def eager(self) -> bool:
        return self.kind in (EAGER_RANGE, EAGER_RR)

    def holding(self) -> set[tuple[str, int]]:
        """What the client processes (its view), including partitions it has yet to release."""
        return pairs(self.owned) | pairs(self.releasing)

    def counted(self) -> set[tuple[str, int]]:
        return self.holding() - self.disowned

    def lose_all(self) -> None:
        self.owned, self.releasing, self.disowned = {}, {}, set()

    def protocols(self) -> tuple[Protocol, ...]:
        owned = sorted_owned(self.owned) if self.version >= 1 else ()
        meta = serialize_subscription(Subscription(self.version, self.topics, None, owned, self.generation))
        if self.kind == EAGER_RANGE:
            return (Protocol("range", meta), Protocol("cooperative-sticky", meta))
        if self.kind == EAGER_RR:
            return (Protocol("roundrobin", meta), Protocol("cooperative-sticky", meta))
        return (Protocol("cooperative-sticky", meta),)
