"""Streams groups in the engine (KIP-1071; engine/streams/): topology configuration against the
metadata image, the statuses Kafka reports, active-task assignment, revoke-before-assign,
leaving, session fencing, describe, ListGroups, offsets, and replay equal to the live state."""

from __future__ import annotations

from typing import Any

import pytest

from engine.config import CoordinatorConfig
from engine.context import RequestContext
from engine.ids import SeededIds
from engine.metadata import MetadataImage, TopicImage, topic_id_for
from engine.shard import Shard
from engine.streams.api import (
    INCORRECTLY_PARTITIONED_TOPICS,
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
    InternalTopic,
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
)
from engine.streams.assignor import assign_active
from engine.streams.group import StreamsGroup, tasks_from
from engine.streams.topology import configure
from records.codec import decode_record, encode_record
from records.streams_group import CopartitionGroup, KeyValue, StreamsGroupTopologyValue, Subtopology, TaskIds
from tests.streams_record_samples import WORD_COUNT_APP_TOPOLOGY as WORD_COUNT_TOPOLOGY

WORDS = "words-in"
REPARTITION = "app-counts-repartition"
CHANGELOG = "app-counts-changelog"
ALL_TOPICS = {WORDS: 4, REPARTITION: 4, CHANGELOG: 4}
NO_TASKS: dict[str, Any] = {"active_tasks": (), "standby_tasks": (), "warmup_tasks": ()}


def image(topics: dict[str, int]) -> MetadataImage:
    return MetadataImage([TopicImage(topic_id_for(n), n, c) for n, c in topics.items()])


class Streams:
    """One shard and the requests of Kafka Streams members (member id = process id here)."""

    def __init__(self, topics: dict[str, int] | None = None, **config: Any) -> None:
        cfg = {k.replace("_", "."): v for k, v in config.items()}
        # Assignments in the heartbeat unless a test asks for Kafka's initial rebalance delay or
        # its assignment interval (tests/test_streams_assignment_interval.py).
        cfg.setdefault("group.streams.initial.rebalance.delay.ms", 0)
        cfg.setdefault("group.streams.assignment.interval.ms", 0)
        self.shard = Shard(CoordinatorConfig.from_kafka(cfg), SeededIds(7), image(topics or ALL_TOPICS))
        self.now = 1000
        self.ctx = RequestContext("app-StreamThread-1-consumer", "/127.0.0.1", 0)
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, tuple[TaskIds, ...]] = {}
        # Every record of the heartbeats from now on, once a test sets it to a list (`replayed`).
        # Kept here, not by wrapping the shard's method: the compiled build's Shard has no
        # assignable methods.
        self.records: list[Any] | None = None

    def hb(self, **fields: Any) -> StreamsGroupHeartbeatResponse:
        fields.setdefault("group_id", "app")
        self.now += 1
        out = self.shard.streams_group_heartbeat(StreamsGroupHeartbeatRequest(**fields), self.ctx, self.now)
        if self.records is not None:
            self.records.extend(out.records)
        assert isinstance(out.response, StreamsGroupHeartbeatResponse)
        # Every record the live shard applied must survive the codec (what a restart reads).
        for r in out.records:
            key, value = encode_record(r)
            assert decode_record(key, value) == r
        return out.response

    def join(
        self, member: str, topology: Any = WORD_COUNT_TOPOLOGY, **over: Any
    ) -> StreamsGroupHeartbeatResponse:
        r = self.hb(
            member_id=member,
            member_epoch=0,
            rebalance_timeout_ms=30000,
            topology=topology,
            process_id=f"process-{member}",
            active_tasks=(),
            standby_tasks=(),
            warmup_tasks=(),
            **over,
        )
        self._remember(member, r)
        return r

    def beat(self, member: str) -> StreamsGroupHeartbeatResponse:
        r = self.hb(
            member_id=member,
            member_epoch=self.epochs[member],
            active_tasks=self.owned[member],
            standby_tasks=(),
            warmup_tasks=(),
        )
        self._remember(member, r)
        return r

    def _remember(self, member: str, r: StreamsGroupHeartbeatResponse) -> None:
        assert r.error_code == 0, r
        self.epochs[member] = r.member_epoch
        if r.active_tasks is not None:
            self.owned[member] = r.active_tasks

    def converge(self, *members: str, rounds: int = 6) -> None:
        for _ in range(rounds):
            for m in members:
                self.beat(m)

    @property
    def group(self) -> StreamsGroup:
        g = self.shard.groups["app"]
        assert isinstance(g, StreamsGroup)
        return g

    def replayed(self) -> Shard:
        """A fresh shard fed the live shard's records (what a restart loads)."""
        fresh = Shard(CoordinatorConfig(), SeededIds(7), self.shard.image)
        assert self.records is not None, "the test did not record the heartbeats"
        fresh.apply(self.records)
        return fresh


def owned_tasks(r: tuple[TaskIds, ...]) -> set[tuple[str, int]]:
    return {(t.subtopology_id, p) for t in r for p in t.partitions}


