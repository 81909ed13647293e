"""Differential: streams groups (KIP-1071) against a real Apache Kafka 4.4 node, answer by answer.

StreamsGroupHeartbeat (88) and StreamsGroupDescribe (89) at v0 and v1, and
StreamsGroupTopologyDescriptionUpdate (93) v0, plus the APIs a streams group
meets (OffsetCommit/OffsetFetch, JoinGroup, ConsumerGroupHeartbeat, ListGroups,
IncrementalAlterConfigs of GROUP configs): joining with a valid topology, topology
configuration (missing source topics, copartitioning, repartition partition counts, topology
epochs), internal topics missing (and created by the coordinator) or wrongly partitioned,
standby replicas, static members, leaving, fencing, request validation, Describe of stable,
empty and unknown groups, offline migration classic <-> streams, and group-type mismatches.

One Kafka 4.4 node and one `groupshift serve` for the whole module (`streams_pair`); every
scenario runs on both at once with the same group and topic names (e2e/differential.py) and the
normalised transcripts are compared field by field. Assignment timing is taken out of the
comparison by both sides' settings (no initial rebalance delay, no assignment interval) but for
the scenarios that set them on their group (`initial-rebalance-delay`, `assignment-interval`).
Member ids are the client's own (a Streams client makes its member id), so they are constant per
scenario. Where groupshift differs on purpose or cannot do better yet, the scenario's `known`
map names the paths (each must still differ, so the table cannot go stale) and
docs/deviations.md has the row.

STREAMS_DIFFERENTIAL_KAFKA=HOST:PORT uses a running Kafka 4.4 node started with
`KAFKA_SETTINGS` instead of starting one.

TxnOffsetCommit (an `exactly_once_v2` Kafka Streams producer's commit) is served by groupshift
in upstream mode only (embedded mode has no transactions): `test_txn_offset_commit_of_streams_members`
compares Kafka 4.4's answers with a second groupshift's, in upstream mode in front of the same
node (`streams_upstream`), each side with names of its own.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from e2e.conftest import Gateways
from e2e.differential import Outcome, Session, compare, plain, run_both, run_sessions
from e2e.upstream_streams import streams_heartbeat_fields

pytestmark = pytest.mark.e2e

KAFKA_VERSION = "4.4"
# Both sides (Kafka's names).
# Both sides skip the initial rebalance delay and the assignment interval (each target in the
# heartbeat that needs it) but for the scenarios that set them on their group.
GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.streams.initial.rebalance.delay.ms": "0",
    "group.streams.assignment.interval.ms": "0",
    "group.streams.heartbeat.interval.ms": "5000",
    "group.streams.session.timeout.ms": "45000",
    # answered in StreamsGroupHeartbeat v1 (a value off Kafka's default shows both sides read it)
    "group.streams.acceptable.recovery.lag": "12345",
    # Kafka's assignor in the heartbeat (4.4.0 reads the setting nowhere, so this only pins it
    # should a later release read it); groupshift takes it too, and both describe the group's
    # internal `streams.assignor.offload.enable` as this broker value.
    "group.streams.assignor.offload.enable": "false",
}
# Kafka only: keeps one node's internal topics small.
KAFKA_SETTINGS = {
    **GROUP_SETTINGS,
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}


@pytest.fixture(scope="module")
def streams_pair(
    tmp_path_factory: pytest.TempPathFactory, kafka_cluster_factory: Any
) -> Iterator[tuple[str, str]]:
    """(Kafka 4.4 bootstrap, groupshift bootstrap), shared by every scenario of the module."""
    kafka = os.environ.get("STREAMS_DIFFERENTIAL_KAFKA")
    if not kafka:
        kafka = kafka_cluster_factory(
            KAFKA_VERSION, configs=KAFKA_SETTINGS, name="streams-differential"
        ).bootstrap
    g = Gateways(tmp_path_factory.mktemp("streams-differential"))
    gw = g.start("groupshift", sets=[f"{k}={v}" for k, v in GROUP_SETTINGS.items()])
    yield kafka, gw.bootstrap
    problems = g.finish()
    if problems:
        pytest.fail("\n\n".join(problems))


# --- the script's vocabulary -----------------------------------------------------------------

A, B, C, D = (str(uuid.UUID(int=i + 0xA11CE)) for i in range(4))  # client-made member ids
NO_TASKS: dict[str, Any] = {"active_tasks": [], "standby_tasks": [], "warmup_tasks": []}
MISSING_INTERNAL_TOPICS = 3


def info(name: str, partitions: int = 0, **configs: str) -> dict[str, Any]:
    return {
        "name": name,
        "partitions": partitions,
        "replication_factor": 0,
        "topic_configs": [{"key": k.replace("_", "."), "value": v} for k, v in configs.items()],
    }


def sub(
    sid: str,
    sources: list[str] | None = None,
    *,
    regex: list[str] | None = None,
    changelogs: list[dict[str, Any]] | None = None,
    sinks: list[str] | None = None,
    repartition: list[dict[str, Any]] | None = None,
    copartition: list[tuple[list[int], list[int], list[int]]] | None = None,
) -> dict[str, Any]:
    return {
        "subtopology_id": sid,
        "source_topics": sources or [],
        "source_topic_regex": regex or [],
        "state_changelog_topics": changelogs or [],
        "repartition_sink_topics": sinks or [],
        "repartition_source_topics": repartition or [],
        "copartition_groups": [
            {"source_topics": a, "source_topic_regex": b, "repartition_source_topics": c}
            for a, b, c in copartition or []
        ],
    }


def topology(*subs: dict[str, Any], epoch: int = 0) -> dict[str, Any]:
    return {"epoch": epoch, "subtopologies": list(subs)}


def repartition_name(s: Session) -> str:
    return f"{s.group()}-counts-repartition"


def changelog_name(s: Session) -> str:
    return f"{s.group()}-counts-store-changelog"


def word_count(s: Session, epoch: int = 0, repartition_partitions: int = 0) -> dict[str, Any]:
    """Kafka Streams' word count: groupBy writes a repartition topic, count keeps a store."""
    return topology(
        sub("0", [s.topic("words")], sinks=[repartition_name(s)]),
        sub(
            "1",
            changelogs=[info(changelog_name(s), cleanup_policy="compact")],
            repartition=[info(repartition_name(s), repartition_partitions, cleanup_policy="delete")],
        ),
        epoch=epoch,
    )


def stateless(s: Session, epoch: int = 0) -> dict[str, Any]:
    return topology(sub("0", [s.topic("words")]), epoch=epoch)


def canon_tasks(tasks: Any) -> Any:
    if tasks is None:
        return None
    return sorted(
        ({"subtopology_id": t["subtopology_id"], "partitions": sorted(t["partitions"])} for t in tasks),
        key=lambda t: t["subtopology_id"],
    )


def hb_fields(s: Session, member: str, epoch: int, **over: Any) -> dict[str, Any]:
    return streams_heartbeat_fields(s.group(), member, epoch, **over)


def hb(s: Session, label: str, member: str, epoch: int, *, version: int = 0, **over: Any) -> dict[str, Any]:
    """A heartbeat whose answer is recorded (tasks in a canonical order)."""
    r = plain(s.raw(88, version, **hb_fields(s, member, epoch, **over)))
    for k in ("active_tasks", "standby_tasks", "warmup_tasks"):
        r[k] = canon_tasks(r[k])
    if r["status"] is not None:
        r["status"] = sorted(r["status"], key=lambda x: x["status_code"])
    for e in r["partitions_by_user_endpoint"] or []:
        # Kafka builds these lists from an immutable Java map, whose iteration order is salted
        # per JVM start: the order of the topics carries no meaning.
        for k in ("active_partitions", "standby_partitions"):
            e[k] = sorted(e[k], key=lambda tp: tp["topic"])
    s.note(label, r)
    return r


def quiet_hb(s: Session, member: str, epoch: int, *, version: int = 0, **over: Any) -> dict[str, Any]:
    r: dict[str, Any] = plain(s.raw(88, version, **hb_fields(s, member, epoch, **over)))
    return r


def join_fields(s: Session, member: str, topo: dict[str, Any], **over: Any) -> dict[str, Any]:
    return {"topology": topo, "process_id": f"process-{member[-4:]}", "client_tags": [], **NO_TASKS, **over}


def join(
    s: Session, label: str, member: str, topo: dict[str, Any], *, version: int = 0, **over: Any
) -> dict[str, Any]:
    return hb(s, label, member, 0, version=version, **join_fields(s, member, topo, **over))


class Members:
    """The members' epochs and owned tasks as a Streams client keeps them (not recorded)."""

    def __init__(self, s: Session, version: int = 0) -> None:
        self.s = s
        self.version = version  # of their StreamsGroupHeartbeat
        self.epoch: dict[str, int] = {}
        self.owned: dict[str, list[dict[str, Any]]] = {}
        self.standby: dict[str, list[dict[str, Any]]] = {}

    def take(self, member: str, r: dict[str, Any]) -> dict[str, Any]:
        assert r["error_code"] == "none", r
        self.epoch[member] = r["member_epoch"]
        if r["active_tasks"] is not None:
            self.owned[member] = canon_tasks(r["active_tasks"])
        if r["standby_tasks"] is not None:
            self.standby[member] = canon_tasks(r["standby_tasks"])
        return r

    def join(
        self, member: str, topo: dict[str, Any], label: str | None = None, **over: Any
    ) -> dict[str, Any]:
        v = self.version
        if label:
            return self.take(member, join(self.s, label, member, topo, version=v, **over))
        return self.take(
            member, quiet_hb(self.s, member, 0, version=v, **join_fields(self.s, member, topo, **over))
        )

    def beat(self, member: str, label: str | None = None, **over: Any) -> dict[str, Any]:
        fields = {
            "active_tasks": self.owned.get(member, []),
            "standby_tasks": self.standby.get(member, []),
            "warmup_tasks": [],
            **over,
        }
        v = self.version
        if label:
            return self.take(member, hb(self.s, label, member, self.epoch[member], version=v, **fields))
        return self.take(member, quiet_hb(self.s, member, self.epoch[member], version=v, **fields))

    def converge(self, *members: str, rounds: int = 8) -> None:
        """Heartbeat round-robin until the group is Stable (revocations acknowledged)."""
        for _ in range(rounds):
            for m in members:
                self.beat(m)
            d = plain(self.s.raw(89, 0, group_ids=[self.s.group()], include_authorized_operations=False))
            if d["groups"][0]["group_state"] == "Stable":
                return
        raise AssertionError(f"{self.s.backend}: group not stable: {d}")

    def until_topics_ready(self, member: str, timeout: float = 30.0) -> None:
        """Heartbeat until no internal topic is missing (the coordinator creates them)."""
        deadline = time.monotonic() + timeout
        while True:
            r = self.beat(member)
            if not any(st["status_code"] == MISSING_INTERNAL_TOPICS for st in r["status"] or []):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.s.backend}: internal topics not created: {r}")
            time.sleep(0.2)

    def note_tasks(self, label: str) -> None:
        """Every member's owned tasks, by member (the normaliser names the members)."""
        self.s.note(label, {m: self.owned.get(m, []) for m in sorted(self.owned, key=self.s.norm.member)})

    def note_standby(self, label: str) -> None:
        """Every member's standby tasks, by member."""
        self.s.note(label, {m: self.standby.get(m, []) for m in sorted(self.standby, key=self.s.norm.member)})


