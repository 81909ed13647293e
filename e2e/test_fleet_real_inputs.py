"""`groupshift fleet report` on the data dir of a real `groupshift serve` and its event log.

A gateway is started (e2e/harness.py) and real clients make its groups: classic groups of
kafka-python members (range), KIP-848 groups of confluent-kafka members
(`group.protocol=consumer`), a classic group upgraded online (a kafka-python member joined by a
consumer-protocol member: a migration in the event log), librdkafka cooperative-sticky members
whose assignment carries userData (KAFKA-18134), and, over the wire, the groups
e2e/test_check_upgrade.py proves blocked (a Kafka Connect-style group, a malformed embedded
subscription, a userData assignment) plus a group with offsets only, and a group that committed,
left and was deleted (DeleteGroups: its GroupMetadata and offsets tombstoned). Then the gateway
stops and the command line (`groupshift fleet report NAME=DATA_DIR NAME=GATEWAY_LOG SYNTH_DIR`,
one run for both tests of the module, beside a damaged `fleet synth` directory) reads what it
left:

* the verdict tables equal `groupshift check upgrade` / `check downgrade --to classic-protocol`
  / `--to kafka-3.9` on the same data dir, verdict, reason and fix, group for group;
* the deleted group is no fleet group (no facts row, no upgrade verdict);
* the upgraded group's health row shows the conversion of the event log;
* `report.html`, rendered by headless Chromium, lists every blocked group with its reason in
  words (no check ids like `record-3`); its screenshot goes to build/artifacts/.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import Gateways
from e2e.differential import Session
from e2e.harness import REPO
from e2e.migration import poll_unstranded
from e2e.test_check_upgrade import librdkafka_cooperative_sticky, offsets_only, solo, wait_type
from translation.embedded_protocol import Subscription, serialize_assignment, serialize_subscription

pytestmark = pytest.mark.e2e

ARTIFACTS = REPO / "build" / "artifacts"
TARGETS = ("classic-protocol", "kafka-3.9")
Verdicts = dict[str, tuple[str, str, str | None]]


# --- the tools, as an operator runs them ----------------------------------------------------------


def fleet_report(inputs: Sequence[str], out: Path, targets: Sequence[str] = TARGETS) -> dict[str, Any]:
    """`groupshift fleet report` (Spark, local mode) as a subprocess; its tables read back with
    pyarrow (no second JVM in the test process)."""
    import pyarrow.dataset as ds

    args = [sys.executable, "-m", "groupshift", "fleet", "report", *inputs, "--out", str(out)]
    args += ["--master", "local[1]"] + [a for t in targets for a in ("--downgrade-target", t)]
    r = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "Traceback" not in r.stderr
    tables: dict[str, Any] = {"stdout": r.stdout}
    for name in ("facts", "verdicts", "health", "problems"):
        if (out / name).is_dir():
            tables[name] = ds.dataset(str(out / name), format="parquet").to_table().to_pylist()
    return tables


def check_verdicts(input_args: Sequence[str], command: str, target: str | None = None) -> Verdicts:
    """{group: (verdict, reason, fix)} of `groupshift check ... --all --json`."""
    args = [sys.executable, "-m", "groupshift", "check", command, *input_args, "--all", "--json"]
    if target is not None:
        args += ["--to", target]
    r = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode in (0, 1, 2, 3), r.stderr[-3000:]
    doc = json.loads(r.stdout)
    return {g["group"]: (g["verdict"], g["reason"], g["fix"]) for g in doc["groups"]}


def fleet_verdicts(tables: dict[str, Any], cluster: str, direction: str, target: str) -> Verdicts:
    return {
        v["group"]: (v["verdict"], v["reason"], v["fix"])
        for v in tables["verdicts"]
        if v["cluster"] == cluster and v["direction"] == direction and v["target"] == target
    }


class CheckRuns:
    """`groupshift check` of one input: the upgrade and every downgrade target, the processes
    started side by side at once. They only read the input, so a test starts them before the
    fleet job and they run while it does (one after the other, after it, they were a good part
    of each fleet test's time in CI)."""

    def __init__(self, check_input: Sequence[str]) -> None:
        self._pool = ThreadPoolExecutor(1 + len(TARGETS))
        self.upgrade = self._pool.submit(check_verdicts, check_input, "upgrade")
        self.downgrades = {t: self._pool.submit(check_verdicts, check_input, "downgrade", t) for t in TARGETS}
        self._pool.shutdown(wait=False)


def assert_fleet_equals_check(tables: dict[str, Any], cluster: str, checks: CheckRuns) -> None:
    """The fleet's verdict table is `groupshift check`'s, for the upgrade and every target."""
    got = fleet_verdicts(tables, cluster, "upgrade", "consumer-protocol")
    assert got == checks.upgrade.result()
    for target in TARGETS:
        got = fleet_verdicts(tables, cluster, "downgrade", target)
        assert got == checks.downgrades[target].result(), target


def assert_html_lists_blocked(out: Path, tables: dict[str, Any], shot: str) -> str:
    """report.html in headless Chromium: a row per negative verdict in the blocked-groups table,
    reasons in words; a screenshot under build/artifacts/."""
    import html
    import re

    from harness import headless

    page = out / "report.html"
    dom = headless.dump_dom(page)
    blocked = re.search(r'<table id="blocked-groups">(.*?)</table>', dom, re.S)
    assert blocked, "no blocked-groups table"
    rows = re.findall(r"<tr>(.*?)</tr>", blocked.group(1), re.S)[1:]
    negative = [v for v in tables["verdicts"] if v["verdict"] in ("NOT-READY", "UNSAFE", "NEEDS-ACTION")]
    assert negative and len(rows) == len(negative)
    text = html.unescape(blocked.group(1))
    for v in negative:
        assert f"<td>{v['group']}</td>" in blocked.group(1) and v["reason"] in text, v
    assert not re.search(r"<td>record-\d+</td>", dom), "a check id shown as a reason"
    headless.screenshot(page, ARTIFACTS / shot, size=(1400, 3000))
    return dom


def snapshot(log_dir: Path, to: Path) -> Path:
    """A copy of a running broker's log dir, so that the fleet and `check` read the same bytes
    (a broker keeps writing: sessions expire, members leave)."""
    import shutil

    shutil.copytree(log_dir, to, ignore=shutil.ignore_patterns("*.lock", ".lock"))
    return to


def close_all(clients: Sequence[Any], seconds: float = 20.0) -> None:
    """Close clients whose server is gone, in parallel, each given `seconds` (a client retries
    its LeaveGroup); a client still closing after that is left to the daemon thread."""
    threads = [threading.Thread(target=c.close, daemon=True) for c in clients]
    for t in threads:
        t.start()
    end = time.monotonic() + seconds
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))


