"""Online migration of a classic Kafka Streams group to a streams group (issue 31, part 3;
translation/streams_upgrade.py, translation/streams_classic_member.py): the conversion at the
first StreamsGroupHeartbeat with the classic instances kept, their JoinGroup/SyncGroup answered
with Streams' AssignmentInfo from the streams group's target, revoke-before-assign across both
kinds (no task active on two members at once, checked after every step of a random walk), the
refusals with their reasons, and replay equal to the live state."""

from __future__ import annotations

import struct
import uuid
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.classic.api import JoinGroupResponse, SyncGroupRequest, SyncGroupResponse
from engine.classic.group import ClassicGroup
from engine.classic.member import Protocol
from engine.context import RequestContext
from engine.errors import Errors
from engine.offsets.api import CommitPartition, CommitTopic, OffsetCommitRequest
from engine.outcome import Pending
from engine.streams.api import StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse
from engine.streams.group import StreamsGroup
from records.codec import decode_record, encode_record
from records.streams_group import TaskIds
from tests.migration_harness import ClassicSeed, MigrationHarness
from tests.streams_record_samples import WORD_COUNT_APP_TOPOLOGY as TOPOLOGY
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
)

WORDS, REPARTITION, CHANGELOG = "words-in", "app-counts-repartition", "app-counts-changelog"
TOPICS = {WORDS: 4, REPARTITION: 4, CHANGELOG: 4}
SUBSCRIBED = (REPARTITION, WORDS)
Task = tuple[str, int]


