"""Kafka partition directories (`tools.kafka_logs`), the loader rules' lookups
(`tools.check.loader_rules`) and `records rewrite/export/import` (`tools.records_transfer`)
on files alone; the same against real brokers is e2e/test_downgrade_logs.py."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from e2e.downgrade_probe import (
    NOW,
    TOPIC,
    TOPIC_ID,
    consumer_assignment,
    consumer_group_records,
    consumer_subscription,
    offset_key,
    offset_value_v4,
)
from records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    CoordinatorRecord,
    GroupMetadataValue,
    OffsetCommitValue,
)
from records.batch import build_batch
from records.codec import decode_record, encode_record
from tools.check.loader_rules import KAFKA_TARGETS, OTHER, RULES, outcome, rules_for
from tools.kafka_logs import (
    LogReadError,
    group_of_key,
    list_partitions,
    partition_dir,
    partition_for,
    read_batches,
    read_partition,
    running_broker,
    running_groupshift,
    write_partition,
)
from tools.records_transfer import (
    RewriteSummary,
    TransferError,
    export_data_dir,
    import_log_dir,
    rewrite_for_downgrade,
    rewrite_partition,
)

# --- loader rules ---------------------------------------------------------------------------


def test_every_target_has_a_rule_for_any_type_and_version() -> None:
    for target in KAFKA_TARGETS:
        for rtype in [*range(0, 24), 99]:
            for version in (None, 0, 3, 4, 5):
                assert outcome(target, rtype, version).target == target
        assert any(r.record_type == OTHER for r in rules_for(target))


def test_rules_that_decide_a_downgrade() -> None:
    assert outcome("kafka-3.4.0", 1, 4).outcome == "fatal"  # what 4.x writes for every commit
    assert outcome("kafka-3.4.0", 1, 3).outcome == "read"
    assert outcome("kafka-3.9", 1, 4).outcome == "read"
    assert outcome("kafka-3.9", 3, 0).outcome == "skipped"
    assert outcome("kafka-3.9", 3, None).outcome == "skipped"  # tombstones too
    assert outcome("kafka-3.4.0", 16, None).outcome == "fatal"
    assert outcome("kafka-4.0", 16, 0).outcome == "read"
    assert outcome("kafka-4.0", 99, 0).outcome == "skipped"
    assert outcome("kafka-3.7", 1, 5).outcome == "fatal"
    # 3.9 with KIP-848 on: a tombstone of a group it does not hold fails the load
    assert outcome("kafka-3.9-kip848", 3, None).outcome == "fatal"
    assert outcome("kafka-3.9-kip848", 3, 0).outcome == "read"
    assert outcome("kafka-3.9-kip848", 7, 0).needs_group
    with pytest.raises(KeyError):
        outcome("kafka-2.8", 1, 3)


def test_proven_rows_name_their_test() -> None:
    for r in RULES:
        assert r.proven == bool(r.pinned_by), r
        if r.proven:
            assert r.pinned_by.startswith("e2e/test_downgrade_rules.py::test_loader_rules[")


# --- partition directories --------------------------------------------------------------------


def _offset(group: str, partition: int, offset: int) -> tuple[bytes, bytes]:
    from records import OffsetCommitKey

    k, v = encode_record(
        CoordinatorRecord(OffsetCommitKey(group, TOPIC, partition), OffsetCommitValue(offset, -1, "", NOW))
    )
    assert v is not None
    return k, v


def test_write_then_read_keeps_bytes_and_kafka_metadata(tmp_path: Path) -> None:
    d = partition_dir(tmp_path, 3)
    d.mkdir()
    (d / "partition.metadata").write_text("version: 0\ntopic_id: abc\n")
    (d / "00000000000000000007.log").write_bytes(b"stale")
    (d / "00000000000000000007.index").write_bytes(b"stale")
    (d / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    (tmp_path / "recovery-point-offset-checkpoint").write_text(
        "0\n2\n__consumer_offsets 3 99\n__consumer_offsets 1 5\n"
    )
    entries = [(*_offset(f"g{i}", 0, i), NOW + i) for i in range(5)]
    entries.append((entries[0][0], None, NOW + 9))  # a tombstone
    assert write_partition(d, entries) == 6
    assert sorted(p.name for p in d.iterdir()) == ["00000000000000000000.log", "partition.metadata"]
    assert (d / "partition.metadata").read_text().endswith("topic_id: abc\n")
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\n__consumer_offsets 1 5\n"
    got = list(read_partition(d))
    assert [(r.key, r.value, r.timestamp) for r in got] == entries
    assert [r.offset for r in got] == list(range(6))
    assert list_partitions(tmp_path) == {3: d}


def test_group_of_key_for_every_key_layout() -> None:
    assert group_of_key(_offset("grp", 0, 1)[0]) == "grp"
    for rtype, (key, _) in consumer_group_records("cg-é").items():
        assert group_of_key(key) == "cg-é", rtype
    assert group_of_key(b"\x00") is None


def test_partition_for_is_kafkas() -> None:
    # Utils.abs("orders-group".hashCode()) % 50, computed with Java String.hashCode
    h = 0
    for ch in "orders-group":
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    assert partition_for("orders-group", 50) == abs(h) % 50


def test_compressed_batches_are_refused(tmp_path: Path) -> None:
    d = partition_dir(tmp_path, 0)
    d.mkdir()
    batch = bytearray(build_batch([_offset("g", 0, 1)], timestamp_ms=NOW))
    batch[22] |= 1  # the gzip bit of the attributes, CRC updated: a valid compressed batch header
    batch[17:21] = crc32c(bytes(batch[21:])).to_bytes(4, "big")
    (d / "00000000000000000000.log").write_bytes(bytes(batch))
    with pytest.raises(LogReadError, match="compressed"):
        list(read_batches(d))


# --- rewrite ------------------------------------------------------------------------------------


def _types(entries: list[tuple[bytes, bytes | None, int]]) -> list[int]:
    return [struct.unpack(">h", k[:2])[0] for k, _, _ in entries]


def test_rewrite_for_340_reencodes_v4_offsets_and_converts_consumer_groups() -> None:
    cg = consumer_group_records("cg")
    entries = [
        (offset_key("cg", 0), offset_value_v4(42, topic_id=TOPIC_ID), NOW),
        *((cg[t][0], cg[t][1], NOW) for t in (5, 16, 4, 3, 7, 6, 8)),
        (cg[3][0], None, NOW),  # a tombstone of another incarnation: fatal on 3.4.0 too
    ]
    summary = RewriteSummary()
    out = rewrite_partition(entries, "kafka-3.4.0", summary)
    assert _types(out) == [1, 2]
    offset = decode_record(out[0][0], out[0][1])
    assert out[0][1] is not None and struct.unpack(">h", out[0][1][:2])[0] == 3
    assert isinstance(offset.value, OffsetCommitValue) and offset.value.offset == 42
    assert summary.reencoded == 1 and summary.kept == 0
    assert sum(summary.dropped.values()) == 8


def test_rewrite_for_39_keeps_bytes_and_makes_a_stable_group_of_classic_members() -> None:
    cg = consumer_group_records("cg")
    sub = consumer_subscription([TOPIC])
    member = ConsumerGroupMemberMetadataValue(
        None, None, "client", "/127.0.0.1", (TOPIC,), None, 30000,
        classic_member_metadata=ClassicMemberMetadata(10000, (ClassicProtocol("range", sub),)),
    )  # fmt: skip
    mk, mv = encode_record(CoordinatorRecord(ConsumerGroupMemberMetadataKey("cg", "m-1"), member))
    v4 = (offset_key("cg", 0), offset_value_v4(42, topic_id=TOPIC_ID), NOW)
    entries = [v4, (mk, mv, NOW), *((cg[t][0], cg[t][1], NOW) for t in (4, 3, 7, 6, 8))]
    summary = RewriteSummary()
    out = rewrite_partition(entries, "kafka-3.9", summary)
    assert out[0] == v4  # readable by 3.9: unchanged
    assert _types(out) == [1, 2]
    group = decode_record(out[1][0], out[1][1]).value
    assert isinstance(group, GroupMetadataValue)
    assert group.generation == 2 and group.protocol == "range" and group.leader == "m-1"
    assert [m.member_id for m in group.members] == ["m-1"]
    assert group.members[0].assignment == consumer_assignment(TOPIC, [0, 1])
    assert "Stable classic group" in summary.converted[0]


def test_rewrite_for_39_kip848_converts_too() -> None:
    cg = consumer_group_records("cg")
    entries = [(cg[t][0], cg[t][1], NOW) for t in (5, 16, 4, 3, 7, 6, 8)]
    assert _types(rewrite_partition(entries, "kafka-3.9-kip848", RewriteSummary())) == [2]


def test_rewrite_for_4x_changes_nothing() -> None:
    cg = consumer_group_records("cg")
    entries = [(cg[t][0], cg[t][1], NOW) for t in (5, 16, 4, 3, 7, 6, 8)]
    assert rewrite_partition(entries, "kafka-4.0", RewriteSummary()) == entries


# --- export / import ----------------------------------------------------------------------------


def test_export_repartitions_and_import_copies(tmp_path: Path) -> None:
    data = tmp_path / "data"
    groups = [f"group-{i}" for i in range(12)]
    for shard in range(2):
        mine = [g for g in groups if partition_for(g, 2) == shard]
        write_partition(
            data / "coordinator" / f"__consumer_offsets-{shard}", [(*_offset(g, 0, 7), NOW) for g in mine]
        )
    out = io.StringIO()
    export_data_dir(data, tmp_path / "kafka", 3, "AAAAAAAAAAAAAAAAAAAAAQ", out)
    parts = list_partitions(tmp_path / "kafka")
    assert sorted(parts) == [0, 1, 2]
    for p, d in parts.items():
        for r in read_partition(d):
            assert partition_for(group_of_key(r.key) or "", 3) == p
        assert "topic_id: AAAAAAAAAAAAAAAAAAAAAQ" in (d / "partition.metadata").read_text()
    assert sum(len(list(read_partition(d))) for d in parts.values()) == 12
    with pytest.raises(TransferError, match="partition count"):
        export_data_dir(data, tmp_path / "kafka", 2, None, io.StringIO())
    back = tmp_path / "back"
    import_log_dir(tmp_path / "kafka", back, io.StringIO())
    assert (back / "meta.properties").is_file()
    for d in parts.values():
        assert list(read_batches(d)) == list(read_batches(back / "coordinator" / d.name))
        assert not (back / "coordinator" / d.name / "partition.metadata").exists()


def test_cli_bad_input_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from groupshift.cli import main

    assert (
        main(["records", "export", "--data-dir", str(tmp_path / "none"), "--to-log-dir", str(tmp_path)]) == 2
    )
    assert "holds no __consumer_offsets-N log" in capsys.readouterr().err
    assert (
        main(["records", "import", "--from-log-dir", str(tmp_path), "--data-dir", str(tmp_path / "d")]) == 2
    )
    assert "no __consumer_offsets-N partition directory" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["records", "rewrite", "--for-downgrade", "kafka-2.8", "--log-dir", str(tmp_path), "--out", "o"])
    assert "invalid choice" in capsys.readouterr().err


# --- export / import that cannot destroy -----------------------------------------------------------


def _two_dirs(tmp_path: Path) -> tuple[Path, Path]:
    """A groupshift data dir with one offset per shard, and a "broker" log dir whose two
    partitions already hold its own groups' offsets."""
    data, kafka = tmp_path / "data", tmp_path / "kafka"
    for shard in range(2):
        write_partition(
            data / "coordinator" / f"__consumer_offsets-{shard}", [(*_offset(f"ours-{shard}", 0, 5), NOW)]
        )
        write_partition(partition_dir(kafka, shard), [(*_offset(f"theirs-{shard}", 0, 9), NOW)])
        (partition_dir(kafka, shard) / "partition.metadata").write_text(
            "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n"
        )
    (kafka / "recovery-point-offset-checkpoint").write_text("0\n1\n__consumer_offsets 0 1\n")
    return data, kafka


