"""`groupshift records dump`: logs written by the engine, Kafka-style segment directories, raw
key/value pairs, damaged and unsupported input, and the command itself."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c

from engine.ids import SeededIds
from gateway.coordinator_storage import CoordinatorStorage
from records import codec
from records.batch import ATTR_CONTROL, CRC_START, build_batch, iter_records
from records.classic_group import GroupMemberMetadata, GroupMetadataKey, GroupMetadataValue
from records.consumer_group import (
    ConsumerGroupMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    TopicPartitions,
)
from records.coordinator import CoordinatorRecord
from records.dump import dump, format_text, iter_entries, to_json_fields
from records.log import SegmentLog
from records.offsets import OffsetCommitKey, OffsetCommitValue
from records.segment import segment_name
from tests.storage_workload import CONFIG, IMAGE, Workload

ROOT = Path(__file__).resolve().parent.parent
TS = 1_700_000_000_000


def run_dump(path: Path, as_json: bool = False) -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    status = dump(path, as_json=as_json, out=out, err=err)
    return status, out.getvalue().splitlines(), err.getvalue()


def engine_log(path: Path, steps: int = 300, seed: int = 4) -> None:
    storage = CoordinatorStorage.open(
        str(path),
        config=CONFIG,
        ids=SeededIds(1),
        image=IMAGE,
        now_ms=1000,
        fsync_policy="none",
        segment_bytes=16 * 1024,
    )
    w = Workload(storage.shard, seed)
    for _ in range(steps):
        w.step()
    storage.close()


def test_every_record_the_engine_wrote_is_dumped_decoded(tmp_path: Path) -> None:
    engine_log(tmp_path)
    expected = []
    with SegmentLog.open(tmp_path, fsync_policy="none") as log:
        assert len(log.segment_base_offsets) > 1  # several segments, read in order
        for _h, raw in log.batches():
            for r in iter_records(raw):
                assert r.key is not None
                expected.append((r.offset, r.timestamp, codec.decode_record(r.key, r.value)))
    status, lines, err = run_dump(tmp_path, as_json=True)
    assert status == 0 and err == ""
    entries = [json.loads(line) for line in lines]
    assert len(entries) == len(expected) > 300
    kinds = set()
    for entry, (offset, ts, record) in zip(entries, expected, strict=True):
        assert entry["offset"] == offset and entry["timestamp"] == ts
        assert entry["type"] == type(record.key).__name__.removesuffix("Key")
        assert entry["key"] == to_json_fields(record.key)
        assert entry["tombstone"] == (record.value is None)
        if record.value is not None:
            assert entry["value"].items() <= to_json_fields(record.value).items()
        kinds.add(entry["type"])
    assert {
        "OffsetCommit",
        "GroupMetadata",
        "ConsumerGroupMetadata",
        "ConsumerGroupCurrentMemberAssignment",
    } <= kinds
    # The text form: one line per record, same order.
    status, text, _ = run_dump(tmp_path)
    assert status == 0 and len(text) == len(expected)
    for line, (offset, _ts, record) in zip(text, expected, strict=True):
        assert line.startswith(f"offset: {offset} time: ")
        assert f" type: {type(record.key).__name__.removesuffix('Key')} key: {{" in line
        assert line.endswith("value: <tombstone>") == (record.value is None)


def test_a_single_segment_file_and_the_lock_of_a_running_server(tmp_path: Path) -> None:
    engine_log(tmp_path, steps=40)
    with SegmentLog.open(tmp_path, fsync_policy="none"):  # held open, as by a server: no lock taken
        status, lines, _ = run_dump(tmp_path)
        status_one, lines_one, _ = run_dump(tmp_path / segment_name(0))
    assert status == status_one == 0
    assert lines_one == lines[: len(lines_one)] and lines_one


def encode(key: Any, value: Any) -> tuple[bytes, bytes | None]:
    return codec.encode_record(CoordinatorRecord(key, value))


def test_raw_pairs_file(tmp_path: Path) -> None:
    topic = uuid.UUID(int=0x0123456789ABCDEF0123456789ABCDEF)
    pairs = [
        encode(OffsetCommitKey("g", "t", 3), OffsetCommitValue(42, 7, "meta", TS)),
        encode(OffsetCommitKey("g", "t", 4), OffsetCommitValue(43, -1, "", TS, TS + 10)),  # v1
        encode(OffsetCommitKey("g", "t", 3), None),
        encode(
            ConsumerGroupTargetAssignmentMemberKey("cg", "m1"),
            ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(topic, (0, 2)),)),
        ),
        encode(
            GroupMetadataKey("classic"),
            GroupMetadataValue(
                "consumer",
                3,
                "range",
                "m",
                TS,
                (GroupMemberMetadata("m", None, "c", "/h", 1000, 500, b"\x00\x01", b""),),
            ),
        ),
    ]
    lines = ["# dumped from a test", ""]
    for k, v in pairs:
        lines.append(f"{k.hex()} {'-' if v is None else v.hex().upper()}")
    lines.insert(3, "   ")
    lines.append("0063abcd 0000")  # record type 99: unknown
    lines.append(f"{encode(ConsumerGroupMetadataKey('cg'), None)[0].hex()} 0000ff")  # malformed
    lines.append("zz 00")  # not hex
    lines.append(f"0x{pairs[0][0].hex()} 0x{pairs[0][1].hex()}")  # 0x prefixes
    path = tmp_path / "pairs.txt"
    path.write_text("\n".join(lines) + "\n")

    status, out, err = run_dump(path)
    assert status == 1 and err == ""
    assert out[0] == (
        'offset: 0 type: OffsetCommit key: {"group":"g","topic":"t","partition":3} value: v3 '
        '{"offset":42,"leaderEpoch":7,"metadata":"meta","commitTimestamp":1700000000000}'
    )
    assert out[1] == (
        'offset: 1 type: OffsetCommit key: {"group":"g","topic":"t","partition":4} value: v1 '
        '{"offset":43,"metadata":"","commitTimestamp":1700000000000,"expireTimestamp":1700000000010}'
    )
    assert out[2] == (
        'offset: 2 type: OffsetCommit key: {"group":"g","topic":"t","partition":3} value: <tombstone>'
    )
    assert out[3] == (
        'offset: 3 type: ConsumerGroupTargetAssignmentMember key: {"groupId":"cg","memberId":"m1"} '
        'value: v0 {"topicPartitions":[{"topicId":"ASNFZ4mrze8BI0VniavN7w","partitions":[0,2]}]}'
    )
    assert out[4].startswith('offset: 4 type: GroupMetadata key: {"group":"classic"} value: v3 {')
    assert '"members":[{"memberId":"m","groupInstanceId":null,' in out[4]
    assert '"subscription":"AAE=","assignment":""' in out[4]
    assert out[5] == "offset: 5 type: unknown(99) key: 0x0063abcd value: 0x0000"
    assert out[6].startswith("offset: 6 error: malformed record type 3: value:")
    assert out[6].endswith("key: 0x000300026367 value: 0x0000ff")
    assert out[7] == "offset: 7 error: line 11: not hex: 'zz'"
    assert out[8] == out[0].replace("offset: 0", "offset: 8")
    assert len(out) == 9

    status, js, _ = run_dump(path, as_json=True)
    entries = [json.loads(line) for line in js]
    assert entries[2] == {
        "offset": 2,
        "timestamp": None,
        "type": "OffsetCommit",
        "record_type": 1,
        "key": {"group": "g", "topic": "t", "partition": 3},
        "value_version": None,
        "value": None,
        "tombstone": True,
        "line": 6,
    }
    assert entries[5]["type"] == "unknown" and entries[5]["record_type"] == 99
    assert entries[6]["type"] == "error" and entries[6]["offset"] == 6 and entries[6]["record_type"] == 3


def _recrc(batch: bytearray) -> None:
    batch[17:21] = crc32c(bytes(batch[CRC_START:])).to_bytes(4, "big")


def test_kafka_style_directory_with_damage_control_and_compressed_batches(tmp_path: Path) -> None:
    """A broker's partition directory: index files are ignored; what cannot be decoded is
    reported naming its offset (or file position) and the dump goes on."""
    good = [encode(OffsetCommitKey("g", "t", p), OffsetCommitValue(p, -1, "", TS)) for p in range(6)]
    b0 = build_batch(good[:2], base_offset=0, timestamp_ms=TS)
    compressed = bytearray(build_batch(good[2:4], base_offset=2, timestamp_ms=TS))
    compressed[22] |= 4  # attributes: zstd (the payload is not really zstd: never looked at)
    _recrc(compressed)
    control = build_batch(
        [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
        base_offset=4,
        timestamp_ms=TS,
        attributes=ATTR_CONTROL,
        producer_id=7,
        producer_epoch=0,
    )
    bad_crc = bytearray(build_batch(good[4:5], base_offset=5, timestamp_ms=TS))
    bad_crc[-1] ^= 0xFF
    b6 = build_batch(good[5:6], base_offset=6, timestamp_ms=TS)
    first = bytes(b0) + bytes(compressed) + control + bytes(bad_crc) + b6
    (tmp_path / segment_name(0)).write_bytes(first)
    (tmp_path / "00000000000000000000.index").write_bytes(b"\x00" * 16)
    (tmp_path / "00000000000000000000.timeindex").write_bytes(b"\x01" * 12)
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    (tmp_path / "partition.metadata").write_text("version: 0\ntopic_id: x\n")
    tail = build_batch(good[:1], base_offset=7, timestamp_ms=TS)
    (tmp_path / segment_name(7)).write_bytes(tail + tail[:30])  # a torn tail

    status, out, err = run_dump(tmp_path)
    assert status == 1 and err == ""
    assert [line.split(" type: ")[0] if " type: " in line else line for line in out] == [
        f"offset: 0 time: {TS}",
        f"offset: 1 time: {TS}",
        "offset: 2..3 error: compressed batch (zstd, 2 records) is not supported: its records were "
        f"skipped (file {segment_name(0)}, byte position {len(b0)})",
        f"offset: 4 time: {TS}",
        out[4],
        f"offset: 6 time: {TS}",
        f"offset: 7 time: {TS}",
        f"error: incomplete batch header (30 bytes at the end of the file: a torn tail); rest of the "
        f"segment skipped (file {segment_name(7)}, byte position {len(tail)})",
    ]
    assert out[3].endswith("type: control(COMMIT)")
    assert out[4].startswith("offset: 5..5 error: CRC mismatch")
    assert "batch skipped" in out[4]


def test_paths_that_cannot_be_dumped(tmp_path: Path) -> None:
    status, out, err = run_dump(tmp_path / "missing")
    assert status == 2 and out == [] and "does not exist" in err
    status, out, err = run_dump(tmp_path)
    assert status == 2 and "holds no log segments" in err
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\xff\xfe\x00\x80" * 10)
    status, out, err = run_dump(binary)
    assert status == 1 and "not a text file" in out[0]


def test_format_text_of_an_empty_dump(tmp_path: Path) -> None:
    (tmp_path / segment_name(0)).write_bytes(b"")
    assert list(iter_entries(tmp_path)) == []
    control = {"offset": 1, "type": "control", "control": "ABORT"}
    assert format_text(control) == "offset: 1 type: control(ABORT)"


@pytest.mark.e2e
def test_the_command(tmp_path: Path) -> None:
    engine_log(tmp_path / "log", steps=30)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "groupshift", "records", "dump"]
    done = subprocess.run([*cmd, str(tmp_path / "log")], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines and all(line.startswith("offset: ") for line in lines)
    done = subprocess.run(
        [*cmd, "--json", str(tmp_path / "log")], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0 and len(done.stdout.splitlines()) == len(lines)
    assert json.loads(done.stdout.splitlines()[0])["offset"] == 0
    pairs = tmp_path / "pairs.txt"
    k, v = encode(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, -1, "", TS))
    pairs.write_text(f"# one record\n{k.hex()} {v.hex()}\n")
    done = subprocess.run([*cmd, str(pairs)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("offset: 0 type: OffsetCommit ")
    done = subprocess.run([*cmd, str(tmp_path / "nope")], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2 and "does not exist" in done.stderr
    helped = subprocess.run([*cmd, "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert "<key hex> <value hex, or - for a tombstone>" in helped.stdout


@pytest.mark.e2e
def test_the_dump_uses_the_records_layer_only() -> None:
    code = (
        "import sys, records.dump; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'engine', 'translation', 'gateway'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr
