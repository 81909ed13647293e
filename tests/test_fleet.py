"""`groupshift fleet` (tools/fleet): the Spark job against a plain-Python reference, the synthetic
fleet, the report in a real browser, and the job on a real Spark standalone cluster.

All Spark tests share one local-mode session (`spark` fixture, tests/plugins/fleet.py) and one
synthetic fleet written by the real engine (`small_fleet`).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from records.dump import iter_entries
from tools.fleet.inputs import Cluster, InputError, discover
from tools.fleet.reference import facts_and_verdicts, health_rows

REPO = Path(__file__).resolve().parents[1]
TARGETS = ["classic-protocol", "kafka-3.9"]


def _inputs(fleet: Path) -> list[str]:
    return [f"{p.name}={p}" for p in sorted(fleet.iterdir()) if p.is_dir()]


def _key(row: dict[str, Any]) -> tuple[str, ...]:
    return (row["cluster"], row["group"], row.get("direction") or "", row.get("target") or "")


def _rows(df: Any) -> list[dict[str, Any]]:
    return sorted((r.asDict(recursive=True) for r in df.collect()), key=_key)


def _same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys(), (x, y)
        for k in x:
            if isinstance(x[k], float) and isinstance(y[k], float):
                assert math.isclose(x[k], y[k], rel_tol=1e-9, abs_tol=1e-9), (k, x, y)
            else:
                assert x[k] == y[k], (k, x["group"], x[k], y[k])


# --- the synthetic fleet (no Spark) -------------------------------------------------------------


def test_synth_writes_engine_records_and_event_logs(small_fleet: Path) -> None:
    clusters = discover(_inputs(small_fleet))
    assert [c.name for c in clusters] == ["cluster-00", "cluster-01", "cluster-02"]
    kinds: Counter[str] = Counter()
    for c in clusters:
        assert c.segments and c.events and c.settings["group.consumer.max.size"] == "24"
        for _partition, path in c.segments:
            for e in iter_entries(path):
                assert e["type"] not in ("error", "unknown"), e  # every record decodes
                kinds[e["type"]] += 1
    # classic groups, KIP-848 groups and their regexes, offsets: all written by the engine
    for kind in ("OffsetCommit", "GroupMetadata", "ConsumerGroupMemberMetadata", "ConsumerGroupMetadata"):
        assert kinds[kind] > 0, kinds
    assert sum(kinds.values()) >= 6000
    events = Counter(
        json.loads(line)["event"]
        for c in clusters
        for p in c.events
        for line in Path(p).read_text().splitlines()
    )
    assert events["group.converted"] > 0 and events["member.fenced"] + events["member.left"] > 0, events


def test_reference_verdicts_cover_the_blockers(small_fleet: Path) -> None:
    facts, verdicts = facts_and_verdicts(discover(_inputs(small_fleet)), TARGETS)
    assert {f["type"] for f in facts} >= {"classic", "consumer", "empty"}
    upgrade = Counter((v["verdict"], v["blocker"]) for v in verdicts if v["direction"] == "upgrade")
    assert upgrade[("READY", None)] > 0
    blockers = {b for (verdict, b) in upgrade if verdict == "NOT-READY"}
    assert {"protocol-type", "size"} <= blockers, upgrade
    assert any(f["static_members"] for f in facts) and any(f["regexes"] for f in facts)
    health = health_rows(discover(_inputs(small_fleet)))
    upgraded = [h for h in health if h["conversion"] == "upgrade"]
    assert upgraded and all(h["migration_steps"] >= 1 for h in upgraded)


@pytest.mark.e2e
def test_inputs_are_checked(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no __consumer_offsets-N segments"):
        discover([f"x={tmp_path}"])
    with pytest.raises(InputError, match="neither a directory nor a file"):
        discover([f"x={tmp_path / 'missing'}"])
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "groupshift",
            "fleet",
            "report",
            f"x={tmp_path}",
            "--out",
            str(tmp_path / "o"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 2 and "no __consumer_offsets-N segments" in r.stderr


def test_health_counts_eager_revocation() -> None:
    from tools.fleet.health import health, parse_event

    T0 = 1_767_225_600_000  # epoch milliseconds, as the gateway's numeric timestamps
    lines = [
        {"event": "group.generation_started", "group": "g", "protocol": "range", "timestamp": T0 + 0},
        {"event": "member.assignment_changed", "group": "g", "member": "a", "assigned": ["t-0", "t-1"],
         "timestamp": T0 + 1000},
        {"event": "group.rebalance_prepared", "group": "g", "timestamp": T0 + 11000},
        {"event": "member.joined", "group": "g", "member": "b", "protocol": "classic",
         "timestamp": T0 + 11000},
        {"event": "group.stable", "group": "g", "timestamp": T0 + 16000},
        {"event": "member.assignment_changed", "group": "g", "member": "a", "assigned": ["t-0"],
         "timestamp": T0 + 16000},
        {"event": "member.assignment_changed", "group": "g", "member": "b", "assigned": ["t-1"],
         "timestamp": T0 + 16000},
    ]  # fmt: skip
    evs = [e for i, d in enumerate(lines) if (e := parse_event(json.dumps(d), "c", i))]
    h = health("c", "g", evs)
    # both partitions unowned for the 5 s of the eager rebalance: 10 partition-seconds
    assert h["unowned_ps_before"] == pytest.approx(10.0)
    assert (h["rebalances"], h["stable_rebalances"]) == (1, 1)
    assert h["mean_time_to_stable_s"] == pytest.approx(5.0)
    assert h["changes_before"] == 1 and h["conversion"] is None


# --- Spark ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_out(spark: Any, small_fleet: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The local-mode job's tables, written once (Parquet) for the tests below."""
    from tools.fleet.job import run

    out = tmp_path_factory.mktemp("fleet-local")
    result = run(spark, discover(_inputs(small_fleet)), str(out), TARGETS)
    assert set(result.counts) == {"facts", "verdicts", "health", "rebalances_hourly", "problems"}
    print(f"local job: {result.seconds:.1f}s {result.counts}")
    return out


