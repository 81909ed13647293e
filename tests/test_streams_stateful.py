"""Streams groups under arbitrary sequences of joins, heartbeats (acknowledging or not), leaves,
topic changes and time passing (Hypothesis state machine over engine/streams/).

Invariants after every step:
* no active task is held by two members at once, counting tasks pending revocation (the
  revoke-before-assign rule Kafka Streams relies on: a task's state store is never open on two
  instances);
* no task is held by two members of one process in any role (active, standby, warm-up,
  counting pending revocation): a process opens a task's state once;
* a member only holds tasks of its target assignment plus tasks it is still revoking;
* once every member has acknowledged for a few rounds with no change, the group is Stable,
  every task of the configured topology is active somewhere, and (`StandbyStreamsMachine`, one
  standby replica) every task of the stateful subtopology has a standby on another process when
  there is one;
* replaying the records written so far into a fresh shard gives the live state.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from engine.config import CoordinatorConfig
from engine.context import RequestContext
from engine.ids import SeededIds
from engine.metadata import MetadataImage, TopicImage, topic_id_for
from engine.shard import Shard
from engine.streams.api import StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse
from engine.streams.group import StreamsGroup, task_ids, tasks_intersect, tasks_minus, tasks_union
from records.streams_group import TaskIds
from tests.stateful_settings import stateful_settings
from tests.streams_record_samples import WORD_COUNT_APP_TOPOLOGY as WORD_COUNT_TOPOLOGY

MEMBERS = ("m1", "m2", "m3", "m4")
PROCESSES = ("p1", "p2", "p3")


def image(partitions: int) -> MetadataImage:
    names = ("words-in", "app-counts-repartition", "app-counts-changelog")
    return MetadataImage([TopicImage(topic_id_for(n), n, partitions) for n in names])


class StreamsMachine(RuleBasedStateMachine):
    STANDBY_REPLICAS = 0
    # Whether a member rejoins on the process it first joined (a Streams instance keeps its
    # process id in its state directory). A member moving to another process may find a standby
    # of a task it runs still on that process until the standby's owner heartbeats, as in Kafka.
    FIXED_PROCESSES = False

    def __init__(self) -> None:
        super().__init__()
        config = CoordinatorConfig.from_kafka(
            {
                "group.streams.num.standby.replicas": self.STANDBY_REPLICAS,
                "group.streams.initial.rebalance.delay.ms": 0,
                # Each target in the heartbeat that needs it: the rules checked here are those of
                # reconciliation (the assignment interval is the streams simulator's).
                "group.streams.assignment.interval.ms": 0,
            }
        )
        self.shard = Shard(config, SeededIds(3), image(4))
        self.now = 1000
        self.ctx = RequestContext("c", "/127.0.0.1", 0)
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, tuple[TaskIds, ...]] = {}
        self.standby: dict[str, tuple[TaskIds, ...]] = {}
        self.process_of: dict[str, str] = {}
        self.records: list[Any] = []
        self.partitions = 4

    def _hb(self, **fields: Any) -> StreamsGroupHeartbeatResponse:
        self.now += 10
        out = self.shard.streams_group_heartbeat(
            StreamsGroupHeartbeatRequest(group_id="app", **fields), self.ctx, self.now
        )
        self.records.extend(out.records)
        assert isinstance(out.response, StreamsGroupHeartbeatResponse)
        return out.response

    def _record(self, member: str, r: StreamsGroupHeartbeatResponse) -> None:
        if r.error_code:
            self.epochs.pop(member, None)
            self.owned.pop(member, None)
            self.standby.pop(member, None)
            return
        self.epochs[member] = r.member_epoch
        if r.active_tasks is not None:
            self.owned[member] = r.active_tasks
        if r.standby_tasks is not None:
            self.standby[member] = r.standby_tasks

    @property
    def group(self) -> StreamsGroup | None:
        g = self.shard.groups.get("app")
        return g if isinstance(g, StreamsGroup) else None

    @rule(member=st.sampled_from(MEMBERS), process=st.sampled_from(PROCESSES))
    def join(self, member: str, process: str) -> None:
        if self.FIXED_PROCESSES:
            process = self.process_of.setdefault(member, process)
        r = self._hb(
            member_id=member,
            member_epoch=0,
            rebalance_timeout_ms=60000,
            topology=WORD_COUNT_TOPOLOGY,
            process_id=process,
            active_tasks=(),
            standby_tasks=(),
            warmup_tasks=(),
        )
        assert r.error_code == 0, r
        self.owned[member] = ()
        self.standby[member] = ()
        self._record(member, r)

    @precondition(lambda self: bool(self.epochs))
    @rule(data=st.data(), acknowledge=st.booleans())
    def heartbeat(self, data: st.DataObject, acknowledge: bool) -> None:
        """`acknowledge`: report the tasks the member was last told to hold (it revoked); else
        keep reporting what it had before (a member slow to revoke)."""
        member = data.draw(st.sampled_from(sorted(self.epochs)))
        g = self.group
        assert g is not None
        held = self.owned.get(member, ())
        standby = self.standby.get(member, ())
        if not acknowledge and member in g.members:
            m = g.members[member]
            held = task_ids(tasks_union(m.active, m.active_pending_revocation))
            standby = task_ids(tasks_union(m.standby, m.standby_pending_revocation))
        r = self._hb(
            member_id=member,
            member_epoch=self.epochs[member],
            active_tasks=held,
            standby_tasks=standby,
            warmup_tasks=(),
        )
        self._record(member, r)

    @precondition(lambda self: bool(self.epochs))
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        member = data.draw(st.sampled_from(sorted(self.epochs)))
        r = self._hb(member_id=member, member_epoch=-1)
        assert r.error_code == 0, r
        self.epochs.pop(member)
        self.owned.pop(member, None)
        self.standby.pop(member, None)

    @rule(partitions=st.sampled_from((4, 6, 8)))
    def topics_change(self, partitions: int) -> None:
        """Partitions are added (Kafka cannot remove them; a member reporting a task beyond a
        subtopology's count is refused with INVALID_REQUEST, as Kafka does)."""
        self.now += 10
        partitions = max(partitions, self.partitions)
        self.partitions = partitions
        out = self.shard.update_metadata(image(partitions), self.now)
        self.records.extend(out.records)

    @rule(ms=st.sampled_from((1000, 30000, 50000)))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        for out in self.shard.expire(self.now):
            self.records.extend(out.records)
        g = self.group
        for member in list(self.epochs):
            if g is None or member not in g.members:
                self.epochs.pop(member)
                self.owned.pop(member, None)

    @precondition(lambda self: bool(self.epochs))
    @rule()
    def everyone_acknowledges_until_stable(self) -> None:
        for _ in range(8):
            for member in sorted(self.epochs):
                r = self._hb(
                    member_id=member,
                    member_epoch=self.epochs[member],
                    active_tasks=self.owned[member],
                    standby_tasks=self.standby.get(member, ()),
                    warmup_tasks=(),
                )
                assert r.error_code == 0, r
                self._record(member, r)
        g = self.group
        assert g is not None
        assert g.state() == "Stable", {m: (x.member_epoch, x.state) for m, x in g.members.items()}
        held = [(s, p) for m in g.members.values() for s, ps in m.active.items() for p in ps]
        assert g.topology is not None
        # every task of the configured topology is active somewhere (topics have n partitions)
        n = self.shard.image.topic("words-in")
        assert n is not None
        assert sorted(held) == sorted((s, p) for s in ("0", "1") for p in range(n.num_partitions))
        # standbys only of the stateful subtopology (1, the counts), one per task while another
        # process exists
        processes = len({m.process_id for m in g.members.values()})
        want = min(self.STANDBY_REPLICAS, processes - 1)
        standbys = [(s, p) for m in g.members.values() for s, ps in m.standby.items() for p in ps]
        assert sorted(standbys) == sorted(("1", p) for p in range(n.num_partitions) for _ in range(want))

    @invariant()
    def no_task_on_two_members(self) -> None:
        g = self.group
        if g is None:
            return
        seen: dict[tuple[str, int], str] = {}
        for mid, m in g.members.items():
            for s, parts in tasks_union(m.active, m.active_pending_revocation).items():
                for p in parts:
                    assert (s, p) not in seen, f"task {s}_{p} on {seen[(s, p)]} and {mid}"
                    seen[(s, p)] = mid
            extra = tasks_minus(m.active, tasks_union(g.targets.get(mid, {}), m.active_pending_revocation))
            assert not extra or not tasks_intersect(extra, g.targets.get(mid, {})), (mid, extra)

    @invariant()
    def one_copy_per_process(self) -> None:
        g = self.group
        if g is None:
            return
        holder: dict[tuple[str, str, int], str] = {}
        for mid, m in g.members.items():
            roles = (m.active, m.active_pending_revocation, m.standby, m.standby_pending_revocation)
            for tasks in (*roles, m.warmup, m.warmup_pending_revocation):
                for s, parts in tasks.items():
                    for p in parts:
                        other = holder.setdefault((m.process_id, s, p), mid)
                        assert other == mid, f"task {s}_{p} on {other} and {mid} of process {m.process_id}"

    @invariant()
    def replay_equals_live(self) -> None:
        fresh = Shard(CoordinatorConfig(), SeededIds(3), self.shard.image)
        fresh.apply(self.records)
        assert fresh.persisted_state()["groups"] == self.shard.persisted_state()["groups"]


TestStreamsMachine = StreamsMachine.TestCase
TestStreamsMachine.settings = stateful_settings(60, 30)


class StandbyStreamsMachine(StreamsMachine):
    """The same with `group.streams.num.standby.replicas`=1: members report their standbys."""

    STANDBY_REPLICAS = 1
    FIXED_PROCESSES = True


TestStandbyStreamsMachine = StandbyStreamsMachine.TestCase
TestStandbyStreamsMachine.settings = stateful_settings(60, 30)