def partitions_of(tasks: set[Task]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for sid, p in tasks:
        out.setdefault(WORDS if sid == "0" else REPARTITION, []).append(p)
    return {t: sorted(ps) for t, ps in out.items()}


def classic_metadata(
    process: int,
    owned: set[Task],
    version: int = 11,
    endpoint: str = "",
    topics: tuple[str, ...] = SUBSCRIBED,
    standby: frozenset[Task] = frozenset(),
) -> bytes:
    """A Kafka Streams 3.9 consumer's JoinGroup metadata: ConsumerProtocolSubscription v3 with
    its owned partitions, SubscriptionInfo with the active tasks at LATEST_OFFSET and the
    `standby` tasks at a changelog offset sum (how Streams reports a standby it runs)."""
    info = SubscriptionInfo(
        version,
        11,
        uuid.UUID(int=process),
        user_endpoint=endpoint.encode(),
        task_offset_sums=tuple(TaskOffsetSum(TaskId(int(s), p), LATEST_OFFSET) for s, p in sorted(owned))
        + tuple(TaskOffsetSum(TaskId(int(s), p), 100) for s, p in sorted(standby)),
        unique_field=0,
    )
    owned_parts = tuple((t, tuple(ps)) for t, ps in sorted(partitions_of(owned).items()))
    return serialize_subscription(Subscription(3, topics, encode_subscription_info(info), owned_parts))


def classic_assignment(tasks: set[Task]) -> bytes:
    """What a 3.9 leader's StreamsPartitionAssignor sent: one active task per sorted partition."""
    parts = sorted((t, p) for t, ps in partitions_of(tasks).items() for p in ps)
    by_part = {(WORDS if s == "0" else REPARTITION, p): TaskId(int(s), p) for s, p in tasks}
    info = AssignmentInfo(11, 11, tuple(by_part[tp] for tp in parts))
    return serialize_assignment(partitions_of(tasks), 3, encode_assignment_info(info))


def decoded_tasks(assignment: bytes) -> set[Task]:
    a = parse_assignment(assignment)
    assert a.user_data is not None
    info = decode_assignment_info(a.user_data)
    # Streams pairs the i-th sorted partition with the i-th active task.
    parts = sorted((t, p) for t, ps in a.partitions for p in ps)
    assert len(parts) == len(info.active_tasks)
    for (topic, p), task in zip(parts, info.active_tasks, strict=True):
        assert task.partition == p and (topic == WORDS) == (task.subtopology == 0)
    return {(str(t.subtopology), t.partition) for t in info.active_tasks}


class Roll(MigrationHarness):
    """A shard with the translation layer, classic Streams instances and streams members."""

    def __init__(self, **config: Any) -> None:
        # Targets in the heartbeat (or JoinGroup) that needs them: no streams assignment interval.
        config.setdefault("group.streams.assignment.interval.ms", 0)
        super().__init__(TOPICS, **config)
        self.classic_epoch: dict[str, int] = {}
        self.classic_tasks: dict[str, set[Task]] = {}  # what each classic instance runs
        self.pid: dict[str, int] = {}
        self.streams_epoch: dict[str, int] = {}
        self.streams_tasks: dict[str, set[Task]] = {}
        self.instance: dict[str, str] = {}  # the static classic instances' group.instance.id

    def seed(
        self,
        members: dict[str, set[Task]],
        generation: int = 3,
        assigned: dict[str, set[Task]] | None = None,
        instance_ids: dict[str, str] | None = None,
    ) -> None:
        """A classic group at `generation`: each instance runs (and its JoinGroup reports) its
        `members` tasks; its stored assignment is the same unless `assigned` says otherwise;
        `instance_ids` makes some static."""
        given = {**members, **(assigned or {})}
        self.instance.update(instance_ids or {})
        for i, mid in enumerate(members, start=1):
            self.pid[mid] = i
        self.seed_classic(
            generation,
            [
                ClassicSeed(
                    mid,
                    subscription=classic_metadata(self.pid[mid], tasks),
                    assignment=classic_assignment(given[mid]),
                    client_id=f"{mid}-StreamThread-1-consumer",
                    instance_id=(instance_ids or {}).get(mid),
                )
                for mid, tasks in members.items()
            ],
            protocol="stream",
            group="app",
        )
        for mid, tasks in members.items():
            self.classic_epoch[mid] = generation
            self.classic_tasks[mid] = set(tasks)

    # --- streams members ------------------------------------------------------------------

    def sgh(self, **fields: Any) -> StreamsGroupHeartbeatResponse:
        fields.setdefault("group_id", "app")
        out = self.shard.streams_group_heartbeat(
            StreamsGroupHeartbeatRequest(**fields), self.ctx(), self.tick()
        )
        r = self.process_out(out)
        assert isinstance(r, StreamsGroupHeartbeatResponse)
        return r

    def ctx(self) -> Any:
        from engine.context import RequestContext

        return RequestContext("s-StreamThread-1-consumer", "/h", 0)

    def process_out(self, out: Any) -> Any:
        for r in out.records:
            key, value = encode_record(r)
            assert decode_record(key, value) == r
        return self.process(out)

    def streams_join(self, mid: str) -> StreamsGroupHeartbeatResponse:
        r = self.sgh(
            member_id=mid,
            member_epoch=0,
            rebalance_timeout_ms=30000,
            topology=TOPOLOGY,
            process_id=f"process-{mid}",
            active_tasks=(),
            standby_tasks=(),
            warmup_tasks=(),
        )
        if r.error_code == 0:
            self._streams_took(mid, r)
        return r

    def streams_beat(self, mid: str) -> StreamsGroupHeartbeatResponse:
        owned = tuple(TaskIds(s, (p,)) for s, p in sorted(self.streams_tasks[mid]))
        r = self.sgh(
            member_id=mid,
            member_epoch=self.streams_epoch[mid],
            active_tasks=owned,
            standby_tasks=(),
            warmup_tasks=(),
        )
        assert r.error_code == 0, r
        self._streams_took(mid, r)
        return r

    def _streams_took(self, mid: str, r: StreamsGroupHeartbeatResponse) -> None:
        self.streams_epoch[mid] = r.member_epoch
        if r.active_tasks is not None:
            self.streams_tasks[mid] = {(t.subtopology_id, p) for t in r.active_tasks for p in t.partitions}
            self.check_exclusive()

    # --- classic instances ------------------------------------------------------------------

    def classic_rejoin(self, mid: str) -> None:
        """One classic round: JoinGroup with what it runs, SyncGroup, and (cooperative) the
        revocation of what the assignment no longer lists, then a rejoin if it revoked."""
        meta = classic_metadata(self.pid[mid], self.classic_tasks[mid])
        iid = self.instance.get(mid)
        j = self.join(mid, protocols=(Protocol("stream", meta),), group="app", version=9, instance_id=iid)
        assert isinstance(j, JoinGroupResponse) and j.error_code == 0, j
        assert j.leader == "" and j.protocol_name == "stream"
        s = self.sync(mid, j.generation_id, group="app", protocol_name="stream", version=5, instance_id=iid)
        assert isinstance(s, SyncGroupResponse)
        if s.error_code == int(Errors.REBALANCE_IN_PROGRESS):
            return
        assert s.error_code == 0, s
        self.classic_epoch[mid] = j.generation_id
        given = decoded_tasks(s.assignment)
        revoked = self.classic_tasks[mid] - given
        self.classic_tasks[mid] = given
        self.check_exclusive()
        if revoked:
            self.classic_rejoin(mid)

    def classic_restart(self, mid: str) -> str:
        """A static classic instance killed and started again on its state directory: what
        it ran stops at once; it joins without a member id under its instance id. Its new
        member id."""
        iid, pid = self.instance.pop(mid), self.pid[mid]
        self.classic_tasks.pop(mid)
        self.classic_epoch.pop(mid)
        meta = classic_metadata(pid, set())
        j = self.join("", protocols=(Protocol("stream", meta),), group="app", version=9, instance_id=iid)
        assert isinstance(j, JoinGroupResponse) and j.error_code == 0, j
        new = j.member_id
        self.pid[new], self.instance[new], self.classic_epoch[new] = pid, iid, j.generation_id
        self.classic_tasks[new] = set()
        s = self.sync(new, j.generation_id, group="app", protocol_name="stream", version=5, instance_id=iid)
        if s.error_code == 0:
            self.classic_tasks[new] = decoded_tasks(s.assignment)
            self.check_exclusive()
        return new

    def classic_beat(self, mid: str) -> int:
        return self.heartbeat(mid, self.classic_epoch[mid], group="app", instance_id=self.instance.get(mid))

    # --- checks ---------------------------------------------------------------------------

    def check_exclusive(self) -> None:
        """No task active on two instances at once, whatever their protocol."""
        seen: dict[Task, str] = {}
        for who, tasks in [*self.classic_tasks.items(), *self.streams_tasks.items()]:
            for t in tasks:
                assert t not in seen, f"task {t} active on {seen[t]} and {who}"
                seen[t] = who

    @property
    def group(self) -> StreamsGroup:
        g = self.shard.groups["app"]
        assert isinstance(g, StreamsGroup)
        return g

    def settle(self, rounds: int = 6) -> None:
        for _ in range(rounds):
            for mid in list(self.classic_tasks):
                if self.classic_beat(mid) == int(Errors.REBALANCE_IN_PROGRESS):
                    self.classic_rejoin(mid)
            for mid in list(self.streams_tasks):
                self.streams_beat(mid)

    def assert_replay_equals_live(self) -> None:
        assert self.replayed().persisted_state() == self.shard.persisted_state()


ALL_TASKS = {(s, p) for s in "01" for p in range(4)}
HALF_A = {("0", 0), ("0", 1), ("1", 0), ("1", 1)}
HALF_B = ALL_TASKS - HALF_A


def test_first_streams_member_converts_the_group_keeping_the_classic_instances() -> None:
    h = Roll()
    h.seed({"a": HALF_A, "b": HALF_B})
    r = h.streams_join("s")
    assert r.error_code == 0, r
    [converted] = h.events("group.converted")
    assert converted["to_type"] == "streams" and converted["members"] == 2
    g = h.group
    assert set(g.members) == {"a", "b", "s"}
    assert g.members["a"].classic is not None and g.members["s"].classic is None
    assert g.members["a"].process_id == str(uuid.UUID(int=1))
    # Nothing is handed to the newcomer while a classic instance still runs it.
    h.check_exclusive()
    h.assert_replay_equals_live()
    # The classic instances are told to rejoin, give tasks up, and the newcomer gets them.
    assert h.classic_beat("a") == int(Errors.REBALANCE_IN_PROGRESS)
    h.settle()
    assert h.streams_tasks["s"], "the streams member got no task"
    owned = set().union(*h.classic_tasks.values(), *h.streams_tasks.values())
    assert owned == ALL_TASKS
    assert h.classic_beat("a") == 0 and h.classic_beat("b") == 0
    assert g.state() == "Stable"
    h.assert_replay_equals_live()


def test_the_assignment_info_speaks_the_members_version_and_lists_hosts() -> None:
    h = Roll()
    h.seed({"a": ALL_TASKS})
    h.streams_join("s")
    meta = classic_metadata(1, ALL_TASKS, version=8, endpoint="h1:7001")
    j = h.join("a", protocols=(Protocol("stream", meta),), group="app", version=9)
    assert j.error_code == 0
    s = h.sync("a", j.generation_id, group="app", protocol_name="stream")
    a = parse_assignment(s.assignment)
    assert a.user_data is not None
    info = decode_assignment_info(a.user_data)
    assert info.version == 8 and info.commonly_supported_version == 11
    assert [hp.endpoint for hp in info.partitions_by_host] == ["h1:7001"]
    assert set(info.partitions_by_host[0].partitions) == {
        (WORDS if t.subtopology == 0 else REPARTITION, t.partition) for t in info.active_tasks
    }


def test_a_new_classic_instance_joins_the_streams_group() -> None:
    h = Roll()
    h.seed({"a": ALL_TASKS})
    h.streams_join("s")
    h.settle()
    h.pid["c"] = 9
    h.classic_tasks["c"] = set()
    j = h.join("", protocols=(Protocol("stream", classic_metadata(9, set())),), group="app", version=9)
    assert j.error_code == int(Errors.MEMBER_ID_REQUIRED)
    new_id = j.member_id
    h.pid[new_id] = 9
    h.classic_tasks[new_id] = h.classic_tasks.pop("c")
    h.classic_rejoin(new_id)
    h.settle()
    assert all(h.classic_tasks.values()) and h.streams_tasks["s"]
    h.assert_replay_equals_live()
    # It leaves: its tasks go to the others, never two owners at once.
    out = h.leave((new_id, None), group="app")
    assert out.members[0].error_code == 0
    h.classic_tasks.pop(new_id)
    h.settle()
    assert set().union(*h.classic_tasks.values(), *h.streams_tasks.values()) == ALL_TASKS
    h.assert_replay_equals_live()


def test_a_restarted_classic_static_instance_takes_its_place_back_without_a_rebalance() -> None:
    """KIP-345 inside a streams group: a classic instance with `group.instance.id` restarts
    (JoinGroup without a member id): it replaces its predecessor at once, keeps its tasks and
    the group epoch, nobody else is told to rebalance, and the old member id is fenced."""
    h = Roll()
    h.seed({"a": HALF_A, "b": HALF_B}, instance_ids={"a": "inst-a"})
    h.streams_join("s")
    h.settle()
    assert h.group.members["a"].instance_id == "inst-a"
    epoch, held = h.group.group_epoch, set(h.classic_tasks["a"])
    streams_held = {m: set(t) for m, t in h.streams_tasks.items()}
    assert held and all(streams_held.values())
    restarted = classic_metadata(h.pid["a"], set())  # a restart runs nothing yet
    j = h.join("", protocols=(Protocol("stream", restarted),), group="app", version=9, instance_id="inst-a")
    assert j.error_code == 0, j
    new = j.member_id
    assert new != "a" and j.generation_id == h.classic_epoch["a"]
    assert "a" not in h.group.members and h.group.members[new].instance_id == "inst-a"
    assert h.group.group_epoch == epoch
    [replaced] = h.events("member.replaced")
    assert (replaced["member"], replaced["replaced"]) == (new, "a")
    s = h.sync(new, j.generation_id, group="app", protocol_name="stream", instance_id="inst-a")
    assert s.error_code == 0 and decoded_tasks(s.assignment) == held
    # The replaced instance is fenced, whether it heartbeats or rejoins under its old id.
    fenced = int(Errors.FENCED_INSTANCE_ID)
    assert h.heartbeat("a", h.classic_epoch["a"], group="app", instance_id="inst-a") == fenced
    old = h.join(
        "a", protocols=(Protocol("stream", restarted),), group="app", version=9, instance_id="inst-a"
    )
    assert old.error_code == fenced
    assert h.heartbeat(new, j.generation_id, group="app", instance_id="inst-a") == 0
    assert h.classic_beat("b") == 0
    h.pid[new], h.instance[new] = h.pid["a"], h.instance.pop("a")
    h.classic_epoch[new] = h.classic_epoch.pop("a")
    h.classic_tasks[new] = h.classic_tasks.pop("a")
    h.settle()
    assert h.classic_tasks[new] == held and h.streams_tasks == streams_held
    assert h.group.group_epoch == epoch
    h.assert_replay_equals_live()


def test_a_classic_static_instance_takes_its_instance_id_over_from_a_streams_member() -> None:
    """A roll back from `group.protocol=streams` to a classic 3.9 instance under the same
    `group.instance.id`: the classic JoinGroup takes the instance id over at once, as a classic
    static member always could, with the streams member's tasks."""
    h = Roll()
    h.seed({"a": ALL_TASKS})
    r = h.sgh(
        member_id="s",
        member_epoch=0,
        instance_id="inst-s",
        rebalance_timeout_ms=30000,
        topology=TOPOLOGY,
        process_id=str(uuid.UUID(int=7)),  # the process id its state directory keeps
        active_tasks=(),
        standby_tasks=(),
        warmup_tasks=(),
    )
    assert r.error_code == 0, r
    h._streams_took("s", r)
    h.settle()
    held = set(h.streams_tasks["s"])
    assert held
    epoch = h.group.group_epoch
    h.pid["c"] = 7
    j = h.join(
        "",
        protocols=(Protocol("stream", classic_metadata(7, set())),),
        group="app",
        version=9,
        instance_id="inst-s",
    )
    assert j.error_code == 0, j
    assert "s" not in h.group.members and h.group.members[j.member_id].classic is not None
    assert h.group.group_epoch == epoch
    s = h.sync(j.member_id, j.generation_id, group="app", protocol_name="stream", instance_id="inst-s")
    assert s.error_code == 0 and decoded_tasks(s.assignment) == held
    h.assert_replay_equals_live()


def test_a_classic_instance_that_never_rejoins_is_fenced_after_its_rebalance_timeout() -> None:
    """Told to rejoin (REBALANCE_IN_PROGRESS) but heartbeating on without a JoinGroup, a classic
    instance keeps its session alive; its rebalance timeout (10 s here) fences it, as Kafka's
    join timer does for classic members of consumer groups, and its tasks move on."""
    h = Roll()
    h.seed({"a": HALF_A, "b": HALF_B})
    h.streams_join("s")
    assert h.classic_beat("a") == int(Errors.REBALANCE_IN_PROGRESS)
    h.classic_rejoin("b")
    for _ in range(12):  # 12 s of heartbeats, never a JoinGroup from "a"
        h.advance(1000)
        if "a" not in h.group.members:
            break
        h.classic_beat("a")
        h.classic_beat("b")
    assert "a" not in h.group.members and "b" in h.group.members
    [fenced] = [e for e in h.events("member.fenced") if e["member"] == "a"]
    assert "failed to join within the rebalance timeout" in fenced["reason"]
    h.classic_tasks.pop("a")
    h.settle()
    assert set().union(*h.classic_tasks.values(), *h.streams_tasks.values()) == ALL_TASKS
    h.assert_replay_equals_live()


def test_a_classic_instance_that_never_syncs_is_fenced_after_its_rebalance_timeout() -> None:
    h = Roll()
    h.seed({"a": HALF_A, "b": HALF_B})
    h.streams_join("s")
    h.settle()
    meta = classic_metadata(h.pid["a"], h.classic_tasks["a"])
    j = h.join("a", protocols=(Protocol("stream", meta),), group="app", version=9)
    assert j.error_code == 0
    for _ in range(12):  # heartbeats at the new generation, never a SyncGroup
        h.advance(1000)
        if "a" not in h.group.members:
            break
        h.heartbeat("a", j.generation_id, group="app")
    assert "a" not in h.group.members
    [fenced] = [e for e in h.events("member.fenced") if e["member"] == "a"]
    assert "failed to sync" in fenced["reason"]
    h.assert_replay_equals_live()


def test_an_expired_classic_session_removes_the_instance() -> None:
    h = Roll()
    h.seed({"a": HALF_A, "b": HALF_B})
    h.streams_join("s")
    h.settle()
    h.advance(11_000)  # the classic session timeout (10 s) passes without a heartbeat
    assert "a" not in h.group.members and "b" not in h.group.members


def test_refusals_name_their_reason() -> None:
    h = Roll()
    h.seed({"a": HALF_A, "b": HALF_B})
    no_topology = h.sgh(
        member_id="s",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        process_id="p",
        active_tasks=(),
        standby_tasks=(),
        warmup_tasks=(),
    )
    # A join without a topology is refused before anything (Kafka's request validation), and
    # the classic group stays as it is.
    assert no_topology.error_code == int(Errors.INVALID_REQUEST)
    assert h.shard.groups["app"].__class__.__name__ == "ClassicGroup"
    # Instances speaking different SubscriptionInfo versions: check upgrade's streams-versions-differ.
    h2 = Roll()
    h2.pid.update(a=1, b=2)
    h2.seed_classic(
        3,
        [
            ClassicSeed(
                "a", subscription=classic_metadata(1, HALF_A, 10), assignment=classic_assignment(HALF_A)
            ),
            ClassicSeed(
                "b", subscription=classic_metadata(2, HALF_B, 11), assignment=classic_assignment(HALF_B)
            ),
        ],
        protocol="stream",
        group="app",
    )
    r = h2.streams_join("s")
    assert r.error_code == int(Errors.GROUP_ID_NOT_FOUND)
    assert "different SubscriptionInfo versions" in (r.error_message or "")
    assert any(e["reason"] == "streams-versions-differ" for e in h2.events("group.conversion_refused"))
    # A custom assignor (protocol not `stream`) is refused too, and the policy can forbid it all.
    h3 = Roll(group_consumer_migration_policy="disabled")
    h3.seed({"a": ALL_TASKS})
    r3 = h3.streams_join("s")
    assert r3.error_code == int(Errors.GROUP_ID_NOT_FOUND) and "disabled" in (r3.error_message or "")
    assert h3.shard.groups["app"].__class__.__name__ == "ClassicGroup"


def test_a_classic_instance_of_another_topology_is_refused() -> None:
    h = Roll()
    h.seed({"a": ALL_TASKS})
    h.streams_join("s")
    meta = classic_metadata(5, set(), topics=("other-topic",))
    j = h.join("x", protocols=(Protocol("stream", meta),), group="app", version=3)
    assert j.error_code == int(Errors.INCONSISTENT_GROUP_PROTOCOL)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.sampled_from(["beat-a", "beat-b", "beat-s", "join-t", "leave-b", "rejoin-a", "restart-a"]),
        max_size=25,
    )
)
def test_random_rolls_never_run_a_task_twice_and_replay_equals_live(steps: list[str]) -> None:
    h = Roll()
    h.seed({"a": HALF_A, "b": HALF_B}, instance_ids={"a": "inst-a"})  # "a" is static
    assert h.streams_join("s").error_code == 0
    current = {"a": "a", "b": "b", "s": "s", "t": "t"}  # a restart gives "a" a new member id
    for step in steps:
        kind, name = step.split("-")
        who = current[name]
        if kind == "restart" and who in h.classic_tasks:
            current[name] = h.classic_restart(who)
        if kind == "beat" and who in h.classic_tasks:
            if h.classic_beat(who) == int(Errors.REBALANCE_IN_PROGRESS):
                h.classic_rejoin(who)
        elif kind == "beat" and who in h.streams_tasks:
            h.streams_beat(who)
        elif kind == "join" and who not in h.streams_tasks:
            h.streams_join(who)
        elif kind == "leave" and who in h.classic_tasks:
            h.leave((who, None), group="app")
            h.classic_tasks.pop(who)
        elif kind == "rejoin" and who in h.classic_tasks:
            h.classic_rejoin(who)
        h.check_exclusive()
    h.settle(8)
    assert set().union(*h.classic_tasks.values(), *h.streams_tasks.values()) == ALL_TASKS
    h.assert_replay_equals_live()