def _groups_in(log_dir: Path) -> set[str]:
    return {group_of_key(r.key) or "" for d in list_partitions(log_dir).values() for r in read_partition(d)}


def test_export_refuses_a_partition_that_holds_data(tmp_path: Path) -> None:
    data, kafka = _two_dirs(tmp_path)
    before = {p: list(read_batches(d)) for p, d in list_partitions(kafka).items()}
    with pytest.raises(
        TransferError, match=r"partition\(s\) 0, 1 already hold 2 record\(s\) of 2 group\(s\)"
    ):
        export_data_dir(data, kafka, None, None, io.StringIO())
    assert {p: list(read_batches(d)) for p, d in list_partitions(kafka).items()} == before
    assert not list(tmp_path.glob("kafka.groupshift-backup-*"))


def test_export_dry_run_writes_nothing_and_says_what_is_there(tmp_path: Path) -> None:
    data, kafka = _two_dirs(tmp_path)
    out = io.StringIO()
    export_data_dir(data, kafka, None, None, out, dry_run=True)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(
        f"would write {partition_dir(kafka, 0)}: 1 batch(es) unchanged; it holds 1 record(s)"
    )
    assert lines[-1].startswith("dry run, nothing written: export would write 2 partition(s)")
    assert "2 of them hold 2 record(s) of 2 group(s) (theirs-0, theirs-1)" in lines[-1]
    assert _groups_in(kafka) == {"theirs-0", "theirs-1"}