# --- topology configuration -------------------------------------------------------------------


def test_word_count_topology_derives_repartition_and_changelog_partitions() -> None:
    c = configure(WORD_COUNT_TOPOLOGY, image({WORDS: 3}))
    assert c.tasks is None
    assert [s.code for s in c.statuses] == [MISSING_INTERNAL_TOPICS]
    assert set(c.to_create) == {
        InternalTopic(REPARTITION, 3, 0, (KeyValue("cleanup.policy", "delete"),)),
        InternalTopic(CHANGELOG, 3, 0, (KeyValue("cleanup.policy", "compact"),)),
    }
    ready = configure(WORD_COUNT_TOPOLOGY, image({WORDS: 3, REPARTITION: 3, CHANGELOG: 3}))
    assert ready.tasks == {"0": 3, "1": 3} and ready.statuses == () and ready.to_create == ()


def test_missing_source_and_wrongly_partitioned_internal_topics_are_reported() -> None:
    missing = configure(WORD_COUNT_TOPOLOGY, image({}))
    assert missing.tasks is None and [s.code for s in missing.statuses] == [MISSING_SOURCE_TOPICS]
    assert WORDS in missing.statuses[0].detail
    wrong = configure(WORD_COUNT_TOPOLOGY, image({WORDS: 3, REPARTITION: 2, CHANGELOG: 3}))
    assert wrong.tasks is None and [s.code for s in wrong.statuses] == [INCORRECTLY_PARTITIONED_TOPICS]


def test_metadata_hash_follows_the_topics_the_topology_uses() -> None:
    a = configure(WORD_COUNT_TOPOLOGY, image(ALL_TOPICS)).metadata_hash
    assert a == configure(WORD_COUNT_TOPOLOGY, image({**ALL_TOPICS, "unrelated": 9})).metadata_hash
    assert a != configure(WORD_COUNT_TOPOLOGY, image({**ALL_TOPICS, WORDS: 8})).metadata_hash


# --- the assignor -----------------------------------------------------------------------------


def test_assignor_balances_over_processes_and_keeps_tasks_where_they_were() -> None:
    first = assign_active({"0": 4, "1": 4}, {"a": "p1", "b": "p2"}, {})
    assert sorted(sum(len(p) for p in t.values()) for t in first.values()) == [4, 4]
    second = assign_active({"0": 4, "1": 4}, {"a": "p1", "b": "p2", "c": "p3"}, first)
    loads = sorted(sum(len(p) for p in t.values()) for t in second.values())
    assert loads == [2, 3, 3]
    for m in ("a", "b"):  # a and b only gave up tasks, they did not swap any
        for s, parts in second[m].items():
            assert parts <= first[m].get(s, frozenset())
    everything = [(s, p) for t in second.values() for s, ps in t.items() for p in ps]
    assert len(everything) == len(set(everything)) == 8


# --- the heartbeat ----------------------------------------------------------------------------


def test_first_member_gets_every_task_and_the_group_is_stable() -> None:
    h = Streams()
    r = h.join("m1")
    # Kafka 4.4 creates the group at epoch 1; the first join bumps it to 2 (measured).
    assert r.member_epoch == 2 and r.heartbeat_interval_ms == 5000 and r.status == ()
    assert owned_tasks(r.active_tasks or ()) == {(s, p) for s in "01" for p in range(4)}
    assert h.group.state() == "Stable"


def test_missing_internal_topics_assign_nothing_and_ask_for_creation() -> None:
    h = Streams({WORDS: 2})
    r = h.join("m1")
    assert [s.code for s in r.status or ()] == [MISSING_INTERNAL_TOPICS]
    assert r.active_tasks == ()
    assert {t.name for t in r.internal_topics_to_create} == {REPARTITION, CHANGELOG}
    assert h.group.state(False) == "NotReady"
    # Once the topics exist, the next heartbeat bumps the epoch (metadata hash) and assigns.
    h.shard.update_metadata(image({WORDS: 2, REPARTITION: 2, CHANGELOG: 2}), h.now)
    r = h.beat("m1")
    assert r.status == () and owned_tasks(r.active_tasks or ()) == {("0", 0), ("0", 1), ("1", 0), ("1", 1)}


def test_second_member_waits_for_revocation_before_getting_tasks() -> None:
    h = Streams()
    h.join("m1")
    r2 = h.join("m2")
    # m1 still holds everything: m2 gets its epoch but none of its target yet.
    assert r2.active_tasks == () and r2.member_epoch == 3
    assert h.shard.groups["app"].members["m2"].state.name == "UNRELEASED_TASKS"  # type: ignore[union-attr]
    r1 = h.beat("m1")  # told to give up half: epoch unchanged until it has
    assert r1.member_epoch == 2 and len(owned_tasks(r1.active_tasks or ())) == 4
    h.converge("m1", "m2")
    a, b = owned_tasks(h.owned["m1"]), owned_tasks(h.owned["m2"])
    assert len(a) == len(b) == 4 and not a & b
    assert h.group.state() == "Stable" and h.epochs == {"m1": 3, "m2": 3}


