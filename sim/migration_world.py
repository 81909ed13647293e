"""The migration world (KIP-848 "Supporting Online Consumer Group Upgrade"): one group driven
through the engine shard (with the translation layer's hooks) by classic eager, classic
cooperative and consumer-protocol clients at once (sim/migration_clients.py describes them and
how they react).

Rules: clients join, rejoin, sync, heartbeat (acknowledging or not), change their subscription,
lose the answer to a request, leave (LeaveGroup; CGH -1; -2 for static members) or crash; a
static instance is replaced by a new process of any protocol; time advances (session, rebalance,
join, sync timeouts and the initial rebalance delay fire via `expire`); topics grow; and the
coordinator restarts: the whole record log so far is replayed into a fresh Shard (with
`on_loaded`), possibly with another `group.consumer.migration.policy`, and clients keep their own
view. A conversion happens whenever the traffic calls for one: the first
consumer-protocol member joining a classic group, the last one leaving (or being fenced, or
replaced by a classic static member) with classic members left.

Invariants:

1. **No partition is owned twice** from the members' point of view (each client's own view as
   above). Ownership of a member the coordinator fenced ends at the fencing (Kafka's guarantee is
   that a partition moves only once its owner revoked it or was fenced by the coordinator): a
   client is fenced when its member is removed (session/rebalance/join/sync timeout, static
   replacement), or, in a classic group, when a join phase completes without it (a static member
   that did not rejoin stays in the group but its generation is over). What a fenced client still
   believes it owns is not counted until it re-establishes ownership (a successful SyncGroup or a
   consumer-protocol join); what it receives afterwards is counted. A classic member removed
   during a join phase (which writes no record) is back after a restart, at its generation and
   with the assignment it holds: its ownership counts again.
2. **Liveness**: at teardown, with no more membership changes, every client acts (rejoins, syncs,
   heartbeats and acknowledges) for up to 100 rounds while time advances by 200 ms a round (20 s:
   enough for a chain of session timeouts of crashed members, each followed by a rebalance); then
   every partition of every subscribed topic is owned by exactly one member.
   Weakened where Kafka does the same: a consumer group whose members all use the classic
   protocol only learns of new partitions when a member rejoins (`classicGroupHeartbeatToConsumerGroup`
   does not refresh metadata and the JoinGroup answer names no leader, so no client watches the
   metadata); for such a group the expected partitions are those of its subscription metadata.
   And a coordinator restart during the rebalance that follows a downgrade loses that rebalance
   (no record says it is due, in Kafka either): the group reloads Stable under a leader no client
   knows it is (the consumer group answered every JoinGroup with leader ""), so partitions still
   moving at the conversion, or added later, wait for the next membership change. Likewise a
   static leader replaced without a rebalance (KIP-814 SkipAssignment) takes today's metadata as
   its snapshot (Java's `onLeaderElected`), so partitions the stored assignment misses (added
   while a rebalance was lost to a restart) wait too. So do topics a static follower adds when
   it restarts with a new subscription while the group is Stable: Kafka gives it the stored
   assignment without a rebalance and the leader does not watch them. In these cases, until a
   join phase completes, only "owned at most once, and subscribed" is required.
3. **Conversions keep assignments**: right after classic->consumer, each converted member's
   assigned partitions are its classic assignment (what a cooperative member holds beyond it is
   pending revocation, see translation/upgrade.py); right after consumer->classic, the
   GroupMetadata record carries each remaining member's current assigned partitions (the joiner
   of a static replacement gets partitions nobody else held).
4. **Replay equals live**: a replica that replays every record as it is written holds the same
   consumer group (`persisted_state()`) and, when the classic group is at rest (Stable or Empty),
   the same persisted classic fields; at teardown a replay from an empty shard agrees as well.

The coordinator's own view is checked too: no partition is assigned or pending revocation in two
consumer-group members. Invariants 1 and 4 are also checked in every round of the settling.

The regressions this machine found are pinned in tests/test_migration_regressions.py. Run it
longer with `STATEFUL_EXAMPLES=5000 STATEFUL_STEPS=100` (one process: the
default 300 examples of 60 steps take about 10 s).

Each rule is a plain method, each invariant too: tests/test_migration_stateful.py draws them with
Hypothesis (`MigrationMachine`), sim/chaos.py with a seeded RNG and faults (`SimMachine`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from engine.classic.api import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
    SyncGroupResponse,
)
from engine.classic.group import ClassicGroup
from engine.classic.records import persisted_view
from engine.classic.state import ClassicGroupState
from engine.config import CoordinatorConfig
from engine.consumer.api import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from engine.consumer.group import ConsumerGroup
from engine.context import RequestContext
from engine.errors import Errors
from engine.ids import SeededIds
from engine.metadata import MetadataImage, TopicImage, topic_id_for
from engine.outcome import Outcome, Pending
from engine.shard import Shard
from records.classic_group import GroupMetadataKey, GroupMetadataValue
from records.consumer_group import TopicPartitions
from records.coordinator import CoordinatorRecord
from sim.client_assignors import assign
from sim.migration_clients import (
    CONSUMER,
    COOP,
    GROUP,
    INITIAL_PARTITIONS,
    MAX_PARTITIONS,
    NAMES,
    REBALANCE_MS,
    SESSION_MS,
    SETTLE_ROUNDS,
    SETTLE_STEP_MS,
    STATIC,
    Client,
    Owned,
    config,
    from_pairs,
    pairs,
    sorted_owned,
)
from translation.embedded_protocol import parse_assignment, parse_subscription, serialize_assignment
from translation.migration import Migration


class MigrationWorld:
    """One group, its coordinator (a synchronous shard: appends acknowledged at once), its
    record log and a replica, and the clients; each rule of the state machine is a plain method.

    The hypothesis machine (tests/test_migration_stateful.py) draws the rules; the chaos
    simulator (sim/chaos.py) draws them from a seeded RNG and replaces the plumbing. `__init__`
    is cooperative so a subclass that also inherits `RuleBasedStateMachine` initialises both."""

    def __init__(self) -> None:
        super().__init__()
        self.policy = "bidirectional"
        self.image = MetadataImage([TopicImage(topic_id_for(t), t, n) for t, n in INITIAL_PARTITIONS.items()])
        self.restarts = 0
        self.shard = self._new_shard()
        self.coordinator = self.shard
        self.replica = Shard(self.config_for(self.policy), SeededIds(0), self.image)
        self.log: list[CoordinatorRecord] = []
        self.now = 10_000
        self.clients: dict[str, Client] = {}
        self.handles: dict[Pending, Client] = {}
        self.early: dict[Pending, Any] = {}  # answers that came before their handle was known
        self.incarnations: dict[str, int] = defaultdict(int)
        # From a downgrade until the classic group completes a join phase; and whether liveness
        # is relaxed until then (see the module docstring, invariant 2).
        self.since_downgrade = False
        self.unwatched = False
        self.requests = 0

    def config_for(self, policy: str) -> CoordinatorConfig:
        """The coordinator's settings under `policy` (a subclass adds its own)."""
        return config(policy)

    def _new_shard(self) -> Shard:
        # A fresh id seed per incarnation of the coordinator: ids must not repeat across restarts.
        cfg = self.config_for(self.policy)
        return Shard(cfg, SeededIds(1000 + self.restarts), self.image, migration=Migration)

    # --- plumbing ---------------------------------------------------------------------------

    @property
    def group(self) -> ConsumerGroup | ClassicGroup | None:
        g = self.shard.groups.get(GROUP)
        return g if isinstance(g, ConsumerGroup | ClassicGroup) else None

    def _tick(self) -> int:
        self.now += 1
        return self.now

    def _names(self, tps: Any) -> Owned:
        out: Owned = {}
        for t, parts in tps:
            topic = self.image.topic_by_id(t)
            assert topic is not None, f"unknown topic id {t}"
            if parts:
                out.setdefault(topic.name, set()).update(parts)
        return out

    def _server_view(self) -> dict[str, Any]:
        """What invariant 3 compares against: the group's type and every member's assignment."""
        g = self.group
        if isinstance(g, ConsumerGroup):
            return {
                "type": "consumer",
                "current": {
                    mid: pairs(self._names(m.assigned_partitions.items())) for mid, m in g.members.items()
                },
                "held": {
                    mid: pairs(self._names(m.assigned_partitions.items()))
                    | pairs(self._names(m.partitions_pending_revocation.items()))
                    for mid, m in g.members.items()
                },
                "target": {mid: pairs(self._names(a.items())) for mid, a in g.target_assignment.items()},
            }
        if isinstance(g, ClassicGroup) and g.members:
            assigned = {}
            for mid, m in g.members.items():
                parsed = parse_assignment(m.assignment).partitions if m.assignment else ()
                assigned[mid] = {(t, p) for t, ps in parsed for p in ps if self.image.topic(t) is not None}
            return {"type": "classic", "generation": g.generation_id, "assigned": assigned}
        return {
            "type": None
            if g is None
            else "empty-" + ("classic" if isinstance(g, ClassicGroup) else "consumer")
        }

    def _run(self, out: Outcome[Any]) -> Any:
        """Append (acknowledged at once), deliver parked answers, and return the response."""
        self.log.extend(out.records)
        self.replica.apply(out.records)
        for handle, response in out.completions:
            self._complete(handle, response)
        if out.on_append is not None:
            self._run(out.on_append(Errors.NONE))
        return out.response

    def _request(self, send: Callable[[], Outcome[Any]]) -> Any:
        """One request, then every timer already due (the runtime fires them at once)."""
        self.requests += 1
        before = self._server_view()
        records_from = len(self.log)
        response = self._run(send())
        for o in self.shard.expire(self.now):
            self._run(o)
        self._after(before, records_from)
        return response

    def _park(self, c: Client, handle: Pending) -> None:
        self.handles[handle] = c
        if handle in self.early:
            self._complete(handle, self.early.pop(handle))

    def _complete(self, handle: Pending, response: Any) -> None:
        if handle not in self.handles:
            self.early[handle] = response  # e.g. the leader's own SyncGroup, answered on append
            return
        c = self.handles.pop(handle)
        if self.clients.get(c.name) is not c:
            return  # the process is gone
        if handle is c.join_handle:
            c.join_handle = None
            self._on_join(c, response)
        elif handle is c.sync_handle:
            c.sync_handle = None
            self._on_sync(c, response)

    # --- after every step: fencing and conversions -------------------------------------------

    def _after(self, before: dict[str, Any], records_from: int) -> None:
        after = self._server_view()
        g = self.group
        members = g.members if g is not None else {}
        for c in self.clients.values():
            if not c.holding():
                continue
            if c.member_id not in members:
                c.disowned |= c.holding()  # fenced (removed or replaced): ownership ends now
            elif (
                before.get("type") == after.get("type") == "classic"
                and after["generation"] > before["generation"]
                and c.generation != after["generation"]
            ):
                c.disowned |= c.holding()  # a join phase completed without it
        if before.get("type") == "classic" and after.get("type") == "consumer":
            self._check_upgrade(before, after)
            self.since_downgrade = self.unwatched = False
        if before.get("type") == "consumer" and after.get("type") == "classic":
            self._check_downgrade(before, self.log[records_from:])
            self.since_downgrade = True
        if (
            before.get("type") == after.get("type") == "classic"
            and after["generation"] > before["generation"]
        ):
            self.since_downgrade = self.unwatched = False

    def _check_upgrade(self, before: dict[str, Any], after: dict[str, Any]) -> None:
        """Invariant 3, classic -> consumer: each member's assignment is carried over."""
        self.event("conversion: upgrade")
        for mid, assigned in before["assigned"].items():
            if mid in after["current"]:
                assert after["current"][mid] == assigned, (
                    f"upgrade changed {mid}'s assignment: classic {sorted(assigned)}, "
                    f"consumer {sorted(after['current'][mid])}"
                )

    def _check_downgrade(self, before: dict[str, Any], records: list[CoordinatorRecord]) -> None:
        """Invariant 3, consumer -> classic: the GroupMetadata record carries current assignments."""
        self.event("conversion: downgrade")
        written = [
            r.value
            for r in records
            if isinstance(r.key, GroupMetadataKey) and isinstance(r.value, GroupMetadataValue)
        ]
        assert written, "a downgrade wrote no GroupMetadata record"
        value = written[0]
        for mm in value.members:
            got = {(t, p) for t, ps in parse_assignment(mm.assignment).partitions for p in ps}
            if mm.member_id in before["current"]:
                assert got == before["current"][mm.member_id], (
                    f"downgrade gave {mm.member_id} {sorted(got)}; its current assignment was "
                    f"{sorted(before['current'][mm.member_id])} (target "
                    f"{sorted(before['target'].get(mm.member_id, ()))})"
                )
            else:  # the static member replacing the last consumer-protocol member
                remaining = {m.member_id for m in value.members} & set(before["current"])
                others = {tp for mid in remaining for tp in before["held"][mid]}
                assert not (got & others), (
                    f"downgrade gave the joiner {mm.member_id} partitions other members hold: "
                    f"{sorted(got & others)}"
                )

    # --- classic clients --------------------------------------------------------------------

    def _join(self, c: Client) -> None:
        if c.eager:
            c.lose_all()  # eager: revoke everything before rejoining
        elif any(t not in c.topics for t in c.owned):
            # cooperative: revoke the partitions of topics it no longer subscribes to
            c.owned = {t: ps for t, ps in c.owned.items() if t in c.topics}
        c.rejoin = False
        for _ in range(2):  # a dynamic member's first JoinGroup only obtains its member id
            req = JoinGroupRequest(
                GROUP, SESSION_MS, REBALANCE_MS, c.member_id, "consumer", c.protocols(), c.instance_id
            )
            ctx = RequestContext(c.name, "/" + c.name, 9)

            def send(req: JoinGroupRequest = req, ctx: RequestContext = ctx) -> Outcome[Any]:
                return self.coordinator.join_group(req, ctx, self._tick())

            r = self._request(send)
            if self.clients.get(c.name) is not c:
                return
            if c.deaf:
                c.phase = "unjoined"  # it timed the request out; it will send JoinGroup again
                return
            if isinstance(r, Pending):
                c.phase = "joining"
                c.join_handle = r
                self._park(c, r)
                return
            self._on_join(c, r)
            if r.error_code != Errors.MEMBER_ID_REQUIRED:
                return

    def _on_join(self, c: Client, r: JoinGroupResponse) -> None:
        code = Errors(r.error_code)
        c.refused = code is Errors.INCONSISTENT_GROUP_PROTOCOL
        if code is Errors.NONE:
            c.member_id, c.generation, c.protocol = r.member_id, r.generation_id, r.protocol_name
            c.phase = "joined"
            c.skip_assignment = r.skip_assignment
            if r.leader == r.member_id and r.members:
                c.leader_members = [(m.member_id, parse_subscription(m.metadata)) for m in r.members]
            else:
                c.leader_members = None
                self._check_unwatched_static_follower(c, r)
        elif code is Errors.MEMBER_ID_REQUIRED:
            c.member_id, c.phase = r.member_id, "unjoined"
        elif code is Errors.UNKNOWN_MEMBER_ID:
            c.lose_all()
            c.member_id, c.generation, c.phase = "", -1, "unjoined"
        elif code is Errors.REBALANCE_IN_PROGRESS:
            c.phase = "unjoined"
        elif code is Errors.FENCED_INSTANCE_ID:
            self._kill(c)
        elif code is Errors.INCONSISTENT_GROUP_PROTOCOL:
            # No protocol in common with the members (a replayed member keeps only the group's
            # selected protocol, as in Kafka): the client's poll() throws; it stays out.
            self.event("JoinGroup: INCONSISTENT_GROUP_PROTOCOL")
            c.phase = "unjoined"
        else:
            raise AssertionError(f"{c.name} ({c.kind}): unexpected JoinGroup answer {code.name}")

    def _check_unwatched_static_follower(self, c: Client, r: JoinGroupResponse) -> None:
        """A static follower replaced while the group is Stable gets the stored assignment with no
        rebalance, whatever its new subscription (Kafka's `updateStaticMemberThenRebalanceOrCompleteJoin`
        rebalances only when the selected protocol would change), and Java's follower does not
        rejoin for it (its joined subscription is the new one). Topics the new subscription adds
        that the leader's snapshot does not cover are then nobody's until the next rebalance, in
        Kafka too (chaos seed 20146)."""
        g = self.group
        if not c.instance_id or not isinstance(g, ClassicGroup) or g.state is not ClassicGroupState.STABLE:
            return
        if g.generation_id != r.generation_id:
            return
        leader = next((o for o in self.clients.values() if o.member_id == r.leader and o is not c), None)
        if leader is None or leader.snapshot is None:
            return
        if set(c.topics) - set(leader.snapshot):
            self.unwatched = True
            self.event("static follower rejoined with topics the leader does not watch")

    def _stored_assignment_complete(self) -> bool:
        view = self._server_view()
        if view.get("type") != "classic":
            return True
        stored = set().union(set(), *view["assigned"].values())
        return self._expected() <= stored

    def _sync(self, c: Client) -> None:
        assignments: list[tuple[str, bytes]] = []
        if c.leader_members is not None:
            counts = {t.name: t.num_partitions for t in self.image.topics()}
            if not c.skip_assignment:
                plan = assign(c.protocol or "", c.leader_members, counts)
                versions = {mid: s.version for mid, s in c.leader_members}
                assignments = [
                    (mid, serialize_assignment(sorted_owned(from_pairs(tps)), versions[mid]))
                    for mid, tps in plan.items()
                ]
            topics = set().union(*(s.topics for _, s in c.leader_members))
            c.snapshot = {t: counts.get(t, 0) for t in topics}
            if c.skip_assignment and not self._stored_assignment_complete():
                # KIP-814: a static leader replaced without a rebalance keeps the stored
                # assignment and takes today's metadata as its snapshot (Java's
                # `onLeaderElected`, which sends the SyncGroup at once), so partitions the
                # stored assignment misses are nobody's until the next rebalance. Judged here,
                # where the snapshot is taken: a topic created between this client's JoinGroup
                # answer and its SyncGroup is in the snapshot too (chaos seed 20146).
                self.unwatched = True
                self.event("static leader skipped assignment over an incomplete assignment")
        req = SyncGroupRequest(
            GROUP, c.generation, c.member_id, c.instance_id, "consumer", c.protocol, assignments
        )
        ctx = RequestContext(c.name, "/" + c.name, 5)
        r = self._request(lambda: self.coordinator.sync_group(req, ctx, self._tick()))
        if self.clients.get(c.name) is not c:
            return
        if c.deaf:
            c.phase = "unjoined"  # a failed SyncGroup restarts the rebalance from JoinGroup
            return
        if isinstance(r, Pending):
            c.phase = "syncing"
            c.sync_handle = r
            self._park(c, r)
            return
        self._on_sync(c, r)

    def _on_sync(self, c: Client, r: SyncGroupResponse) -> None:
        code = Errors(r.error_code)
        if code is Errors.NONE:
            got = from_pairs({(t, p) for t, ps in parse_assignment(r.assignment).partitions for p in ps})
            if not set(got) <= set(c.topics):
                # Java's checkAssignmentMatchedSubscription: an assignment for another
                # subscription (a static process that came back with new topics and was given the
                # stored assignment) is not adopted; the client rejoins.
                self.event("SyncGroup: assignment does not match the subscription")
                c.phase, c.rejoin = "stable", True
                return
            if not c.eager and pairs(c.owned) - pairs(got):
                c.rejoin = True  # cooperative: revoke what the assignment omits, then rejoin
            c.owned, c.disowned = got, set()
            c.phase = "stable"
            if c.leader_members is None:
                c.snapshot = None
        elif code is Errors.REBALANCE_IN_PROGRESS:
            c.phase = "unjoined"
        elif code is Errors.ILLEGAL_GENERATION:
            c.lose_all()
            c.generation, c.phase = -1, "unjoined"
        elif code is Errors.UNKNOWN_MEMBER_ID:
            c.lose_all()
            c.member_id, c.generation, c.phase = "", -1, "unjoined"
        elif code is Errors.FENCED_INSTANCE_ID:
            self._kill(c)
        elif code is Errors.INCONSISTENT_GROUP_PROTOCOL:
            # Java throws from poll() with a rejoin pending; the next poll rejoins.
            self.event("SyncGroup: INCONSISTENT_GROUP_PROTOCOL")
            c.phase = "unjoined"
        else:
            raise AssertionError(f"{c.name} ({c.kind}): unexpected SyncGroup answer {code.name}")

    def _classic_heartbeat(self, c: Client) -> None:
        req = HeartbeatRequest(GROUP, c.generation, c.member_id, c.instance_id)
        ctx = RequestContext(c.name, "/" + c.name, 4)
        r = self._request(lambda: self.coordinator.heartbeat(req, ctx, self._tick()))
        if self.clients.get(c.name) is not c or c.deaf:
            return
        code = Errors(r.error_code)
        if code is Errors.NONE:
            return
        if code is Errors.REBALANCE_IN_PROGRESS:
            c.rejoin = True
        elif code is Errors.ILLEGAL_GENERATION:
            c.lose_all()
            c.generation, c.rejoin = -1, True
            if c.phase in ("joined", "stable"):
                c.phase = "unjoined"
        elif code is Errors.UNKNOWN_MEMBER_ID:
            c.lose_all()
            c.member_id, c.generation, c.rejoin = "", -1, True
            if c.phase in ("joined", "stable"):
                c.phase = "unjoined"
        elif code is Errors.FENCED_INSTANCE_ID:
            self._kill(c)
        else:
            raise AssertionError(f"{c.name} ({c.kind}): unexpected Heartbeat answer {code.name}")

    def _metadata_stale(self, c: Client) -> bool:
        """A Stable leader notices that partition counts changed since it assigned (Java's
        `assignmentSnapshot` check) and rejoins."""
        if c.snapshot is None or c.phase != "stable":
            return False
        return any(
            (self.image.topic(t).num_partitions if self.image.topic(t) else 0) != n  # type: ignore[union-attr]
            for t, n in c.snapshot.items()
        )

    def _classic_step(self, c: Client) -> None:
        """What a classic client's poll loop does next."""
        if c.phase == "joining":
            return
        if c.phase == "syncing":
            self._classic_heartbeat(c)
        elif c.phase == "unjoined" or c.rejoin or self._metadata_stale(c):
            self._join(c)
        elif c.phase == "joined":
            self._sync(c)
        else:
            self._classic_heartbeat(c)

    # --- consumer-protocol clients -----------------------------------------------------------

    def _cgh(self, c: Client, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        ctx = RequestContext(c.name, "/" + c.name, 1)
        r = self._request(lambda: self.coordinator.consumer_group_heartbeat(req, ctx, self._tick()))
        assert isinstance(r, ConsumerGroupHeartbeatResponse)
        return r

    def _cgh_join(self, c: Client) -> None:
        c.lose_all()
        c.epoch = 0
        req = ConsumerGroupHeartbeatRequest(
            GROUP,
            c.member_id,
            0,
            instance_id=c.instance_id,
            rebalance_timeout_ms=REBALANCE_MS,
            subscribed_topic_names=list(c.topics),
            topic_partitions=[],
        )
        self._on_cgh(c, req, self._cgh(c, req))

    def _cgh_heartbeat(self, c: Client, ack: bool) -> None:
        owned = None
        full = c.full_next
        if ack or full:
            owned = [TopicPartitions(topic_id_for(t), tuple(sorted(ps))) for t, ps in sorted(c.owned.items())]
            c.disowned -= pairs(c.releasing)
            c.releasing = {}  # released once the acknowledgement is sent
        req = ConsumerGroupHeartbeatRequest(
            GROUP,
            c.member_id,
            c.epoch,
            instance_id=c.instance_id,
            topic_partitions=owned,
            rebalance_timeout_ms=REBALANCE_MS if full else -1,
            subscribed_topic_names=list(c.topics) if full or c.topics_changed else None,
        )
        c.topics_changed = False
        self._on_cgh(c, req, self._cgh(c, req))

    def _on_cgh(
        self, c: Client, req: ConsumerGroupHeartbeatRequest, r: ConsumerGroupHeartbeatResponse
    ) -> None:
        if self.clients.get(c.name) is not c:
            return
        if c.deaf:
            c.full_next = req.member_epoch > 0  # it resends everything in its next heartbeat
            return
        c.full_next = False
        code = Errors(r.error_code)
        if code is Errors.NONE:
            c.refused = False
            if req.member_epoch == 0:
                c.disowned = set()
            c.epoch = r.member_epoch
            if r.assignment is not None:
                new = self._names((tp.topic_id, tp.partitions) for tp in r.assignment)
                gone = pairs(c.owned) - pairs(new)
                c.releasing = from_pairs(pairs(c.releasing) | gone)
                c.owned = new
        elif code in (Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID):
            c.lose_all()
            c.epoch = 0  # abandon everything and rejoin
        elif code is Errors.GROUP_ID_NOT_FOUND:
            c.lose_all()
            c.epoch, c.refused = 0, True  # a refused upgrade, or a group that is classic now
        elif code in (Errors.UNRELEASED_INSTANCE_ID, Errors.FENCED_INSTANCE_ID):
            self._kill(c)
        else:
            raise AssertionError(f"{c.name}: unexpected ConsumerGroupHeartbeat answer {code.name}: {r}")

    def _consumer_step(self, c: Client, ack: bool = True) -> None:
        if c.epoch == 0:
            self._cgh_join(c)
        else:
            self._cgh_heartbeat(c, ack)

    # --- lifecycle ---------------------------------------------------------------------------

    def _kill(self, c: Client) -> None:
        """The process stops (a fatal error, a crash, or a close): it owns nothing any more."""
        if self.clients.get(c.name) is c:
            del self.clients[c.name]
        c.lose_all()

    def _spawn(self, name: str, kind: str, topics: tuple[str, ...], version: int) -> Client:
        self.incarnations[name] += 1
        n = self.incarnations[name]
        if kind == CONSUMER:
            version = 3
        elif kind == COOP:
            version = max(version, 1)  # cooperative-sticky needs owned partitions (v1+)
        c = Client(name, kind, topics, version, STATIC.get(name), n)
        if kind == CONSUMER:
            c.member_id = f"{name}-kip848-{n}"  # client-generated member id (KIP-1082)
        self.clients[name] = c
        self.event(f"client kind {kind}{' static' if c.instance_id else ''}")
        return c

    def _first_step(self, c: Client) -> None:
        if c.classic:
            self._join(c)
        else:
            self._cgh_join(c)

    # --- rules -------------------------------------------------------------------------------

    def _pick(self, i: int) -> Client:
        names = sorted(self.clients)
        return self.clients[names[i % len(names)]]

    def start_client(self, i: int, spec: tuple[str, tuple[str, ...], int, bool]) -> None:
        """A new process joins (JoinGroup, or ConsumerGroupHeartbeat with epoch 0)."""
        absent = [n for n in NAMES if n not in self.clients]
        kind, topics, version, _ = spec
        self._first_step(self._spawn(absent[i % len(absent)], kind, topics, version))

    def act(self, i: int) -> None:
        """A client does what its poll loop does next (join, sync, heartbeat and acknowledge)."""
        c = self._pick(i)
        if c.classic:
            self._classic_step(c)
        else:
            self._consumer_step(c)

    def change_subscription(self, i: int, topics: tuple[str, ...]) -> None:
        """A client subscribes to other topics: a classic client rejoins with the new subscription,
        a consumer-protocol client sends it with its next heartbeat."""
        c = self._pick(i)
        if topics == c.topics:
            return
        c.topics = topics
        self.event(f"subscription changed ({'classic' if c.classic else 'consumer'})")
        if c.classic:
            c.rejoin = True
        else:
            c.topics_changed = True

    def lose_answer(self, i: int) -> None:
        """A client's next request reaches the coordinator but the answer is lost: it times the
        request out (a classic client restarts its rebalance if it was joining or syncing; a
        consumer-protocol client sends a full heartbeat next)."""
        c = self._pick(i)
        self.event(f"answer lost ({'classic' if c.classic else 'consumer'})")
        c.deaf = True
        try:
            if c.classic:
                self._classic_step(c)
            else:
                self._consumer_step(c)
        finally:
            c.deaf = False

    def rejoin(self, i: int) -> None:
        """A classic client sends JoinGroup when it must (REBALANCE_IN_PROGRESS, a shrunken
        assignment, an error, or as leader after a metadata change)."""
        c = self._pick(i)
        if not c.classic or c.phase in ("joining", "syncing"):
            return
        if c.phase == "unjoined" or c.rejoin or self._metadata_stale(c):
            self._join(c)

    def sync(self, i: int) -> None:
        c = self._pick(i)
        if c.classic and c.phase == "joined":
            self._sync(c)

    def heartbeat(self, i: int, ack: bool) -> None:
        """A heartbeat, also when a classic client should rather rejoin or sync, and (consumer
        protocol) with or without acknowledging its revocations."""
        c = self._pick(i)
        if not c.classic:
            self._consumer_step(c, ack)
        elif c.member_id and c.generation >= 0 and c.phase != "joining":
            self._classic_heartbeat(c)

    def leave(self, i: int, static_leave: int) -> None:
        """A clean close: classic dynamic members send LeaveGroup, static ones do not (KIP-345);
        consumer-protocol members send -1, static ones -2 (or -1)."""
        c = self._pick(i)
        if c.classic:
            if c.instance_id is None and c.member_id:
                req = LeaveGroupRequest(GROUP, [MemberIdentity(c.member_id, None, "closing")])
                ctx = RequestContext(c.name, "/" + c.name, 5)
                c.lose_all()
                self._request(lambda: self.coordinator.leave_group(req, ctx, self._tick()))
        elif c.epoch > 0:
            epoch = static_leave if c.instance_id is not None else -1
            c.lose_all()
            leave = ConsumerGroupHeartbeatRequest(GROUP, c.member_id, epoch, instance_id=c.instance_id)
            r = self._cgh(c, leave)
            assert r.error_code in (
                0,
                Errors.UNKNOWN_MEMBER_ID,
                Errors.GROUP_ID_NOT_FOUND,
                Errors.FENCED_INSTANCE_ID,
            ), r
        self._kill(c)

    def crash(self, i: int) -> None:
        self._kill(self._pick(i))

    def replace_static(self, name: str, spec: tuple[str, tuple[str, ...], int, bool]) -> None:
        """A static instance restarts as a new process, possibly of the other protocol: the new
        process takes over the instance id (and its assignment)."""
        kind, topics, version, graceful = spec
        old = self.clients.get(name)
        if old is not None:
            if graceful and not old.classic and old.epoch > 0:
                old.lose_all()
                self._cgh(
                    old, ConsumerGroupHeartbeatRequest(GROUP, old.member_id, -2, instance_id=old.instance_id)
                )
            self._kill(old)
        self.event(f"static replacement -> {kind}")
        self._first_step(self._spawn(name, kind, topics, version))

    def advance(self, ms: int) -> None:
        self.now += ms
        before = self._server_view()
        records_from = len(self.log)
        for o in self.coordinator.expire(self.now):
            self._run(o)
        self._after(before, records_from)

    def grow_topic(self, topic: str, more: int) -> None:
        """Partitions are added (Kafka never removes partitions of a topic)."""
        if self._grow(topic, more):
            out = self.coordinator.update_metadata(self.image, self._tick())
            self._run(out)

    def _grow(self, topic: str, more: int) -> bool:
        """Add up to `more` partitions (at most MAX_PARTITIONS) to the image and the replica."""
        t = self.image.topic(topic)
        assert t is not None
        n = min(t.num_partitions + more, MAX_PARTITIONS)
        if n == t.num_partitions:
            return False
        self.image = self.image.with_topic(TopicImage(t.topic_id, topic, n))
        self.replica.update_metadata(self.image)
        return True

    def restart(self, policy: str) -> None:
        """The coordinator restarts (maybe with another migration policy): a fresh shard replays
        the whole log. In-flight requests fail (NOT_COORDINATOR); a Java classic client then
        restarts its rebalance from JoinGroup, whether its JoinGroup or its SyncGroup was lost
        (it sends SyncGroup as soon as the JoinGroup answer arrives, so "joined" means its
        SyncGroup was in flight)."""
        self._before_restart()
        self.policy = policy
        self.restarts += 1
        self.event(f"restart with policy {policy}")
        self.shard = self._new_shard()
        self.shard.apply(self.log)
        self.coordinator = self.shard
        self.shard.tick(self.now)
        for o in self.shard.on_loaded(self.now):
            self._run(o)
        self._after_restart()

    def _before_restart(self) -> None:
        g = self.group
        if isinstance(g, ClassicGroup) and self.since_downgrade and g.state is not ClassicGroupState.STABLE:
            self.unwatched = True  # see the module docstring (invariant 2)
            self.event("restart lost the rebalance after a downgrade")

    def _after_restart(self) -> None:
        """The clients' side of a coordinator restart (see `restart`)."""
        self.handles.clear()
        self.early.clear()
        for c in self.clients.values():
            if c.phase in ("joining", "joined", "syncing"):
                c.join_handle = c.sync_handle = None
                c.phase = "unjoined"
        # A classic member removed during a join phase is not written to the log: the restarted
        # coordinator has it back, at its generation, with the assignment it holds. Its
        # ownership is the coordinator's again (nobody synced a later generation, or it would be
        # in the log).
        view = self._server_view()
        if view.get("type") == "classic":
            for c in self.clients.values():
                if (
                    c.disowned
                    and c.member_id in view["assigned"]
                    and c.generation == view["generation"]
                    and c.holding() <= view["assigned"][c.member_id]
                ):
                    self.event("restart restored a fenced classic member")
                    c.disowned = set()

    # --- invariants --------------------------------------------------------------------------

    def no_partition_owned_twice_by_members(self) -> None:
        seen: dict[tuple[str, int], str] = {}
        for c in self.clients.values():
            for tp in c.counted():
                assert tp not in seen, (
                    f"{tp[0]}-{tp[1]} owned by {seen[tp]} and {c.name} ({c.kind}, member {c.member_id})"
                )
                seen[tp] = f"{c.name} ({c.kind}, member {c.member_id})"

    def no_partition_owned_twice_by_the_coordinator(self) -> None:
        view = self._server_view()
        if view.get("type") != "consumer":
            return
        seen: dict[tuple[str, int], str] = {}
        for mid, held in view["held"].items():
            for tp in held:
                assert tp not in seen, f"{tp} held by {seen[tp]} and {mid} in the coordinator"
                seen[tp] = mid

    def replica_equals_live(self) -> None:
        live, replayed = self.shard.groups.get(GROUP), self.replica.groups.get(GROUP)
        if isinstance(live, ConsumerGroup):
            assert isinstance(replayed, ConsumerGroup), f"replica holds {replayed!r}, live {live!r}"
            assert live.persisted_state() == replayed.persisted_state()
        elif isinstance(live, ClassicGroup) and live.state in (
            ClassicGroupState.STABLE,
            ClassicGroupState.EMPTY,
        ):
            if live.is_simple():
                return
            assert isinstance(replayed, ClassicGroup), f"replica holds {replayed!r}, live {live!r}"
            assert persisted_view(replayed) == persisted_view(live)

    # --- teardown: replay from scratch, then liveness ------------------------------------------

    def event(self, value: str) -> None:
        """Something worth counting happened (a conversion, a kind of client, a lost answer):
        the hypothesis machine reports it with `hypothesis.event`; nothing by default."""

    def check_at_end(self) -> None:
        """Replay from scratch, settle (liveness), replay again: the machine's teardown."""
        self.event(f"requests before settling: {min(self.requests // 20 * 20, 100)}+")
        self._check_replay_from_scratch()
        self._settle()
        self._check_replay_from_scratch()

    def _check_replay_from_scratch(self) -> None:
        fresh = Shard(self.config_for(self.policy), SeededIds(0), self.image)
        fresh.apply(self.log)
        g, f = self.shard.groups.get(GROUP), fresh.groups.get(GROUP)
        if isinstance(g, ConsumerGroup):
            assert isinstance(f, ConsumerGroup) and f.persisted_state() == g.persisted_state()
        elif (
            isinstance(g, ClassicGroup)
            and g.state in (ClassicGroupState.STABLE, ClassicGroupState.EMPTY)
            and not g.is_simple()
        ):
            assert isinstance(f, ClassicGroup) and persisted_view(f) == persisted_view(g)

    def _expected(self) -> set[tuple[str, int]]:
        g = self.group
        if g is None:
            return set()
        topics: set[str] = set()
        for c in self.clients.values():
            if c.member_id in g.members:
                topics.update(c.topics)
        counts = {t: self.image.topic(t).num_partitions for t in topics}  # type: ignore[union-attr]
        if isinstance(g, ConsumerGroup) and g.num_classic_members == g.num_members:
            # Only classic members: nobody refreshes the metadata (see the module docstring).
            counts = {
                t: min(n, g.subscription_metadata[t].num_partitions)
                for t, n in counts.items()
                if t in g.subscription_metadata
            }
        return {(t, p) for t, n in counts.items() for p in range(n)}

    def _settled(self) -> bool:
        g = self.group
        if g is None:
            return not self.clients
        for c in self.clients.values():
            if c.refused:
                continue
            if c.member_id not in g.members or c.disowned or c.releasing:
                return False
            if c.classic and (c.phase != "stable" or c.rejoin or self._metadata_stale(c)):
                return False
            if not c.classic and c.epoch <= 0:
                return False
        owned = [tp for c in self.clients.values() for tp in c.counted()]
        if self.unwatched:
            return set(owned) <= self._expected()  # see the module docstring
        return sorted(owned) == sorted(self._expected())

    def _settle(self) -> None:
        for _ in range(SETTLE_ROUNDS):
            if self._settled():
                return
            for name in sorted(self.clients):
                c = self.clients.get(name)
                if c is None:
                    continue
                if c.classic:
                    self._classic_step(c)
                else:
                    self._consumer_step(c)
            self.advance(SETTLE_STEP_MS)
            self.no_partition_owned_twice_by_members()
            self.no_partition_owned_twice_by_the_coordinator()
            self.replica_equals_live()
        g = self.group
        detail = {
            c.name: (c.kind, c.member_id, c.phase, c.rejoin, c.generation, c.epoch, sorted(c.counted()))
            for c in self.clients.values()
        }
        owned = sorted(tp for c in self.clients.values() for tp in c.counted())
        raise AssertionError(
            f"the group did not settle in {SETTLE_ROUNDS} rounds: group {g!r}, expected "
            f"{sorted(self._expected())}, owned {owned}, clients {detail}"
        )