def describe(
    s: Session,
    label: str,
    *groups: str,
    ops: bool = False,
    version: int = 0,
    topology_description: bool = False,
) -> dict[str, Any]:
    v1 = {"include_topology_description": topology_description} if version >= 1 else {}
    r = plain(
        s.raw(89, version, group_ids=list(groups) or [s.group()], include_authorized_operations=ops, **v1)
    )
    r["groups"].sort(key=lambda g: g["group_id"])  # Kafka answers in coordinator-partition order
    for g in r["groups"]:
        for m in g["members"]:
            for a in ("assignment", "target_assignment"):
                for k in ("active_tasks", "standby_tasks", "warmup_tasks"):
                    m[a][k] = canon_tasks(m[a][k])
        g["members"].sort(key=lambda m: s.norm.member(m["member_id"]))
        if g["topology"] is not None:
            g["topology"]["subtopologies"].sort(key=lambda t: t["subtopology_id"])
    s.note(label, r)
    return r


def settle() -> None:
    """Kafka's group coordinator sees a new topic a moment after Metadata shows it (its metadata
    image is published separately); a join in between would see the topic missing."""
    time.sleep(0.5)


def setup(s: Session, partitions: int = 4, *internal: tuple[str, int]) -> None:
    """The source topic, any pre-created internal topics, and the group's coordinator."""
    s.create_topic(s.topic("words"), partitions)
    for name, n in internal:
        s.create_topic(name, n)
    s.wait_coordinator(s.group())
    settle()


def ready_word_count(s: Session, members: Members, *ids: str, partitions: int = 4) -> None:
    """A word count whose internal topics exist, joined by `ids` and stable (not recorded)."""
    setup(s, partitions, (repartition_name(s), partitions), (changelog_name(s), partitions))
    for m in ids:
        members.join(m, word_count(s))
    members.converge(*ids)