def test_leave_and_session_expiry_give_the_tasks_to_the_others() -> None:
    h = Streams()
    h.join("m1")
    h.join("m2")
    h.join("m3")
    h.converge("m1", "m2", "m3")
    r = h.hb(member_id="m3", member_epoch=-1)
    assert r.error_code == 0 and r.member_epoch == -1
    h.converge("m1", "m2")
    assert len(owned_tasks(h.owned["m1"]) | owned_tasks(h.owned["m2"])) == 8
    # m2 stops heartbeating: fenced after group.streams.session.timeout.ms (45 s).
    for _ in range(10):
        h.now += 5000
        h.shard.expire(h.now)
        h.beat("m1")
    assert set(h.group.members) == {"m1"}
    h.converge("m1")
    assert len(owned_tasks(h.owned["m1"])) == 8


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"member_id": "", "member_epoch": 0}, 42),
        ({"member_id": "m", "member_epoch": 0, "rebalance_timeout_ms": 1}, 42),  # no topology
        ({"member_id": "ghost", "member_epoch": 3}, 69),  # no group yet
    ],
)
def test_invalid_heartbeats_get_kafkas_errors(fields: dict[str, Any], code: int) -> None:
    assert Streams().hb(**fields).error_code == code


def test_fenced_and_unknown_members() -> None:
    h = Streams()
    h.join("m1")
    assert h.hb(member_id="m1", member_epoch=7, **NO_TASKS).error_code == 110  # FENCED_MEMBER_EPOCH
    assert h.hb(member_id="other", member_epoch=1, **NO_TASKS).error_code == 25  # UNKNOWN_MEMBER_ID


def test_list_describe_and_other_protocols_on_a_streams_group() -> None:
    h = Streams()
    h.join("m1")
    listed = h.shard.list_groups()
    assert [(g.group_id, g.group_type, g.group_state) for g in listed] == [("app", "streams", "Stable")]
    (d,) = h.shard.describe_streams_groups(["app"])
    assert (
        d.error_code == 0
        and d.group_epoch == 2
        and d.assignment_epoch == 2
        and d.topology is not None
        and d.topology.epoch == WORD_COUNT_TOPOLOGY.epoch
    )
    # The internal topics the application left undefined show the counts the coordinator chose.
    (_, counting) = d.topology.subtopologies
    assert [
        (i.name, i.partitions)
        for i in (*counting.state_changelog_topics, *counting.repartition_source_topics)
    ] == [
        (CHANGELOG, 4),
        (REPARTITION, 4),
    ]
    assert [m.member.member_id for m in d.members] == ["m1"] and d.members[0].assignment == d.members[
        0
    ].target_assignment
    (missing,) = h.shard.describe_streams_groups(["nope"])
    assert missing.error_code == 69


def test_replay_rebuilds_the_live_state() -> None:
    h = Streams()
    h.records = []
    h.join("m1")
    h.join("m2")
    h.converge("m1", "m2")
    h.join("m3")
    h.converge("m1", "m2", "m3")
    h.hb(member_id="m2", member_epoch=-1)
    h.converge("m1", "m3")
    live = h.shard.persisted_state()["groups"]
    assert live == h.replayed().persisted_state()["groups"]
    assert live["app"][0] == "streams"
    assert tasks_from(h.owned["m1"])  # both remaining members hold tasks
    assert tasks_from(h.owned["m3"])


def test_streams_settings_have_kafkas_defaults_and_standbys_stay_under_the_max() -> None:
    config = CoordinatorConfig()
    assert (config.streams_session_timeout_ms, config.streams_heartbeat_interval_ms) == (45000, 5000)
    assert (config.streams_num_standby_replicas, config.streams_max_standby_replicas) == (0, 2)
    assert (
        CoordinatorConfig.from_kafka({"group.streams.num.standby.replicas": "2"}).streams_num_standby_replicas
        == 2
    )
    with pytest.raises(ValueError, match="must not exceed"):
        CoordinatorConfig.from_kafka({"group.streams.num.standby.replicas": "3"})


def test_metrics_and_event_details_know_streams_groups() -> None:
    from gateway.groups.events import member_details
    from gateway.groups.group_metrics import group_counts, is_stable

    h = Streams()
    h.join("m1")
    assert group_counts([h.group]) == {("streams", "Stable"): 1}
    assert is_stable(h.group)
    assert member_details(h.shard, "app", "m1") == {
        "client_id": "app-StreamThread-1-consumer",
        "client_host": "/127.0.0.1",
        "protocol": "streams",
    }
    h.join("m2")
    assert not is_stable(h.group)  # m2 waits for m1's tasks