def test_classic_instances_commit_with_their_generation_at_any_version() -> None:
    h = Roll()
    h.seed({"a": HALF_A, "b": HALF_B})
    h.streams_join("s")

    def commit(member: str, epoch: int, version: int) -> int:
        req = OffsetCommitRequest(
            "app", epoch, member, None, -1, [CommitTopic(WORDS, [CommitPartition(0, 42)])]
        )
        out = h.shard.offset_commit(req, RequestContext("c", "/h", version), h.tick())
        return out.response.topics[0].partitions[0].error_code

    # The classic instance commits at v8 with its generation; a wrong generation is
    # ILLEGAL_GENERATION (the classic error), as in a consumer group.
    assert commit("a", h.classic_epoch["a"], 8) == 0
    assert commit("a", h.classic_epoch["a"] + 5, 8) == int(Errors.ILLEGAL_GENERATION)
    # A streams-protocol member still needs v9 or above.
    assert commit("s", h.streams_epoch["s"], 8) == int(Errors.UNSUPPORTED_VERSION)


def test_the_last_streams_member_leaving_turns_the_group_classic_again() -> None:
    h = Roll()
    h.seed({"a": HALF_A, "b": HALF_B})
    h.streams_join("s")
    h.settle()
    held = {mid: set(t) for mid, t in h.classic_tasks.items()}
    r = h.sgh(member_id="s", member_epoch=-1)
    assert r.error_code == 0
    h.streams_tasks.pop("s")
    [converted] = h.events("group.converted")
    assert converted["to_type"] == "classic" and converted["members"] == 2
    g = h.shard.groups["app"]
    assert isinstance(g, ClassicGroup) and g.protocol_name == "stream"
    # Each instance's stored assignment is the AssignmentInfo of the tasks it runs now.
    for mid, m in g.members.items():
        assert decoded_tasks(m.assignment) == held[mid]
    # The instances rejoin the classic group: its leader's StreamsPartitionAssignor assigns next.
    assert h.classic_beat("a") == int(Errors.REBALANCE_IN_PROGRESS)
    h.assert_replay_equals_live()