def topic_partitions(s: Session, label: str, *names: str) -> None:
    md = plain(
        s.raw(
            3,
            12,
            topics=[{"name": n, "topic_id": uuid.UUID(int=0)} for n in names],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    )
    s.note(label, {t["name"]: (t["error_code"], len(t["partitions"])) for t in md["topics"]})


# --- scenarios: join ---------------------------------------------------------------------------


def scenario_join_stateless(s: Session) -> None:
    """A one-subtopology topology over an existing topic: every task at once, then stable."""
    setup(s, 3)
    members = Members(s)
    members.join(A, stateless(s), "join")
    members.beat(A, "heartbeat after join")
    describe(s, "describe stable")


def scenario_join_word_count_topics_exist(s: Session) -> None:
    ready_word_count(s, Members(s), A)
    describe(s, "describe")


def scenario_join_creates_internal_topics(s: Session) -> None:
    """Missing repartition and changelog topics: MISSING_INTERNAL_TOPICS, then the coordinator
    creates them with the derived partition counts and the topology's configs."""
    setup(s, 3)
    members = Members(s)
    members.join(A, word_count(s), "join")
    members.until_topics_ready(A)
    topic_partitions(s, "internal topics", repartition_name(s), changelog_name(s))
    members.converge(A)
    members.note_tasks("tasks")
    describe(s, "describe")


def scenario_internal_topic_configs(s: Session) -> None:
    setup(s, 2)
    members = Members(s)
    members.join(A, word_count(s))
    members.until_topics_ready(A)
    r = plain(
        s.raw(
            32,
            4,
            resources=[
                {"resource_type": 2, "resource_name": n, "configuration_keys": ["cleanup.policy"]}
                for n in (repartition_name(s), changelog_name(s))
            ],
            include_synonyms=False,
            include_documentation=False,
        )
    )
    s.note(
        "cleanup.policy",
        {x["resource_name"]: [(c["name"], c["value"]) for c in x["configs"]] for x in r["results"]},
    )


def scenario_join_heartbeat_unchanged(s: Session) -> None:
    """A heartbeat that reports the tasks it owns gets null task lists back."""
    members = Members(s)
    ready_word_count(s, members, A)
    members.beat(A, "steady heartbeat")
    members.beat(A, "another")


def scenario_heartbeat_reporting_fewer_tasks(s: Session) -> None:
    """A member that reports fewer tasks than it has is sent its full assignment again."""
    members = Members(s)
    ready_word_count(s, members, A)
    members.owned[A] = members.owned[A][:1]
    members.beat(A, "reporting fewer tasks")


def scenario_two_processes(s: Session) -> None:
    """A second process joins: the first revokes, the second gets tasks once released."""
    members = Members(s)
    ready_word_count(s, members, A)
    members.join(B, word_count(s), "second joins")
    members.beat(A, "first told to revoke")
    members.beat(A, "first acknowledges")
    members.beat(B, "second heartbeats")
    members.converge(A, B)
    s.note("task counts", sorted(sum(len(t["partitions"]) for t in ts) for ts in members.owned.values()))
    describe(s, "describe two members")


def scenario_two_members_one_process(s: Session) -> None:
    """Two stream threads of one process."""
    members = Members(s)
    setup(s, 4, (repartition_name(s), 4), (changelog_name(s), 4))
    members.join(A, word_count(s), process_id="process-shared")
    members.join(B, word_count(s), process_id="process-shared")
    members.converge(A, B)
    members.note_tasks("tasks")


def scenario_three_processes(s: Session) -> None:
    """A third process joins a stable group of two: who gives up which task."""
    members = Members(s)
    ready_word_count(s, members, A, B)
    members.join(C, word_count(s))
    members.converge(A, B, C)
    members.note_tasks("tasks")
    describe(s, "describe three members")


def scenario_four_joins_in_a_row(s: Session) -> None:
    """Four processes join a two-partition word count one after another, no heartbeat in
    between: each join's target places the tasks the first member gives up on equally loaded
    processes, a tie Kafka's assignor breaks by its priority queue's heap order (issue 31)."""
    setup(s, 2, (repartition_name(s), 2), (changelog_name(s), 2))
    members = Members(s)
    for name, m in zip("ABCD", (A, B, C, D), strict=True):
        members.join(m, word_count(s), f"join {name}")
    describe(s, "describe after the joins")
    for name, m in zip("ABCD", (A, B, C, D), strict=True):
        members.beat(m, f"heartbeat {name}")
    describe(s, "describe after the heartbeats")
    members.converge(A, B, C, D)
    members.note_tasks("tasks")


def scenario_join_with_endpoint_rack_tags(s: Session) -> None:
    setup(s, 2)
    members = Members(s)
    members.join(
        A,
        stateless(s),
        "join",
        rack_id="rack-1",
        user_endpoint={"host": "localhost", "port": 8080},
        client_tags=[{"key": "zone", "value": "eu-1"}],
    )
    describe(s, "describe")


def scenario_endpoints_two_members(s: Session) -> None:
    """Interactive-query metadata: two members with endpoints, each heartbeat naming the
    endpoint information epoch it has seen."""
    setup(s, 4, (repartition_name(s), 4), (changelog_name(s), 4))
    members = Members(s)
    first = members.join(A, word_count(s), "A joins", user_endpoint={"host": "a", "port": 1})
    members.converge(A)
    members.join(B, word_count(s), "B joins", user_endpoint={"host": "b", "port": 2})
    members.beat(A, "A, epoch 0 seen", endpoint_information_epoch=0)
    seen = plain(
        s.raw(88, 0, **hb_fields(s, B, members.epoch[B], **{**NO_TASKS, "active_tasks": members.owned[B]}))
    )
    s.note("B's endpoint information epoch", seen["endpoint_information_epoch"])
    members.beat(B, "B, current epoch seen", endpoint_information_epoch=seen["endpoint_information_epoch"])
    del first


def scenario_process_change_bumps_epoch(s: Session) -> None:
    members = Members(s)
    ready_word_count(s, members, A)
    members.beat(A, "process id changes", process_id="process-moved")
    describe(s, "describe")


# --- scenarios: topology configuration -------------------------------------------------------


def scenario_missing_source_topic(s: Session) -> None:
    s.wait_coordinator(s.group())
    members = Members(s)
    members.join(A, stateless(s), "join")
    members.beat(A, "heartbeat")
    describe(s, "describe not ready")


def scenario_missing_source_topic_then_created(s: Session) -> None:
    s.wait_coordinator(s.group())
    members = Members(s)
    members.join(A, stateless(s), "join")
    s.create_topic(s.topic("words"), 2)
    deadline = time.monotonic() + 30
    while members.beat(A)["status"]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    members.converge(A)
    members.note_tasks("tasks")
    describe(s, "describe")


def scenario_source_regex_no_match(s: Session) -> None:
    s.wait_coordinator(s.group())
    join(s, "join", A, topology(sub("0", regex=[f"nothing-{s.group()}-.*"])))


def scenario_source_regex_matches(s: Session) -> None:
    s.create_topic(s.topic("ra"), 2)
    s.create_topic(s.topic("rb"), 3)
    s.wait_coordinator(s.group())
    settle()
    join(s, "join", A, topology(sub("0", regex=[f"r[ab]-{s.names['run']}"])))


def scenario_copartition_mismatch(s: Session) -> None:
    """A join of two source topics with 2 and 3 partitions."""
    s.create_topic(s.topic("left"), 2)
    s.create_topic(s.topic("right"), 3)
    s.wait_coordinator(s.group())
    settle()
    topo = topology(sub("0", [s.topic("left"), s.topic("right")], copartition=[([0, 1], [], [])]))
    join(s, "join", A, topo)
    describe(s, "describe")


def scenario_copartition_repartition_follows_source(s: Session) -> None:
    """A repartition topic copartitioned with a 3-partition source takes 3 partitions, though
    its writer reads a 5-partition topic."""
    s.create_topic(s.topic("wide"), 5)
    s.create_topic(s.topic("table"), 3)
    s.wait_coordinator(s.group())
    settle()
    rep = f"{s.group()}-join-repartition"
    topo = topology(
        sub("0", [s.topic("wide")], sinks=[rep]),
        sub("1", [s.topic("table")], repartition=[info(rep)], copartition=[([0], [], [0])]),
    )
    members = Members(s)
    members.join(A, topo, "join")
    members.until_topics_ready(A)
    topic_partitions(s, "repartition topic", rep)


def scenario_repartition_fixed_partitions(s: Session) -> None:
    """A repartition topic with a fixed count (Streams' `Repartitioned.withNumberOfPartitions`)."""
    setup(s, 2)
    members = Members(s)
    members.join(A, word_count(s, repartition_partitions=5), "join")
    members.until_topics_ready(A)
    topic_partitions(s, "internal topics", repartition_name(s), changelog_name(s))
    members.converge(A)
    members.note_tasks("tasks")


def scenario_repartition_chain(s: Session) -> None:
    """A repartition topic feeding another: counts propagate through both."""
    setup(s, 3)
    r1, r2 = f"{s.group()}-a-repartition", f"{s.group()}-b-repartition"
    topo = topology(
        sub("0", [s.topic("words")], sinks=[r1]),
        sub("1", sinks=[r2], repartition=[info(r1)]),
        sub("2", repartition=[info(r2)]),
    )
    members = Members(s)
    members.join(A, topo, "join")
    members.until_topics_ready(A)
    topic_partitions(s, "repartition topics", r1, r2)


def scenario_changelog_wrongly_partitioned(s: Session) -> None:
    setup(s, 4, (repartition_name(s), 4), (changelog_name(s), 2))
    members = Members(s)
    members.join(A, word_count(s), "join")
    describe(s, "describe")


def scenario_repartition_wrongly_partitioned(s: Session) -> None:
    """An existing repartition topic whose count differs from the topology's fixed count."""
    setup(s, 2, (repartition_name(s), 3), (changelog_name(s), 2))
    join(s, "join", A, word_count(s, repartition_partitions=2))


def scenario_internal_topic_is_source(s: Session) -> None:
    """A changelog topic that is also a source topic (Kafka's topology validation)."""
    setup(s, 2)
    topo = topology(sub("0", [s.topic("words")], changelogs=[info(s.topic("words"))]))
    join(s, "join", A, topo)


def scenario_repartition_sink_unknown(s: Session) -> None:
    """A sink naming a repartition topic no subtopology reads."""
    setup(s, 2)
    join(s, "join", A, topology(sub("0", [s.topic("words")], sinks=[f"{s.group()}-nowhere-repartition"])))


def scenario_copartition_index_out_of_range(s: Session) -> None:
    setup(s, 2)
    join(s, "join", A, topology(sub("0", [s.topic("words")], copartition=[([0, 3], [], [])])))


def scenario_newer_topology_epoch(s: Session) -> None:
    """A member rejoining with topology epoch 1 replaces the group's topology."""
    members = Members(s)
    setup(s, 2)
    members.join(A, stateless(s))
    members.converge(A)
    quiet_hb(s, A, -1)
    join(s, "rejoin with epoch 1", A, stateless(s, epoch=1))
    describe(s, "describe")


def scenario_stale_topology(s: Session) -> None:
    """A second member joining with an older topology epoch than the group's."""
    members = Members(s)
    setup(s, 2)
    members.join(A, stateless(s, epoch=2))
    members.converge(A)
    members.join(B, stateless(s, epoch=1), "older topology")
    describe(s, "describe")


def scenario_topology_changed_same_epoch(s: Session) -> None:
    """Another topology under the group's epoch."""
    members = Members(s)
    setup(s, 2, (repartition_name(s), 2), (changelog_name(s), 2))
    members.join(A, stateless(s))
    members.converge(A)
    join(s, "different topology, same epoch", B, word_count(s))


def scenario_negative_topology_epoch(s: Session) -> None:
    setup(s, 2)
    join(s, "join", A, stateless(s, epoch=-1))


def scenario_changelog_with_partitions(s: Session) -> None:
    """A changelog topic with a partition count (Kafka derives them)."""
    setup(s, 2)
    topo = topology(sub("0", [s.topic("words")], changelogs=[info(f"{s.group()}-store-changelog", 3)]))
    join(s, "join", A, topo)


def scenario_duplicate_subtopology_ids(s: Session) -> None:
    setup(s, 2)
    join(s, "join", A, topology(sub("0", [s.topic("words")]), sub("0", [s.topic("words")])))


def scenario_repartition_source_without_writer(s: Session) -> None:
    """A repartition source topic no subtopology writes, with no fixed count."""
    setup(s, 2)
    topo = topology(
        sub("0", [s.topic("words")]), sub("1", repartition=[info(f"{s.group()}-orphan-repartition")])
    )
    join(s, "join", A, topo)


def scenario_owned_task_unknown_subtopology(s: Session) -> None:
    members = Members(s)
    ready_word_count(s, members, A)
    hb(
        s,
        "unknown subtopology",
        A,
        members.epoch[A],
        active_tasks=[{"subtopology_id": "9", "partitions": [0]}],
        standby_tasks=[],
        warmup_tasks=[],
    )


def scenario_owned_task_out_of_range(s: Session) -> None:
    members = Members(s)
    ready_word_count(s, members, A)
    hb(
        s,
        "partition out of range",
        A,
        members.epoch[A],
        active_tasks=[{"subtopology_id": "0", "partitions": [7]}],
        standby_tasks=[],
        warmup_tasks=[],
    )


def scenario_shutdown_application(s: Session) -> None:
    """A member asks the whole application to shut down."""
    members = Members(s)
    ready_word_count(s, members, A, B)
    members.beat(A, "A asks for shutdown", shutdown_application=True)
    members.beat(B, "B is told")


# --- scenarios: request validation ---------------------------------------------------------------


def _refusal(**over: Any) -> Callable[[Session], None]:
    def scenario(s: Session) -> None:
        setup(s, 2)
        fields = join_fields(s, A, stateless(s))
        fields.update(over)
        epoch = fields.pop("member_epoch", 0)
        hb(s, "heartbeat", fields.pop("member_id", A), epoch, **fields)

    return scenario


def scenario_heartbeat_without_tasks_after_join(s: Session) -> None:
    """A heartbeat with all three task lists null (nothing changed on the client)."""
    members = Members(s)
    ready_word_count(s, members, A)
    hb(s, "null tasks", A, members.epoch[A])


def scenario_one_task_list_null(s: Session) -> None:
    members = Members(s)
    ready_word_count(s, members, A)
    hb(
        s,
        "one null list",
        A,
        members.epoch[A],
        active_tasks=members.owned[A],
        standby_tasks=[],
        warmup_tasks=None,
    )


def scenario_topology_on_heartbeat(s: Session) -> None:
    members = Members(s)
    ready_word_count(s, members, A)
    hb(s, "topology after join", A, members.epoch[A], topology=word_count(s), **NO_TASKS)


# --- scenarios: leave and fencing ----------------------------------------------------------------


def scenario_leave_last_member(s: Session) -> None:
    members = Members(s)
    ready_word_count(s, members, A)
    hb(s, "leave", A, -1)
    describe(s, "describe empty")
    hb(s, "leave again", A, -1)


def scenario_leave_one_of_two(s: Session) -> None:
    members = Members(s)
    ready_word_count(s, members, A, B)
    hb(s, "A leaves", A, -1)
    members.beat(B, "B gets everything")
    members.converge(B)
    describe(s, "describe")


def scenario_leave_unknown_group(s: Session) -> None:
    s.wait_coordinator(s.group())
    hb(s, "leave", A, -1)


def scenario_dynamic_member_leaves_with_minus_two(s: Session) -> None:
    """Epoch -2 from a member without an instance id."""
    members = Members(s)
    ready_word_count(s, members, A)
    hb(s, "leave -2 without instance", A, -2)


def scenario_greater_epoch_fenced(s: Session) -> None:
    members = Members(s)
    ready_word_count(s, members, A)
    hb(s, "epoch+5", A, members.epoch[A] + 5, **NO_TASKS)


def scenario_smaller_epoch_fenced(s: Session) -> None:
    members = Members(s)
    ready_word_count(s, members, A)
    members.join(B, word_count(s))
    members.converge(A, B)
    hb(
        s,
        "epoch-1 with more tasks",
        A,
        members.epoch[A] - 1,
        active_tasks=members.owned[B],
        standby_tasks=[],
        warmup_tasks=[],
    )


def scenario_previous_epoch_accepted(s: Session) -> None:
    """A member's previous epoch with a subset of its tasks is accepted (a lost answer)."""
    members = Members(s)
    ready_word_count(s, members, A)
    members.join(B, word_count(s))
    members.converge(A, B)
    describe(s, "describe before")
    r = plain(s.raw(89, 0, group_ids=[s.group()], include_authorized_operations=False))
    hb(s, "previous epoch", B, members.epoch[B] - 1, **NO_TASKS)
    del r


def scenario_unknown_member(s: Session) -> None:
    members = Members(s)
    ready_word_count(s, members, A)
    hb(s, "unknown member", B, members.epoch[A], **NO_TASKS)


def scenario_unknown_group_heartbeat(s: Session) -> None:
    s.wait_coordinator(s.group())
    hb(s, "unknown group", A, 3, **NO_TASKS)


def scenario_rejoin_after_fencing(s: Session) -> None:
    """A fenced member rejoins with epoch 0 and the same member id."""
    members = Members(s)
    ready_word_count(s, members, A)
    hb(s, "fenced", A, members.epoch[A] + 1, **NO_TASKS)
    members.join(A, word_count(s), "rejoin")
    describe(s, "describe")


# --- scenarios: static members -------------------------------------------------------------------


def scenario_static_join(s: Session) -> None:
    setup(s, 2)
    members = Members(s)
    members.join(A, stateless(s), "join", instance_id="instance-1")
    describe(s, "describe")


def scenario_static_leave(s: Session) -> None:
    setup(s, 2)
    members = Members(s)
    members.join(A, stateless(s), instance_id="instance-1")
    members.converge(A)
    hb(s, "static leave", A, -2, instance_id="instance-1")
    describe(s, "describe after static leave")


def scenario_static_rejoin_new_member_id(s: Session) -> None:
    """A static member restarts with a new member id: it takes its place and tasks."""
    setup(s, 2)
    members = Members(s)
    members.join(A, stateless(s), instance_id="instance-1")
    members.converge(A)
    quiet_hb(s, A, -2, instance_id="instance-1")
    members.join(B, stateless(s), "rejoin as B", instance_id="instance-1")
    describe(s, "describe")


def scenario_static_instance_in_use(s: Session) -> None:
    """A second member with a live member's instance id."""
    setup(s, 2)
    members = Members(s)
    members.join(A, stateless(s), instance_id="instance-1")
    members.converge(A)
    join(s, "same instance id", B, stateless(s), instance_id="instance-1")


def scenario_static_leave_unknown_instance(s: Session) -> None:
    """Epoch -2 from a member whose instance id the group does not know."""
    setup(s, 2)
    members = Members(s)
    members.join(A, stateless(s), instance_id="instance-1")
    members.converge(A)
    hb(s, "static leave, other instance", A, -2, instance_id="instance-2")
    hb(s, "static leave, unknown member", B, -2, instance_id="instance-1")


def scenario_static_rejoin_same_member_id(s: Session) -> None:
    """A static member leaves with -2 and rejoins with its own member id."""
    setup(s, 2)
    members = Members(s)
    members.join(A, stateless(s), instance_id="instance-1")
    members.converge(A)
    quiet_hb(s, A, -2, instance_id="instance-1")
    members.join(A, stateless(s), "rejoin", instance_id="instance-1")
    describe(s, "describe")


# --- scenarios: standby replicas -----------------------------------------------------------------


def set_group_configs(s: Session, label: str, **values: str | None) -> None:
    """IncrementalAlterConfigs of the group's configs (`streams_num_standby_replicas="1"`: the
    name with dots; None deletes it)."""
    r = plain(
        s.raw(
            44,
            1,
            resources=[
                {
                    "resource_type": 32,
                    "resource_name": s.group(),
                    "configs": [
                        {
                            "name": name.replace("_", "."),
                            "config_operation": 0 if value is not None else 1,
                            "value": value,
                        }
                        for name, value in values.items()
                    ],
                }
            ],
            validate_only=False,
        )
    )
    s.note(label, r)


def set_standby_replicas(s: Session, label: str, value: str | None) -> None:
    """IncrementalAlterConfigs of the group's `streams.num.standby.replicas` (None deletes it)."""
    set_group_configs(s, label, streams_num_standby_replicas=value)


def describe_group_configs(s: Session, label: str, *names: str) -> None:
    r = plain(
        s.raw(
            32,
            4,
            resources=[{"resource_type": 32, "resource_name": s.group(), "configuration_keys": list(names)}],
            include_synonyms=False,
            include_documentation=False,
        )
    )
    s.note(label, r)


def scenario_session_and_heartbeat_group_configs(s: Session) -> None:
    """The group's own `streams.session.timeout.ms` and `streams.heartbeat.interval.ms`: within
    the broker's `group.streams.min/max.*` bounds they are taken, described, and the next
    heartbeat answers the group's interval; outside them, or a session not above the interval,
    INVALID_CONFIG with Kafka's words; deleted, the broker's values are back. (With the default
    bounds a session is always above the interval, so that check is a unit test's.)"""
    members = Members(s)
    ready_word_count(s, members, A)
    session, interval = "streams.session.timeout.ms", "streams.heartbeat.interval.ms"
    describe_group_configs(s, "describe defaults", session, interval)
    set_group_configs(s, "set both", streams_session_timeout_ms="50000", streams_heartbeat_interval_ms="6000")
    settle()  # Kafka applies group configs from its metadata log, a moment later
    describe_group_configs(s, "describe after set", session, interval)
    members.beat(A, "A: the group's interval")
    set_group_configs(s, "session too low", streams_session_timeout_ms="1000")
    set_group_configs(s, "session too high", streams_session_timeout_ms="60001")
    set_group_configs(s, "interval too low", streams_heartbeat_interval_ms="10")
    set_group_configs(s, "interval too high", streams_heartbeat_interval_ms="15001")
    set_group_configs(
        s,
        "interval not below the session",
        streams_session_timeout_ms="45000",
        streams_heartbeat_interval_ms="15000",
    )
    set_group_configs(s, "not a number", streams_session_timeout_ms="soon")
    set_group_configs(s, "delete both", streams_session_timeout_ms=None, streams_heartbeat_interval_ms=None)
    settle()
    describe_group_configs(s, "describe after delete", session, interval)
    members.beat(A, "A: the broker's interval again")
    members.beat(A, "A: the broker's interval again")


def scenario_initial_rebalance_delay(s: Session) -> None:
    """The group's `streams.initial.rebalance.delay.ms` (2 s): the first member and one joining
    within the delay are answered ASSIGNMENT_DELAYED and no tasks; once it has passed both share
    the first assignment; the group describes as it goes."""
    setup(s, 4, (repartition_name(s), 4), (changelog_name(s), 4))
    set_group_configs(s, "IncrementalAlterConfigs delay", streams_initial_rebalance_delay_ms="2000")
    settle()  # Kafka applies group configs from its metadata log, a moment later
    members = Members(s)
    members.join(A, word_count(s), "join A: delayed")
    members.join(B, word_count(s), "join B: delayed")
    members.beat(A, "A within the delay")
    describe(s, "describe within the delay")
    time.sleep(2.5)
    members.beat(A, "A after the delay")
    members.beat(B, "B after the delay")
    members.converge(A, B)
    members.note_tasks("active after the delay")
    describe(s, "describe after the delay")


def scenario_assignment_interval(s: Session) -> None:
    """The group's `streams.assignment.interval.ms` (2 s; refused below 0 and above the broker's
    maximum, described): A joins and is assigned every task at once; B joining within the
    interval, and A's next heartbeat, are answered ASSIGNMENT_DELAYED (B with no tasks, at the
    assignment epoch there is); once the interval has passed A's heartbeat computes the target
    and both share the tasks. B then leaves: A's heartbeat within the interval is delayed again,
    the one after it takes every task."""
    setup(s, 4, (repartition_name(s), 4), (changelog_name(s), 4))
    set_group_configs(s, "interval below zero", streams_assignment_interval_ms="-1")
    set_group_configs(s, "interval above the maximum", streams_assignment_interval_ms="15001")
    set_group_configs(s, "IncrementalAlterConfigs interval", streams_assignment_interval_ms="2000")
    settle()  # Kafka applies group configs from its metadata log, a moment later
    describe_group_configs(s, "describe the interval", "streams.assignment.interval.ms")
    members = Members(s)
    members.join(A, word_count(s), "join A: assigned at once")
    members.join(B, word_count(s), "join B: delayed")
    members.beat(A, "A within the interval")
    describe(s, "describe within the interval")
    time.sleep(2.5)
    members.beat(A, "A after the interval")
    members.beat(B, "B after the interval")
    members.converge(A, B)
    members.note_tasks("active after the interval")
    describe(s, "describe after the interval")
    hb(s, "B leaves", B, -1)
    members.beat(A, "A within the interval after B left")
    time.sleep(2.5)
    members.beat(A, "A after the interval: every task")
    members.converge(A)
    describe(s, "describe after B left")


def scenario_standby_replicas_group_config(s: Session) -> None:
    """`streams.num.standby.replicas`=1 on the group, then two processes join: each keeps a
    standby of the stateful tasks the other runs; a third process joins and the tasks and
    standbys spread; the group describes them."""
    setup(s, 2, (repartition_name(s), 2), (changelog_name(s), 2))
    set_standby_replicas(s, "IncrementalAlterConfigs", "1")
    members = Members(s)
    members.join(A, word_count(s), "join A")
    members.join(B, word_count(s), "join B")
    members.converge(A, B)
    members.note_tasks("active, two processes")
    members.note_standby("standby, two processes")
    members.join(C, word_count(s), "join C")
    members.converge(A, B, C)
    members.note_tasks("active, three processes")
    members.note_standby("standby, three processes")
    describe(s, "describe")


def scenario_standby_promoted_when_the_owner_leaves(s: Session) -> None:
    """Two processes with one standby each; one leaves: the other's standbys become its active
    tasks, answer by answer."""
    setup(s, 2, (repartition_name(s), 2), (changelog_name(s), 2))
    set_standby_replicas(s, "IncrementalAlterConfigs", "1")
    members = Members(s)
    members.join(A, word_count(s))
    members.join(B, word_count(s))
    members.converge(A, B)
    hb(s, "B leaves", B, -1, **NO_TASKS)
    members.beat(A, "A after B left")
    members.beat(A, "A again")
    members.note_standby("standby")


def scenario_standby_two_members_one_process(s: Session) -> None:
    """Two members of one process and a member of another, one standby each: a process never
    holds a task twice, so the standbys of the shared process's tasks all go to the other."""
    setup(s, 4, (repartition_name(s), 4), (changelog_name(s), 4))
    set_standby_replicas(s, "IncrementalAlterConfigs", "1")
    members = Members(s)
    members.join(A, word_count(s), "join A", process_id="process-shared")
    members.join(B, word_count(s), "join B", process_id="process-shared")
    members.join(C, word_count(s), "join C")
    members.converge(A, B, C)
    members.note_tasks("active")
    members.note_standby("standby")
    hb(s, "C leaves", C, -1, **NO_TASKS)
    members.converge(A, B)
    members.note_tasks("active, one process")
    members.note_standby("standby, one process")


def scenario_standby_endpoints(s: Session) -> None:
    """Interactive-query metadata with standbys: each member's endpoint lists the source
    partitions of its standby tasks too."""
    setup(s, 2, (repartition_name(s), 2), (changelog_name(s), 2))
    set_standby_replicas(s, "IncrementalAlterConfigs", "1")
    members = Members(s)
    members.join(A, word_count(s), user_endpoint={"host": "a", "port": 1})
    members.join(B, word_count(s), user_endpoint={"host": "b", "port": 2})
    members.converge(A, B)
    r = members.beat(A, "A, epoch 0 seen", endpoint_information_epoch=0)
    # on both sides: the standbys' partitions are there to compare
    assert all(e["standby_partitions"] for e in r["partitions_by_user_endpoint"]), r


def scenario_standby_task_offsets(s: Session) -> None:
    """Three processes with two standbys per stateful task; a fourth joins reporting the
    changelog offsets of one task (state left on its disk): Kafka 4.4 ranks it as a standby
    candidate for that task, so a standby lands where the offsets say (without the offsets the
    standbys differ)."""
    setup(s, 4, (repartition_name(s), 4), (changelog_name(s), 4))
    set_standby_replicas(s, "IncrementalAlterConfigs", "2")
    members = Members(s)
    for m in (A, B, C):
        members.join(m, word_count(s))
    members.converge(A, B, C)
    members.note_tasks("active, three processes")
    members.note_standby("standby, three processes")
    offsets = [{"subtopology_id": "1", "partition": 2, "offset": 100}]
    members.join(D, word_count(s), "D joins with offsets", task_offsets=offsets, task_end_offsets=offsets)
    members.converge(A, B, C, D)
    members.note_tasks("active")
    members.note_standby("standby")
    describe(s, "describe")


def scenario_standby_replicas_above_the_max(s: Session) -> None:
    """A group config above `group.streams.max.standby.replicas` (2) is refused."""
    set_standby_replicas(s, "IncrementalAlterConfigs 3", "3")
    set_standby_replicas(s, "IncrementalAlterConfigs -1", "-1")


def scenario_api_versions(s: Session) -> None:
    """The versions of the streams group APIs each side serves."""
    r = plain(s.raw(18, 3, client_software_name="groupshift-e2e", client_software_version="1.0"))
    ranges = {k["api_key"]: [k["min_version"], k["max_version"]] for k in r["api_keys"]}
    s.note("ApiVersions", {str(k): ranges.get(k, "<absent>") for k in (88, 89, 93)})


# --- scenarios: describe -------------------------------------------------------------------------


def scenario_describe_unknown(s: Session) -> None:
    s.wait_coordinator(s.group())
    describe(s, "describe unknown")


def scenario_describe_authorized_operations(s: Session) -> None:
    members = Members(s)
    ready_word_count(s, members, A)
    describe(s, "with operations", ops=True)


def scenario_describe_several(s: Session) -> None:
    members = Members(s)
    ready_word_count(s, members, A)
    s.wait_coordinator(s.group("other"))
    describe(s, "describe two", s.group(), s.group("other"))


def scenario_describe_consumer_group(s: Session) -> None:
    """StreamsGroupDescribe of a consumer group."""
    setup(s, 2)
    cgh_join(s, s.group(), "consumer join")
    describe(s, "describe consumer group")


# --- scenarios: group types and migration -------------------------------------------------------


def cgh_join(s: Session, group: str, label: str) -> dict[str, Any]:
    r = plain(
        s.raw(
            68,
            0,
            group_id=group,
            member_id=str(uuid.UUID(int=0xC0FFEE)),
            member_epoch=0,
            instance_id=None,
            rack_id=None,
            rebalance_timeout=30000,
            subscribed_topic_names=[s.topic("words")],
            server_assignor=None,
            topic_partitions=[],
        )
    )
    s.note(label, {k: r[k] for k in ("error_code", "error_message", "member_epoch")})
    return r


def classic_join(s: Session, label: str) -> dict[str, Any]:
    """A classic member's JoinGroup v9: MEMBER_ID_REQUIRED, then the join with its member id."""
    from e2e.diffgroups import subscription

    def send(member_id: str) -> dict[str, Any]:
        r: dict[str, Any] = plain(
            s.raw(
                11,
                9,
                group_id=s.group(),
                session_timeout=30000,
                rebalance_timeout=10000,
                member_id=member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocols=[{"name": "range", "metadata": subscription([s.topic("words")])}],
                reason=None,
            )
        )
        s.note(label, {k: r[k] for k in ("error_code", "generation_id", "protocol_type", "protocol_name")})
        return r

    first = send("")
    if first["error_code"] != "member_id_required":
        return first
    return send(first["member_id"])


def commit_offsets(s: Session, label: str, member: str = "", epoch: int = -1) -> None:
    r = s.raw(
        8,
        9,
        group_id=s.group(),
        generation_id_or_member_epoch=epoch,
        member_id=member,
        group_instance_id=None,
        retention_time=-1,
        topics=[
            {
                "name": s.topic("words"),
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 42,
                        "committed_leader_epoch": -1,
                        "commit_timestamp": -1,
                        "committed_metadata": None,
                    }
                ],
            }
        ],
    )
    s.note(label, r)