def test_export_force_backs_up_then_replaces(tmp_path: Path) -> None:
    data, kafka = _two_dirs(tmp_path)
    backup = tmp_path / "saved"
    out = io.StringIO()
    export_data_dir(data, kafka, None, None, out, force=True, backup_dir=backup)
    (line,) = out.getvalue().splitlines()  # one summary line
    assert line == (
        f"export: 2 partition(s) into {kafka}, 2 batch(es) copied unchanged; replaced 2 partition(s) that "
        f"held 2 record(s) of 2 group(s) (theirs-0, theirs-1), backup in {backup}"
    )
    assert _groups_in(kafka) == {"ours-0", "ours-1"}
    assert _groups_in(backup) == {"theirs-0", "theirs-1"}
    assert (backup / "recovery-point-offset-checkpoint").read_text() == "0\n1\n__consumer_offsets 0 1\n"
    assert "topic_id" in (partition_dir(kafka, 0) / "partition.metadata").read_text()  # kept in place
    with pytest.raises(TransferError, match="already exists"):
        export_data_dir(data, kafka, None, None, io.StringIO(), force=True, backup_dir=backup)


def test_import_refuses_data_in_the_data_dir_and_force_backs_it_up(tmp_path: Path) -> None:
    data, kafka = _two_dirs(tmp_path)
    with pytest.raises(TransferError, match="already hold 2 record"):
        import_log_dir(kafka, data, io.StringIO())
    assert _groups_in(data / "coordinator") == {"ours-0", "ours-1"}
    out = io.StringIO()
    import_log_dir(kafka, data, out, dry_run=True)
    assert _groups_in(data / "coordinator") == {"ours-0", "ours-1"}
    assert out.getvalue().splitlines()[-1].startswith("dry run, nothing written: import would write 2")
    out = io.StringIO()
    import_log_dir(kafka, data, out, force=True)
    (line,) = out.getvalue().splitlines()
    assert "replaced 2 partition(s) that held 2 record(s) of 2 group(s) (ours-0, ours-1), backup in" in line
    assert line.endswith("; serve it with offsets.topic.num.partitions=2")
    (backup,) = tmp_path.glob("data.groupshift-backup-*")
    assert _groups_in(backup) == {"ours-0", "ours-1"}
    assert _groups_in(data / "coordinator") == {"theirs-0", "theirs-1"}


