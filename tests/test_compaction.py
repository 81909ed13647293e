"""Compaction of the coordinator log: latest value per key, tombstone retention, bounded size,
and a consistent log after a crash at every step of the swap."""

from __future__ import annotations

import errno
import os
import random
import shutil
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecordsBuilder

import records.compaction as compaction_module
from records.batch import iter_records, read_batch_header
from records.compaction import COMPACTION_STEPS, compact, dirty_bytes, should_compact
from records.errors import CompactionError, LogFailedError
from records.log import SegmentLog

TS = 1_700_000_000_000
Rec = tuple[bytes | None, bytes | None]


def replay(log: SegmentLog) -> dict[bytes, bytes]:
    """What a coordinator rebuilds: the latest value per key, tombstones deleting."""
    state: dict[bytes, bytes] = {}
    for _h, raw in log.batches():
        for r in iter_records(raw):
            assert r.key is not None
            if r.value is None:
                state.pop(r.key, None)
            else:
                state[r.key] = r.value
    return state


def records_by_offset(log: SegmentLog) -> dict[int, tuple[bytes | None, bytes | None, int]]:
    return {r.offset: (r.key, r.value, r.timestamp) for _h, raw in log.batches() for r in iter_records(raw)}


def workload(log: SegmentLog, rng: random.Random, ops: int, keys: int, ts0: int = TS) -> None:
    for i in range(ops):
        recs: list[Rec] = []
        for _ in range(rng.randint(1, 4)):
            key = b"key-%d" % rng.randrange(keys)
            value = None if rng.random() < 0.2 else b"v%d-" % i + rng.randbytes(rng.randint(0, 80))
            recs.append((key, value))
        log.append_records(recs, ts0 + i)


# --- what compaction keeps ----------------------------------------------------------------------


def test_compaction_keeps_the_latest_record_of_every_key_at_its_original_offset(
    tmp_path: Path,
) -> None:
    with SegmentLog.open(tmp_path, segment_bytes=3000) as log:
        workload(log, random.Random(1), ops=400, keys=40)
        before_state = replay(log)
        before = records_by_offset(log)
        start, end = log.start_offset, log.end_offset
        result = compact(log, now_ms=TS, tombstone_retention_ms=10**9)
        after = records_by_offset(log)
        assert replay(log) == before_state
        assert (log.start_offset, log.end_offset) == (start, end)
        # Kept records are the originals, at their original offsets, one per key: the last.
        assert all(before[o] == rec for o, rec in after.items())
        last_offset_of = {k: o for o, (k, _v, _t) in sorted(before.items())}
        assert sorted(after) == sorted(last_offset_of.values())
        assert result.records_before == len(before)
        assert result.records_kept == len(after) == len(last_offset_of)
        assert result.bytes_after < result.bytes_before
        assert log.segment_base_offsets == [0, end]
    with SegmentLog.open(tmp_path, segment_bytes=3000) as log:
        assert records_by_offset(log) == after
        log.append_records([(b"key-1", b"new")], TS)
        assert replay(log)[b"key-1"] == b"new"


def test_tombstones_are_kept_until_older_than_the_retention(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path, segment_bytes=500) as log:
        log.append_records([(b"old", b"1"), (b"young", b"1"), (b"alive", b"1")], TS)
        log.append_records([(b"old", None)], TS + 1_000)
        log.append_records([(b"young", None)], TS + 9_000)
        result = compact(log, now_ms=TS + 10_000, tombstone_retention_ms=5_000)
        kept = {k: v for k, v, _t in records_by_offset(log).values()}
        assert kept == {b"young": None, b"alive": b"1"}
        assert result.tombstones_dropped == 1
        # Later, the young tombstone expires as well.
        compact(log, now_ms=TS + 20_000, tombstone_retention_ms=5_000)
        assert {k: v for k, v, _t in records_by_offset(log).values()} == {b"alive": b"1"}
        assert replay(log) == {b"alive": b"1"}