def fetch_offsets(s: Session, label: str) -> None:
    r = plain(
        s.raw(
            9,
            9,
            groups=[{"group_id": s.group(), "member_id": None, "member_epoch": -1, "topics": None}],
            require_stable=False,
        )
    )
    s.note(label, r)


def list_group(s: Session, label: str) -> None:
    r = plain(s.raw(16, 5, states_filter=[], types_filter=[]))
    s.note(label, [g for g in r["groups"] if g["group_id"] == s.group()])


def scenario_consumer_group_id_taken(s: Session) -> None:
    """A streams member joining a live consumer group."""
    setup(s, 2)
    cgh_join(s, s.group(), "consumer join")
    join(s, "streams join", A, stateless(s))


def scenario_streams_group_id_taken_by_consumer(s: Session) -> None:
    setup(s, 2)
    join(s, "streams join", A, stateless(s))
    cgh_join(s, s.group(), "consumer join")


def scenario_streams_group_id_taken_by_classic(s: Session) -> None:
    setup(s, 2)
    join(s, "streams join", A, stateless(s))
    classic_join(s, "classic join")


def scenario_live_classic_group_refuses_streams(s: Session) -> None:
    setup(s, 2)
    classic_join(s, "classic join")
    join(s, "streams join", A, stateless(s))