def test_a_member_that_does_not_revoke_is_fenced_after_its_rebalance_timeout() -> None:
    h = Streams()
    h.join("m1")  # rebalance timeout 30 s
    h.join("m2")
    r = h.beat("m1")  # told to give up tasks; it keeps heartbeating but never does
    assert h.group.members["m1"].state.name == "UNREVOKED_TASKS"
    stale = h.owned["m1"] if r.active_tasks is None else r.active_tasks
    for _ in range(7):
        h.now += 5000
        h.shard.expire(h.now)
        if "m1" in h.group.members:
            # still reporting every task it had: the revocation never completes
            h.hb(
                member_id="m1",
                member_epoch=h.epochs["m1"],
                active_tasks=tuple(TaskIds(s, tuple(range(4))) for s in "01"),
                standby_tasks=(),
                warmup_tasks=(),
            )
        h.beat("m2")
    assert set(h.group.members) == {"m2"} and stale is not None
    h.converge("m2")
    assert len(owned_tasks(h.owned["m2"])) == 8


def test_member_state_bytes_are_kafkas() -> None:
    """Kafka's streams MemberState starts at 1 (STABLE), unlike the consumer-group one."""
    h = Streams()
    h.join("m1")
    h.join("m2")
    states = {mid: m.assignment_value().state for mid, m in h.group.members.items()}
    assert states == {"m1": 1, "m2": 3}  # m2: UNRELEASED_TASKS until m1 revokes
    h.beat("m1")
    assert h.group.members["m1"].assignment_value().state == 2  # UNREVOKED_TASKS


def test_a_leave_records_the_topics_it_assigned_against() -> None:
    """Found by tests/test_streams_stateful.py: the topics shrink, a member leaves (its
    target is computed on the new topics), the topics grow back: the next heartbeat must see
    the change and assign the new tasks, which needs the leave to have stored the hash of the
    topics it used."""
    h = Streams()
    h.join("m1")
    h.join("m2")
    h.shard.update_metadata(image({WORDS: 2, REPARTITION: 2, CHANGELOG: 2}), h.now)
    h.hb(member_id="m1", member_epoch=-1)
    h.shard.update_metadata(image(ALL_TOPICS), h.now)
    h.converge("m2")
    assert len(owned_tasks(h.owned["m2"])) == 8


# Answers measured on Kafka 4.4.0 (raw StreamsGroupHeartbeat v0 requests against a KRaft node with
# `group.streams.initial.rebalance.delay.ms`=0, the delay groupshift has): error code, message, and
# member epoch 0 with an empty status list in every refusal. e2e/test_streams_differential.py
# compares them with the node on every run.
KAFKA_44_REFUSALS = [
    ({"member_id": ""}, 42, "MemberId can't be empty."),
    ({"process_id": "p", **NO_TASKS}, 42, "Topology must be non-null when (re-)joining."),
    (
        {"topology": WORD_COUNT_TOPOLOGY, "process_id": "p"},
        42,
        "ActiveTasks must be empty when (re-)joining.",
    ),
    ({"group_id": "nogroup", "member_epoch": 3}, 69, "Streams group nogroup not found."),
    ({"member_id": "zz", "member_epoch": 1, **NO_TASKS}, 25, "Member zz is not a member of group app."),
    ({"member_epoch": 1, "active_tasks": ()}, 42, "If one task-type is non-null, all must be non-null."),
    ({"member_epoch": -3}, 42, "MemberEpoch is -3, but must be greater than or equal to -2."),
    (
        {"member_epoch": 5, **NO_TASKS},
        110,
        "The streams group member has a greater member epoch (5) than the one known by the group "
        "coordinator (2). The member must abandon all its partitions and rejoin.",
    ),
]


@pytest.mark.parametrize(("fields", "code", "message"), KAFKA_44_REFUSALS)
def test_refusals_answer_as_kafka_44(fields: dict[str, Any], code: int, message: str) -> None:
    h = Streams()
    h.join("m1")
    fields = {"member_id": "m1", "member_epoch": 0, "rebalance_timeout_ms": 30000, **fields}
    r = h.hb(**fields)
    assert (r.error_code, r.error_message, r.member_epoch, r.status) == (code, message, 0, ())


def test_leave_answers_its_epoch_and_a_second_leave_is_unknown() -> None:
    h = Streams()
    h.join("m1")
    r = h.hb(member_id="m1", member_epoch=-1)
    assert (r.error_code, r.member_epoch, r.status) == (0, -1, ())
    again = h.hb(member_id="m1", member_epoch=-1)
    assert (again.error_code, again.error_message) == (25, "Member m1 is not a member of group app.")


