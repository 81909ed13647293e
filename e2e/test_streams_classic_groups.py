"""A Kafka Streams 3.9 application on the classic protocol (its default: protocol type `consumer`,
protocol `stream`) on groupshift embedded, and what groupshift reads of it (issue 31, part 3):

- the JoinGroup metadata and SyncGroup assignment each instance sent / received, as
  DescribeGroups returns them, decode with translation.streams_classic_protocol (SubscriptionInfo
  and AssignmentInfo at the version Kafka Streams 3.9 speaks, 11) and encode back to the same
  bytes; the decoded process ids are two, the endpoints are the instances' `application.server`,
  and the decoded active and standby tasks are exactly what each instance reports of itself
  (its state listener's `TASKS` / `STANDBY` lines);
- `groups list --type` marks the group as a classic Kafka Streams group, `groups describe
  --members` shows its members with tasks, process and endpoint, `groups migration` shows the
  tasks too, and `check upgrade` says nothing blocks converting it to a streams group (and that
  groupshift does not build that conversion yet).

The application is e2e/java_programs/StreamsWordCountClassic.java, two instances with one
standby replica, compiled against the kafka-streams 3.9.2 jars from Maven Central
(`harness.kafka_dist.maven`, component "streams"). One groupshift for the module.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from e2e.conftest import Gateways
from e2e.groups_cli import groups_json, ok, table
from e2e.java_compile import finish_javac, start_javac
from e2e.streams_wordcount import ALL_TASKS, INPUT, LINES, OUTPUT, Instance
from groupshift.cli import main as groupshift_main
from harness.kafka_dist import resolve_component
from tools.groups.wire import AdminWire
from translation.embedded_protocol import parse_assignment
from translation.streams_classic_protocol import (
    LATEST_SUPPORTED_VERSION,
    decode_assignment_info,
    encode_assignment_info,
    encode_subscription_info,
    parse_streams_member_metadata,
)

pytestmark = pytest.mark.e2e

SOURCE = Path(__file__).parent / "java_programs" / "StreamsWordCountClassic.java"
APP = "wordcount-classic"
ENDPOINTS = ("localhost:7101", "localhost:7102")


class ClassicInstance(Instance):
    """A StreamsWordCountClassic JVM, its `application.server` endpoint its last argument."""

    def __init__(self, classpath: str, bootstrap: str, tmp: Path, i: int) -> None:
        super().__init__(
            classpath,
            bootstrap,
            tmp / f"state-{i}",
            tmp / f"instance-{i}.log",
            app=APP,
            main_class="StreamsWordCountClassic",
            extra_args=(ENDPOINTS[i - 1],),
        )

    def standby(self) -> set[str] | None:
        found = [line for line in self.lines if line.startswith("STANDBY")]
        if not found:
            return None
        return {t for t in found[-1][len("STANDBY") :].strip().split(",") if t}


def test_classic_streams_group_decoded(module_gateways: Gateways, tmp_path: Path) -> None:
    dist = resolve_component("3.9.2", "streams")
    classes, javac = _compiled(dist.classpath, dist.home, tmp_path / "classes")
    # No initial rebalance delay: Kafka's 3 s, extended by each joining instance, is most of the
    # time to a stable group; the instances rebalance again as the second joins either way. No
    # streams assignment interval either: targets in the heartbeat, as before it was modelled.
    gw = module_gateways.start(
        "streams-classic",
        sets=[
            "group.initial.rebalance.delay.ms=0",
            "group.streams.initial.rebalance.delay.ms=0",
            "group.streams.assignment.interval.ms=0",
        ],
    )
    bootstrap = gw.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(INPUT, 4, 1), NewTopic(OUTPUT, 2, 1)]).values():
        f.result()
    p = Producer({"bootstrap.servers": bootstrap})
    for i, line in enumerate(LINES[:60]):
        p.produce(INPUT, key=str(i), value=line)
    p.flush(30)
    if javac is not None:
        finish_javac(javac)
        classes = _keep(classes, dist.classpath, dist.home)

    classpath = f"{classes}:{dist.classpath}"
    instances = [ClassicInstance(classpath, bootstrap, tmp_path, i) for i in (1, 2)]
    wire = AdminWire(bootstrap)
    try:
        # Both instances running with disjoint shares of the 8 tasks, each the standby of the
        # other's counting tasks, and the group Stable with the assignment they run.
        deadline = time.monotonic() + 40
        shares: list[set[str]] = [set(), set()]
        described = None
        while time.monotonic() < deadline:
            shares = [i.tasks() or set() for i in instances]
            if all(shares) and shares[0] | shares[1] == ALL_TASKS and not shares[0] & shares[1]:
                described = wire.describe_group(APP)
                if described.group_state == "Stable" and len(described.members) == 2:
                    decoded = {
                        str(parse_streams_member_metadata(m.member_metadata).info.endpoint): m
                        for m in described.members
                    }
                    active = {
                        e: {
                            str(t)
                            for t in decode_assignment_info(
                                parse_assignment(m.member_assignment).user_data or b""
                            ).active_tasks
                        }
                        for e, m in decoded.items()
                    }
                    if [active.get(e) for e in ENDPOINTS] == shares:
                        break
            time.sleep(0.5)
        assert described is not None, [i.lines for i in instances]
        assert described.protocol_type == "consumer" and described.protocol_data == "stream"
        by_endpoint = {}
        for m in described.members:
            member = parse_streams_member_metadata(m.member_metadata)
            info = member.info
            assert info.version == LATEST_SUPPORTED_VERSION == info.latest_supported_version
            assert encode_subscription_info(info) == member.subscription.user_data
            assignment = parse_assignment(m.member_assignment)
            assert assignment.user_data is not None
            ainfo = decode_assignment_info(assignment.user_data)
            assert encode_assignment_info(ainfo) == assignment.user_data
            assert ainfo.version == LATEST_SUPPORTED_VERSION and ainfo.error_code == 0
            by_endpoint[info.endpoint] = (info, ainfo, assignment)
        assert sorted(by_endpoint) == sorted(ENDPOINTS)
        assert len({info.process_id for info, _, _ in by_endpoint.values()}) == 2
        for inst, endpoint in zip(instances, ENDPOINTS, strict=True):
            info, ainfo, assignment = by_endpoint[endpoint]
            assert {str(t) for t in ainfo.active_tasks} == inst.tasks(), (endpoint, ainfo, inst.lines)
            assert {str(t) for t, _ in ainfo.standby_tasks} == inst.standby(), (endpoint, ainfo, inst.lines)
            # partitions by host: each endpoint's entry names the partitions its active tasks read.
            hosts = {h.endpoint: set(h.partitions) for h in ainfo.partitions_by_host}
            assert set(hosts) == set(ENDPOINTS)
            assert hosts[endpoint] == {(t, p) for t, ps in assignment.partitions for p in ps}

        # -- the operator tools ----------------------------------------------------------------
        listed = groups_json(bootstrap, "list", "--type", "classic")
        (row,) = [g for g in listed if g["group"] == APP]
        assert row["type"] == "Classic" and row["kafka_streams"] is True
        text = table(ok(bootstrap, "list", "--type", "classic"))
        assert [r["TYPE"] for r in text if r["GROUP"] == APP] == ["Classic (Kafka Streams)"]

        members = groups_json(bootstrap, "describe", APP, "--members")
        assert members["kafka_streams"] is True
        got = {m["user_endpoint"]: m for m in members["members"]}
        for inst, endpoint in zip(instances, ENDPOINTS, strict=True):
            m = got[endpoint]
            active = {f"{t['subtopology']}_{p}" for t in m["assignment"]["active"] for p in t["partitions"]}
            standby = {f"{t['subtopology']}_{p}" for t in m["assignment"]["standby"] for p in t["partitions"]}
            assert active == inst.tasks() and standby == inst.standby()
            assert m["process_id"] == str(by_endpoint[endpoint][0].process_id)
            assert m["subscription_version"] == 11
        rows = table(ok(bootstrap, "describe", APP, "--members"))
        assert {r["ENDPOINT"] for r in rows} == set(ENDPOINTS)
        assert all(r["ASSIGNMENTS"].startswith("ACTIVE: ") and "STANDBY: " in r["ASSIGNMENTS"] for r in rows)

        view = groups_json(bootstrap, "migration", APP)
        assert view["phase"] == "classic" and view["kafka_streams"]["convertible"] is True
        assert {m["endpoint"] for m in view["kafka_streams"]["members"]} == set(ENDPOINTS)

        verdicts = _check_upgrade(bootstrap, APP)
        (v,) = verdicts
        assert v["verdict"] == "READY"
        names = {d["name"]: d for d in v["details"]}
        assert names["streams-conversion"]["status"] == "ok", v
        assert names["streams-online-conversion"]["status"] == "ok", v
    finally:
        wire.close()
        for i in instances:
            i.stop()


def _compiled(classpath: str, dist_home: Path, tmp: Path) -> tuple[Path, subprocess.Popen[bytes] | None]:
    """The program's classes: compiled once per source and Kafka Streams jars and kept beside the
    cached jars (javac takes ~10 s of this module's time on a loaded machine), or the javac
    compiling them into `tmp` (then `_keep` them)."""
    cached = _classes_dir(classpath, dist_home)
    if cached.is_dir():
        return cached, None
    return tmp, start_javac(classpath, SOURCE, tmp)


def _classes_dir(classpath: str, dist_home: Path) -> Path:
    key = hashlib.sha256(SOURCE.read_bytes() + classpath.encode()).hexdigest()[:12]
    return dist_home / f"classes-{SOURCE.stem}-{key}"


def _keep(compiled: Path, classpath: str, dist_home: Path) -> Path:
    """Copy freshly compiled classes into the cache (a rename of a complete copy, so a parallel
    run sees all or nothing); the cached directory to use."""
    cached = _classes_dir(classpath, dist_home)
    staging = cached.with_name(f"{cached.name}.{os.getpid()}")
    shutil.copytree(compiled, staging, dirs_exist_ok=True)
    try:
        os.rename(staging, cached)
    except OSError:  # another run kept them first
        shutil.rmtree(staging, ignore_errors=True)
    return cached


def _check_upgrade(bootstrap: str, group: str) -> list[dict[str, object]]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        groupshift_main(["check", "upgrade", "--bootstrap-server", bootstrap, group, "--json"])
    data = json.loads(out.getvalue())
    verdicts = data["groups"]
    return [v for v in verdicts if v["group"] == group]