def scenario_offline_migration_classic_to_streams(s: Session) -> None:
    """An empty classic group (committed offsets only) becomes a streams group, keeping them."""
    setup(s, 2)
    commit_offsets(s, "admin commit")
    list_group(s, "list before")
    members = Members(s)
    members.join(A, stateless(s), "streams join")
    list_group(s, "list after")
    fetch_offsets(s, "offsets kept")


def scenario_offline_migration_streams_to_classic(s: Session) -> None:
    """An empty streams group (everyone left) is taken over by a classic member; offsets stay."""
    setup(s, 2)
    members = Members(s)
    members.join(A, stateless(s))
    members.converge(A)
    commit_offsets(s, "member commit", A, members.epoch[A])
    quiet_hb(s, A, -1)
    list_group(s, "list empty streams group")
    classic_join(s, "classic join")
    list_group(s, "list after")
    fetch_offsets(s, "offsets kept")


def scenario_offline_migration_consumer_to_streams(s: Session) -> None:
    """An empty consumer group becomes a streams group."""
    setup(s, 2)
    cgh_join(s, s.group(), "consumer join")
    s.raw(
        68,
        0,
        group_id=s.group(),
        member_id=str(uuid.UUID(int=0xC0FFEE)),
        member_epoch=-1,
        instance_id=None,
        rack_id=None,
        rebalance_timeout=-1,
        subscribed_topic_names=None,
        server_assignor=None,
        topic_partitions=None,
    )
    join(s, "streams join", A, stateless(s))


def scenario_streams_commit_epochs(s: Session) -> None:
    """OffsetCommit by a streams member: its epoch, a stale one, an admin commit."""
    members = Members(s)
    ready_word_count(s, members, A)
    commit_offsets(s, "member epoch", A, members.epoch[A])
    commit_offsets(s, "stale epoch", A, members.epoch[A] + 3)
    commit_offsets(s, "admin while members", "", -1)
    fetch_offsets(s, "offsets")


def scenario_list_groups_streams_type(s: Session) -> None:
    members = Members(s)
    ready_word_count(s, members, A)
    list_group(s, "listed")
    r = plain(s.raw(16, 5, states_filter=[], types_filter=["streams"]))
    s.note("filtered by type", [g["group_type"] for g in r["groups"] if g["group_id"] == s.group()])