def test_a_streams_member_leaving_while_another_remains_keeps_the_streams_group() -> None:
    h = Roll()
    h.seed({"a": ALL_TASKS})
    h.streams_join("s")
    h.streams_join("t")
    h.settle()
    assert h.sgh(member_id="s", member_epoch=-1).error_code == 0
    assert isinstance(h.shard.groups["app"], StreamsGroup)
    # The session of the last one expires: back to classic, with the classic instance kept.
    h.streams_tasks.clear()
    for _ in range(12):  # 48 s: the classic instance heartbeats, the streams member is silent
        h.advance(4_000)
        # ... and rejoins when told to, as a real one does (else its rebalance timeout, 10 s
        # here, would fence it first: the join timer).
        told = isinstance(h.shard.groups["app"], StreamsGroup) and h.classic_beat("a") == int(
            Errors.REBALANCE_IN_PROGRESS
        )
        if told:
            h.classic_rejoin("a")
    g = h.shard.groups["app"]
    assert isinstance(g, ClassicGroup) and set(g.members) == {"a"}, g


def test_the_downgrade_follows_the_migration_policy() -> None:
    h = Roll(group_consumer_migration_policy="upgrade")
    h.seed({"a": ALL_TASKS})
    h.streams_join("s")
    h.settle()
    h.sgh(member_id="s", member_epoch=-1)
    assert isinstance(h.shard.groups["app"], StreamsGroup)
    assert any(e["direction"] == "downgrade" for e in h.events("group.conversion_refused"))
    h.assert_replay_equals_live()