# --- the groups -------------------------------------------------------------------------------------


def poll_until(clients: Sequence[Any], done: Callable[[], bool], timeout: float = 90.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for c in clients:
            if hasattr(c, "consume"):
                c.poll(0.1)
            else:
                poll_unstranded(c, 200)
        if done():
            return
    raise AssertionError("the members did not get their assignments in time")


def kafka_python_member(bootstrap: str, gid: str, topic: str) -> Any:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=gid,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        partition_assignment_strategy=[RangePartitionAssignor],
        session_timeout_ms=30000,
        heartbeat_interval_ms=1000,
    )
    # kafka-python 3.0.12: know the topic before subscribing (e2e/groups.py says why)
    end = time.monotonic() + 30
    while not c.partitions_for_topic(topic):
        assert time.monotonic() < end, "topic metadata unknown"
        time.sleep(0.2)
    c.subscribe([topic])
    return c


def consumer_protocol_member(bootstrap: str, gid: str, topic: str) -> Any:
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": gid,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    return c


def assigned(c: Any) -> bool:
    return bool(c.assignment())


def commit(c: Any, topic: str, offset: int) -> None:
    if hasattr(c, "consume"):
        from confluent_kafka import TopicPartition

        c.commit(offsets=[TopicPartition(topic, p, offset) for p in range(3)], asynchronous=False)
    else:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        c.commit({TopicPartition(topic, p): OffsetAndMetadata(offset, "", -1) for p in range(3)})


def delete_group(s: Session, gid: str) -> None:
    r = s.raw(42, 2, groups_names=[gid])
    assert r.results[0].error_code.name == "none", r