def scenario_describe_groups_classic_api(s: Session) -> None:
    """Classic DescribeGroups of a streams group (Dead; from v6 "Group X is not a classic group.")."""
    members = Members(s)
    ready_word_count(s, members, A)
    r = plain(s.raw(15, 5, groups=[s.group()], include_authorized_operations=False))
    s.note("DescribeGroups", r)
    # v6 (KIP-1043) carries the error: GROUP_ID_NOT_FOUND and Kafka's reason
    r = plain(s.raw(15, 6, groups=[s.group()], include_authorized_operations=False))
    s.note("DescribeGroups v6", r)


# --- scenarios: v1 (KIP-1331, KIP-1357) and StreamsGroupTopologyDescriptionUpdate ---------------


def scenario_v1_heartbeats(s: Session) -> None:
    """A member speaking v1 throughout: AcceptableRecoveryLag (int64) on a join, a heartbeat and
    the MISSING_INTERNAL_TOPICS answer, the default -1 on a leave and on errors;
    TopologyDescriptionRequired false (no description plugin)."""
    setup(s, 2)
    members = Members(s, version=1)
    members.join(A, word_count(s), "join v1")
    members.until_topics_ready(A)
    members.converge(A)
    r = members.beat(A, "heartbeat v1")
    assert r["acceptable_recovery_lag"] == int(GROUP_SETTINGS["group.streams.acceptable.recovery.lag"]), r
    hb(s, "fenced v1", A, members.epoch[A] + 5, version=1, **NO_TASKS)
    hb(s, "unknown member v1", B, 3, version=1, **NO_TASKS)
    hb(s, "leave v1", A, -1, version=1)
    hb(s, "leave again v1", A, -1, version=1)
    s.wait_coordinator(s.group("other"))
    hb(s, "unknown group v1", A, 1, version=1, group_id=s.group("other"), **NO_TASKS)


def scenario_v1_static_leave_and_refusals(s: Session) -> None:
    """v1 answers of a static member's join and -2 leave, and of request refusals (an empty
    member id, an epoch below -2): what AcceptableRecoveryLag each carries."""
    setup(s, 2)
    members = Members(s, version=1)
    members.join(A, stateless(s), "static join v1", instance_id="instance-1")
    members.converge(A)
    hb(s, "static leave v1", A, -2, version=1, instance_id="instance-1")
    hb(s, "empty member id v1", "", 0, version=1, **join_fields(s, "", stateless(s)))
    hb(s, "epoch -3 v1", A, -3, version=1, **NO_TASKS)


def scenario_v1_acceptable_recovery_lag_group_config(s: Session) -> None:
    """The group's own `streams.acceptable.recovery.lag` (an internal group config in Kafka
    4.4): set, a v1 heartbeat answers it; refused below 0 and as a non-number; described (or
    not) as Kafka describes it; deleted, the broker's value is back."""
    members = Members(s, version=1)
    ready_word_count(s, members, A)
    name = "streams.acceptable.recovery.lag"
    describe_group_configs(s, "describe it unset", name)
    set_group_configs(s, "set", streams_acceptable_recovery_lag="777")
    settle()  # Kafka applies group configs from its metadata log, a moment later
    members.beat(A, "the group's lag")
    describe_group_configs(s, "describe it", name)
    set_group_configs(s, "below 0", streams_acceptable_recovery_lag="-1")
    set_group_configs(s, "not a number", streams_acceptable_recovery_lag="many")
    set_group_configs(s, "a long", streams_acceptable_recovery_lag=str(2**40))
    settle()
    members.beat(A, "a long lag")
    set_group_configs(s, "delete", streams_acceptable_recovery_lag=None)
    settle()
    members.beat(A, "the broker's lag")


def scenario_warmup_and_assignor_configs(s: Session) -> None:
    """Kafka 4.4's `streams.task.offset.interval.ms`, `streams.num.warmup.replicas`,
    `streams.assignor.offload.enable` (internal) and `streams.assignor.name`: described unset by
    name (an internal one only when the broker gives it, in Kafka's order); refused below the
    broker's minimum, above its maximum, not a registered assignor or not a boolean, in Kafka's
    words; set, the heartbeats (v0 and v1) answer the group's TaskOffsetIntervalMs, a second
    process joins with five warm-ups wanted and none is assigned (Describe v1 names the group's
    assignor); deleted, the broker's interval is back."""
    members = Members(s)
    ready_word_count(s, members, A)
    names = (
        "streams.task.offset.interval.ms",
        "streams.num.warmup.replicas",
        "streams.assignor.offload.enable",
        "streams.assignor.name",
    )
    describe_group_configs(s, "describe them unset", *names)
    set_group_configs(s, "interval 0", streams_task_offset_interval_ms="0")
    set_group_configs(s, "interval below the minimum", streams_task_offset_interval_ms="14999")
    set_group_configs(s, "interval not a number", streams_task_offset_interval_ms="soon")
    set_group_configs(s, "warm-ups below 0", streams_num_warmup_replicas="-1")
    set_group_configs(s, "warm-ups above the maximum", streams_num_warmup_replicas="21")
    set_group_configs(s, "an unknown assignor", streams_assignor_name="mock")
    set_group_configs(s, "a consumer assignor", streams_assignor_name="range")
    set_group_configs(s, "offload not a boolean", streams_assignor_offload_enable="yes")
    set_group_configs(
        s,
        "set all four",
        streams_task_offset_interval_ms="20000",
        streams_num_warmup_replicas="5",
        streams_assignor_offload_enable="false",
        streams_assignor_name=" sticky ",  # a STRING is trimmed before it is checked
    )
    settle()  # Kafka applies group configs from its metadata log, a moment later
    describe_group_configs(s, "describe them set", *names)
    members.beat(A, "A: the group's task offset interval")
    v1 = Members(s, version=1)
    v1.epoch, v1.owned, v1.standby = members.epoch, members.owned, members.standby
    v1.beat(A, "A at v1: the group's task offset interval")
    members.join(B, word_count(s), "B joins: no warm-up tasks")
    members.converge(A, B)
    members.note_tasks("active with warm-ups wanted")
    describe(s, "describe v1: the assignor, no warm-ups", version=1)
    set_group_configs(
        s,
        "delete all four",
        streams_task_offset_interval_ms=None,
        streams_num_warmup_replicas=None,
        streams_assignor_offload_enable=None,
        streams_assignor_name=None,
    )
    settle()
    members.beat(A, "A: the broker's interval again")
    describe_group_configs(s, "describe them deleted", *names)


def alter_group_list(s: Session, label: str, name: str, operation: int, value: str) -> None:
    """IncrementalAlterConfigs APPEND (2) or SUBTRACT (3) of a group config."""
    r = plain(
        s.raw(
            44,
            1,
            resources=[
                {
                    "resource_type": 32,
                    "resource_name": s.group(),
                    "configs": [{"name": name, "config_operation": operation, "value": value}],
                }
            ],
            validate_only=False,
        )
    )
    s.note(label, r)


def missing_tags(r: dict[str, Any]) -> list[str]:
    """The MISSING_CLIENT_TAGS (6) details of a heartbeat answer."""
    return [st["status_detail"] for st in r["status"] or [] if st["status_code"] == 6]


def scenario_rack_aware_assignment_tags(s: Session) -> None:
    """Kafka 4.4's `streams.rack.aware.assignment.tags` (a LIST group config): described unset
    and set, refused with duplicate keys or an empty one, APPEND and SUBTRACT refused; v1 members that
    report none or only some of the tag keys get MISSING_CLIENT_TAGS naming the missing ones, a
    member with all of them and a v0 heartbeat get no status; the changes bump the group epoch
    (Describe after)."""
    setup(s, 2, (repartition_name(s), 2), (changelog_name(s), 2))
    name = "streams.rack.aware.assignment.tags"
    describe_group_configs(s, "describe it unset", name)
    set_group_configs(s, "duplicate keys", streams_rack_aware_assignment_tags="zone, rack ,zone")
    set_group_configs(s, "an empty key", streams_rack_aware_assignment_tags="zone,,rack")
    set_group_configs(s, "set", streams_rack_aware_assignment_tags=" zone , rack ")
    settle()  # Kafka applies group configs from its metadata log, a moment later
    describe_group_configs(s, "describe it set", name)
    v1 = Members(s, version=1)
    r = v1.join(A, word_count(s), "v1 without client tags")
    assert missing_tags(r) == [
        "Missing required client tags for rack-aware standby assignment: [zone, rack]. "
        "Configure them via 'client.tag.<tagKey>' in your Streams config."
    ], r
    r = v1.join(B, word_count(s), "v1 with some", client_tags=[{"key": "rack", "value": "r1"}])
    assert len(missing_tags(r)) == 1 and "[zone]" in missing_tags(r)[0], r
    tags = [{"key": "zone", "value": "z1"}, {"key": "rack", "value": "r2"}]
    assert missing_tags(v1.join(D, word_count(s), "v1 with all", client_tags=tags)) == []
    v1.beat(A, "A beats")
    v0 = Members(s)
    v0.epoch, v0.owned, v0.standby = v1.epoch, v1.owned, v1.standby
    assert missing_tags(v0.beat(A, "A beats at v0")) == []
    # Kafka 4.4's controller takes no GROUP config as a LIST.
    alter_group_list(s, "append", name, 2, "host")
    alter_group_list(s, "subtract", name, 3, "rack")
    alter_group_list(s, "append to an INT", "streams.num.standby.replicas", 2, "1")
    set_group_configs(s, "a third key", streams_rack_aware_assignment_tags="zone,rack,host")
    settle()
    describe_group_configs(s, "describe three keys", name)
    assert "[host]" in missing_tags(v1.beat(D, "D misses the third key"))[0]
    set_group_configs(s, "zone only", streams_rack_aware_assignment_tags="zone")
    settle()
    v1.beat(B, "B has none of them now")
    v1.beat(D, "D has them all again")
    set_group_configs(s, "delete", streams_rack_aware_assignment_tags=None)
    settle()
    assert missing_tags(v1.beat(A, "A after delete")) == []
    describe(s, "describe the group")