def test_an_emptied_last_batch_stays_as_a_header_so_the_offset_range_is_kept(
    tmp_path: Path,
) -> None:
    with SegmentLog.open(tmp_path) as log:
        log.append_records([(b"a", b"1"), (b"b", b"1")], TS)
        log.append_records([(b"a", None), (b"b", None)], TS)  # expired tombstones
        compact(log, now_ms=TS + 10, tombstone_retention_ms=0)
        headers = [h for h, _raw in log.batches()]
        assert [(h.base_offset, h.last_offset, h.record_count) for h in headers] == [(2, 3, 0)]
        assert headers[0].first_timestamp == -1
        assert log.end_offset == 4
    with SegmentLog.open(tmp_path) as log:
        assert (log.end_offset, replay(log)) == (4, {})


def test_key_fn_decides_which_keys_are_the_same(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path) as log:
        log.append_records([(b"group#v0", b"old"), (b"other#v0", b"x")], TS)
        log.append_records([(b"group#v1", b"new")], TS)
        compact(log, now_ms=TS, tombstone_retention_ms=0, key_fn=lambda k: k.split(b"#")[0])
        assert sorted(replay(log).items()) == [(b"group#v1", b"new"), (b"other#v0", b"x")]


def test_compaction_refuses_compressed_batches_and_leaves_the_log_usable(tmp_path: Path) -> None:
    builder = MemoryRecordsBuilder(magic=2, compression_type=1, batch_size=1 << 20)
    builder.append(timestamp=TS, key=b"k", value=b"v" * 500, headers=[])
    builder.close()
    assert read_batch_header(bytes(builder.buffer())).compression == 1
    with SegmentLog.open(tmp_path) as log:
        log.append_records([(b"a", b"1")], TS)
        log.append_batch(bytes(builder.buffer()))
        with pytest.raises(CompactionError, match="compressed"):
            compact(log, now_ms=TS, tombstone_retention_ms=0)
        assert log.append_records([(b"b", b"2")], TS) == (2, 2)
        assert [r for r in os.listdir(tmp_path) if "cleaned" in r or "swap" in r] == []


def test_a_write_error_while_cleaning_leaves_the_log_usable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def enospc(fd: int, pending: list[bytes]) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with SegmentLog.open(tmp_path) as log:
        workload(log, random.Random(2), ops=50, keys=5)
        before = records_by_offset(log)
        state = replay(log)
        monkeypatch.setattr(compaction_module, "_flush", enospc)
        with pytest.raises(OSError, match="No space"):
            compact(log, now_ms=TS, tombstone_retention_ms=0)
        monkeypatch.undo()
        assert not any(n.endswith(".cleaned") for n in os.listdir(tmp_path))
        assert records_by_offset(log) == before
        compact(log, now_ms=TS, tombstone_retention_ms=0)
        assert replay(log) == state
        assert len(records_by_offset(log)) == len(state)


# --- trigger and boundedness --------------------------------------------------------------------


def test_should_compact_follows_dirty_ratio_and_minimum_bytes(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path) as log:
        for i in range(100):
            log.append_records([(b"k%d" % (i % 5), b"x" * 100)], TS)
        assert dirty_bytes(log) == log.size_bytes
        assert should_compact(log, min_dirty_ratio=0.5, min_bytes=1000)
        assert not should_compact(log, min_dirty_ratio=0.5, min_bytes=log.size_bytes + 1)
        compact(log, now_ms=TS, tombstone_retention_ms=0)
        assert dirty_bytes(log) == 0
        assert not should_compact(log, min_dirty_ratio=0.01, min_bytes=1)
        for i in range(3):
            log.append_records([(b"k%d" % i, b"y" * 100)], TS)
        clean = log.size_bytes - dirty_bytes(log)
        assert dirty_bytes(log) > 0 and clean > 0
        ratio = dirty_bytes(log) / log.size_bytes
        assert should_compact(log, min_dirty_ratio=ratio - 0.01, min_bytes=1)
        assert not should_compact(log, min_dirty_ratio=ratio + 0.01, min_bytes=1)