def test_rewrite_refuses_a_partition_that_holds_data_and_force_backs_it_up(tmp_path: Path) -> None:
    """`rewrite --out` is usually the target broker's own log dir: the same care as export."""
    data, kafka = _two_dirs(tmp_path)
    with pytest.raises(TransferError, match=r"already hold 2 record\(s\) of 2 group\(s\).*the rewrite"):
        rewrite_for_downgrade(data, kafka, "kafka-3.9", None, io.StringIO())
    assert _groups_in(kafka) == {"theirs-0", "theirs-1"}
    out = io.StringIO()
    rewrite_for_downgrade(data, kafka, "kafka-3.9", None, out, dry_run=True)
    assert _groups_in(kafka) == {"theirs-0", "theirs-1"}
    assert (
        out.getvalue()
        .splitlines()[-1]
        .startswith("dry run, nothing written: rewrite for kafka-3.9 would write 2 partition(s)")
    )
    out = io.StringIO()
    rewrite_for_downgrade(data, kafka, "kafka-3.9", None, out, force=True, backup_dir=tmp_path / "saved")
    replaced = "replaced 2 partition(s) that held 2 record(s) of 2 group(s) (theirs-0, theirs-1)"
    assert replaced in out.getvalue()
    assert _groups_in(kafka) == {"ours-0", "ours-1"}
    assert _groups_in(tmp_path / "saved") == {"theirs-0", "theirs-1"}
    with pytest.raises(TransferError, match="is the directory read"):
        rewrite_for_downgrade(kafka, kafka, "kafka-3.9", None, io.StringIO(), force=True)


def test_a_running_groupshift_refuses_import(tmp_path: Path) -> None:
    """groupshift's logs hold flock locks (records.log); one held here is a running server."""
    import fcntl
    import os

    data, kafka = _two_dirs(tmp_path)
    fd = os.open(data / "coordinator" / "__consumer_offsets-0" / ".lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert running_groupshift(data) and not running_broker(kafka)
        with pytest.raises(TransferError, match="a groupshift server is running on"):
            import_log_dir(kafka, data, io.StringIO(), force=True)
        out = io.StringIO()
        import_log_dir(kafka, data, out, dry_run=True)
        assert "a real run is refused until it stops" in out.getvalue()
    finally:
        os.close(fd)
    assert not running_groupshift(data)
    assert _groups_in(data / "coordinator") == {"ours-0", "ours-1"}