@pytest.mark.e2e
def test_spark_job_equals_the_reference_row_for_row(spark: Any, small_fleet: Path, local_out: Path) -> None:
    clusters = discover(_inputs(small_fleet))
    facts, verdicts = facts_and_verdicts(clusters, TARGETS)
    health = health_rows(clusters)
    table = {n: spark.read.parquet(str(local_out / n)) for n in ("facts", "verdicts", "health")}
    _same(_rows(table["facts"]), sorted(facts, key=_key))
    _same(_rows(table["verdicts"]), sorted(verdicts, key=_key))
    _same(_rows(table["health"]), sorted(health, key=_key))
    assert spark.read.parquet(str(local_out / "problems")).count() == 0
    hourly = spark.read.parquet(str(local_out / "rebalances_hourly")).groupBy().sum("rebalances").collect()
    assert hourly[0][0] == sum(h["rebalances"] for h in health)


@pytest.mark.e2e
def test_spark_job_reports_damaged_segments(spark: Any, small_fleet: Path, tmp_path: Path) -> None:
    """A flipped byte fails one batch's CRC: a problem row, the other batches still count."""
    from tools.fleet.job import build

    [c] = discover([f"cluster-00={small_fleet / 'cluster-00'}"])
    partition, path = c.segments[0]
    data = bytearray(Path(path).read_bytes())
    data[200] ^= 0xFF
    broken = tmp_path / f"__consumer_offsets-{partition}"
    broken.mkdir()
    (broken / Path(path).name).write_bytes(bytes(data))
    damaged = Cluster("damaged", [(partition, str(broken / Path(path).name))])
    tables = build(spark, [damaged], TARGETS)
    problems = [r.problem for r in tables["problems"].collect()]
    assert len(problems) == 1 and "crc" in problems[0].lower(), problems
    assert tables["facts"].count() > 0