def test_other_group_apis_on_a_streams_group_answer_as_kafka_44() -> None:
    """Measured on Kafka 4.4.0: ConsumerGroupHeartbeat GROUP_ID_NOT_FOUND "Group g is not a
    consumer group.", JoinGroup INCONSISTENT_GROUP_PROTOCOL, DescribeGroups Dead,
    StreamsGroupDescribe of a missing group GROUP_ID_NOT_FOUND with epochs 0."""
    from engine.classic.api import JoinGroupRequest
    from engine.classic.member import Protocol
    from engine.consumer.api import ConsumerGroupHeartbeatRequest

    h = Streams()
    h.join("m1")
    cgh = h.shard.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest(
            group_id="app",
            member_id="c1",
            member_epoch=0,
            rebalance_timeout_ms=30000,
            subscribed_topic_names=[WORDS],
            topic_partitions=[],
        ),
        h.ctx.with_version(0),
        h.now,
    ).response
    assert (cgh.error_code, cgh.error_message) == (69, "Group app is not a consumer group.")
    join = h.shard.join_group(
        JoinGroupRequest(
            group_id="app",
            session_timeout_ms=30000,
            rebalance_timeout_ms=30000,
            member_id="",
            protocol_type="consumer",
            protocols=(Protocol("range", b""),),
        ),
        h.ctx.with_version(9),
        h.now,
    ).response
    assert join.error_code == 23
    (described,) = h.shard.describe_groups(["app"])
    assert (described.error_code, described.group_state, described.protocol_type) == (0, "Dead", "")
    (missing,) = h.shard.describe_streams_groups(["none"])
    assert (missing.error_code, missing.group_epoch, missing.assignment_epoch) == (69, 0, 0)


# --- answers the differential suite measured on Kafka 4.4.0 (e2e/test_streams_differential.py) ---


def _subtopology(sid: str, sources: tuple[str, ...], **over: Any) -> Subtopology:
    fields: dict[str, Any] = {
        "subtopology_id": sid,
        "source_topics": sources,
        "source_topic_regex": (),
        "state_changelog_topics": (),
        "repartition_sink_topics": (),
        "repartition_source_topics": (),
        "copartition_groups": (),
    }
    fields.update(over)
    return Subtopology(**fields)


def _topology(epoch: int, *subs: Subtopology) -> StreamsGroupTopologyValue:
    return StreamsGroupTopologyValue(epoch, subs)


def test_a_source_regex_is_refused_before_any_other_check() -> None:
    h = Streams()
    r = h.hb(
        member_id="",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        topology=_topology(0, _subtopology("0", (), source_topic_regex=("words.*",))),
        **NO_TASKS,
    )
    assert (r.error_code, r.error_message, r.member_id) == (
        42,
        "Regular expressions for source topics are not supported yet.",
        "",
    )


def test_a_static_leave_without_instance_id_and_a_topology_off_a_join_are_refused() -> None:
    h = Streams()
    h.join("m1")
    r = h.hb(member_id="m1", member_epoch=-2)
    assert (r.error_code, r.error_message) == (42, "InstanceId can't be null.")
    r = h.hb(member_id="m1", member_epoch=-2, instance_id="i", topology=WORD_COUNT_TOPOLOGY, **NO_TASKS)
    assert (r.error_code, r.error_message) == (42, "Topology can only be provided when (re-)joining.")


def test_topology_updates_are_refused_and_an_older_epoch_is_stale() -> None:
    h = Streams()
    h.join("m1", _topology(2, _subtopology("0", (WORDS,))))
    newer = h.hb(
        member_id="m2",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        topology=_topology(3, _subtopology("0", (WORDS,))),
        process_id="p2",
        **NO_TASKS,
    )
    assert (newer.error_code, newer.error_message) == (42, "Topology updates are not supported yet.")
    other = h.hb(
        member_id="m2",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        topology=_topology(2, _subtopology("0", (REPARTITION,))),
        process_id="p2",
        **NO_TASKS,
    )
    assert other.error_code == 42
    stale = h.join("m3", _topology(1, _subtopology("0", (WORDS,))))
    assert [(s.code, s.detail) for s in stale.status or ()] == [
        (0, "The member's topology epoch 1 is behind the group's topology epoch 2.")
    ]
    # The status stays on the member's later heartbeats.
    assert [s.code for s in h.beat("m3").status or ()] == [0]


@pytest.mark.parametrize(
    "topology",
    [
        _topology(-1, _subtopology("0", (WORDS,))),
        _topology(0, _subtopology("0", (WORDS,), copartition_groups=(CopartitionGroup((0, 3), (), ()),))),
    ],
    ids=["negative-epoch", "copartition-index-out-of-range"],
)
def test_topologies_kafka_fails_on_get_unknown_server_error(topology: Any) -> None:
    h = Streams()
    r = h.hb(
        member_id="m1",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        topology=topology,
        process_id="p",
        **NO_TASKS,
    )
    assert (r.error_code, r.error_message) == (-1, None)
    assert "app" not in h.shard.groups


def test_tasks_are_sent_only_on_a_join_or_when_they_change() -> None:
    """Kafka's `hasAssignedTasksChanged`: not for an epoch bump alone (a new process id), not to
    a member reporting fewer tasks than it has."""
    h = Streams()
    h.join("m1")
    moved = h.hb(
        member_id="m1",
        member_epoch=h.epochs["m1"],
        process_id="elsewhere",
        active_tasks=h.owned["m1"],
        standby_tasks=(),
        warmup_tasks=(),
    )
    assert moved.member_epoch == h.epochs["m1"] + 1 and moved.active_tasks is None
    fewer = h.hb(
        member_id="m1",
        member_epoch=moved.member_epoch,
        active_tasks=h.owned["m1"][:1],
        standby_tasks=(),
        warmup_tasks=(),
    )
    assert fewer.error_code == 0 and fewer.active_tasks is None


