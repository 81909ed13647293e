"""The deterministic simulator for streams groups (KIP-1071), with faults (docs/simulation.md).

Kafka Streams members speaking StreamsGroupHeartbeat (`group.protocol=streams`) against the real
server path below the sockets, as sim/chaos.py runs the consumer and classic members: the
engine `Shard` through `Shard.streams_group_heartbeat` (the entry point the gateway's
`StreamsApis` calls), the shard runtime (group commit, records before responses, the loop timer
that fences expired sessions and members that do not revoke, reload after a storage failure) and
`CoordinatorStorage` (journal, load from the log), over chaos.py's virtual clock, loop and disk.
The application is a word count (subtopology 0 reads `words-in` and writes a repartition topic;
subtopology 1 reads it into a store with a changelog), `group.streams.num.standby.replicas=1`,
six members (two stream threads per process, three processes). The internal topics are created
as the gateway creates them: when a heartbeat's answer asks for them.

A member behaves as Kafka Streams' `StreamsMembershipManager` does, simplified: it joins with
epoch 0 and its topology; each heartbeat reports the tasks it holds; it takes the assignment an
answer carries (a slow member keeps its old tasks for one more heartbeat, so revocations wait,
and the rebalance timeout may fence it); FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID drop every task
and rejoin at epoch 0; an INVALID_REQUEST (a newer topology epoch the group refuses: Kafka 4.4
does not update topologies) ends the instance; a coordinator error or a lost answer is retried.

Two of the six members are static (`group.instance.id`): they leave with epoch -2 and a new
incarnation takes the place and tasks of the one that left.

Faults: lost and duplicated answers, client crashes (the session expires), leaves, heartbeats
with a fenced epoch (one ahead, or behind with tasks it no longer has), members started with a
stale (older) or a newer topology epoch, an emptied group deleted (the next instances may bring
a newer topology), topics that grow, clock jumps, append and fsync failures, stalled fsyncs and
server crashes (kill or power loss).

Invariants after every step (`StreamsSimMachine.check`):
1. no active task on two members, in the coordinator (counting tasks pending revocation) and in
   the members' own view (a member fenced by the coordinator, or whose epoch the coordinator
   has moved past in an answer the member did not get, no longer counts);
2. no process holds two copies of a task (active, standby, warm-up, pending revocation
   included), in the coordinator and in the members' view;
3. replay equals live: a replica fed every journaled record holds the live group; every
   `REPLAY_EVERY` steps and at the end, a shard loaded from the simulated disk does too;
4. every member has its session timer;
and once faults stop, the members converge: the group is Stable, every task active on exactly
one member, each stateful task with min(1, processes - 1) standbys and no stateless one with
any, every member holding exactly what the coordinator says.

Classic Kafka Streams 3.9 threads (sim/streams_classic_clients.py): each time one of the four
dynamic members starts it may start classic (protocol `consumer`, Streams' SubscriptionInfo), so
the group converts to a streams group when the first StreamsGroupHeartbeat member joins and back
when the last one goes (online migration, translation/streams_upgrade.py and
streams_downgrade.py); the invariants above cover both kinds and the classic group in between
(docs/simulation.md). Warm-up tasks (Kafka 4.4 assigns none) and offset commits are not exercised
here.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

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
from engine.classic.member import Protocol
from engine.classic.state import ClassicGroupState
from engine.config import CoordinatorConfig
from engine.context import RequestContext
from engine.errors import Errors
from engine.metadata import MetadataImage, TopicImage, topic_id_for
from engine.outcome import Outcome
from engine.shard import Shard
from engine.streams.api import StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse
from engine.streams.group import StreamsGroup, Tasks, task_ids, tasks_from, tasks_intersect, tasks_union
from engine.streams.topology import configure
from engine.timers import TimerKind
from records.streams_group import (
    CopartitionGroup,
    KeyValue,
    StreamsGroupTopologyValue,
    Subtopology,
    TopicInfo,
)
from sim import chaos
from sim.chaos import COORDINATOR_ERRORS, SeedResult
from sim.shard_sim import ShardSimMachine
from sim.streams_classic_clients import (
    PROTOCOL,
    ClassicStreamsMember,
    decode_roles,
    leader_assignment,
)

GROUP = "app"
SOURCE = "words-in"
REPARTITION = "app-counts-repartition"
CHANGELOG = "app-counts-changelog"
NAMES = ("s1", "s2", "s3", "s4", "s5", "s6")
PROCESS = {n: f"p{(i // 2) + 1}" for i, n in enumerate(NAMES)}  # two stream threads per process
STATIC = {"s5": "inst-5", "s6": "inst-6"}  # `group.instance.id` (static members, Kafka 4.4)
INITIAL_PARTITIONS = 4
MAX_PARTITIONS = 8
SESSION_MS = 3000
REBALANCE_MS = 4000
STATEFUL = "1"  # the subtopology with a changelog: the only one with standbys
# Dynamic members that may start as classic Kafka Streams 3.9 threads (protocol `consumer`) now
# and then, as in a rolling upgrade or downgrade: the group converts both ways (online migration).
MAY_BE_CLASSIC = ("s1", "s2", "s3", "s4")
CLASSIC_SHARE = 0.5
CLASSIC_SESSION_MS = 3000


def config() -> CoordinatorConfig:
    return CoordinatorConfig.from_kafka(
        {
            "group.streams.session.timeout.ms": SESSION_MS,
            "group.streams.heartbeat.interval.ms": 1000,
            "group.streams.num.standby.replicas": 1,
            "group.consumer.migration.policy": "bidirectional",
            "group.min.session.timeout.ms": 10,
            "group.initial.rebalance.delay.ms": 50,
            # Kafka's initial rebalance delay, short like the classic one: a group emptied by
            # faults and joined again waits for it, and a crash or a refused append meanwhile.
            "group.streams.initial.rebalance.delay.ms": 50,
            # Kafka's assignment interval, short too: a target wanted within 50 ms of the last
            # waits for a later heartbeat (ASSIGNMENT_DELAYED meanwhile), a classic thread's
            # for a later JoinGroup.
            "group.streams.assignment.interval.ms": 50,
        }
    )


def topology(epoch: int) -> StreamsGroupTopologyValue:
    """The word count as Kafka Streams 4.4 sends it (groupBy -> repartition, count -> changelog)."""
    return StreamsGroupTopologyValue(
        epoch=epoch,
        subtopologies=(
            Subtopology("0", (SOURCE,), (), (), (REPARTITION,), (), ()),
            Subtopology(
                STATEFUL,
                (),
                (),
                (TopicInfo(CHANGELOG, 0, 0, (KeyValue("cleanup.policy", "compact"),)),),
                (),
                (TopicInfo(REPARTITION, 0, 0, (KeyValue("cleanup.policy", "delete"),)),),
                (CopartitionGroup((), (), (0,)),),
            ),
        ),
    )


@dataclass
class Member:
    """One stream thread: what it believes it holds, from the answers it saw."""

    name: str
    incarnation: int
    topology_epoch: int
    member_id: str = ""
    epoch: int = 0
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)
    # the latest assignment seen and not yet taken (a slow member takes it one heartbeat late)
    next_roles: tuple[Tasks, Tasks, Tasks] | None = None

    @property
    def process(self) -> str:
        return PROCESS[self.name]

    @property
    def instance_id(self) -> str | None:
        return STATIC.get(self.name)

    @property
    def process_key(self) -> str:
        return self.process

    @property
    def classic(self) -> bool:
        return False

    def drop_everything(self) -> None:
        self.active, self.standby, self.warmup, self.next_roles = {}, {}, {}, None
        self.epoch = 0


class StreamsSimMachine(ShardSimMachine):
    """Streams members served by a `ShardRuntime` on chaos.py's simulated clock, loop and disk
    (the plumbing: sim/shard_sim.py)."""

    NAME = "streams chaos"  # the summary line of `groupshift simulate --chaos --streams`
    CLI_FLAG = " --streams"  # the reproduce line
    GROUP_ID = GROUP
    NAMES = NAMES

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self.members: dict[str, Member | ClassicStreamsMember] = {}
        self.incarnations = 0
        self.topics: dict[str, int] = {SOURCE: INITIAL_PARTITIONS}
        self.deployed_epoch = 1  # the topology epoch new instances bring while no group exists
        self.ctx = RequestContext("app-StreamThread-1-consumer", "/127.0.0.1", 0)
        self.runtime = self._new_runtime()

    def coordinator_config(self) -> CoordinatorConfig:
        return config()

    # --- the server ----------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return MetadataImage([TopicImage(topic_id_for(n), n, c) for n, c in sorted(self.topics.items())])

    @property
    def group(self) -> StreamsGroup | None:
        g = self.shard.groups.get(GROUP)
        return g if isinstance(g, StreamsGroup) else None

    # --- members -------------------------------------------------------------------------------

    def start(self, name: str) -> None:
        """A new stream thread (a fresh instance, or one restarted on its state directory),
        whose topology epoch is the group's, now and then an older (stale) or a newer one."""
        if name in self.members:
            return
        if name in MAY_BE_CLASSIC and self.rng.random() < CLASSIC_SHARE:
            self.incarnations += 1
            pid = uuid.UUID(int=int(PROCESS[name][1:]))
            self.members[name] = ClassicStreamsMember(name, self.incarnations, pid)
            self._note("classic instance started")
            self.classic_step(name)
            return
        g = self.group
        base = g.topology.epoch if g is not None and g.topology is not None else self.deployed_epoch
        delta = self.rng.choices((0, -1, 1), (8, 1, 1))[0]
        epoch = max(0, base + delta)
        if delta:
            self._note(
                "member started with a stale topology" if delta < 0 else "member with a newer topology"
            )
        self.incarnations += 1
        m = Member(name, self.incarnations, epoch, member_id=f"{name}-{self.incarnations}")
        self.members[name] = m
        g = self.group
        if (
            m.instance_id is not None
            and g is not None
            and any(x.instance_id == m.instance_id and x.member_epoch == -2 for x in g.members.values())
        ):
            self._note("static member replaced")
        self.heartbeat(name)

    def _roles_request(self, m: Member, epoch: int) -> StreamsGroupHeartbeatRequest:
        if epoch == 0:
            return StreamsGroupHeartbeatRequest(
                GROUP,
                m.member_id,
                0,
                instance_id=m.instance_id,
                rebalance_timeout_ms=REBALANCE_MS,
                topology=topology(m.topology_epoch),
                process_id=m.process,
                active_tasks=task_ids(m.active),
                standby_tasks=task_ids(m.standby),
                warmup_tasks=task_ids(m.warmup),
            )
        return StreamsGroupHeartbeatRequest(
            GROUP,
            m.member_id,
            epoch,
            active_tasks=task_ids(m.active),
            standby_tasks=task_ids(m.standby),
            warmup_tasks=task_ids(m.warmup),
        )

    def heartbeat(
        self, name: str, *, slow: bool = False, lost: bool = False, epoch: int | None = None
    ) -> None:
        """One heartbeat of member `name`: reports what it holds, takes what the answer gives."""
        m = self.members.get(name)
        if m is None:
            return
        if isinstance(m, ClassicStreamsMember):
            self.classic_step(name, lost=lost)
            return
        if m.next_roles is not None and not slow:
            m.active, m.standby, m.warmup = m.next_roles
            m.next_roles = None
        req = self._roles_request(m, m.epoch if epoch is None else epoch)
        r = self._request(lambda shard: shard.streams_group_heartbeat(req, self.ctx, self.now))
        if r is None or lost:
            if lost:
                self._note("answer lost")
            return
        assert isinstance(r, StreamsGroupHeartbeatResponse), r
        self._answer(m, r, slow)

    def _answer(self, m: Member, r: StreamsGroupHeartbeatResponse, slow: bool) -> None:
        code = r.error_code
        if code in COORDINATOR_ERRORS:
            self._note(f"answered {Errors(code).name}")
            return
        if code in (Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID):
            self._note(f"fenced ({Errors(code).name})")
            m.drop_everything()
            return
        if code == Errors.INVALID_REQUEST:
            # A newer topology epoch than the group's: Kafka 4.4 refuses topology updates, and
            # Kafka Streams treats INVALID_REQUEST as fatal.
            self._note("instance refused (topology update)")
            del self.members[m.name]
            return
        if code in (Errors.UNRELEASED_INSTANCE_ID, Errors.FENCED_INSTANCE_ID):
            # A static instance restarted while its predecessor still holds the instance id
            # (its session has not expired), or one replaced by a newer incarnation: fatal.
            self._note(f"static instance refused ({Errors(code).name})")
            del self.members[m.name]
            return
        if code == Errors.GROUP_ID_NOT_FOUND:
            # The group was deleted (or a power loss took its creation back) while the member
            # heartbeated at an epoch above 0; the simulated instance ends (an operator restarts it).
            self._note("group gone under a member")
            del self.members[m.name]
            return
        assert code == 0, f"{m.member_id}: unexpected answer {Errors(code).name}: {r.error_message}"
        m.epoch = r.member_epoch
        for s in r.status or ():
            if s.code == 0:
                self._note("stale topology status")
        for t in r.internal_topics_to_create:
            if t.name not in self.topics:
                self.topics[t.name] = t.partitions
                self._note("internal topic created")
        if r.internal_topics_to_create:
            self._update_metadata()
        if r.active_tasks is None and r.standby_tasks is None and r.warmup_tasks is None:
            return
        cur = m.next_roles or (m.active, m.standby, m.warmup)
        roles = (
            cur[0] if r.active_tasks is None else tasks_from(r.active_tasks),
            cur[1] if r.standby_tasks is None else tasks_from(r.standby_tasks),
            cur[2] if r.warmup_tasks is None else tasks_from(r.warmup_tasks),
        )
        if slow:
            m.next_roles = roles
            self._note("slow to take an assignment")
        else:
            m.active, m.standby, m.warmup = roles
            m.next_roles = None

    def leave(self, name: str) -> None:
        """A clean shutdown: epoch -1; a static member's is -2 (it keeps its place and tasks until
        a new incarnation with its instance id replaces it or its session expires)."""
        m = self.members.pop(name, None)
        if m is None:
            return
        if isinstance(m, ClassicStreamsMember):
            self._classic_leave(m)
            return
        if m.instance_id is not None:
            self._note("static leave")
        req = StreamsGroupHeartbeatRequest(
            GROUP, m.member_id, -1 if m.instance_id is None else -2, instance_id=m.instance_id
        )
        self._request(lambda shard: shard.streams_group_heartbeat(req, self.ctx, self.now))

    def crash(self, name: str) -> None:
        """The instance dies without a word: its session expires."""
        self.members.pop(name, None)

    def lose(self, name: str) -> None:
        self.heartbeat(name, lost=True)

    def retry(self, name: str) -> None:
        """The client retries a heartbeat whose answer it did not get: a full heartbeat again."""
        self.heartbeat(name, lost=True)
        self.heartbeat(name)

    # --- classic Kafka Streams instances (online migration) -------------------------------------

    def _classic_ctx(self) -> RequestContext:
        return RequestContext("app-StreamThread-1-consumer", "/127.0.0.1", 9)

    def _classic_send(
        self, m: ClassicStreamsMember, send: Callable[[Shard], Outcome[Any]], on_answer: Callable[[Any], None]
    ) -> bool:
        """Send a JoinGroup/SyncGroup; its answer now, or when the parked request completes (False
        then: the member waits). An answer to an older request of the member is ignored."""
        m.inflight += 1
        token = m.inflight
        result = self.runtime.run(lambda shard, _now: send(shard))
        if isinstance(result, asyncio.Future) and not result.done():

            def deliver(f: asyncio.Future[Any]) -> None:
                if f.cancelled():
                    return
                if self.members.get(m.name) is not m or m.inflight != token:
                    f.exception()
                    return
                if f.exception() is not None:
                    m.phase = "unjoined"  # the in-flight request failed (storage)
                    return
                on_answer(f.result())

            result.add_done_callback(deliver)
            self._drain()
            return False
        self._drain()
        if isinstance(result, asyncio.Future):
            if result.exception() is not None:
                self._note("request failed (storage)")
                m.phase = "unjoined"
                return True
            result = result.result()
        if m.inflight == token and self.members.get(m.name) is m:
            on_answer(result)
        return True

    def classic_step(self, name: str, lost: bool = False) -> None:
        """The next request of a classic instance: JoinGroup, SyncGroup or Heartbeat."""
        m = self.members.get(name)
        if not isinstance(m, ClassicStreamsMember):
            return
        if m.phase in ("joining", "syncing"):
            m.waits += 1
            if m.waits > 8:  # the client's request timeout: it joins again
                self._note("classic request timed out")
                m.inflight += 1
                m.phase = "unjoined"
            return
        m.waits = 0
        if m.phase == "unjoined":
            m.phase = "joining"
            meta = m.metadata(SOURCE, REPARTITION)
            req = JoinGroupRequest(
                GROUP, CLASSIC_SESSION_MS, REBALANCE_MS, m.member_id, "consumer", (Protocol(PROTOCOL, meta),)
            )
            on = (lambda _r: self._classic_lost(m)) if lost else (lambda r: self._on_join(m, r))
            self._classic_send(m, lambda shard: shard.join_group(req, self._classic_ctx(), self.now), on)
        elif m.phase == "joined":
            m.phase = "syncing"
            assignments: list[tuple[str, bytes]] = []
            if m.leader and m.join_members:
                assignments = list(self._leader_assign(m).items())
            sreq = SyncGroupRequest(
                GROUP, m.join_generation, m.member_id, None, "consumer", PROTOCOL, assignments
            )
            on = (lambda _r: self._classic_lost(m, sync=True)) if lost else (lambda r: self._on_sync(m, r))
            self._classic_send(m, lambda shard: shard.sync_group(sreq, self._classic_ctx(), self.now), on)
        elif m.phase == "stable":
            if m.leader and self.topics[SOURCE] != m.snapshot:
                self._note("classic leader rejoins (metadata changed)")
                m.phase = "unjoined"
                return
            hreq = HeartbeatRequest(GROUP, m.generation, m.member_id)
            r = self._request(lambda shard: shard.heartbeat(hreq, self._classic_ctx(), self.now))
            if r is None or lost:
                return
            self._on_classic_error(m, int(r.error_code), "heartbeat")

    def _classic_lost(self, m: ClassicStreamsMember, sync: bool = False) -> None:
        self._note("classic answer lost")
        if sync:
            m.unseen_sync = True
        m.phase = "unjoined"  # it times the request out and joins again

    def _on_classic_error(self, m: ClassicStreamsMember, code: int, what: str) -> None:
        if code == 0:
            return
        self._note(f"classic {what} {Errors(code).name}")
        if code in (Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION):
            m.lose_all()  # onPartitionsLost
            if code == Errors.UNKNOWN_MEMBER_ID:
                m.member_id = ""
        # REBALANCE_IN_PROGRESS (tasks kept: cooperative), coordinator errors, the rest: rejoin
        m.phase = "unjoined"

    def _on_join(self, m: ClassicStreamsMember, r: JoinGroupResponse) -> None:
        if r.error_code == Errors.MEMBER_ID_REQUIRED:
            m.member_id = r.member_id
            m.phase = "unjoined"
            return
        if r.error_code != 0:
            self._on_classic_error(m, r.error_code, "join")
            return
        m.member_id = r.member_id or m.member_id
        m.join_generation = r.generation_id
        m.leader = r.leader == m.member_id and bool(r.members)
        m.join_members = list(r.members) if m.leader else []
        m.phase = "joined"

    def _on_sync(self, m: ClassicStreamsMember, r: SyncGroupResponse) -> None:
        if r.error_code != 0:
            self._on_classic_error(m, r.error_code, "sync")
            return
        active, standby = decode_roles(r.assignment)
        revoked = {s: p - active.get(s, frozenset()) for s, p in m.active.items()}
        m.active, m.standby = active, standby
        m.generation = m.join_generation
        m.left_behind = False
        m.unseen_sync = False
        if any(revoked.values()):
            self._note("classic instance revoked tasks")
            m.phase = "unjoined"  # revoke, then rejoin at once
        else:
            m.phase = "stable"

    def _leader_assign(self, m: ClassicStreamsMember) -> dict[str, bytes]:
        """The classic leader's StreamsPartitionAssignor: creates the internal topics when missing,
        then assigns (sim/streams_classic_clients.py)."""
        n = self.topics[SOURCE]
        if REPARTITION not in self.topics or CHANGELOG not in self.topics:
            self.topics.setdefault(REPARTITION, n)
            self.topics.setdefault(CHANGELOG, n)
            self._note("internal topic created (classic leader)")
            self._update_metadata()
        m.snapshot = n
        tasks = {("0", p) for p in range(n)} | {(STATEFUL, p) for p in range(self.topics[REPARTITION])}
        return leader_assignment(m.join_members, tasks, SOURCE, REPARTITION)

    def _classic_leave(self, m: ClassicStreamsMember) -> None:
        if not m.member_id:
            return
        self._note("classic leave")
        req = LeaveGroupRequest(GROUP, [MemberIdentity(m.member_id, None)])
        self._request(lambda shard: shard.leave_group(req, self._classic_ctx(), self.now))

    def fenced_heartbeat(self, name: str) -> None:
        """A heartbeat with an epoch the coordinator does not hold: one ahead (fenced), or one
        behind (accepted only while the tasks it reports are still its own)."""
        m = self.members.get(name)
        if m is None or isinstance(m, ClassicStreamsMember) or m.epoch <= 0:
            return
        self.heartbeat(name, epoch=m.epoch + self.rng.choice((1, -1)))

    def delete_group(self) -> None:
        """DeleteGroups, accepted when every member has left or expired; the next instances may
        bring the next topology epoch."""
        g = self.group
        if g is None or g.members:
            return
        ctx = RequestContext("admin", "/admin", 2)
        r = self._request(lambda shard: shard.delete_groups([GROUP], ctx, self.now))
        if isinstance(r, list) and r and r[0].error_code == 0:
            self._note("group deleted")
            self.deployed_epoch += 1

    def grow(self) -> None:
        """More partitions for the input and, with it, for the internal topics (an operator
        keeping them aligned, as Kafka Streams requires)."""
        if self.topics[SOURCE] >= MAX_PARTITIONS:
            return
        more = self.rng.randint(1, 2)
        self.topics = {n: min(MAX_PARTITIONS, c + more) for n, c in self.topics.items()}
        self._update_metadata()

    def admin_reads(self) -> None:
        shard = self.shard
        shard.describe_streams_groups([GROUP])
        shard.list_groups()
        shard.describe_groups([GROUP])

    # --- time and the server -------------------------------------------------------------------

    def crash_server(self, power_loss: bool) -> None:
        super().crash_server(power_loss)
        for m in self.members.values():
            if isinstance(m, ClassicStreamsMember) and m.phase in ("joining", "syncing"):
                m.inflight += 1  # the connection closed: the in-flight request failed
                m.phase = "unjoined"

    # --- invariants ----------------------------------------------------------------------------

    def check_clients(self) -> None:
        self.no_task_twice_in_the_coordinator()
        self.no_task_twice_in_the_members_view()
        self.every_member_has_its_session_timer()

    def no_task_twice_in_the_coordinator(self) -> None:
        cg = self.classic_group
        if cg is not None:
            # a classic group (before the first streams member, or converted back): the
            # assignments it holds, decoded from Streams' AssignmentInfo
            owner: dict[tuple[str, int], str] = {}
            for mid, cm in cg.members.items():
                for t in _pairs(decode_roles(cm.assignment)[0]):
                    assert t not in owner, f"task {t[0]}_{t[1]} assigned to {owner[t]} and {mid}"
                    owner[t] = mid
            return
        g = self.group
        if g is None:
            return
        active: dict[tuple[str, int], str] = {}
        copies: dict[tuple[str, str, int], str] = {}
        for mid, m in sorted(g.members.items()):
            for s, p in _pairs(tasks_union(m.active, m.active_pending_revocation)):
                assert (s, p) not in active, f"task {s}_{p} active on {active[(s, p)]} and {mid}"
                active[(s, p)] = mid
            held = tasks_union(
                tasks_union(m.active, m.active_pending_revocation),
                tasks_union(
                    tasks_union(m.standby, m.standby_pending_revocation),
                    tasks_union(m.warmup, m.warmup_pending_revocation),
                ),
            )
            for s, p in _pairs(held):
                k = (m.process_id, s, p)
                assert k not in copies, f"process {m.process_id} holds task {s}_{p} on {copies[k]} and {mid}"
                copies[k] = mid

    def no_task_twice_in_the_members_view(self) -> None:
        g = self.group
        cg = self.classic_group
        live = {} if g is None else g.members
        active: dict[tuple[str, int], str] = {}
        copies: dict[tuple[str, str, int], str] = {}
        for name, m in sorted(self.members.items()):
            if isinstance(m, ClassicStreamsMember):
                # A classic instance counts while the coordinator holds it at the generation of
                # its last SyncGroup (or of the JoinGroup it syncs for): one removed, or left
                # behind on an older generation, learns it at its next request
                # (UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION) and loses its tasks then.
                # Once left behind it stays so until a SyncGroup answer gives it tasks again: a
                # JoinGroup with its old member id is taken as a new member's (Kafka's consumer
                # group path does the same), and what it still runs was handed out meanwhile.
                if cg is not None:
                    held = m.member_id in cg.members and cg.generation_id in (m.generation, m.join_generation)
                else:
                    sm = live.get(m.member_id)
                    held = sm is not None and sm.member_epoch in (m.generation, m.join_generation)
                if not held:
                    m.left_behind = True
                if m.left_behind:
                    continue
                warmup: Tasks = {}
                standby = m.standby
                sm = live.get(m.member_id) if cg is None else None
                if m.unseen_sync and sm is not None:
                    # A SyncGroup answer it did not get: the coordinator released the standbys
                    # that answer dropped when it sent it (translation/streams_classic_member's
                    # `release_standbys`), so a sibling thread may be given one while this thread
                    # still runs it until it rejoins and syncs again. Only within its process,
                    # where Kafka Streams' state directory lock makes the sibling wait; the
                    # coordinator cannot tell a lost answer from a read one (seed 5710).
                    standby = tasks_intersect(
                        m.standby, tasks_union(sm.standby, sm.standby_pending_revocation)
                    )
            else:
                cm = live.get(m.member_id)
                if cm is None or cm.member_epoch != m.epoch:
                    # Fenced by the coordinator, or an epoch the coordinator has moved past (the
                    # answer that moved it was lost): its ownership ended there. Its commits are
                    # refused from then on (STALE_MEMBER_EPOCH) and its next heartbeat, reporting
                    # tasks no longer its own at an older epoch, is fenced.
                    continue
                warmup, standby = m.warmup, m.standby
            for s, p in _pairs(m.active):
                assert (s, p) not in active, f"members {active[(s, p)]} and {name} both run task {s}_{p}"
                active[(s, p)] = name
            for s, p in _pairs(tasks_union(m.active, tasks_union(standby, warmup))):
                k = (m.process_key, s, p)
                assert k not in copies, (
                    f"process {m.process_key} holds task {s}_{p} in {copies[k]} and {name}"
                )
                copies[k] = name

    def every_member_has_its_session_timer(self) -> None:
        keys = set(self.shard.timers.keys())
        cg = self.classic_group
        if cg is not None:
            # A member whose JoinGroup (SyncGroup) is parked is covered by the group's join
            # (sync) phase timer instead: its heartbeat deadline counts as met meanwhile, as
            # Kafka's `hasSatisfiedHeartbeat` has it, and the phase's end removes it if absent.
            # While the group prepares a rebalance the join phase's end removes every dynamic
            # member that has not rejoined (Kafka's `completeClassicGroupJoin`), so the join
            # timer covers them all. Once every member has synced, the sync timer is gone (Kafka's
            # `removePendingSyncMember`) while the leader's assignment is being made durable; its
            # append's completion reschedules every member's heartbeat (or fails the sync).
            synced = cg.is_in_state(ClassicGroupState.COMPLETING_REBALANCE) and not cg.pending_sync_members
            prefix = f"{TimerKind.CLASSIC_HEARTBEAT.value}-{GROUP}-"
            lacking = sorted(
                mid
                for mid, cm in cg.members.items()
                if prefix + mid not in keys
                and not (
                    (cm.is_awaiting_join or cg.is_in_state(ClassicGroupState.PREPARING_REBALANCE))
                    and f"join-{GROUP}" in keys
                )
                and not (cm.awaiting_sync is not None and (synced or f"sync-{GROUP}" in keys))
            )
            assert not lacking, f"classic members without their session timer (never expired): {lacking}"
            return
        g = self.group
        if g is None:
            return
        prefix = f"{TimerKind.STREAMS_SESSION.value}-{GROUP}-"
        missing = sorted(mid for mid in g.members if prefix + mid not in keys)
        assert not missing, f"members without their session timer (never expired): {missing}"

    # --- steps ---------------------------------------------------------------------------------

    def actions(self, faults: bool) -> list[tuple[str, float]]:
        actions: list[tuple[str, float]] = [
            ("heartbeat", 30),
            ("slow_heartbeat", 3),
            ("start", 6),
            ("leave", 1.5),
            ("advance", 12),
            ("grow", 0.5),
            ("admin", 2),
            ("delete_group", 1),
        ]
        if faults:
            actions += [("lose", 4), ("duplicate", 2), ("crash_client", 2), ("fence", 2)]
        return actions

    def act_on(self, action: str, name: str) -> bool:
        if action == "heartbeat":
            self.heartbeat(name)
        elif action == "slow_heartbeat":
            self.heartbeat(name, slow=True)
        elif action == "start":
            self.start(name)
        elif action == "grow":
            self.grow()
        elif action == "fence":
            self.fenced_heartbeat(name)
        else:
            return False
        return True

    def settle(self, rounds: int = 100) -> None:
        """Faults stopped: every instance heartbeats each round (a stopped one is started again,
        as an operator restarts it) while time moves 200 ms a round, until the group converges."""
        for name in NAMES:
            if name not in self.members and self.rng.random() < 0.5:
                self.start(name)
        if not self.members:
            self.start(NAMES[0])
        why = ""
        for _ in range(rounds):
            for name in sorted(self.members):
                self.heartbeat(name)
                if isinstance(self.members.get(name), ClassicStreamsMember):
                    self.classic_step(name)  # a classic round is JoinGroup then SyncGroup
            for name in NAMES:
                m = self.members.get(name)
                if (
                    isinstance(m, Member)
                    and m.epoch == 0
                    and self.group is not None
                    and m.member_id not in self.group.members
                ):
                    self.heartbeat(name)  # fenced: rejoin
            self.advance(200)
            self.check(full_replay=False)
            why = self.converged()
            if not why:
                return
        raise AssertionError(f"the members did not converge once faults stopped: {why}")

    def _classic_converged(self, cg: ClassicGroup) -> str:
        """A classic group (every instance classic): Stable, each instance at the group's
        generation holding what its assignment says, every task active exactly once."""
        ids = sorted(m.member_id for m in self.members.values())
        if sorted(cg.members) != ids:
            return f"classic group members {sorted(cg.members)} vs instances {ids}"
        if not cg.is_in_state(ClassicGroupState.STABLE):
            return f"classic group {cg.state.value}"
        active: list[tuple[str, int]] = []
        for m in self.members.values():
            assert isinstance(m, ClassicStreamsMember)  # a streams member would make a streams group
            given = decode_roles(cg.members[m.member_id].assignment)
            if m.generation != cg.generation_id or (m.active, m.standby) != given:
                return f"classic {m.name} holds {m.active} at {m.generation}, the group says {given[0]}"
            active += _pairs(m.active)
        if sorted(active) != _all_tasks(self.topics):
            return f"tasks not all active once: {sorted(active)}"
        return ""

    def converged(self) -> str:
        """Why the group has not converged yet ('' once it has)."""
        g = self.group
        if not self.members:
            return ""
        for m in self.members.values():
            if isinstance(m, ClassicStreamsMember) and m.phase != "stable":
                return f"classic {m.name} {m.phase}"
        cg = self.classic_group
        if cg is not None:
            return self._classic_converged(cg)
        if g is None:
            return "no group"
        if set(g.members) != {m.member_id for m in self.members.values()}:
            ids = sorted(m.member_id for m in self.members.values())
            return f"members {sorted(g.members)} vs instances {ids}"
        if g.state() != "Stable":
            return f"group {g.state()}"
        assert g.topology is not None
        tasks = configure(g.topology, self.image).tasks
        if tasks is None:
            return "topology not ready"
        active = sorted(t for m in g.members.values() for t in _pairs(m.active))
        assert active == sorted((s, p) for s, n in tasks.items() for p in range(n)), (
            f"a Stable group does not run every task exactly once: {active}"
        )
        processes = {m.process_id for m in g.members.values()}
        want = min(1, len(processes) - 1)
        standbys = sorted(t for m in g.members.values() for t in _pairs(m.standby))
        assert standbys == sorted((STATEFUL, p) for p in range(tasks[STATEFUL]) for _ in range(want)), (
            f"a Stable group's standbys are not one per stateful task: {standbys}"
        )
        for m in self.members.values():
            cm = g.members[m.member_id]
            if isinstance(m, ClassicStreamsMember):
                if (m.active, m.standby, m.generation) != (
                    dict(cm.active),
                    dict(cm.standby),
                    cm.member_epoch,
                ):
                    says = f"{dict(cm.active)}/{dict(cm.standby)} at {cm.member_epoch}"
                    return f"classic {m.name} holds {m.active}/{m.standby}, the coordinator says {says}"
                continue
            if (m.active, m.standby) != (dict(cm.active), dict(cm.standby)) or m.next_roles is not None:
                return f"{m.name} holds {m.active}/{m.standby}, the coordinator says {cm.active}/{cm.standby}"
        return ""


def _all_tasks(topics: dict[str, int]) -> list[tuple[str, int]]:
    n = topics.get(REPARTITION, 0)
    return sorted([("0", p) for p in range(topics[SOURCE])] + [(STATEFUL, p) for p in range(n)])


def _pairs(tasks: Tasks) -> Iterable[tuple[str, int]]:
    for s, ps in sorted(tasks.items()):
        for p in sorted(ps):
            yield s, p


# --- running seeds -----------------------------------------------------------------------------


def run_seed(seed: int, steps: int) -> SeedResult:
    return chaos.run_seed(seed, steps, StreamsSimMachine)


def main(seed: int, steps: int, seeds: int, out: TextIO, keep_going: bool = False) -> int:
    """`groupshift simulate --chaos --streams`: seeds `seed .. seed+seeds-1`, `steps` steps each."""
    return chaos.main(seed, steps, seeds, out, keep_going=keep_going, machine=StreamsSimMachine)