@pytest.mark.e2e
def test_report_renders_in_chromium_with_its_plots(
    spark: Any, small_fleet: Path, local_out: Path, tmp_path: Path
) -> None:
    from harness import headless
    from tools.fleet.report import from_tables, render

    try:
        headless.chromium()
    except headless.ChromiumMissing as e:
        pytest.skip(str(e))
    clusters = discover(_inputs(small_fleet))
    names = ("facts", "verdicts", "health", "rebalances_hourly", "problems")
    tables = {n: spark.read.parquet(str(local_out / n)) for n in names}
    page = tmp_path / "report.html"
    page.write_text(render(from_tables(tables)))
    dom = headless.dump_dom(page)
    plots = re.findall(
        r'<img class="plot" alt="([^"]+)" src="data:image/png;base64,([A-Za-z0-9+/=]{2000,})"', dom
    )
    assert [alt for alt, _ in plots] == [
        "Readiness by cluster",
        "Blockers by reason",
        "Unowned time before, during and after migration",
    ]
    for c in clusters:
        assert f"<td>{c.name}</td>" in dom
    assert "http://" not in page.read_text() and "https://" not in page.read_text()  # self-contained
    shot = headless.screenshot(page, tmp_path / "report.png", size=(1200, 2400))
    assert shot.stat().st_size > 20_000


