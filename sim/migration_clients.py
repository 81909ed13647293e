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