def test_standby_tasks_reach_classic_instances_with_their_partitions() -> None:
    h = Roll(group_streams_num_standby_replicas=1)
    h.seed({"a": HALF_A, "b": HALF_B})
    h.streams_join("s")
    h.settle()
    g = h.group
    m = g.members["a"]
    assert m.standby, "no standby task for the classic instance"
    meta = classic_metadata(h.pid["a"], h.classic_tasks["a"], endpoint="h1:7001")
    j = h.join("a", protocols=(Protocol("stream", meta),), group="app", version=9)
    s = h.sync("a", j.generation_id, group="app", protocol_name="stream")
    a = parse_assignment(s.assignment)
    assert a.user_data is not None
    info = decode_assignment_info(a.user_data)
    standby = {(str(t.subtopology), t.partition): parts for t, parts in info.standby_tasks}
    assert set(standby) == {(sid, p) for sid, ps in g.members["a"].standby.items() for p in ps}
    for (sid, p), parts in standby.items():
        assert parts == ((WORDS if sid == "0" else REPARTITION, p),)
    # Only the stateful subtopology (1, the count) has standbys; the endpoint lists them.
    assert {sid for sid, _ in standby} == {"1"}
    [host] = info.standby_partitions_by_host
    assert host.endpoint == "h1:7001" and set(host.partitions) == {(REPARTITION, p) for _, p in standby}