@pytest.mark.e2e
def test_standalone_cluster_gives_the_local_results(
    spark: Any, spark_standalone: str, small_fleet: Path, local_out: Path, tmp_path: Path
) -> None:
    """`groupshift fleet report --master spark://...` on a master and two workers writes the
    same tables as the local-mode job."""
    out = tmp_path / "standalone"
    r = subprocess.run(
        [sys.executable, "-m", "groupshift", "fleet", "report", *_inputs(small_fleet), "--out", str(out),
         "--master", spark_standalone, "--downgrade-target", TARGETS[0], "--downgrade-target", TARGETS[1]],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    print(r.stdout)
    assert (out / "report.html").is_file()
    for name in ("facts", "verdicts", "health", "rebalances_hourly"):
        got, want = spark.read.parquet(str(out / name)), spark.read.parquet(str(local_out / name))
        if name == "rebalances_hourly":
            assert sorted(got.collect()) == sorted(want.collect())
        else:
            _same(_rows(got), _rows(want))


# --- inputs as the server and `fleet synth` write them (no Spark) ---------------------------------


def test_a_synth_dir_is_its_clusters_and_its_topics_json_is_the_servers(small_fleet: Path) -> None:
    """`fleet report DIR` on `fleet synth --out DIR`: one cluster per folder; topics.json in the
    server's registry format, read by the server's parser."""
    from gateway.dataplane.topics import TopicRegistry

    clusters = discover([str(small_fleet)])
    assert [c.name for c in clusters] == ["cluster-00", "cluster-01", "cluster-02"]
    for c in clusters:
        registry = TopicRegistry.load(small_fleet / c.name)
        assert c.topic_names == {str(t.topic_id): t.name for t in registry.all()} and c.topic_names
        assert c.problems == []


def test_unreadable_settings_and_topics_are_problems(tmp_path: Path) -> None:
    (tmp_path / "events.jsonl").write_text("")
    (tmp_path / "topics.json").write_text('{"6b1c2e0a-0000-4000-8000-000000000001": "orders"}')
    (tmp_path / "settings.json").write_text("not json")
    [c] = discover([f"x={tmp_path}"])
    assert c.topic_names == {} and c.settings == {}
    problems = {Path(f).name: m for f, m in c.problems}
    assert problems["topics.json"] == 'not read: expected an object with a "topics" list'
    assert problems["settings.json"].startswith("not JSON: ")
    assert problems["settings.json"].endswith("the verdicts assume Kafka's default settings")


def test_blockers_are_named_in_words() -> None:
    from tools.fleet.report import blocker_label

    tail = "records the target release skips or cannot load"
    assert blocker_label("record-3") == f"ConsumerGroupMetadata {tail}"
    assert blocker_label("record-99") == f"type 99 {tail}"
    assert blocker_label("size") == "more members than the group size limit allows"
    assert blocker_label(None) == "other"


def test_health_marks_a_deleted_group() -> None:
    from tools.fleet.health import health, parse_event

    T0 = 1_767_225_600_000
    lines = [
        {"event": "member.joined", "group": "g", "member": "a", "protocol": "classic", "timestamp": T0},
        {"event": "member.left", "group": "g", "member": "a", "timestamp": T0 + 1000},
        {"event": "group.deleted", "group": "g", "timestamp": T0 + 2000},
    ]
    evs = [e for i, d in enumerate(lines) if (e := parse_event(json.dumps(d), "c", i))]
    assert health("c", "g", evs)["deleted"] is True
    assert health("c", "g", evs[:2])["deleted"] is False


@pytest.mark.e2e
def test_streams_groups_counted_and_listed_by_spark_as_by_the_reference(spark: Any) -> None:
    """The report's Kafka Streams rows (per-cluster counts of streams and classic Kafka Streams
    groups, and the list with members, active tasks and state) and the 'streams group already'
    readiness come out of Spark's aggregation as out of the plain-row reference."""
    from tools.check.facts import GroupFacts, MemberFacts
    from tools.fleet.judge import FACTS_SCHEMA, facts_row
    from tools.fleet.report import from_rows, from_tables
    from tools.fleet.schema import columns

    streams = GroupFacts(
        "app", cluster="c1", type="streams", state="Reconciling", protocol_type="streams", generation=3,
        members=(
            MemberFacts("m1", "app-1-consumer", protocol="streams", active_tasks=(("0", 0), ("1", 0))),
            MemberFacts("m2", "app-2-consumer", protocol="streams", active_tasks=(("0", 1),)),
        ),
    )  # fmt: skip
    plain = GroupFacts(
        "orders", cluster="c1", type="consumer", members=(MemberFacts("m", "rdkafka", protocol="consumer"),)
    )
    empty = GroupFacts("idle-app", cluster="c2", type="streams", state="Empty", protocol_type="streams")
    rows = [facts_row(f, 3) for f in (streams, plain, empty)]
    verdicts = [
        {"cluster": f.cluster, "group": f.group, "type": f.type, "size": f.size, "direction": "upgrade",
         "target": "consumer-protocol", "verdict": "READY", "blocker": None, "reason": "", "fix": None,
         "kafka_message": None}
        for f in (streams, plain, empty)
    ]  # fmt: skip
    names = columns(FACTS_SCHEMA)
    verdict_ddl = (
        "cluster string, `group` string, type string, size int, direction string, target string, "
        "verdict string, blocker string, reason string, fix string, kafka_message string"
    )
    table = {
        "facts": spark.createDataFrame([tuple(r[n] for n in names) for r in rows], schema=FACTS_SCHEMA),
        "verdicts": spark.createDataFrame([tuple(v.values()) for v in verdicts], schema=verdict_ddl),
    }
    want = from_rows(rows, verdicts, [])
    got = from_tables(table)
    assert [dict(c) for c in got.clusters] == want.clusters
    assert want.clusters[0]["streams_groups"] == 1 and want.clusters[1]["streams_groups"] == 1
    assert (
        got.streams
        == want.streams
        == [
            {
                "cluster": "c1",
                "group": "app",
                "type": "streams",
                "size": 2,
                "tasks": 3,
                "state": "Reconciling",
            },
            {
                "cluster": "c2",
                "group": "idle-app",
                "type": "streams",
                "size": 0,
                "tasks": 0,
                "state": "Empty",
            },
        ]
    )
    assert sorted(map(str, got.readiness)) == sorted(map(str, want.readiness))
    assert {"cluster": "c1", "status": "streams group already", "count": 1} in want.readiness