def scenario_v0_and_v1_members(s: Session) -> None:
    """One member on v0 and one on v1 in the same group: each answered in its own version."""
    members = Members(s)
    ready_word_count(s, members, A)
    v1 = Members(s, version=1)
    v1.join(B, word_count(s), "B joins v1")
    members.beat(A, "A v0")
    v1.beat(B, "B v1")
    for _ in range(3):
        members.beat(A)
        v1.beat(B)
    members.beat(A, "A v0 settled")
    v1.beat(B, "B v1 settled")
    describe(s, "describe v1", version=1)


def scenario_v1_describe(s: Session) -> None:
    """Describe v1 with and without IncludeTopologyDescription, with authorized operations, an
    unknown group beside a stable one, and a group every member left."""
    members = Members(s)
    ready_word_count(s, members, A)
    s.wait_coordinator(s.group("other"))
    describe(s, "v1", version=1)
    describe(s, "v1 with description", version=1, topology_description=True)
    describe(s, "v1 with operations", version=1, ops=True, topology_description=True)
    describe(s, "v1 with unknown", s.group(), s.group("other"), version=1, topology_description=True)
    hb(s, "leave", A, -1)
    describe(s, "v1 empty", version=1, topology_description=True)


def scenario_v1_describe_consumer_group(s: Session) -> None:
    """Describe v1 of a consumer group (not a streams group) and of an empty group id."""
    setup(s, 2)
    cgh_join(s, s.group(), "consumer join")
    describe(s, "v1 consumer group", version=1, topology_description=True)
    describe(s, "v1 empty id", "", version=1, topology_description=True)


def description(s: Session) -> dict[str, Any]:
    """Kafka Streams' description of the word count's first subtopology (KIP-1331's shape)."""
    node: dict[str, Any] = {"source_topics": [], "sink_topic": None, "stores": [], "successors": []}
    return {
        "subtopologies": [
            {
                "subtopology_id": "0",
                "nodes": [
                    {
                        **node,
                        "name": "KSTREAM-SOURCE-0000000000",
                        "node_type": 1,
                        "source_topics": [s.topic("words")],
                        "successors": ["KSTREAM-SINK-0000000001"],
                    },
                    {
                        **node,
                        "name": "KSTREAM-SINK-0000000001",
                        "node_type": 3,
                        "sink_topic": repartition_name(s),
                    },
                ],
            }
        ],
        "global_stores": [],
    }


def scenario_topology_description_update(s: Session) -> None:
    """StreamsGroupTopologyDescriptionUpdate (93) from a member, at a stale epoch, from an unknown
    member and group, and with empty ids: a broker without a topology description plugin (Kafka
    4.4's default) refuses each the same way, before looking at the group."""
    members = Members(s, version=1)
    ready_word_count(s, members, A)
    s.wait_coordinator(s.group("other"))

    def push(label: str, **over: Any) -> None:
        body = {
            "group_id": s.group(),
            "member_id": A,
            "topology_epoch": 0,
            "topology_description": description(s),
        }
        s.note(label, plain(s.raw(93, 0, **{**body, **over})))

    push("member")
    push("stale epoch", topology_epoch=-1)
    push("unknown member", member_id=B)
    push("unknown group", group_id=s.group("other"))
    push("empty member id", member_id="")
    push("empty group id", group_id="")
    members.beat(A, "heartbeat after")


# --- TxnOffsetCommit of streams members (groupshift in upstream mode) ------------------------------


def find_transaction_coordinator(s: Session, txn: str, timeout: float = 30.0) -> None:
    """FindCoordinator for a transactional id until it is available (Kafka creates
    `__transaction_state` on the first lookup)."""
    deadline = time.monotonic() + timeout
    while True:
        (c,) = plain(s.raw(10, 4, key_type=1, coordinator_keys=[txn]))["coordinators"]
        if c["error_code"] == "none":
            return
        assert time.monotonic() < deadline, (s.backend, c)
        time.sleep(0.2)


def retried(s: Session, api_key: int, version: int, **fields: Any) -> dict[str, Any]:
    """A transaction coordinator call, asked again while the coordinator is loading or the
    previous transactional step is still completing (CONCURRENT_TRANSACTIONS)."""
    deadline = time.monotonic() + 30
    while True:
        r = plain(s.raw(api_key, version, **fields))
        if r["error_code"] not in (
            "coordinator_load_in_progress",
            "concurrent_transactions",
            "not_coordinator",
        ):
            return r
        assert time.monotonic() < deadline, (s.backend, r)
        time.sleep(0.2)


def scenario_txn_offset_commit(s: Session) -> None:
    """TxnOffsetCommit v3 inside a real transaction (InitProducerId, AddOffsetsToTxn) by the
    members of a streams group, as a Kafka Streams `exactly_once_v2` producer sends it: its
    member's own epoch, a newer one, an unknown member, no member at generation -1, a member at
    -1, an older epoch for tasks held since then, for a task given up and for tasks given
    later, a topic outside the topology at an older epoch, a member that left (a killed
    instance's zombie producer), a group that does not exist, and a consumer group with a
    member. Only the error codes are recorded: the two sides use names of their own (one
    cluster behind both)."""
    members = Members(s)
    setup(s)
    s.create_topic(s.topic("other"), 1)
    members.join(A, stateless(s))
    deadline = time.monotonic() + 30
    while sum(len(t["partitions"]) for t in members.owned.get(A, [])) < 4:
        assert time.monotonic() < deadline, (s.backend, members.owned)
        time.sleep(0.2)
        members.beat(A)
    txn = s.group("txn")
    find_transaction_coordinator(s, txn)
    r = retried(s, 22, 4, transactional_id=txn, transaction_timeout=60000, producer_id=-1, producer_epoch=-1)
    assert r["error_code"] == "none", r
    producer = {
        "transactional_id": txn,
        "producer_id": r["producer_id"],
        "producer_epoch": r["producer_epoch"],
    }
    for group in (s.group(), s.group("none"), s.group("consumers")):
        s.wait_coordinator(group)
        r = retried(s, 25, 3, group_id=group, **producer)
        assert r["error_code"] == "none", (s.backend, r)

    def commit(
        label: str, member: str, epoch: int, parts: list[int], topic: str = "words", group: str = ""
    ) -> None:
        r = plain(
            s.raw(
                28,
                3,
                group_id=group or s.group(),
                generation_id=epoch,
                member_id=member,
                group_instance_id=None,
                topics=[
                    {
                        "name": s.topic(topic),
                        "partitions": [
                            {
                                "partition_index": p,
                                "committed_offset": 7,
                                "committed_leader_epoch": -1,
                                "committed_metadata": None,
                            }
                            for p in parts
                        ],
                    }
                ],
                **producer,
            )
        )
        s.note(label, sorted({p["error_code"] for t in r["topics"] for p in t["partitions"]}))

    first = members.epoch[A]
    every = [0, 1, 2, 3]
    commit("own epoch", A, first, every)
    commit("newer epoch", A, first + 1, every)
    commit("unknown member", D, first, every)
    commit("no member, generation -1", "", -1, every)
    commit("member at generation -1", A, -1, every)
    members.join(B, stateless(s))
    members.converge(A, B)
    s.note("epoch moved", members.epoch[A] > first)
    kept = [p for t in members.owned[A] for p in t["partitions"]]
    given = [p for t in members.owned[B] for p in t["partitions"]]
    s.note("split", (len(kept), len(given)))
    commit("older epoch, tasks held since", A, first, kept)
    commit("older epoch, a task given up", A, first, [*kept, given[0]])
    commit("older epoch than the tasks", B, first, given)
    commit("older epoch, topic outside the topology", A, first, [0], topic="other")
    commit("own epoch, topic outside the topology", A, members.epoch[A], [0], topic="other")
    members.beat(A, member_epoch=-1)  # A leaves: its producer is a zombie now
    commit("left member", A, members.epoch[A], kept)
    commit("missing group, generation 1", A, 1, every, group=s.group("none"))
    commit("missing group, generation -1", "", -1, every, group=s.group("none"))
    # The same rules in a consumer group (KIP-848 member): no member at generation -1 is
    # accepted whatever the members, a member's stale epoch is not.
    consumer = cgh_join(s, s.group("consumers"), "consumer join")
    cid, cepoch = consumer["member_id"], consumer["member_epoch"]
    commit("consumer group, no member, generation -1", "", -1, every, group=s.group("consumers"))
    commit("consumer group, own epoch", cid, cepoch, every, group=s.group("consumers"))
    commit("consumer group, newer epoch", cid, cepoch + 1, every, group=s.group("consumers"))
    r = retried(s, 26, 3, committed=False, **producer)
    s.note("aborted", r["error_code"])


def run_apart(scenario: Callable[[Session], None], kafka: str, groupshift: str) -> Outcome:
    """`run_both` with names of each side's own: here both sides are the same Kafka cluster
    (groupshift in upstream mode in front of it), where one side's topics and transactional
    ids would be the other's."""
    sessions = {
        "kafka": Session("kafka", kafka, {"run": uuid.uuid4().hex[:10]}),
        "groupshift": Session("groupshift", groupshift, {"run": uuid.uuid4().hex[:10]}),
    }
    return run_sessions(scenario, sessions)