def test_status_details_name_topics_as_kafka_does() -> None:
    from engine.streams.topology import java_hash_order

    # Orders measured on Kafka 4.4.0 (Java HashMap iteration).
    assert java_hash_order(["g-0c3a781ff0-counts-repartition", "g-0c3a781ff0-counts-store-changelog"]) == [
        "g-0c3a781ff0-counts-store-changelog",
        "g-0c3a781ff0-counts-repartition",
    ]
    assert java_hash_order(["g-54a2a6a7cb-a-repartition", "g-54a2a6a7cb-b-repartition"]) == [
        "g-54a2a6a7cb-b-repartition",
        "g-54a2a6a7cb-a-repartition",
    ]
    wrong = configure(WORD_COUNT_TOPOLOGY, image({WORDS: 4, REPARTITION: 4, CHANGELOG: 2}))
    assert [s.detail for s in wrong.statuses] == [
        f"Existing topic {CHANGELOG} has different number of partitions: expected 4, found 2"
    ]


def test_a_classic_join_replaces_an_empty_streams_group_keeping_its_offsets() -> None:
    """Kafka 4.4's offline migration back: once every streams member left, a classic JoinGroup
    takes the group id; a streams group with members answers INCONSISTENT_GROUP_PROTOCOL."""
    from engine.classic.api import JoinGroupRequest
    from engine.classic.group import ClassicGroup
    from engine.classic.member import Protocol

    h = Streams()
    h.join("m1")
    request = JoinGroupRequest(
        group_id="app",
        session_timeout_ms=30000,
        rebalance_timeout_ms=30000,
        member_id="",
        protocol_type="consumer",
        protocols=(Protocol("range", b""),),
    )
    assert h.shard.join_group(request, h.ctx.with_version(9), h.now).response.error_code == 23
    h.hb(member_id="m1", member_epoch=-1)
    out = h.shard.join_group(request, h.ctx.with_version(9), h.now)
    assert out.response.error_code == 79  # MEMBER_ID_REQUIRED: the classic join goes on as usual
    assert isinstance(h.shard.groups["app"], ClassicGroup)


@pytest.mark.parametrize(
    ("app", "named"),
    [
        ("g-2f50cd68bb", "g-2f50cd68bb-counts-store-changelog"),
        ("g-45917a19f9", "g-45917a19f9-counts-repartition"),
    ],
)
def test_the_first_wrongly_partitioned_internal_topic_is_kafkas(app: str, named: str) -> None:
    """Both internal topics wrong (a fixed repartition count of 2 over an existing 3-partition
    topic, a 2-partition changelog): Kafka 4.4 names the first of its hash map (measured with
    these names), and expects the changelog to follow the existing repartition topic (3)."""
    from records.streams_group import TopicInfo

    rep, changelog = f"{app}-counts-repartition", f"{app}-counts-store-changelog"
    topo = _topology(
        0,
        _subtopology("0", (WORDS,), repartition_sink_topics=(rep,)),
        _subtopology(
            "1",
            (),
            state_changelog_topics=(TopicInfo(changelog, 0, 0, ()),),
            repartition_source_topics=(TopicInfo(rep, 2, 0, ()),),
        ),
    )
    c = configure(topo, image({WORDS: 2, rep: 3, changelog: 2}))
    expected = {rep: "expected 2, found 3", changelog: "expected 3, found 2"}[named]
    assert [s.detail for s in c.statuses] == [
        f"Existing topic {named} has different number of partitions: {expected}"
    ]


def test_static_members_leave_with_their_tasks_and_are_replaced() -> None:
    """Kafka 4.4 (measured): epoch -2 keeps the member and its tasks (Reconciling, no epoch
    bump); a new member id with the instance id takes its place and tasks; a live holder of the
    instance id refuses another member."""
    h = Streams()
    h.records = []
    h.join("m1", instance_id="i-1")
    epoch = h.group.group_epoch
    tasks = owned_tasks(h.owned["m1"])
    left = h.hb(member_id="m1", member_epoch=-2, instance_id="i-1")
    assert (left.error_code, left.member_epoch) == (0, -2)
    assert h.group.group_epoch == epoch and h.group.state() == "Reconciling"
    assert (
        h.group.members["m1"].member_epoch == -2 and owned_tasks(task_ids_of(h.group.members["m1"])) == tasks
    )
    busy = h.hb(
        member_id="m9",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        topology=WORD_COUNT_TOPOLOGY,
        process_id="process-m1",
        instance_id="i-2",
        **NO_TASKS,
    )
    assert busy.error_code == 0
    back = h.hb(
        member_id="m2",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        topology=WORD_COUNT_TOPOLOGY,
        process_id="process-m1",
        instance_id="i-1",
        **NO_TASKS,
    )
    assert back.error_code == 0 and "m1" not in h.group.members
    assert owned_tasks(back.active_tasks or ()) <= tasks
    refused = h.hb(
        member_id="m3",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        topology=WORD_COUNT_TOPOLOGY,
        process_id="p3",
        instance_id="i-1",
        **NO_TASKS,
    )
    assert (refused.error_code, refused.error_message) == (
        111,
        "Static member m3 with instance id i-1 cannot join the group because the instance id is owned "
        "by m2 member.",
    )
    assert h.shard.persisted_state()["groups"] == h.replayed().persisted_state()["groups"]


