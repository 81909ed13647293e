"""Classic Kafka Streams instances (3.9: protocol type `consumer`, protocol `stream`, Streams'
SubscriptionInfo / AssignmentInfo in the embedded ConsumerProtocol bytes) for the streams chaos
simulator (sim/streams_chaos.py), sharing one group with `group.protocol=streams` members through
groupshift's online migration (issue 31, part 3; docs/streams-classic-groups.md).

What a classic stream thread does here, as Kafka Streams' cooperative rebalance protocol has it:
it joins with the tasks it runs (SubscriptionInfo's task offset sums at LATEST_OFFSET, and the
ConsumerProtocolSubscription's owned partitions); a REBALANCE_IN_PROGRESS keeps its tasks and
rejoins; a SyncGroup answer that drops tasks makes it revoke them and rejoin at once;
UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION lose every task (`onPartitionsLost`) and rejoin. While the
group is a classic group, its leader runs a client-side assignor (below): sticky, and like
Kafka's cooperative assignors it withholds a task that changes owner for one round (the owner
revokes it, rejoins, and the next round hands it out); it creates the internal topics when they
are missing, as Streams' leader does, and rejoins when the partition counts it assigned from
change. In a streams group groupshift's coordinator computes the AssignmentInfo instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from engine.classic.api import JoinGroupResponseMember
from engine.streams.group import Tasks
from translation.embedded_protocol import (
    Subscription,
    parse_assignment,
    serialize_assignment,
    serialize_subscription,
)
from translation.streams_classic_protocol import (
    LATEST_OFFSET,
    AssignmentInfo,
    SubscriptionInfo,
    TaskId,
    TaskOffsetSum,
    decode_assignment_info,
    encode_assignment_info,
    encode_subscription_info,
    parse_streams_member_metadata,
)

PROTOCOL = "stream"
SUBSCRIPTION_VERSION = 11  # Kafka Streams 3.9's LATEST_SUPPORTED_VERSION


def task_topic(subtopology: str, source: str, repartition: str) -> str:
    """The topic a task of the word count reads: subtopology 0 the input, 1 the repartition topic."""
    return source if subtopology == "0" else repartition


@dataclass(eq=False)
class ClassicStreamsMember:
    """One classic stream thread: what it runs, from the SyncGroup answers it saw."""

    name: str
    incarnation: int
    process_uuid: uuid.UUID
    member_id: str = ""
    phase: str = "unjoined"  # unjoined | joining | joined (must sync) | syncing | stable
    generation: int = -1  # of the last SyncGroup it adopted
    join_generation: int = -1  # of the JoinGroup answer it syncs for
    leader: bool = False
    join_members: list[JoinGroupResponseMember] = field(default_factory=list)
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    left_behind: bool = False  # the coordinator dropped it (or moved past its generation)
    # a SyncGroup the coordinator answered and it never saw (it rejoins): the standbys that
    # answer dropped were released with it, so they no longer count as its own (seed 5710)
    unseen_sync: bool = False
    waits: int = 0  # its own steps spent waiting on a parked request
    inflight: int = 0  # the token of its parked JoinGroup/SyncGroup (older answers are ignored)
    snapshot: int = 0  # the input's partition count a leader assigned from

    @property
    def classic(self) -> bool:
        return True

    @property
    def process_key(self) -> str:
        """The process id the coordinator knows it by (SubscriptionInfo's process UUID)."""
        return str(self.process_uuid)

    def lose_all(self) -> None:
        self.active, self.standby = {}, {}
        self.generation = -1
        self.left_behind = False
        self.unseen_sync = False

    def metadata(self, source: str, repartition: str) -> bytes:
        info = SubscriptionInfo(
            SUBSCRIPTION_VERSION,
            SUBSCRIPTION_VERSION,
            self.process_uuid,
            task_offset_sums=tuple(
                TaskOffsetSum(TaskId(int(s), p), LATEST_OFFSET) for s, p in pairs(self.active)
            )
            + tuple(TaskOffsetSum(TaskId(int(s), p), 0) for s, p in pairs(self.standby)),
        )
        owned: dict[str, list[int]] = {}
        for s, p in pairs(self.active):
            owned.setdefault(task_topic(s, source, repartition), []).append(p)
        parts = tuple((t, tuple(sorted(ps))) for t, ps in sorted(owned.items()))
        return serialize_subscription(
            Subscription(3, (repartition, source), encode_subscription_info(info), parts)
        )


def pairs(tasks: Tasks) -> Iterable[tuple[str, int]]:
    for s, ps in sorted(tasks.items()):
        for p in sorted(ps):
            yield s, p


def to_tasks(ids: Iterable[TaskId]) -> Tasks:
    out: dict[str, frozenset[int]] = {}
    for t in ids:
        out[str(t.subtopology)] = out.get(str(t.subtopology), frozenset()) | {t.partition}
    return out


def decode_roles(assignment: bytes) -> tuple[Tasks, Tasks]:
    """The active and standby tasks an AssignmentInfo gives (empty bytes: nothing)."""
    if not assignment:
        return {}, {}
    a = parse_assignment(assignment)
    if a.user_data is None:
        return {}, {}
    info = decode_assignment_info(a.user_data)
    return to_tasks(info.active_tasks), to_tasks(t for t, _ in info.standby_tasks)


def encode_roles(active: set[tuple[str, int]], source: str, repartition: str) -> bytes:
    """A classic leader's assignment of active tasks (no standbys: the simplified assignor)."""
    by_part = sorted(((task_topic(s, source, repartition), p), TaskId(int(s), p)) for s, p in active)
    partitions: dict[str, list[int]] = {}
    for (t, p), _ in by_part:
        partitions.setdefault(t, []).append(p)
    info = AssignmentInfo(SUBSCRIPTION_VERSION, SUBSCRIPTION_VERSION, tuple(task for _, task in by_part))
    return serialize_assignment(partitions, 3, encode_assignment_info(info))


def leader_assignment(
    members: list[JoinGroupResponseMember], tasks: set[tuple[str, int]], source: str, repartition: str
) -> dict[str, bytes]:
    """The leader's cooperative sticky assignment: a task claimed by exactly one member stays
    there (unless that member holds more than its share: then it is withheld, the member revokes
    it and the next round gives it out); a task claimed by two is withheld; an unclaimed task goes
    to a member that reports its state (a standby it runs), else to the least loaded member.

    The state rule is Kafka Streams' own preference (4.4's `assignTasksToThreads` first gives each
    thread the tasks whose state it reports, `ClientState.prevTasksByLag`, up to its share), made
    absolute here: a thread runs its standby until the SyncGroup answer that drops it, so a
    sibling thread given the task active in the same round would hold a second copy in the
    process, which Streams survives only through the state directory lock this model does not
    simulate (streams chaos seed 6951)."""
    claims: dict[tuple[str, int], list[str]] = {}
    state: dict[tuple[str, int], str] = {}
    for m in members:
        info = parse_streams_member_metadata(m.metadata).info
        for claimed in info.active_tasks:
            claims.setdefault((str(claimed.subtopology), claimed.partition), []).append(m.member_id)
        for kept in info.standby_or_state_tasks:
            state.setdefault((str(kept.subtopology), kept.partition), m.member_id)
    ids = [m.member_id for m in members]
    share = -(-len(tasks) // max(1, len(ids)))
    given: dict[str, set[tuple[str, int]]] = {mid: set() for mid in ids}
    for t in sorted(tasks):
        owners = claims.get(t, [])
        if len(owners) == 1 and len(given[owners[0]]) < share:
            given[owners[0]].add(t)
    for t in sorted(tasks):
        if t in claims:
            continue
        mid = state.get(t) or min(ids, key=lambda i: (len(given[i]), i))
        given[mid].add(t)
    return {mid: encode_roles(ts, source, repartition) for mid, ts in given.items()}