@pytest.fixture(scope="module")
def streams_upstream(
    streams_pair: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """(Kafka 4.4 bootstrap, a groupshift in upstream mode in front of that node): the streams
    group is groupshift's, the transactions the node's (docs/transactions.md)."""
    kafka = streams_pair[0]
    g = Gateways(tmp_path_factory.mktemp("streams-upstream"))
    sets = [f"{k}={v}" for k, v in GROUP_SETTINGS.items()] + ["upstream.metadata.max.age.ms=1000"]
    gw = g.start("groupshift-upstream", sets=sets, extra_args=("--upstream", kafka))
    yield kafka, gw.bootstrap
    problems = g.finish()
    if problems:
        pytest.fail("\n\n".join(problems))


def test_txn_offset_commit_of_streams_members(streams_upstream: tuple[str, str]) -> None:
    """Issue 31 (exactly_once_v2 through groupshift): every TxnOffsetCommit answer of
    `scenario_txn_offset_commit` equals Kafka 4.4's."""
    outcome = run_apart(scenario_txn_offset_commit, *streams_upstream)
    compare(outcome)
    labels = [x.label for x in outcome.kafka]
    # Kafka's own answers, so that a change on both sides is seen too.
    answers = dict(zip(labels, (x.response for x in outcome.kafka), strict=True))
    print(f"Kafka 4.4's TxnOffsetCommit answers: {answers}")
    assert answers["own epoch"] == ["none"], answers
    assert answers["left member"] == ["unknown_member_id"], answers
    assert answers["older epoch, tasks held since"] == ["none"], answers
    assert answers["older epoch than the tasks"] == ["illegal_generation"], answers
    assert answers["consumer group, no member, generation -1"] == ["none"], answers


# --- the table -----------------------------------------------------------------------------------

Known = dict[str, str]

# Declared deviations (docs/deviations.md), each a path regex with its reason.
DESCRIBED_COUNTS = {
    r"subtopologies\[\d\]\.(repartition_source|state_changelog)_topics\[\d\]\.partitions": (
        "Kafka describes the internal topics' configured counts only once a write after the "
        "topology's first configuration committed; groupshift whenever the topology is ready"
    )
}
SCENARIOS: list[tuple[str, Callable[[Session], None], Known]] = [
    ("join-stateless", scenario_join_stateless, {}),
    ("join-word-count", scenario_join_word_count_topics_exist, DESCRIBED_COUNTS),
    ("join-creates-internal-topics", scenario_join_creates_internal_topics, {}),
    ("internal-topic-configs", scenario_internal_topic_configs, {}),
    ("heartbeat-unchanged", scenario_join_heartbeat_unchanged, {}),
    ("heartbeat-fewer-tasks", scenario_heartbeat_reporting_fewer_tasks, {}),
    ("two-processes", scenario_two_processes, {}),
    ("two-members-one-process", scenario_two_members_one_process, {}),
    ("three-processes", scenario_three_processes, {}),
    ("four-joins-in-a-row", scenario_four_joins_in_a_row, {}),
    ("endpoint-rack-tags", scenario_join_with_endpoint_rack_tags, {}),
    ("endpoints-two-members", scenario_endpoints_two_members, {}),
    ("process-change", scenario_process_change_bumps_epoch, {}),
    ("missing-source-topic", scenario_missing_source_topic, {}),
    ("missing-source-then-created", scenario_missing_source_topic_then_created, {}),
    ("source-regex-no-match", scenario_source_regex_no_match, {}),
    ("source-regex-matches", scenario_source_regex_matches, {}),
    ("copartition-mismatch", scenario_copartition_mismatch, {}),
    ("copartition-repartition", scenario_copartition_repartition_follows_source, {}),
    ("repartition-fixed", scenario_repartition_fixed_partitions, {}),
    ("repartition-chain", scenario_repartition_chain, {}),
    ("changelog-wrongly-partitioned", scenario_changelog_wrongly_partitioned, {}),
    ("repartition-wrongly-partitioned", scenario_repartition_wrongly_partitioned, {}),
    ("internal-topic-is-source", scenario_internal_topic_is_source, {}),
    ("repartition-sink-unknown", scenario_repartition_sink_unknown, {}),
    ("copartition-index-out-of-range", scenario_copartition_index_out_of_range, {}),
    ("changelog-with-partitions", scenario_changelog_with_partitions, {}),
    ("duplicate-subtopology-ids", scenario_duplicate_subtopology_ids, {}),
    ("repartition-source-without-writer", scenario_repartition_source_without_writer, {}),
    ("owned-task-unknown-subtopology", scenario_owned_task_unknown_subtopology, {}),
    ("owned-task-out-of-range", scenario_owned_task_out_of_range, {}),
    ("shutdown-application", scenario_shutdown_application, {}),
    ("newer-topology-epoch", scenario_newer_topology_epoch, {}),
    ("stale-topology", scenario_stale_topology, {}),
    ("topology-changed-same-epoch", scenario_topology_changed_same_epoch, {}),
    ("negative-topology-epoch", scenario_negative_topology_epoch, {}),
    ("refuse-empty-member-id", _refusal(member_id=""), {}),
    ("refuse-empty-group-id", _refusal(group_id=""), {}),
    ("refuse-empty-instance-id", _refusal(instance_id=""), {}),
    ("refuse-empty-rack-id", _refusal(rack_id=""), {}),
    ("refuse-join-without-rebalance-timeout", _refusal(rebalance_timeout=-1), {}),
    ("refuse-join-without-topology", _refusal(topology=None), {}),
    ("refuse-join-without-process-id", _refusal(process_id=None), {}),
    (
        "refuse-join-with-active-tasks",
        _refusal(active_tasks=[{"subtopology_id": "0", "partitions": [0]}]),
        {},
    ),
    ("refuse-join-with-null-tasks", _refusal(active_tasks=None, standby_tasks=None, warmup_tasks=None), {}),
    ("refuse-epoch-below-minus-two", _refusal(member_epoch=-3), {}),
    ("refuse-static-leave-without-instance", _refusal(member_epoch=-2), {}),
    ("refuse-unknown-static-leave", _refusal(member_epoch=-2, instance_id="nobody"), {}),
    ("heartbeat-null-tasks", scenario_heartbeat_without_tasks_after_join, {}),
    ("one-task-list-null", scenario_one_task_list_null, {}),
    ("topology-on-heartbeat", scenario_topology_on_heartbeat, {}),
    ("leave-last-member", scenario_leave_last_member, {}),
    ("leave-one-of-two", scenario_leave_one_of_two, {}),
    ("leave-unknown-group", scenario_leave_unknown_group, {}),
    ("dynamic-leave-minus-two", scenario_dynamic_member_leaves_with_minus_two, {}),
    ("fenced-greater-epoch", scenario_greater_epoch_fenced, {}),
    ("fenced-smaller-epoch", scenario_smaller_epoch_fenced, {}),
    ("previous-epoch-accepted", scenario_previous_epoch_accepted, {}),
    ("unknown-member", scenario_unknown_member, {}),
    ("unknown-group-heartbeat", scenario_unknown_group_heartbeat, {}),
    ("rejoin-after-fencing", scenario_rejoin_after_fencing, DESCRIBED_COUNTS),
    ("static-join", scenario_static_join, {}),
    ("static-leave", scenario_static_leave, {}),
    ("static-rejoin-new-member-id", scenario_static_rejoin_new_member_id, {}),
    ("static-instance-in-use", scenario_static_instance_in_use, {}),
    ("static-leave-unknown-instance", scenario_static_leave_unknown_instance, {}),
    ("static-rejoin-same-member-id", scenario_static_rejoin_same_member_id, {}),
    ("standby-replicas", scenario_standby_replicas_group_config, {}),
    ("standby-promoted", scenario_standby_promoted_when_the_owner_leaves, {}),
    ("standby-two-members-one-process", scenario_standby_two_members_one_process, {}),
    ("standby-endpoints", scenario_standby_endpoints, {}),
    ("standby-task-offsets", scenario_standby_task_offsets, {}),
    ("standby-replicas-above-max", scenario_standby_replicas_above_the_max, {}),
    ("api-versions", scenario_api_versions, {}),
    ("v1-heartbeats", scenario_v1_heartbeats, {}),
    ("v1-static-leave-and-refusals", scenario_v1_static_leave_and_refusals, {}),
    ("v1-acceptable-recovery-lag-group-config", scenario_v1_acceptable_recovery_lag_group_config, {}),
    ("rack-aware-assignment-tags", scenario_rack_aware_assignment_tags, {}),
    ("warmup-and-assignor-configs", scenario_warmup_and_assignor_configs, {}),
    ("v0-and-v1-members", scenario_v0_and_v1_members, {}),
    ("v1-describe", scenario_v1_describe, DESCRIBED_COUNTS),
    ("v1-describe-consumer-group", scenario_v1_describe_consumer_group, {}),
    ("topology-description-update", scenario_topology_description_update, {}),
    ("describe-unknown", scenario_describe_unknown, {}),
    ("describe-authorized-operations", scenario_describe_authorized_operations, DESCRIBED_COUNTS),
    ("describe-several", scenario_describe_several, DESCRIBED_COUNTS),
    ("describe-consumer-group", scenario_describe_consumer_group, {}),
    ("consumer-group-id-taken", scenario_consumer_group_id_taken, {}),
    ("streams-group-taken-by-consumer", scenario_streams_group_id_taken_by_consumer, {}),
    ("streams-group-taken-by-classic", scenario_streams_group_id_taken_by_classic, {}),
    ("live-classic-refuses-streams", scenario_live_classic_group_refuses_streams, {}),
    ("migration-classic-to-streams", scenario_offline_migration_classic_to_streams, {}),
    ("migration-streams-to-classic", scenario_offline_migration_streams_to_classic, {}),
    ("migration-consumer-to-streams", scenario_offline_migration_consumer_to_streams, {}),
    ("streams-commit-epochs", scenario_streams_commit_epochs, {}),
    ("list-groups-streams", scenario_list_groups_streams_type, {}),
    ("describe-groups-classic-api", scenario_describe_groups_classic_api, {}),
    ("session-heartbeat-group-configs", scenario_session_and_heartbeat_group_configs, {}),
    ("initial-rebalance-delay", scenario_initial_rebalance_delay, {}),
    ("assignment-interval", scenario_assignment_interval, {}),
]


@pytest.mark.parametrize(("name", "scenario", "known"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_streams_differential(
    name: str, scenario: Callable[[Session], None], known: Known, streams_pair: tuple[str, str]
) -> None:
    compare(run_both(scenario, *streams_pair), known)


def test_suite_size() -> None:
    """Issue 31 asks for at least 40 scenarios compared answer by answer."""
    assert len(SCENARIOS) >= 40
    assert len({s[0] for s in SCENARIOS}) == len(SCENARIOS)
