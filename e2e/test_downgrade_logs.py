"""Real downgrades of real logs (issue 15): `__consumer_offsets` written by Apache Kafka 4.x
(classic groups with static and dynamic members, consumer groups with a static member and a regex
subscription, a group converted online from classic, admin-committed offsets) is loaded by Kafka
3.9 and by Kafka 3.4.0, as is and after `groupshift records rewrite --for-downgrade`; and
groupshift data dirs go to Kafka 4.x and back with `records export` / `records import`.

As is, the outcome is the one `tools.check.loader_rules` predicts for the records the log
holds: a partition with a fatal record loses every group and offset on it (3.4.0 reads no
OffsetCommitValue v4, which 4.1+ writes for every commit), elsewhere every offset loads and the
consumer groups appear as empty classic groups (3.9 skips their records). Rewritten, every group
and every offset loads on both.

One Kafka 4.x start, one 3.9 and one 3.4.0 start with a restart per log, one groupshift
start per direction: about 60 s on a quiet machine.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from e2e.downgrade_groups import ALL_GROUPS, CONSUMER, TOPICS, make_groups, observed
from e2e.downgrade_probe import wait_partition_dirs
from e2e.harness import GatewayProcess
from harness.kafka_dist import KafkaCluster
from tests.plugins.kafka import KAFKA4_TEST_CONFIGS, QUICK_RESTART_CONFIGS, skip_without_tools
from tools.check.loader_rules import TARGET_RELEASES, outcome
from tools.kafka_logs import (
    list_partitions,
    partition_dir,
    partition_for,
    read_batches,
    read_partition,
    write_partition_batches,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

P = 4
REPO = Path(__file__).resolve().parent.parent
# members stay until the broker stops: sessions longer than the test
KAFKA_CONFIGS = {
    **KAFKA4_TEST_CONFIGS,
    "offsets.topic.num.partitions": str(P),
    "group.consumer.session.timeout.ms": "120000",
    "group.consumer.max.session.timeout.ms": "120000",
    "group.consumer.assignment.interval.ms": "0",
}
# Each target is killed and started again four times: QUICK_RESTART_CONFIGS.
OLD_CONFIGS = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": str(P),
    "group.initial.rebalance.delay.ms": "0",
    **QUICK_RESTART_CONFIGS,
}


def records_cli(*args: str) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "groupshift", "records", *map(str, args)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


@dataclass
class Source:
    log_dir: Path  # a copy of Kafka 4.x's __consumer_offsets-N directories
    offsets: dict[str, dict[tuple[str, int], int]]  # what the groups committed
    seen: dict[str, Any]  # what Kafka 4.x showed before it stopped
    cluster: KafkaCluster | None = None  # the stopped Kafka 4.x that wrote it (reused by export)


@pytest.fixture(scope="module")
def kafka4_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    skip_without_tools()
    base = tmp_path_factory.mktemp("kafka4-log")
    with KafkaCluster("4", configs=KAFKA_CONFIGS, workdir=base / "kafka") as cluster:
        cluster.start()
        server, offsets = make_groups(cluster.bootstrap)
        seen = observed(cluster.bootstrap)
        cluster.stop_broker(0)
        server.close()
        copy = base / "copy"
        for d in list_partitions(cluster.nodes[0].data_dir).values():
            shutil.copytree(d, copy / d.name)
        assert len(list_partitions(copy)) == P
        yield Source(copy, offsets, seen, cluster)


def test_kafka4_wrote_both_group_types(kafka4_log: Source) -> None:
    for g in ALL_GROUPS:
        assert kafka4_log.seen[g]["offsets"] == kafka4_log.offsets[g], g
    for g in CONSUMER:
        assert kafka4_log.seen[g]["listed"]["type"] == "consumer", g
    assert kafka4_log.seen["classic-static"]["listed"]["type"] == "classic"
    types = {
        struct.unpack(">h", r.key[:2])[0]
        for p in list_partitions(kafka4_log.log_dir).values()
        for r in read_partition(p)
    }
    assert {1, 2, 3, 5, 8, 16} <= types, types  # offsets, classic, consumer groups, a regex


@pytest.fixture(scope="module")
def groupshift_log(tmp_path_factory: pytest.TempPathFactory) -> Source:
    """The same groups made on groupshift; its data dir after it stopped."""
    data = tmp_path_factory.mktemp("groupshift-log") / "data"
    gw = GatewayProcess.start(
        data, sets=(f"offsets.topic.num.partitions={P}", "group.initial.rebalance.delay.ms=0")
    )
    try:
        server, offsets = make_groups(gw.bootstrap)
        seen = observed(gw.bootstrap)
        server.close()
    finally:
        gw.stop()
    return Source(data, offsets, seen)


def partitions_of(source: Source) -> dict[int, Path]:
    coordinator = source.log_dir / "coordinator"
    return list_partitions(coordinator if coordinator.is_dir() else source.log_dir)


def predicted_lost(source: Source, target: str) -> set[int]:
    """Partitions holding a record `target` fails on (loader_rules)."""
    lost = set()
    for p, d in partitions_of(source).items():
        for r in read_partition(d):
            rtype = struct.unpack(">h", r.key[:2])[0]
            version = None if r.value is None else struct.unpack(">h", r.value[:2])[0]
            if outcome(target, rtype, version).outcome == "fatal":
                lost.add(p)
    return lost


def _prepare_target(cluster: KafkaCluster) -> None:
    """Topics and `__consumer_offsets` (a FindCoordinator creates it) on a fresh target."""
    from kafka.admin import KafkaAdminClient, NewTopic

    from tools.groups.wire import AdminWire

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(t, n, 1) for t, n in TOPICS.items()])
    finally:
        admin.close()
    with AdminWire(cluster.bootstrap, timeout=30) as wire:
        wire.coordinator("setup")
    wait_partition_dirs(cluster, P)


def _as_is(cluster: KafkaCluster, source: Source, target: str, name: str) -> None:
    """The source's partitions loaded unchanged: the groups of a partition the rules call
    fatal are gone, every other offset is there, consumer groups are Empty classic groups."""
    data = cluster.nodes[0].data_dir
    for p, d in partitions_of(source).items():
        write_partition_batches(partition_dir(data, p), list(read_batches(d)))
    cluster.start_broker(0)
    lost = predicted_lost(source, target)
    got = observed(cluster.bootstrap)
    cluster.kill_broker(0)
    for g in ALL_GROUPS:
        if partition_for(g, P) in lost:
            assert got[g]["offsets"] == {} and got[g]["listed"] is None, (name, target, g, got[g])
        else:
            assert got[g]["offsets"] == source.offsets[g], (name, target, g, got[g])
            if g in CONSUMER:
                assert got[g]["listed"]["state"] == "Empty", (name, g, got[g])
    if target == "kafka-3.4.0" and name == "kafka4":
        assert lost == {partition_for(g, P) for g in ALL_GROUPS}  # every commit is a v4 value
    if target == "kafka-3.4.0" and name == "groupshift":  # v3 values: only consumer groups hurt
        assert lost == {partition_for(g, P) for g in CONSUMER}


def _rewritten(cluster: KafkaCluster, source: Source, target: str, name: str) -> None:
    """The source rewritten for the target: every group and offset loads."""
    data = cluster.nodes[0].data_dir
    flag = "--data-dir" if (source.log_dir / "coordinator").is_dir() else "--log-dir"
    # The target broker's log dir holds the as-is copy loaded just before: replacing it is the
    # point, so --force (the replaced partitions are backed up beside the log dir).
    summary = records_cli(
        "rewrite", "--for-downgrade", target, flag, source.log_dir, "--out", data, "--force"
    )
    for g in CONSUMER:
        assert f"converted: {g}: consumer group" in summary, summary
    assert "ConsumerGroupMemberMetadata record(s)" in summary, summary
    log_start = cluster.log_path(0).stat().st_size
    cluster.start_broker(0)
    got = observed(cluster.bootstrap)
    cluster.kill_broker(0)
    for g in ALL_GROUPS:
        assert got[g]["offsets"] == source.offsets[g], (name, target, g, got[g], summary)
        assert got[g]["listed"] is not None, (name, target, g)
    for g in CONSUMER:
        assert got[g]["listed"]["protocol_type"] == "consumer", (name, g, got[g])
    assert got["classic-static"]["listed"]["state"] == "Stable", (name, got["classic-static"])
    with open(cluster.log_path(0), "rb") as f:
        f.seek(log_start)
        assert b"Error loading offsets" not in f.read()


@pytest.mark.parametrize("target", ["kafka-3.9", "kafka-3.4.0"])
def test_downgrade_as_is_and_rewritten(
    kafka4_log: Source, groupshift_log: Source, target: str, tmp_path: Path
) -> None:
    with KafkaCluster(TARGET_RELEASES[target], configs=OLD_CONFIGS, workdir=tmp_path / "kafka") as cluster:
        cluster.start()
        _prepare_target(cluster)
        cluster.kill_broker(0)  # SIGKILL: a restart recovers every partition, as it must anyway
        for name, source in (("kafka4", kafka4_log), ("groupshift", groupshift_log)):
            _as_is(cluster, source, target, name)
            _rewritten(cluster, source, target, name)


def test_import_into_groupshift(kafka4_log: Source, tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = records_cli("import", "--from-log-dir", kafka4_log.log_dir, "--data-dir", data)
    assert f"offsets.topic.num.partitions={P}" in out
    for d in list_partitions(kafka4_log.log_dir).values():  # batches byte for byte
        assert list(read_batches(d)) == list(read_batches(data / "coordinator" / d.name))
    gw = GatewayProcess.start(data, sets=(f"offsets.topic.num.partitions={P}",))
    try:
        got = observed(gw.bootstrap)
    finally:
        gw.stop()
    for g in ALL_GROUPS:
        assert got[g]["offsets"] == kafka4_log.offsets[g], (g, got[g])
    for g in CONSUMER:
        assert got[g]["listed"]["type"] == "consumer", (g, got[g])


def records_refused(*args: str) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "groupshift", "records", *map(str, args)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    return r.stderr


def test_export_over_a_brokers_groups_is_refused(groupshift_log: Source, kafka4_log: Source) -> None:
    """Into the stopped Kafka 4.x's own log dir, which holds its groups: refused without --force,
    a dry run writes nothing, and the broker loads its groups unchanged afterwards; while it
    runs, even --force is refused (it holds `<log dir>/.lock`), and its groups stay."""
    data, cluster = groupshift_log.log_dir, kafka4_log.cluster
    assert cluster is not None
    kdata = cluster.nodes[0].data_dir
    before = {p: list(read_batches(d)) for p, d in list_partitions(kdata).items()}
    err = records_refused("export", "--data-dir", data, "--to-log-dir", kdata)
    assert "already hold" in err and "Nothing was written" in err and "--force" in err, err
    dry = records_cli("export", "--data-dir", data, "--to-log-dir", kdata, "--dry-run")
    assert dry.splitlines()[-1].startswith("dry run, nothing written: export would write 4 partition(s)"), dry
    assert "so a run without --force is refused" in dry, dry
    assert {p: list(read_batches(d)) for p, d in list_partitions(kdata).items()} == before
    assert not list(kdata.parent.glob(f"{kdata.name}.groupshift-backup-*"))
    cluster.start_broker(0)
    try:
        got = observed(cluster.bootstrap)
        for g in ALL_GROUPS:  # the broker's own groups, as it showed them before it stopped
            assert got[g]["offsets"] == kafka4_log.seen[g]["offsets"], (g, got[g])
            assert got[g]["listed"]["type"] == kafka4_log.seen[g]["listed"]["type"], (g, got[g])
        err = records_refused("export", "--data-dir", data, "--to-log-dir", kdata, "--force")
        assert "a Kafka broker is running on" in err and "Nothing was written" in err, err
        dry = records_cli("export", "--data-dir", data, "--to-log-dir", kdata, "--dry-run")
        assert "a real run is refused until it stops" in dry, dry
        got = observed(cluster.bootstrap)
        for g in ALL_GROUPS:
            assert got[g]["offsets"] == kafka4_log.seen[g]["offsets"], (g, got[g])
    finally:
        cluster.stop_broker(0)
    assert not list(kdata.parent.glob(f"{kdata.name}.groupshift-backup-*"))


def test_export_from_groupshift(groupshift_log: Source, kafka4_log: Source) -> None:
    """groupshift's data dir exported into the (stopped) Kafka 4.x that wrote `kafka4_log`: its
    own `__consumer_offsets` directories (topic id kept) get groupshift's batches, with --force;
    what they held is in the backup directory the summary names."""
    data, seen, cluster = groupshift_log.log_dir, groupshift_log.seen, kafka4_log.cluster
    assert cluster is not None
    kdata = cluster.nodes[0].data_dir
    held = {p: list(read_batches(d)) for p, d in list_partitions(kdata).items()}
    backup = kdata.parent / "kafka-groups-backup"
    summary = records_cli(
        "export", "--data-dir", data, "--to-log-dir", kdata, "--force", "--backup-dir", backup
    )
    (line,) = summary.splitlines()
    assert line.startswith(f"export: {P} partition(s) into {kdata}, ") and line.endswith(
        f"backup in {backup}"
    ), line
    assert {p: list(read_batches(d)) for p, d in list_partitions(backup).items()} == held
    for p in range(P):  # batches byte for byte
        assert list(read_batches(data / "coordinator" / f"__consumer_offsets-{p}")) == list(
            read_batches(partition_dir(kdata, p))
        )
    cluster.start_broker(0)
    got = observed(cluster.bootstrap)
    cluster.kill_broker(0)
    for g in ALL_GROUPS:
        assert got[g]["offsets"] == groupshift_log.offsets[g] == seen[g]["offsets"], (g, got[g])
        assert got[g]["listed"]["type"] == seen[g]["listed"]["type"], (g, got[g], seen[g])