def test_the_log_stays_bounded_under_a_steady_stream_of_overwrites(tmp_path: Path) -> None:
    rng = random.Random(3)
    appended = 0
    peak = 0
    compactions = 0
    with SegmentLog.open(tmp_path, segment_bytes=64 * 1024, fsync_policy="none") as log:
        for i in range(20_000):
            recs: list[Rec] = [
                (b"group-%02d-member" % rng.randrange(50), b"epoch=%d;" % i + b"a" * 60)
                for _ in range(rng.randint(1, 3))
            ]
            before = log.size_bytes
            log.append_records(recs, TS + i)
            appended += log.size_bytes - before
            if should_compact(log, min_dirty_ratio=0.5, min_bytes=32 * 1024):
                compact(log, now_ms=TS + i, tombstone_retention_ms=60_000)
                compactions += 1
            peak = max(peak, log.size_bytes)
        state = replay(log)
    assert appended > 2_000_000
    assert compactions > 20
    # Live set: 50 keys of ~90 bytes; plus up to min_bytes / ratio of not-yet-compacted data.
    assert peak < 80 * 1024
    assert len(state) == 50
    with SegmentLog.open(tmp_path, fsync_policy="none") as log:
        assert replay(log) == state
        assert len(log.segment_base_offsets) <= 3


# --- crash at every step of the swap ------------------------------------------------------------


class SimulatedCrash(Exception):
    pass


def reference_compaction(
    path: Path,
) -> tuple[list[str], dict[int, tuple[bytes | None, bytes | None, int]]]:
    """Compact a copy of the log without crashing: the steps taken and the records kept."""
    scratch = path.parent / "reference"
    shutil.copytree(path, scratch)
    steps: list[str] = []
    with SegmentLog.open(scratch, segment_bytes=3000) as log:
        compact(log, now_ms=TS + 500, tombstone_retention_ms=100, on_step=steps.append)
        kept = records_by_offset(log)
    shutil.rmtree(scratch)
    return steps, kept


def test_a_crash_after_each_step_of_the_swap_leaves_the_old_or_the_new_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compaction_module, "_FLUSH_BYTES", 700)  # .cleaned written in pieces
    src = tmp_path / "src"
    with SegmentLog.open(src, segment_bytes=3000) as log:
        workload(log, random.Random(4), ops=300, keys=30)
        state = replay(log)
        original = records_by_offset(log)
        end = log.end_offset
        old_segments = log.segment_base_offsets
    steps, compacted = reference_compaction(src)
    assert len(compacted) < len(original)
    assert steps[0] == "rolled" and steps[-1] == "swap_installed"
    assert steps.count("input_deleted") == len(old_segments)
    assert set(steps) == set(COMPACTION_STEPS)
    committed = steps.index("swap_renamed")

    for crash_at in range(len(steps)):
        work = tmp_path / f"crash-{crash_at}"
        shutil.copytree(src, work)
        log = SegmentLog.open(work, segment_bytes=3000)
        calls: list[str] = []

        def stop(name: str, calls: list[str] = calls, crash_at: int = crash_at) -> None:
            if len(calls) == crash_at:
                raise SimulatedCrash(name)
            calls.append(name)

        with pytest.raises(SimulatedCrash):
            compact(log, now_ms=TS + 500, tombstone_retention_ms=100, on_step=stop)
        if crash_at > 0:  # once rewriting started, an error fails the log until reopened
            with pytest.raises(LogFailedError):
                log.append_records([(b"x", b"y")], TS)
        log._abandon()

        with SegmentLog.open(work, segment_bytes=3000) as log:
            assert replay(log) == state, f"crash after step {crash_at} ({steps[crash_at]})"
            assert log.end_offset == end
            names = os.listdir(work)
            assert not [n for n in names if n.endswith((".cleaned", ".swap"))]
            if crash_at < committed:  # old state (plus the rolled, empty active segment)
                assert log.segment_base_offsets == [*old_segments, end]
                assert records_by_offset(log) == original
            else:  # new state
                assert log.segment_base_offsets == [0, end]
                assert records_by_offset(log) == compacted
            # and life goes on: append, compact again, reopen
            log.append_records([(b"after-crash", b"1")], TS + 1000)
            compact(log, now_ms=TS + 500, tombstone_retention_ms=100)
        with SegmentLog.open(work) as log:
            assert replay(log) == state | {b"after-crash": b"1"}


def test_a_leftover_cleaned_file_is_discarded_at_open(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path) as log:
        log.append_records([(b"a", b"1")], TS)
    (tmp_path / f"{0:020d}.log.cleaned").write_bytes(b"half a compaction")
    with SegmentLog.open(tmp_path) as log:
        assert replay(log) == {b"a": b"1"}
    assert sorted(os.listdir(tmp_path)) == [".lock", f"{0:020d}.log"]