def test_a_topology_with_unnumbered_subtopologies_does_not_convert() -> None:
    h = Roll()
    h.seed({"a": ALL_TASKS})
    named = replace(
        TOPOLOGY,
        subtopologies=tuple(
            replace(s, subtopology_id=f"x{s.subtopology_id}") for s in TOPOLOGY.subtopologies
        ),
    )
    r = h.sgh(
        member_id="s",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        topology=named,
        process_id="p",
        active_tasks=(),
        standby_tasks=(),
        warmup_tasks=(),
    )
    assert r.error_code == int(Errors.GROUP_ID_NOT_FOUND) and "numbered" in (r.error_message or "")
    assert isinstance(h.shard.groups["app"], ClassicGroup)


def test_an_out_of_range_endpoint_port_is_dropped_not_a_traceback() -> None:
    h = Roll()
    h.seed({"a": ALL_TASKS})
    h.streams_join("s")
    meta = classic_metadata(5, set(), endpoint="h9:99999")
    j = h.join("z", protocols=(Protocol("stream", meta),), group="app", version=3)
    assert j.error_code == 0
    assert h.group.members["z"].user_endpoint is None
    h.assert_replay_equals_live()


def test_describe_groups_shows_the_classic_instances_of_a_streams_group() -> None:
    """DescribeGroups mid-roll: the classic instances as a classic consumer group describes
    them (protocol type `consumer`, protocol `stream`, their metadata and current
    AssignmentInfo); the streams-protocol member left out, as Kafka has no such form for it."""
    h = Roll()
    h.seed({"a": HALF_A, "b": HALF_B})
    h.streams_join("s")
    h.settle()
    [d] = h.shard.describe_groups(["app"])
    assert d.error_code == 0 and d.error_message is None
    assert (d.group_state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "stream")
    assert sorted(m.member_id for m in d.members) == ["a", "b"]
    for m in d.members:
        assert m.client_id == "classic"  # the harness's JoinGroup client id
        assert m.member_metadata == classic_metadata(h.pid[m.member_id], h.classic_tasks[m.member_id])
        assert decoded_tasks(m.member_assignment) == h.classic_tasks[m.member_id]
    # With the classic instances gone it is a plain streams group: Kafka 4.4's answer.
    for mid in ("a", "b"):
        h.leave((mid, None), group="app")
    [d] = h.shard.describe_groups(["app"])
    assert (d.group_state, d.members) == ("Dead", ())
    assert d.error_message == "Group app is not a classic group."


def test_describe_groups_of_a_streams_group_without_translation_is_kafkas_dead() -> None:
    from engine.hooks import RefuseMigration

    h = Roll()
    h.seed({"a": HALF_A})
    h.streams_join("s")
    h.shard.state.migration = RefuseMigration()
    [d] = h.shard.describe_groups(["app"])
    assert (d.group_state, d.members, d.error_message) == ("Dead", (), "Group app is not a classic group.")


def test_a_standby_a_classic_instance_reports_stays_its_own_until_its_sync() -> None:
    """Seed 3083 of the streams chaos simulator: a classic instance that rejoins still runs its
    standby tasks until its SyncGroup hands it the new assignment, so a member of the same
    process waits for them (UNRELEASED_TASKS) instead of holding a second copy; once the
    instance has synced, the member gets them."""
    h = Roll(group_streams_num_standby_replicas=1)
    h.seed({"a": HALF_A, "b": HALF_B})
    h.streams_join("s")
    h.settle()
    j = h.join("", protocols=(Protocol("stream", classic_metadata(1, set())),), group="app", version=9)
    sibling = j.member_id
    h.pid[sibling], h.classic_tasks[sibling] = 1, set()
    h.classic_rejoin(sibling)
    h.settle()
    s = h.sync("a", h.classic_epoch["a"], group="app", protocol_name="stream")
    a = parse_assignment(s.assignment)
    assert a.user_data is not None
    a_standby = {
        (str(t.subtopology), t.partition) for t, _ in decode_assignment_info(a.user_data).standby_tasks
    }
    assert a_standby, "the classic instance has no standby task"
    # A streams member starts on the classic instance's process (uuid 1): the new target moves
    # a standby of "a" to it.
    process = str(uuid.UUID(int=1))
    r = h.sgh(
        member_id="t",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        topology=TOPOLOGY,
        process_id=process,
        active_tasks=(),
        standby_tasks=(),
        warmup_tasks=(),
    )
    assert r.error_code == 0, r
    target = h.group.standby_targets["t"]
    moved = {(sid, p) for sid, ps in target.items() for p in ps} & a_standby
    assert moved, "the target moves no standby of the classic instance to the streams member"
    assert h.classic_beat("a") == int(Errors.REBALANCE_IN_PROGRESS)
    meta = classic_metadata(1, h.classic_tasks["a"], standby=frozenset(a_standby))
    ja = h.join("a", protocols=(Protocol("stream", meta),), group="app", version=9)
    assert ja.error_code == 0
    # "a" has joined but not synced: it still runs its standbys.
    epoch, held_by_t = r.member_epoch, set[Task]()
    for _ in range(3):
        r = h.sgh(member_id="t", member_epoch=epoch, active_tasks=(), standby_tasks=(), warmup_tasks=())
        assert r.error_code == 0, r
        epoch = r.member_epoch
        if r.standby_tasks is not None:
            held_by_t = {(t.subtopology_id, p) for t in r.standby_tasks for p in t.partitions}
        assert not held_by_t & moved, f"task {held_by_t & moved} on two members of process {process}"
    assert h.group.members["t"].state.name == "UNRELEASED_TASKS"
    s = h.sync("a", ja.generation_id, group="app", protocol_name="stream")
    assert s.error_code == 0
    # Synced: "a" dropped the standbys the assignment no longer lists; "t" gets them.
    owned = tuple(TaskIds(sid, (p,)) for sid, p in sorted(held_by_t))
    r = h.sgh(member_id="t", member_epoch=epoch, active_tasks=(), standby_tasks=owned, warmup_tasks=())
    assert r.error_code == 0 and r.standby_tasks is not None, r
    assert moved <= {(t.subtopology_id, p) for t in r.standby_tasks for p in t.partitions}
    h.assert_replay_equals_live()