def task_ids_of(member: Any) -> tuple[TaskIds, ...]:
    from engine.streams.group import task_ids

    return task_ids(member.active)


def test_a_static_leave_names_the_instance_kafka_knows() -> None:
    h = Streams()
    h.join("m1", instance_id="i-1")
    other = h.hb(member_id="m1", member_epoch=-2, instance_id="i-2")
    assert (other.error_code, other.error_message) == (25, "Instance id i-2 is unknown.")
    fenced = h.hb(member_id="m2", member_epoch=-2, instance_id="i-1")
    assert (fenced.error_code, fenced.error_message) == (
        82,
        "Static member m2 with instance id i-1 was fenced by member m1.",
    )


def test_topologies_kafka_refuses_as_invalid() -> None:
    """Measured on Kafka 4.4.0: STREAMS_INVALID_TOPOLOGY for a changelog with a partition count
    and for a repartition topic nobody writes; UNKNOWN_SERVER_ERROR for duplicate subtopology ids."""
    from records.streams_group import TopicInfo

    h = Streams()
    changelog = _topology(0, _subtopology("0", (WORDS,), state_changelog_topics=(TopicInfo("c", 3, 0, ()),)))
    r = h.hb(
        member_id="m1",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        topology=changelog,
        process_id="p",
        **NO_TASKS,
    )
    assert (r.error_code, r.error_message) == (
        130,
        "Changelog topic c must have an undefined partition count, but it is set to 3.",
    )
    orphan = _topology(
        0,
        _subtopology("0", (WORDS,)),
        _subtopology("1", (), repartition_source_topics=(TopicInfo("o", 0, 0, ()),)),
    )
    r = h.hb(
        member_id="m1",
        member_epoch=0,
        rebalance_timeout_ms=30000,
        topology=orphan,
        process_id="p",
        **NO_TASKS,
    )
    assert (r.error_code, r.error_message) == (
        130,
        "Failed to compute number of partitions for all repartition topics, because a repartition source "
        "topic is never used as a sink topic.",
    )
    twice = _topology(0, _subtopology("0", (WORDS,)), _subtopology("0", (WORDS,)))
    r = h.hb(
        member_id="m1", member_epoch=0, rebalance_timeout_ms=30000, topology=twice, process_id="p", **NO_TASKS
    )
    assert (r.error_code, r.error_message) == (-1, None)
    assert "app" not in h.shard.groups


def test_owned_tasks_outside_the_topology_are_refused() -> None:
    h = Streams()
    h.join("m1")
    epoch = h.epochs["m1"]
    unknown = h.hb(
        member_id="m1",
        member_epoch=epoch,
        active_tasks=(TaskIds("9", (0,)),),
        standby_tasks=(),
        warmup_tasks=(),
    )
    assert (unknown.error_code, unknown.error_message) == (
        42,
        "Subtopology 9 does not exist in the topology.",
    )
    beyond = h.hb(
        member_id="m1",
        member_epoch=epoch,
        active_tasks=(),
        standby_tasks=(TaskIds("0", (7,)),),
        warmup_tasks=(),
    )
    assert (beyond.error_code, beyond.error_message) == (
        42,
        "Task 7 for subtopology 0 is invalid. Number of tasks for this subtopology: 4",
    )


def test_a_shutdown_request_reaches_every_member_until_the_group_is_empty() -> None:
    h = Streams()
    h.join("m1")
    h.join("m2")
    asked = h.hb(
        member_id="m1",
        member_epoch=h.epochs["m1"],
        shutdown_application=True,
        **{**NO_TASKS, "active_tasks": h.owned["m1"]},
    )
    detail = (
        "Streams group member m1 encountered a fatal error and requested a shutdown for the entire "
        "application."
    )
    assert [(s.code, s.detail) for s in asked.status or ()] == [(4, detail)]
    assert [s.code for s in h.beat("m2").status or ()] == [4]
    h.hb(member_id="m1", member_epoch=-1)
    h.hb(member_id="m2", member_epoch=-1)
    assert h.group.shutdown_requested_by is None
    assert h.join("m3").status == ()


def test_two_internal_topics_in_one_hash_bucket_keep_kafkas_insertion_order() -> None:
    """Measured on Kafka 4.4.0: both names fall in bucket 5; Kafka lists the repartition topic
    first."""
    from engine.streams.topology import java_hash_order

    names = ["g-17efaf47db-counts-repartition", "g-17efaf47db-counts-store-changelog"]
    assert java_hash_order(names) == names
    app = "g-17efaf47db"
    rep, changelog = f"{app}-counts-repartition", f"{app}-counts-store-changelog"
    from records.streams_group import TopicInfo

    topo = _topology(
        0,
        _subtopology("0", (WORDS,), repartition_sink_topics=(rep,)),
        _subtopology(
            "1",
            (),
            state_changelog_topics=(TopicInfo(changelog, 0, 0, ()),),
            repartition_source_topics=(TopicInfo(rep, 5, 0, ()),),
        ),
    )
    c = configure(topo, image({WORDS: 2}))
    assert [s.detail for s in c.statuses] == [f"Internal topics are missing: {rep}, {changelog}"]


