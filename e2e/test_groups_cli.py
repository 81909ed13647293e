"""`groupshift groups` against a real `groupshift serve`, with groups made by real clients.

One gateway per module; each test uses its own topic and groups. Offsets and lag are checked
against what the test produced and committed itself; mutations (reset, delete-offsets, delete,
config) are checked by reading the result back with a second command, and refusals by their
exit code and message.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from e2e.conftest import Gateways
from e2e.groups_cli import groups, groups_json, ok, table
from e2e.harness import GatewayProcess
from e2e.migration import FAST_GROUP_SETTINGS, create_topic, poll_unstranded

PER_PARTITION = (7, 5, 3)  # records produced to partitions 0, 1, 2


@pytest.fixture(scope="module")
def gw(module_gateways: Gateways) -> GatewayProcess:
    return module_gateways.start("groups-cli", sets=FAST_GROUP_SETTINGS)


def produce(gw: GatewayProcess, topic: str, counts: tuple[int, ...] = PER_PARTITION) -> None:
    create_topic(gw, topic, len(counts))
    p = KafkaProducer(bootstrap_servers=gw.bootstrap)
    for part, n in enumerate(counts):
        for i in range(n):
            p.send(topic, f"{part}-{i}".encode(), partition=part)
    p.flush()
    p.close()


def member(gw: GatewayProcess, topic: str, group: str) -> KafkaConsumer:
    """A kafka-python member that has joined and been assigned every partition.

    kafka-python 3.0.12 sometimes stalls in the first group of a fresh server: its leader
    rejoins once the topic's metadata arrives, the server completes that generation (SyncGroup
    answered), and the client neither applies the assignment nor heartbeats again until its
    session expires. A member not assigned within 15 s is closed and started again."""
    for _ in range(3):
        c = KafkaConsumer(
            topic,
            bootstrap_servers=gw.bootstrap,
            group_id=group,
            client_id=f"{group}-client",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=10000,
            heartbeat_interval_ms=500,
        )
        deadline = time.monotonic() + 15
        while not c.assignment() and time.monotonic() < deadline:
            poll_unstranded(c, 200)
        if c.assignment():
            return c
        c.close()
    raise AssertionError(f"the kafka-python member of {group} was never assigned partitions")


def commit(c: KafkaConsumer, topic: str, offsets: dict[int, int]) -> None:
    c.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})


def empty_group(gw: GatewayProcess, topic: str, group: str, offsets: dict[int, int]) -> None:
    c = member(gw, topic, group)
    commit(c, topic, offsets)
    c.close()


@pytest.fixture(scope="module")
def active(gw: GatewayProcess) -> Iterator[tuple[str, str, KafkaConsumer]]:
    topic, group = "cli-active-t", "cli-active"
    produce(gw, topic)
    c = member(gw, topic, group)
    commit(c, topic, {0: 4, 1: 5})  # partition 2: no commit
    yield topic, group, c
    c.close()


def offsets_of(gw: GatewayProcess, group: str) -> dict[tuple[str, int], int]:
    d = groups_json(gw.bootstrap, "describe", group, "--offsets")
    return {(r["topic"], r["partition"]): r["current_offset"] for r in d["offsets"]}


# -- list -------------------------------------------------------------------------------------


def test_list_with_state_and_type_filters(gw: GatewayProcess, active: Any) -> None:
    topic, group, c = active
    empty_group(gw, topic, "cli-list-empty", {0: 1})
    from confluent_kafka import Consumer

    kip848 = Consumer(
        {"bootstrap.servers": gw.bootstrap, "group.id": "cli-list-848", "group.protocol": "consumer"}
    )
    kip848.subscribe(["cli-active-t"])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not kip848.assignment():
            kip848.poll(0.2)
        c.poll(50)
        names = ok(gw.bootstrap, "list").split()
        assert {group, "cli-list-empty", "cli-list-848"} <= set(names)

        rows = {r["GROUP"]: r for r in table(ok(gw.bootstrap, "list", "--state", "--type"))}
        assert rows[group]["TYPE"] == "Classic" and rows[group]["STATE"] == "Stable"
        assert rows["cli-list-empty"]["STATE"] == "Empty"
        assert rows["cli-list-848"]["TYPE"] == "Consumer"

        empties = {r["GROUP"] for r in table(ok(gw.bootstrap, "list", "--state", "Empty"))}
        assert "cli-list-empty" in empties and group not in empties and "cli-list-848" not in empties
        consumers = {g["group"] for g in groups_json(gw.bootstrap, "list", "--type", "consumer")}
        assert "cli-list-848" in consumers and group not in consumers
        classics = {g["group"] for g in groups_json(gw.bootstrap, "list", "--type", "classic")}
        assert {group, "cli-list-empty"} <= classics and "cli-list-848" not in classics

        bad = groups(gw.bootstrap, "list", "--state", "Sleepy")
        assert bad.returncode == 2 and "Invalid state list" in bad.stderr
    finally:
        kip848.close()


# -- describe ---------------------------------------------------------------------------------


def test_describe_offsets_lag_members_state(gw: GatewayProcess, active: Any) -> None:
    topic, group, c = active
    c.poll(50)
    rows = table(ok(gw.bootstrap, "describe", group))
    by_part = {int(r["PARTITION"]): r for r in rows}
    assert set(by_part) == {0, 1, 2}
    assert [by_part[p]["LOG-END-OFFSET"] for p in range(3)] == [str(n) for n in PER_PARTITION]
    assert by_part[0]["CURRENT-OFFSET"] == "4" and by_part[0]["LAG"] == "3"
    assert by_part[1]["CURRENT-OFFSET"] == "5" and by_part[1]["LAG"] == "0"
    assert by_part[2]["CURRENT-OFFSET"] == "-" and by_part[2]["LAG"] == "-"
    member_ids = {r["CONSUMER-ID"] for r in rows}
    assert len(member_ids) == 1 and member_ids.pop().startswith(f"{group}-client")
    assert {r["CLIENT-ID"] for r in rows} == {f"{group}-client"}
    assert all(r["HOST"].endswith("127.0.0.1") for r in rows)

    members = table(ok(gw.bootstrap, "describe", group, "--members", "--verbose"))
    assert len(members) == 1
    m = members[0]
    assert m["#PARTITIONS"] == "3" and m["CURRENT-ASSIGNMENT"] == f"{topic}:0,1,2"
    assert m["PROTOCOL"] == "classic"

    state = table(ok(gw.bootstrap, "describe", group, "--state"))[0]
    assert state["STATE"] == "Stable" and state["#MEMBERS"] == "1" and state["TYPE"] == "Classic"
    assert state["ASSIGNMENT-STRATEGY"] == "range"
    assert state["COORDINATOR (ID)"].startswith(gw.bootstrap)

    d = groups_json(gw.bootstrap, "describe", group, "--members")
    assert d["state"] == "Stable" and d["members"][0]["client_id"] == f"{group}-client"


def test_describe_consumer_protocol_member_epochs_and_targets(gw: GatewayProcess) -> None:
    from confluent_kafka import Consumer

    topic, group = "cli-848-t", "cli-848"
    produce(gw, topic)
    k = Consumer({"bootstrap.servers": gw.bootstrap, "group.id": group, "group.protocol": "consumer"})
    k.subscribe([topic])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(k.assignment()) < 3:
            k.poll(0.2)
        d = groups_json(gw.bootstrap, "describe", group, "--members")
        assert d["type"] == "consumer" and d["described_with"] == "ConsumerGroupDescribe"
        (m,) = d["members"]
        assert m["protocol"] == "consumer" and m["member_epoch"] == d["group_epoch"] >= 1
        assert (
            m["assignment"] == m["target_assignment"] == [{"topic": topic, "partition": p} for p in range(3)]
        )
        verbose = table(ok(gw.bootstrap, "describe", group, "--members", "--verbose"))[0]
        assert verbose["CURRENT-EPOCH"] == verbose["TARGET-EPOCH"] == str(d["group_epoch"])
        assert verbose["TARGET-ASSIGNMENT"] == f"{topic}:0,1,2"
        state = table(ok(gw.bootstrap, "describe", group, "--state", "--verbose"))[0]
        assert state["ASSIGNMENT-STRATEGY"] == "uniform" and state["TYPE"] == "Consumer"
        assert state["GROUP-EPOCH"] == str(d["group_epoch"])
    finally:
        k.close()


def test_describe_unknown_group_exits_3(gw: GatewayProcess) -> None:
    r = groups(gw.bootstrap, "describe", "no-such-group", subprocess=True)
    assert r.returncode == 3
    assert "Consumer group 'no-such-group' does not exist." in r.stderr


def test_unreachable_cluster_exits_1() -> None:
    r = groups("127.0.0.1:1", "--timeout", "2", "list", subprocess=True)
    assert r.returncode == 1 and "cannot connect" in r.stderr


def test_describe_several_groups_and_all_groups(gw: GatewayProcess) -> None:
    """Several groups per describe (positional and --group) and --all-groups, as
    kafka-consumer-groups.sh has them; with --json one list of the single-group objects."""
    topic = "cli-several"
    produce(gw, topic)
    empty_group(gw, topic, "cli-several-a", {0: 1})
    empty_group(gw, topic, "cli-several-b", {1: 2})
    out = ok(gw.bootstrap, "describe", "cli-several-a", "--group", "cli-several-b")
    assert {r["GROUP"] for r in table(out)} == {"cli-several-a", "cli-several-b"}
    listed = groups_json(
        gw.bootstrap, "describe", "cli-several-a", "cli-several-b", "no-such-group", expect=3
    )
    assert [d["group"] for d in listed] == ["cli-several-a", "cli-several-b", "no-such-group"]
    assert listed[2] == {"group": "no-such-group", "exists": False}
    every = groups_json(gw.bootstrap, "describe", "--all-groups")
    assert {"cli-several-a", "cli-several-b"} <= {d["group"] for d in every}
    assert groups(gw.bootstrap, "describe", "cli-several-a", "--all-groups").returncode == 2
    # other tests' groups may be active: those are refused (exit 4), the empty ones planned
    r = groups(gw.bootstrap, "reset-offsets", "--all-groups", "--topic", topic, "--to-earliest", "--export")
    assert r.returncode in (0, 4), r.stderr
    lines = set(r.stdout.splitlines())
    assert {f"cli-several-a,{topic},0,0", f"cli-several-b,{topic},1,0"} <= lines


# -- reset-offsets ----------------------------------------------------------------------------


def test_reset_offsets_every_scenario_dry_run_then_execute(gw: GatewayProcess, tmp_path: Path) -> None:
    topic, group = "cli-reset-t", "cli-reset"
    produce(gw, topic)
    empty_group(gw, topic, group, {0: 4, 1: 2, 2: 1})
    before = offsets_of(gw, group)
    ends = dict(enumerate(PER_PARTITION))

    def plan(*scenario: str) -> dict[int, int]:
        d = groups_json(gw.bootstrap, "reset-offsets", group, "--topic", topic, *scenario)
        assert d["executed"] is False
        return {o["partition"]: o["new_offset"] for o in d["offsets"]}

    assert plan("--to-earliest") == {0: 0, 1: 0, 2: 0}
    assert plan("--to-latest") == ends
    assert plan("--to-current") == {0: 4, 1: 2, 2: 1}
    assert plan("--to-offset", "4") == {0: 4, 1: 4, 2: 3}  # clamped to the log end
    assert plan("--shift-by", "2") == {0: 6, 1: 4, 2: 3}
    assert plan("--shift-by", "-3") == {0: 1, 1: 0, 2: 0}  # clamped to the log start
    future = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)).strftime(
        "%Y-%m-%dT%H:%M:%S.000Z"
    )
    assert plan("--to-datetime", future) == ends
    assert plan("--to-datetime", "2000-01-01T00:00:00.000+00:00") == {0: 0, 1: 0, 2: 0}
    only = groups_json(gw.bootstrap, "reset-offsets", group, "--topic", f"{topic}:1", "--to-earliest")
    assert [(o["partition"], o["new_offset"]) for o in only["offsets"]] == [(1, 0)]
    assert offsets_of(gw, group) == before, "a dry run changed offsets"

    # The table for people, in Kafka's words.
    rows = table(ok(gw.bootstrap, "reset-offsets", group, "--topic", topic, "--to-latest", "--dry-run"))
    assert [(r["GROUP"], r["TOPIC"], r["PARTITION"], r["NEW-OFFSET"]) for r in rows] == [
        (group, topic, str(p), str(n)) for p, n in ends.items()
    ]

    ok(gw.bootstrap, "reset-offsets", group, "--topic", topic, "--shift-by", "1", "--execute")
    assert offsets_of(gw, group) == {(topic, 0): 5, (topic, 1): 3, (topic, 2): 2}

    # CSV export, as Kafka's tool writes it, then the same plan back from the file.
    exported = ok(gw.bootstrap, "reset-offsets", group, "--topic", topic, "--to-earliest", "--export")
    assert list(csv.reader(io.StringIO(exported))) == [[topic, str(p), "0"] for p in range(3)]
    ok(gw.bootstrap, "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
    assert set(offsets_of(gw, group).values()) == {0}
    plan_file = tmp_path / "plan.csv"
    plan_file.write_text(f"{topic},0,6\n{topic},2,3\n")
    ok(gw.bootstrap, "reset-offsets", group, "--from-file", str(plan_file), "--execute")
    assert offsets_of(gw, group) == {(topic, 0): 6, (topic, 1): 0, (topic, 2): 3}
    multi = tmp_path / "multi.csv"
    multi.write_text(f"other,{topic},0,1\n{group},{topic},1,4\n")
    ok(gw.bootstrap, "reset-offsets", group, "--from-file", str(multi), "--execute")
    assert offsets_of(gw, group)[(topic, 1)] == 4 and offsets_of(gw, group)[(topic, 0)] == 6

    bad = tmp_path / "bad.csv"
    bad.write_text("not,a,number\n")
    r = groups(gw.bootstrap, "reset-offsets", group, "--from-file", str(bad))
    assert r.returncode == 2 and "line 1" in r.stderr


def test_reset_offsets_of_an_active_group_is_refused(gw: GatewayProcess, active: Any) -> None:
    topic, group, c = active
    c.poll(50)
    r = groups(gw.bootstrap, "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
    assert r.returncode == 4
    assert f"Assignments can only be reset if the group '{group}' is inactive" in r.stderr
    assert offsets_of(gw, group)[(topic, 0)] == 4
    usage = groups(gw.bootstrap, "reset-offsets", group, "--to-earliest")
    assert usage.returncode == 2 and "--all-topics, --topic" in usage.stderr


# -- delete-offsets, delete -------------------------------------------------------------------


def test_delete_offsets_refused_while_subscribed_then_deleted(gw: GatewayProcess, active: Any) -> None:
    topic, group, c = active
    c.poll(50)
    r = groups(gw.bootstrap, "delete-offsets", group, "--topic", f"{topic}:0")
    assert r.returncode == 4, r.stdout + r.stderr
    rows = table(r.stdout)
    assert rows == [{"TOPIC": topic, "PARTITION": "0", "STATUS": rows[0]["STATUS"]}]
    assert "actively subscribed" in rows[0]["STATUS"]

    empty_group(gw, topic, "cli-delo", {0: 3, 1: 3, 2: 3})
    out = ok(gw.bootstrap, "delete-offsets", "cli-delo", "--topic", f"{topic}:0,2")
    assert "Request succeeded for deleting offsets from group cli-delo." in out
    assert {r["PARTITION"]: r["STATUS"] for r in table(out)} == {"0": "Successful", "2": "Successful"}
    assert offsets_of(gw, "cli-delo") == {(topic, 1): 3}
    d = groups_json(gw.bootstrap, "delete-offsets", "cli-delo", "--topic", topic)
    assert {(p["partition"], p["error"]) for p in d["partitions"]} == {(0, None), (1, None), (2, None)}
    assert offsets_of(gw, "cli-delo") == {}


def test_delete_groups(gw: GatewayProcess, active: Any) -> None:
    topic, group, c = active
    c.poll(50)
    empty_group(gw, topic, "cli-del-a", {0: 1})
    empty_group(gw, topic, "cli-del-b", {0: 1})
    out = ok(gw.bootstrap, "delete", "cli-del-a", "cli-del-b")
    assert "Deletion of requested consumer groups ('cli-del-a', 'cli-del-b') was successful." in out
    assert groups(gw.bootstrap, "describe", "cli-del-a").returncode == 3
    r = groups(gw.bootstrap, "delete", group)
    assert r.returncode == 4 and f"* Group '{group}' could not be deleted due to: NON_EMPTY_GROUP" in r.stdout
    r = groups(gw.bootstrap, "delete", "cli-del-a")
    assert r.returncode == 3 and "GROUP_ID_NOT_FOUND" in r.stdout


# -- config -----------------------------------------------------------------------------------


def test_config_set_and_delete(gw: GatewayProcess) -> None:
    group = "cli-config"
    d = groups_json(gw.bootstrap, "config", group, "--set", "consumer.session.timeout.ms=5000")
    assert d["configs"]["consumer.session.timeout.ms"] == {"value": "5000", "source": "dynamic"}
    rows = {r["NAME"]: r for r in table(ok(gw.bootstrap, "config", group))}
    assert rows["consumer.session.timeout.ms"]["VALUE"] == "5000"
    # the gateway was started with both broker settings: a group falls back to them, which Kafka
    # reports as a static broker config
    assert rows["consumer.heartbeat.interval.ms"]["SOURCE"] == "static broker"
    d = groups_json(gw.bootstrap, "config", group, "--delete", "consumer.session.timeout.ms")
    assert d["configs"]["consumer.session.timeout.ms"]["source"] == "static broker"
    r = groups(gw.bootstrap, "config", group, "--set", "no.such.config=1")
    assert r.returncode == 1 and "INVALID_CONFIG" in r.stderr
    r = groups(gw.bootstrap, "config", group, "--set", "novalue")
    assert r.returncode == 2


def test_output_is_plain_when_piped_and_json_is_json(gw: GatewayProcess, active: Any) -> None:
    _topic, group, _c = active
    piped = groups(gw.bootstrap, "describe", group, subprocess=True)
    assert piped.returncode == 0 and "\x1b[" not in piped.stdout  # not a terminal: no colour
    assert table(piped.stdout)[0]["GROUP"] == group
    json.loads(groups(gw.bootstrap, "--json", "describe", group).stdout)


def test_describe_members_shows_static_instance_ids(gw: GatewayProcess) -> None:
    from confluent_kafka import Consumer

    topic, group = "cli-static-t", "cli-static"
    produce(gw, topic)
    k = Consumer(
        {
            "bootstrap.servers": gw.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "group.instance.id": "static-1",
            "client.id": "static-client",
        }
    )
    k.subscribe([topic])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(k.assignment()) < 3:
            k.poll(0.2)
        (row,) = table(ok(gw.bootstrap, "describe", group, "--members"))
        assert row["GROUP-INSTANCE-ID"] == "static-1" and row["CLIENT-ID"] == "static-client"
        assert row["#PARTITIONS"] == "3" and row["PROTOCOL"] == "consumer"
        (m,) = groups_json(gw.bootstrap, "describe", group, "--members")["members"]
        assert m["instance_id"] == "static-1"
        rep = groups_json(gw.bootstrap, "migration", group)
        assert rep["members"][0]["instance_id"] == "static-1" and rep["phase"] == "consumer"
    finally:
        k.close()