@pytest.fixture(scope="module")
def groupshift_data_dir(module_gateways: Gateways) -> Iterator[tuple[Path, Path, dict[str, str]]]:
    """Groups of every kind made on a real gateway, which is then stopped: (data dir, gateway
    log, {kind: group id})."""
    gw = module_gateways.start("groupshift")
    s = Session("groupshift", gw.bootstrap, {"run": uuid.uuid4().hex[:6]})
    topic = s.topic("orders")
    s.create_topic(topic, 3)
    names = {}
    clients: list[Any] = []
    with ExitStack() as stack:
        stack.callback(close_all, clients)
        # blocked and plain classic groups over the wire (members that never heartbeat)
        solo(s, "ready")
        solo(
            s,
            "userdata",
            protocol="cooperative-sticky",
            assignment=serialize_assignment({topic: [0, 1, 2]}, 1, b"\x00\x00\x00\x01"),
        )
        solo(s, "connect", protocol_type="connect", protocol="default", metadata=b"\x00\x01connect-config")
        v0 = serialize_subscription(Subscription(0, (topic,)))
        solo(s, "malformed", metadata=b"\x00\x01" + v0[2:])
        offsets_only(s, "offsets")  # fmt: skip
        for n in ("ready", "userdata", "connect", "malformed", "offsets"):
            names[n] = s.group(n)
        # real clients: kafka-python classic, confluent-kafka KIP-848, librdkafka cooperative-sticky
        names["classic"] = s.group("classic")
        kp = [kafka_python_member(gw.bootstrap, names["classic"], topic) for _ in range(2)]
        clients += kp
        names["consumer"] = s.group("consumer")
        cg = [consumer_protocol_member(gw.bootstrap, names["consumer"], topic) for _ in range(2)]
        clients += cg
        poll_until(kp + cg, lambda: all(assigned(c) for c in kp + cg))
        commit(kp[0], topic, 11)
        commit(cg[0], topic, 12)
        names["rdk"] = s.group("rdk")
        clients += librdkafka_cooperative_sticky(s, "rdk")
        # an online upgrade: a kafka-python member, then a consumer-protocol member joins
        names["upgraded"] = s.group("upgraded")
        old = kafka_python_member(gw.bootstrap, names["upgraded"], topic)
        clients.append(old)
        poll_until([old], lambda: assigned(old))
        new = consumer_protocol_member(gw.bootstrap, names["upgraded"], topic)
        clients.append(new)
        end = time.monotonic() + 60
        while True:
            poll_until([old, new], lambda: True, timeout=1)
            try:
                wait_type(s, names["upgraded"], "consumer", timeout=0.2)
                break
            except AssertionError:
                assert time.monotonic() < end, "the classic group was not upgraded"
        poll_until([old, new], lambda: assigned(old) and assigned(new))
        # a group that committed, left and was deleted
        names["deleted"] = s.group("deleted")
        gone = kafka_python_member(gw.bootstrap, names["deleted"], topic)
        poll_until([gone], lambda: assigned(gone))
        commit(gone, topic, 5)
        gone.close(autocommit=False)
        delete_group(s, names["deleted"])
        s.close()
        assert gw.stop() == 0
    yield gw.data_dir, gw.log_path, names


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """What `fleet synth --out DIR` wrote, with its topics.json and settings.json of cluster-01
    damaged afterwards; and the synth command's own run (its test checks it)."""
    fleet = tmp_path_factory.mktemp("synth") / "fleet"
    r = subprocess.run(
        [sys.executable, "-m", "groupshift", "fleet", "synth", "--clusters", "2", "--groups", "4",
         "--records", "400", "--hours", "0.5", "--out", str(fleet)],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if r.returncode == 0:
        (fleet / "cluster-01" / "topics.json").write_text('{"0f3c": "orders"}')
        (fleet / "cluster-01" / "settings.json").write_text("[1, 2]")
    return fleet, r


class Report:
    """One `groupshift fleet report gs=DATA_DIR gs=GATEWAY_LOG SYNTH_DIR` for both tests: the
    Spark JVM and job are most of each test's time, and an operator's fleet mixes inputs like
    this anyway. `groupshift check` of the data dir runs while the fleet job does."""

    def __init__(self, out: Path, tables: dict[str, Any], checks: CheckRuns) -> None:
        self.out, self.tables, self.checks = out, tables, checks
        self._dom: str | None = None

    def dom(self) -> str:
        """report.html in headless Chromium lists every blocked group, of every cluster (asserted
        once, on the first call, for the page both tests read)."""
        if self._dom is None:
            self._dom = assert_html_lists_blocked(self.out, self.tables, "fleet-groupshift-data-dir.png")
        return self._dom


@pytest.fixture(scope="module")
def report(
    groupshift_data_dir: tuple[Path, Path, dict[str, str]],
    synth_dir: tuple[Path, subprocess.CompletedProcess[str]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Report:
    data_dir, log, _names = groupshift_data_dir
    fleet, synthesized = synth_dir
    assert synthesized.returncode == 0, synthesized.stderr[-3000:]
    out = tmp_path_factory.mktemp("fleet-report") / "report"
    checks = CheckRuns(["--data-dir", str(data_dir)])  # they run while the fleet job does
    return Report(out, fleet_report([f"gs={data_dir}", f"gs={log}", str(fleet)], out), checks)


def test_fleet_report_on_a_groupshift_data_dir(
    groupshift_data_dir: tuple[Path, Path, dict[str, str]], report: Report
) -> None:
    data_dir, _log, names = groupshift_data_dir
    assert json.loads((data_dir / "topics.json").read_text())["version"] == 1  # the server's format
    tables = report.tables
    assert [p for p in tables.get("problems", []) if p["cluster"] == "gs"] == []
    facts = {f["group"]: f for f in tables["facts"] if f["cluster"] == "gs"}
    assert set(facts) == set(names.values()) - {names["deleted"]}, sorted(facts)
    assert {k: facts[names[k]]["type"] for k in ("classic", "consumer", "upgraded", "offsets")} == {
        "classic": "classic",
        "consumer": "consumer",
        "upgraded": "consumer",
        "offsets": "empty",
    }
    assert facts[names["upgraded"]]["classic_members"] == 1 == facts[names["upgraded"]]["consumer_members"]
    assert_fleet_equals_check(tables, "gs", report.checks)
    upgrade = fleet_verdicts(tables, "gs", "upgrade", "consumer-protocol")
    assert names["deleted"] not in upgrade
    blocked = {g for g, (v, _r, _f) in upgrade.items() if v == "NOT-READY"}
    assert blocked == {names[k] for k in ("userdata", "connect", "malformed", "rdk")}, upgrade
    health = {h["group"]: h for h in tables["health"] if h["cluster"] == "gs"}
    assert health[names["upgraded"]]["conversion"] == "upgrade", health[names["upgraded"]]
    assert [g for g, h in health.items() if h["deleted"]] == [names["deleted"]]
    dom = report.dom()
    assert "<td>gs</td>" in dom and f"<td>{names['deleted']}</td>" not in dom


def test_fleet_report_reads_a_synth_dir_and_reports_bad_inputs(
    synth_dir: tuple[Path, subprocess.CompletedProcess[str]], report: Report, tmp_path: Path
) -> None:
    """`fleet report DIR` on what `fleet synth --out DIR` wrote finds its cluster folders; a
    damaged topics.json or settings.json is a `problems` row, not a stack trace."""
    fleet, r = synth_dir
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"fleet report {fleet} --out" in r.stdout
    tables = report.tables
    assert {f["cluster"] for f in tables["facts"]} == {"gs", "cluster-00", "cluster-01"}
    problems = sorted((Path(p["file"]).name, p["problem"]) for p in tables["problems"])
    assert problems == [
        ("settings.json", "expected a JSON object of broker settings; the verdicts assume Kafka's "
         "default settings"),
        ("topics.json", 'not read: expected an object with a "topics" list'),
    ], problems  # fmt: skip
    page = (report.out / "report.html").read_text()
    assert "Inputs not read" in page and "topics.json" in page
    bad = subprocess.run(
        [sys.executable, "-m", "groupshift", "fleet", "report", f"x={tmp_path / 'nowhere'}",
         "--out", str(tmp_path / "report")],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