def test_assignor_spreads_each_subtopology_as_kafka_44() -> None:
    """Measured on Kafka 4.4.0: a second process joining a member that has every task of a word
    count takes partitions 2 and 3 of both subtopologies; the first keeps 0 and 1 of both."""
    alone = assign_active({"0": 4, "1": 4}, {"a": "p1"}, {})
    two = assign_active({"0": 4, "1": 4}, {"a": "p1", "b": "p2"}, alone)
    assert two == {
        "a": {"0": frozenset({0, 1}), "1": frozenset({0, 1})},
        "b": {"0": frozenset({2, 3}), "1": frozenset({2, 3})},
    }


def test_endpoint_information_follows_kafkas_epoch() -> None:
    """Kafka 4.4 (measured by the differential suite): a member with a user endpoint that is sent
    its tasks bumps the group's endpoint information epoch; a member whose epoch differs gets
    every member's endpoint with the source partitions of its tasks."""
    from records.streams_group import Endpoint

    h = Streams()
    first = h.join("m1", user_endpoint=Endpoint("a", 1))
    # The group is new: epoch 0 answered, the member's own endpoint listed.
    assert first.endpoint_information_epoch == 0 and first.partitions_by_user_endpoint is not None
    (own,) = first.partitions_by_user_endpoint
    assert own.endpoint == Endpoint("a", 1)
    assert sorted(own.active) == [(REPARTITION, (0, 1, 2, 3)), (WORDS, (0, 1, 2, 3))]
    second = h.join("m2", user_endpoint=Endpoint("b", 2))
    assert second.endpoint_information_epoch == 1
    assert [e.endpoint for e in second.partitions_by_user_endpoint or ()] == [
        Endpoint("a", 1),
        Endpoint("b", 2),
    ]
    h.converge("m1", "m2")
    steady = h.hb(
        member_id="m1",
        member_epoch=h.epochs["m1"],
        endpoint_information_epoch=h.group.endpoint_information_epoch,
        active_tasks=h.owned["m1"],
        standby_tasks=(),
        warmup_tasks=(),
    )
    # Nothing changed and the member has seen the group's epoch: no endpoint list.
    assert steady.active_tasks is None and steady.partitions_by_user_endpoint is None


def test_a_recorded_topology_with_negative_copartition_indexes_is_configured() -> None:
    """Found by the `streams_records` fuzz target: a topology record (not a heartbeat, whose
    indexes are validated) with copartition indexes below zero made StreamsGroupDescribe and the
    heartbeat raise IndexError (-5) or pick a topic from the end (-1). Out-of-range indexes name
    nothing, below zero as above the end."""
    sub = WORD_COUNT_TOPOLOGY.subtopologies[0]
    bad = StreamsGroupTopologyValue(
        0,
        (
            Subtopology(
                sub.subtopology_id,
                (WORDS,),
                (),
                (),
                sub.repartition_sink_topics,
                (),
                (CopartitionGroup((-5, -1, 0), (-3,), (-2,)),),
            ),
            WORD_COUNT_TOPOLOGY.subtopologies[1],
        ),
    )
    c = configure(bad, image(ALL_TOPICS))
    assert c.tasks == {"0": 4, "1": 4} and c.statuses == ()


def test_a_member_still_revoking_when_the_shard_loads_is_fenced_after_its_rebalance_timeout() -> None:
    """Found by the streams simulator (seed 5018): the load duties gave a streams member its
    session timer but not the rebalance timer of a member still revoking, so after a restart a
    member that never gave its tasks up kept them (and its group Reconciling) for as long as it
    heartbeated. They schedule it now, as for consumer-group members."""
    h = Streams()
    h.records = []
    h.join("m1")  # rebalance timeout 30 s
    h.join("m2")
    h.beat("m1")
    assert h.group.members["m1"].state.name == "UNREVOKED_TASKS"
    epoch = h.epochs["m1"]
    h.shard = h.replayed()  # a restart
    h.shard.on_loaded(h.now)
    assert "streams-rebalance-timeout-app-m1" in h.shard.timers.keys()  # noqa: SIM118 (Timers is no dict)
    everything = tuple(TaskIds(s, tuple(range(4))) for s in "01")
    for _ in range(7):
        h.now += 5000
        h.shard.expire(h.now)
        if "m1" in h.group.members:
            h.hb(
                member_id="m1", member_epoch=epoch, active_tasks=everything, standby_tasks=(), warmup_tasks=()
            )
        h.beat("m2")
    assert set(h.group.members) == {"m2"}
    h.converge("m2")
    assert len(owned_tasks(h.owned["m2"])) == 8
