"""The streams-group views of `groupshift groups` (tools/groups/streams_group.py) without a
server: a StreamsGroupDescribe v0 answer built as kio's entities, read into the model, and
printed in the words and column order of Kafka 4.4's `kafka-streams-groups.sh --describe`.
e2e/test_groups_cli_streams.py runs the same code against groupshift and Kafka 4.4 and compares
it with Kafka's own tool."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
from typing import Any

import kio.schema.streams_group_describe.v0.response as v0
import pytest

from protocol.entity_builder import build
from protocol.kafka_schemas import DescribedGroupV1
from tests.streams_wire_samples import SAMPLES
from tools.groups import streams_migration
from tools.groups.list_groups import listed_kind, type_matches
from tools.groups.output import Style, emit_json
from tools.groups.streams_group import (
    StreamsGroup,
    Tasks,
    assignments_string,
    describe_one,
    describe_streams,
    from_described,
    input_partitions,
    members_table,
    offset_rows,
    offsets_table,
    state_table,
    topology_text,
)
from tools.groups.streams_migration import StreamsTracker
from tools.groups.wire import EARLIEST, LATEST, KafkaError, Node

PLAIN = Style(False)


def tasks(active: Any = (), standby: Any = (), warmup: Any = ()) -> dict[str, Any]:
    def ids(entries: Any) -> list[dict[str, Any]]:
        return [{"subtopology_id": s, "partitions": ps} for s, ps in entries]

    return {"active_tasks": ids(active), "standby_tasks": ids(standby), "warmup_tasks": ids(warmup)}


def member(member_id: str, **over: Any) -> dict[str, Any]:
    values = {
        "member_id": member_id,
        "member_epoch": 7,
        "instance_id": None,
        "rack_id": None,
        "client_id": f"app-{member_id}-StreamThread-1-consumer",
        "client_host": "/10.0.0.1",
        "topology_epoch": 0,
        "process_id": f"process-{member_id}",
        "user_endpoint": None,
        "client_tags": [],
        "task_offsets": [],
        "task_end_offsets": [],
        "assignment": tasks(),
        "target_assignment": tasks(),
        "is_classic": False,
    }
    values.update(over)
    return values


def word_count(members: list[dict[str, Any]], state: str = "Stable") -> StreamsGroup:
    """Kafka Streams' word count: subtopology 0 reads `words`, subtopology 1 the repartition
    topic 0 writes; as the coordinator describes it."""
    topic_info = {
        "name": "app-words-repartition",
        "partitions": 4,
        "replication_factor": -1,
        "topic_configs": [],
    }
    described = build(
        v0.DescribedGroup,
        {
            "error_code": 0,
            "group_id": "app",
            "group_state": state,
            "group_epoch": 9,
            "assignment_epoch": 8,
            "topology": {
                "epoch": 2,
                "subtopologies": [
                    {
                        "subtopology_id": "1",
                        "source_topics": [],
                        "repartition_sink_topics": [],
                        "state_changelog_topics": [],
                        "repartition_source_topics": [topic_info],
                    },
                    {
                        "subtopology_id": "0",
                        "source_topics": ["words"],
                        "repartition_sink_topics": ["app-words-repartition"],
                        "state_changelog_topics": [],
                        "repartition_source_topics": [],
                    },
                ],
            },
            "members": members,
        },
    )
    return from_described(described, Node(1, "broker-1", 9092))


def test_tasks_print_as_kafkas_tool_prints_them() -> None:
    current = Tasks({"1": [2], "0": [0, 1], "10": [3]}, {"0": [3]}, {"1": [0]})
    target = Tasks({"0": [0, 1, 2]}, {}, {})
    assert assignments_string(current) == "ACTIVE: 0:[0,1]; 1:[2]; 10:[3]; STANDBY: 0:[3]; WARMUP: 1:[0];"
    assert assignments_string(current, target) == (
        "ACTIVE: 0:[0,1]; 1:[2]; 10:[3]; STANDBY: 0:[3]; WARMUP: 1:[0]; TARGET-ACTIVE: 0:[0,1,2];"
    )
    assert assignments_string(Tasks()) == ""


def test_members_view_has_kafkas_columns_plus_host() -> None:
    group = word_count(
        [
            member(
                "m1",
                assignment=tasks(active=[("0", [1, 0]), ("1", [0, 1])], standby=[("1", [3])]),
                target_assignment=tasks(active=[("0", [0, 1]), ("1", [0, 1])]),
            ),
            member("m2", member_epoch=8, is_classic=True, assignment=tasks(warmup=[("0", [2])])),
        ]
    )
    lines = members_table(group, False, PLAIN).splitlines()
    assert lines[0].split() == ["GROUP", "MEMBER", "PROCESS", "HOST", "CLIENT-ID", "ASSIGNMENTS"]
    assert lines[1].split() == [
        "app",
        "m1",
        "process-m1",
        "/10.0.0.1",
        "app-m1-StreamThread-1-consumer",
        *["ACTIVE:", "0:[0,1];", "1:[0,1];", "STANDBY:", "1:[3];"],
    ]
    assert lines[2].endswith("WARMUP: 0:[2];")

    verbose = members_table(group, True, PLAIN).splitlines()
    assert verbose[0].split() == [
        "GROUP",
        "TARGET-ASSIGNMENT-EPOCH",
        "TOPOLOGY-EPOCH",
        "MEMBER",
        "MEMBER-PROTOCOL",
        "MEMBER-EPOCH",
        "PROCESS",
        "HOST",
        "CLIENT-ID",
        "ASSIGNMENTS",
    ]
    assert verbose[1].split()[:6] == ["app", "8", "0", "m1", "streams", "7"]
    assert verbose[1].endswith("STANDBY: 1:[3]; TARGET-ACTIVE: 0:[0,1]; 1:[0,1];")
    assert verbose[2].split()[:6] == ["app", "8", "0", "m2", "classic", "8"]

    static = word_count([member("m1", instance_id="pod-0")])
    assert members_table(static, False, PLAIN).splitlines()[0].split()[:3] == [
        "GROUP",
        "MEMBER",
        "GROUP-INSTANCE-ID",
    ]


def test_state_view_and_the_summary_json() -> None:
    group = word_count([member("m1"), member("m2")], state="Reconciling")
    lines = state_table(group, False, PLAIN).splitlines()
    assert lines[0].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNOR", "STATE", "#MEMBERS", "TYPE"]
    assert lines[1].split() == ["app", "broker-1:9092", "(1)", "-", "Reconciling", "2", "Streams"]
    described_v1 = dataclasses.replace(group, assignor="sticky")
    assert state_table(described_v1, False, PLAIN).splitlines()[1].split()[3] == "sticky"
    assert described_v1.to_json()["assignor"] == "sticky" and group.to_json()["assignor"] is None
    verbose = state_table(group, True, PLAIN).splitlines()
    assert verbose[0].split()[5:] == ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS", "TYPE"]
    assert verbose[1].split()[5:] == ["9", "8", "2", "Streams"]
    summary = group.to_json()
    assert summary["subtopologies"] == [
        {"subtopology": "0", "input_topics": ["words"]},
        {"subtopology": "1", "input_topics": ["app-words-repartition"]},
    ]
    assert (summary["type"], summary["topology_epoch"], summary["num_members"]) == ("streams", 2, 2)


class Offsets:
    """The two calls `offset_rows` makes, answered from fixed numbers; records what was asked."""

    def __init__(self) -> None:
        self.asked: dict[int, list[tuple[str, int]]] = {}

    def offset_fetch(self, group: str) -> dict[tuple[str, int], tuple[int, int | None, str | None]]:
        # committed: words-1 and an old topic no task reads any more
        return {("words", 1): (5, 3, ""), ("old", 0): (2, None, "")}

    def list_offsets(self, partitions: list[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
        self.asked[timestamp] = list(partitions)
        return {tp: (4 if timestamp == EARLIEST else 10) for tp in partitions}


def test_offsets_are_the_partitions_the_active_tasks_read_with_kafkas_lag() -> None:
    group = word_count(
        [member("m1", assignment=tasks(active=[("0", [1]), ("1", [2])], standby=[("0", [3])]))]
    )
    assert input_partitions(group) == {("words", 1), ("app-words-repartition", 2)}  # not the standby's
    admin = Offsets()
    rows = offset_rows(admin, group)  # type: ignore[arg-type]
    by_tp = {(r["topic"], r["partition"]): r for r in rows}
    assert list(by_tp) == [("app-words-repartition", 2), ("old", 0), ("words", 1)]
    assert (by_tp[("words", 1)]["lag"], by_tp[("words", 1)]["leader_epoch"]) == (5, 3)
    # no commit: everything from the earliest offset on is still to read (Kafka's tool)
    assert by_tp[("app-words-repartition", 2)]["current_offset"] is None
    assert by_tp[("app-words-repartition", 2)]["lag"] == 10 - 4
    assert admin.asked[EARLIEST] == [("app-words-repartition", 2)]
    assert len(admin.asked[LATEST]) == 3

    lines = offsets_table(rows, False, PLAIN).splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "OFFSET-LAG"]
    assert lines[3].split() == ["app", "words", "1", "5"]
    verbose = offsets_table(rows, True, PLAIN).splitlines()
    assert verbose[0].split()[3:] == ["CURRENT-OFFSET", "LEADER-EPOCH", "LOG-END-OFFSET", "OFFSET-LAG"]
    assert verbose[1].split() == ["app", "app-words-repartition", "2", "-", "-", "10", "6"]


def args(**over: Any) -> argparse.Namespace:
    values = {"offsets": False, "members": False, "show_state": False, "verbose": False, "json": False}
    values.update(over)
    return argparse.Namespace(**values)


def test_an_empty_group_says_so_and_prints_no_members() -> None:
    group = word_count([], state="Empty")
    out, err = io.StringIO(), io.StringIO()
    assert describe_one(Offsets(), group, args(members=True), out, err, PLAIN, print) == 0  # type: ignore[arg-type]
    assert out.getvalue() == ""
    assert err.getvalue().strip() == "Streams group 'app' has no active members."
    # the offsets view still lists what the group committed
    out = io.StringIO()
    describe_one(Offsets(), group, args(), out, io.StringIO(), PLAIN, print)  # type: ignore[arg-type]
    assert [line.split()[1] for line in out.getvalue().split("\n") if line.startswith("app")] == [
        "old",
        "words",
    ]


def test_json_members_carry_every_kind_of_task() -> None:
    group = word_count([member("m1", assignment=tasks(active=[("0", [0])], warmup=[("1", [1])]))])
    out = io.StringIO()
    describe_one(
        Offsets(),
        group,
        args(members=True, json=True),
        out,
        io.StringIO(),
        PLAIN,
        lambda v: emit_json(v, out),
    )  # type: ignore[arg-type]
    value = json.loads(out.getvalue())
    (m,) = value["members"]
    assert m["assignment"] == {
        "active": [{"subtopology": "0", "partitions": [0]}],
        "standby": [],
        "warmup": [{"subtopology": "1", "partitions": [1]}],
    }
    assert (m["protocol"], m["process_id"], m["host"]) == ("streams", "process-m1", "/10.0.0.1")


def test_list_keeps_consumer_and_streams_groups_only() -> None:
    def entry(protocol_type: str | None, group_type: str | None) -> dict[str, Any]:
        return {"group": "g", "protocol_type": protocol_type, "state": "Stable", "type": group_type}

    assert listed_kind(entry("streams", "Streams")) == "streams"
    assert listed_kind(entry("streams", None)) == "streams"  # ListGroups < v5 has no type
    assert listed_kind(entry("consumer", "Consumer")) == "consumer"
    assert listed_kind(entry("", "Classic")) == "consumer"  # a group that only commits offsets
    assert listed_kind(entry("connect", "Classic")) is None
    assert listed_kind(entry("share", "Share")) is None


def test_migration_view_tracks_tasks_pending_revocation_and_awaiting() -> None:
    # m1 still runs 0_2, which its target gave to m2 (revoke before assign: m2 waits for it)
    moving = word_count(
        [
            member(
                "m1",
                assignment=tasks(active=[("0", [0, 1, 2])], standby=[("1", [0])]),
                target_assignment=tasks(active=[("0", [0, 1])]),
            ),
            member("m2", is_classic=True, target_assignment=tasks(active=[("0", [2, 3])])),
        ],
        state="Reconciling",
    )
    tracker = StreamsTracker()
    tracker.observe(moving, 100.0)
    tracker.observe(moving, 190.0)
    rep = streams_migration.report(moving, 190.0, tracker, stuck_after=60)
    m1, m2 = sorted(rep["members"], key=lambda m: m["member_id"])
    assert (m1["active"], m1["standby"], m1["pending_revocation"]) == (
        ["0_0", "0_1", "0_2"],
        ["1_0"],
        ["0_2"],
    )
    assert m2["awaiting"] == [{"task": "0_2", "held_by": "m1"}, {"task": "0_3", "held_by": None}]
    assert rep["pending_revocation"] == [
        {
            "task": "0_2",
            "member_id": "m1",
            "process_id": "process-m1",
            "protocol": "streams",
            "pending_for_s": 90.0,
        }
    ]
    assert (rep["phase"], rep["members_by_protocol"]) == ("migrating", {"classic": 1, "streams": 1})
    assert rep["next_step"].startswith("Member m1 (process process-m1) has kept task 0_2 for 90.0s")
    text = streams_migration.render(rep, PLAIN)
    header = next(line for line in text.splitlines() if line.startswith("MEMBER"))
    assert header.split() == [
        "MEMBER",
        "PROCESS",
        "PROTOCOL",
        "EPOCH",
        "ACTIVE",
        "STANDBY",
        "WARMUP",
        "PENDING-REVOCATION",
        "AWAITING",
    ]
    assert "pending revocation: tasks 0_2 on m1 for 90.0s" in text

    # m1 gives 0_2 up, m2 gets it: the change story names the task, nothing is pending any more
    done = word_count(
        [
            member(
                "m1",
                assignment=tasks(active=[("0", [0, 1])]),
                target_assignment=tasks(active=[("0", [0, 1])]),
            ),
            member(
                "m2",
                assignment=tasks(active=[("0", [2, 3])]),
                target_assignment=tasks(active=[("0", [2, 3])]),
            ),
        ]
    )
    assert streams_migration.changes(moving, done) == [
        "state Reconciling -> Stable",
        "task 0_2: m1 -> m2",
        "task 0_3: unowned -> m2",
    ]
    tracker.observe(done, 200.0)
    assert tracker.first_pending == {}
    rep = streams_migration.report(done, 200.0, tracker, stuck_after=60)
    assert rep["next_step"] == "Done: every member uses the streams protocol and the group is stable."
    assert streams_migration.report(word_count([], "Empty"), 0.0, tracker, 60)["phase"] == "empty"


class Coordinator:
    """The calls `describe_streams` makes, with one StreamsGroupDescribe error code."""

    def __init__(self, code: int | None) -> None:
        self.code = code

    def coordinator(self, group: str) -> int:
        return 1

    def node(self, node_id: int) -> Node:
        return Node(node_id, "broker-1", 9092)

    def streams_group_describe(self, group: str, include_topology_description: bool = False) -> Any:
        if self.code is None:  # the coordinator does not list API 89
            return None
        return build(
            v0.DescribedGroup,
            {
                "error_code": self.code,
                "group_id": group,
                "group_state": "Dead",
                "group_epoch": -1,
                "assignment_epoch": -1,
                "topology": None,
                "members": [],
            },
        )


def test_no_streams_group_where_the_server_has_none() -> None:
    # not listed, GROUP_ID_NOT_FOUND (no group / another type), UNSUPPORTED_VERSION (streams off)
    for code in (None, 69, 35):
        assert describe_streams(Coordinator(code), "g") is None, code  # type: ignore[arg-type]
    with pytest.raises(KafkaError, match="GROUP_AUTHORIZATION_FAILED"):
        describe_streams(Coordinator(30), "g")  # type: ignore[arg-type]


def test_type_filter_without_types_from_the_broker() -> None:
    # ListGroups < v5: no type; the protocol type still tells a streams group
    streams = {"group": "s", "protocol_type": "streams", "state": "Stable", "type": None}
    consumer = {"group": "c", "protocol_type": "consumer", "state": "Stable", "type": None}
    assert type_matches(streams, ["streams"]) and not type_matches(streams, ["classic", "consumer"])
    assert type_matches(consumer, ["classic"]) and not type_matches(consumer, ["streams"])
    assert type_matches({**consumer, "type": "Consumer"}, ["consumer"])
    assert not type_matches({**consumer, "type": "Consumer"}, ["classic"])
    assert type_matches(consumer, [])


def test_topology_view_is_kafkas_layout_of_a_v1_description() -> None:
    """`describe --topology` of a group described at v1 with an AVAILABLE description (as Kafka
    with a topology description plugin answers; e2e/test_groups_cli_streams.py compares with
    Kafka's own tool): subtopologies and nodes in the broker's order, topics, stores and
    successors sorted, predecessors rebuilt from the successors, a sink without a topic `null`,
    global stores numbered after the subtopologies."""
    (response,) = [v for name, _, v, _ in SAMPLES if name == "StreamsGroupDescribeResponseData"]
    stored, missing = response["groups"]
    group = from_described(build(DescribedGroupV1, stored), Node(1, "broker-1", 9092))
    assert group.assignor == "sticky" and group.topology_status == 3 and group.topology_description
    text = topology_text(group.topology_description)
    assert text == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [words, wörds-2])\n"
        "      --> KSTREAM-FLATMAPVALUES-0000000001\n"
        "    Processor: KSTREAM-FLATMAPVALUES-0000000001 (stores: [counts-store, other-store])\n"
        "      --> KSTREAM-SINK-0000000002\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Sink: KSTREAM-SINK-0000000002 (topic: app-counts-repartition)\n"
        "      <-- KSTREAM-FLATMAPVALUES-0000000001\n"
        "\n"
        "   Sub-topology: 1\n"
        "\n"
        "   Sub-topology: 2 for global store (will not generate tasks)\n"
        "    Source: KSTREAM-SOURCE-0000000009 (topics: [global-in])\n"
        "      --> KTABLE-SOURCE-0000000010\n"
        "    Processor: KTABLE-SOURCE-0000000010 (stores: [global-store])\n"
        "      --> none\n"
        "      <-- KSTREAM-SOURCE-0000000009\n"
        "\n"
    )
    args = argparse.Namespace(topology=True, json=False)
    out = io.StringIO()
    assert describe_one(None, group, args, out, io.StringIO(), PLAIN, lambda v: None) == 0  # type: ignore[arg-type]
    assert out.getvalue() == text + "\n"
    # NOT_STORED (Kafka without a plugin, groupshift): Kafka's tool's words, exit 1
    missing = {**stored, "topology_description": None, "topology_description_status": 1}
    bare = from_described(build(DescribedGroupV1, missing), None)
    out = io.StringIO()
    assert describe_one(None, bare, args, out, io.StringIO(), PLAIN, lambda v: None) == 1  # type: ignore[arg-type]
    assert out.getvalue() == "\nError: No topology description is stored for streams group 'app'.\n"
    emitted: list[Any] = []
    json_args = argparse.Namespace(topology=True, json=True)
    assert describe_one(None, group, json_args, io.StringIO(), io.StringIO(), PLAIN, emitted.append) == 0  # type: ignore[arg-type]
    (value,) = emitted
    assert value["topology_description_status"] == "AVAILABLE"
    assert value["topology_description"]["global_stores"][0]["processor"]["type"] == "processor"