def test_log_and_metrics_count_classic_instances_in_a_streams_group_as_classic() -> None:
    """A classic Kafka Streams instance inside the streams group is logged and counted as
    `classic` (the roll to `group.protocol=streams` is done at classic 0), not as `streams`."""
    from gateway.groups.events import annotate
    from gateway.groups.group_metrics import GroupMetrics
    from gateway.metrics import MetricsRegistry

    h = Roll()
    h.seed({"a": HALF_A, "b": HALF_B})
    h.streams_join("s")
    h.settle()
    j = h.join("", protocols=(Protocol("stream", classic_metadata(9, set())),), group="app", version=9)
    h.join(j.member_id, protocols=(Protocol("stream", classic_metadata(9, set())),), group="app", version=9)
    assert h.last is not None
    annotate(h.shard, h.last.events)
    [joined] = [f for name, f in h.last.events if name == "member.joined"]
    assert (joined["protocol"], joined["assignor"]) == ("classic", ["stream"]), joined
    gm = GroupMetrics(
        MetricsRegistry(),
        lambda: ((gid, g, h.shard.offsets.group(gid)) for gid, g in h.shard.groups.items()),
        h.shard.groups.get,
        lambda t, p: 0,
        max_groups=10,
        clock=lambda: 1.0,
    )
    assert gm.collect()["groupshift_group_members"] == {("app", "classic"): 3, ("app", "streams"): 1}


def test_a_classic_instance_whose_parked_sync_a_failed_conversion_answered_still_expires() -> None:
    """Seed 6127 of the streams chaos simulator: a classic instance's SyncGroup is parked behind
    its assignment's append and its session expiry is ignored meanwhile (Kafka's
    `hasSatisfiedHeartbeat`); a streams member's heartbeat then converts the group, answering
    that SyncGroup REBALANCE_IN_PROGRESS, but the journal refuses the conversion, so the classic
    group stays with the instance no longer parked. The append's completion restarts the session
    only of members it answers itself, so the instance needs its session timer from the failed
    conversion: once silent, it expires."""
    h = Roll()
    h.seed({"a": ALL_TASKS})
    meta = classic_metadata(1, ALL_TASKS)
    j = h.join("a", protocols=(Protocol("stream", meta),), group="app", version=9)
    assert isinstance(j, JoinGroupResponse) and j.error_code == 0, j
    req = SyncGroupRequest("app", j.generation_id, "a", None, "consumer", "stream", [])
    out = h.shard.sync_group(req, RequestContext("a-StreamThread-1-consumer", "/h", 5), h.tick())
    parked, on_append = out.response, out.on_append
    assert isinstance(parked, Pending) and on_append is not None, out
    h.advance(10_001)  # its session expires while the sync is parked: ignored
    cg = h.shard.classic_group("app")
    assert cg is not None and "a" in cg.members
    h.append_error = Errors.NOT_ENOUGH_REPLICAS
    r = h.streams_join("s")
    assert r.error_code != 0, r
    h.append_error = None
    answer = h.completed.get(parked)
    assert isinstance(answer, SyncGroupResponse) and answer.error_code == int(Errors.REBALANCE_IN_PROGRESS)
    assert h.shard.classic_group("app") is cg, "the refused conversion replaced the classic group"
    assert h.deadline("heartbeat-app-a") is not None, "the instance has no session timer"
    h.process(on_append(Errors.NONE))  # the assignment is durable after all
    h.advance(10_001)  # "a" is silent
    assert "a" not in cg.members, "the classic instance never expires"


@pytest.mark.parametrize(
    "assigned",
    [pytest.param(HALF_A, id="withheld-by-the-leader"), pytest.param(set(), id="emptied-by-a-rebalance")],
)
def test_tasks_a_classic_instance_still_runs_beyond_its_assignment_stay_its_own_through_the_conversion(
    assigned: set[Task],
) -> None:
    """Seeds 6721 and 6283 of the streams chaos simulator: a cooperative classic instance runs
    tasks its stored assignment no longer gives it (its leader withheld them and the SyncGroup
    answer saying so was lost; or a JoinGroup during CompletingRebalance emptied every stored
    assignment, as Kafka's `prepareRebalance` does), and its JoinGroup reports them. A streams
    member converting the group must not be handed them while the instance runs them: the
    converted instance holds them and gives them up through its own revocation."""
    h = Roll()
    h.seed({"a": ALL_TASKS}, assigned={"a": assigned})
    r = h.streams_join("s")
    assert r.error_code == 0, r
    a = h.group.members["a"]
    held = {(sid, p) for sid, ps in a.active.items() for p in ps}
    assert held == ALL_TASKS, f"the converted instance holds {held}, it runs {ALL_TASKS}"
    h.check_exclusive()  # "a" still runs every task: "s" got none of them
    h.assert_replay_equals_live()
    h.settle()
    assert h.streams_tasks["s"], "the streams member got no task once the instance revoked"
    assert set().union(*h.classic_tasks.values(), *h.streams_tasks.values()) == ALL_TASKS
    assert h.group.state() == "Stable"
    h.assert_replay_equals_live()


def test_a_task_two_classic_instances_report_is_not_given_to_either_by_the_conversion() -> None:
    """The claims the conversion keeps never give a task two holders: a task another instance's
    assignment gives it stays there, and one two instances report beyond their assignments
    goes to neither (a classic leader withholds it too)."""
    h = Roll()
    h.seed(
        {"a": ALL_TASKS, "b": HALF_B | {("0", 0)}, "c": {("0", 0)}},
        assigned={"a": set(), "b": HALF_B, "c": set()},
    )
    r = h.sgh(  # `streams_join` would check the (deliberately overlapping) reports themselves
        member_id="s",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        topology=TOPOLOGY,
        process_id="process-s",
        active_tasks=(),
        standby_tasks=(),
        warmup_tasks=(),
    )
    assert r.error_code == 0, r
    members = h.group.members
    held = {mid: {(sid, p) for sid, ps in members[mid].active.items() for p in ps} for mid in "abc"}
    assert held == {"a": HALF_A - {("0", 0)}, "b": HALF_B, "c": set()}, held


def future_metadata(version: int, latest: int, owned: set[Task] = frozenset()) -> bytes:  # type: ignore[assignment]
    """A newer Kafka Streams' JoinGroup metadata probing with SubscriptionInfo `version`: the two
    version fields every version starts with, then bytes this side cannot read (what Kafka's own
    StreamsPartitionAssignorTest encodes as a future subscription)."""
    info = struct.pack(">ii", version, latest) + b"process id, endpoint and offsets of a newer Streams"
    owned_parts = tuple((t, tuple(ps)) for t, ps in sorted(partitions_of(set(owned)).items()))
    return serialize_subscription(Subscription(3, SUBSCRIBED, info, owned_parts))


def test_a_classic_instance_probing_with_a_future_version_is_answered_at_11_and_downgrades() -> None:
    """Version probing above SubscriptionInfo 11 (KIP-268), as Kafka 4.4's
    StreamsPartitionAssignor answers it as leader: the instance of a newer Streams joins (its
    process the nil UUID, Kafka's FUTURE_ID, with no previous tasks), is assigned like any
    instance, and its SyncGroup carries AssignmentInfo version 11, commonly supported 11, which
    a newer Streams reads as "downgrade to 11 and rejoin"; rejoining with version 11 under its
    real process id it keeps its place."""
    h = Roll()
    h.seed({"a": ALL_TASKS})
    h.streams_join("s")
    h.settle()
    j = h.join("", protocols=(Protocol("stream", future_metadata(12, 12)),), group="app", version=9)
    assert j.error_code == int(Errors.MEMBER_ID_REQUIRED)
    new_id = j.member_id
    j = h.join(new_id, protocols=(Protocol("stream", future_metadata(12, 12)),), group="app", version=9)
    assert j.error_code == 0, j
    group = h.shard.groups["app"]
    assert isinstance(group, StreamsGroup)
    assert group.members[new_id].process_id == str(uuid.UUID(int=0))
    assert any(e["version"] == 12 for e in h.events("member.version_probing"))
    s = h.sync(new_id, j.generation_id, group="app", protocol_name="stream")
    assert s.error_code == 0
    a = parse_assignment(s.assignment)
    assert a.user_data is not None
    info = decode_assignment_info(a.user_data)
    assert not info.is_future
    assert (info.version, info.commonly_supported_version) == (11, 11)
    # The partitions it is given are exactly those of its active tasks, in Streams' layout.
    assigned = {(t, p) for t, ps in a.partitions for p in ps}
    assert assigned == {
        (WORDS if t.subtopology == 0 else REPARTITION, t.partition) for t in info.active_tasks
    }
    # It downgrades and rejoins at 11 under its own process id, as any instance.
    h.pid[new_id] = 7
    meta = classic_metadata(7, {(str(t.subtopology), t.partition) for t in info.active_tasks})
    j = h.join(new_id, protocols=(Protocol("stream", meta),), group="app", version=9)
    assert j.error_code == 0, j
    assert group.members[new_id].process_id == str(uuid.UUID(int=7))
    h.assert_replay_equals_live()


def test_a_future_version_is_refused_no_more_but_an_old_one_still_is() -> None:
    h = Roll()
    h.seed({"a": ALL_TASKS})
    h.streams_join("s")
    j = h.join(
        "x", protocols=(Protocol("stream", classic_metadata(9, set(), version=6)),), group="app", version=3
    )
    assert j.error_code == int(Errors.INCONSISTENT_GROUP_PROTOCOL)
    assert any(
        e["reason"] == "streams-version" and e["version"] == 6 for e in h.events("group.conversion_refused")
    )
    j = h.join("y", protocols=(Protocol("stream", future_metadata(13, 14)),), group="app", version=3)
    assert j.error_code == 0
