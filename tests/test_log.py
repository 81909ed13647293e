"""SegmentLog: appends, group commit, reads (Fetch), truncation, reopen, ListOffsets."""

from __future__ import annotations

import errno
import os
import random
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

import records.log as log_module
from records.batch import (
    CorruptBatchError,
    InvalidBatchError,
    build_batch,
    iter_records,
    read_batch_header,
    verify_crc,
)
from records.errors import LogFailedError, LogLockedError, OffsetOutOfRangeError
from records.log import SegmentLog

TS = 1_700_000_000_000


def op(i: int, n: int = 3, value_size: int = 60) -> list[tuple[bytes | None, bytes | None]]:
    """The records of coordinator operation `i`: n (key, value) pairs, the last a tombstone."""
    recs: list[tuple[bytes | None, bytes | None]] = [
        (f"key-{i}-{j}".encode(), f"value-{i}-{j}-".encode().ljust(value_size, b"x")) for j in range(n - 1)
    ]
    recs.append((f"key-{i}-tomb".encode(), None))
    return recs


def all_records(log: SegmentLog, start: int | None = None) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for _h, raw in log.batches(start) for r in iter_records(raw)]


def split_batches(data: bytes) -> list[bytes]:
    out = []
    pos = 0
    while pos < len(data):
        h = verify_crc(data, pos)
        out.append(data[pos : pos + h.size])
        pos += h.size
    return out


def client_batch(n: int, ts: int = TS, compression: int = 0, value: bytes = b"v" * 50) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=compression, batch_size=1 << 22)
    for i in range(n):
        builder.append(timestamp=ts + i, key=b"k%d" % i, value=value, headers=[])
    builder.close()
    return bytes(builder.buffer())


# --- append / read / reopen ---------------------------------------------------------------------


def test_new_log_is_empty_and_starts_at_offset_zero(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path / "log") as log:
        assert (log.start_offset, log.end_offset, log.durable_offset, log.size_bytes) == (
            0,
            0,
            0,
            0,
        )
        assert log.read(0, 1000) == b""
        assert list(log.batches()) == []
    assert sorted(os.listdir(tmp_path / "log")) == [".lock", "00000000000000000000.log"]


def test_append_records_makes_one_batch_per_operation(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path) as log:
        assert log.append_records(op(0), TS) == (0, 2)
        assert log.append_records(op(1, n=1), TS) == (3, 3)
        assert log.append_records(op(2, n=5), TS + 1) == (4, 8)
        headers = [h for h, _raw in log.batches()]
        assert [(h.base_offset, h.record_count) for h in headers] == [(0, 3), (3, 1), (4, 5)]
        assert log.end_offset == 9


def test_records_survive_close_and_reopen_with_offsets_continuing(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path) as log:
        for i in range(50):
            log.append_records(op(i), TS + i)
        before = all_records(log)
        size = log.size_bytes
    with SegmentLog.open(tmp_path) as log:
        assert all_records(log) == before
        assert (log.end_offset, log.durable_offset, log.size_bytes) == (150, 150, size)
        assert log.append_records(op(50), TS) == (150, 152)
    with SegmentLog.open(tmp_path) as log:
        assert all_records(log)[-3:] == [(o, k, v) for o, (k, v) in zip(range(150, 153), op(50), strict=True)]


def test_segments_roll_at_segment_bytes_with_kafka_file_names(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path, segment_bytes=2000) as log:
        for i in range(60):
            log.append_records(op(i), TS)
        bases = log.segment_base_offsets
        assert len(bases) > 5
        batch_starts = {h.base_offset for h, _ in log.batches()}
        assert set(bases) <= batch_starts
    names = sorted(n for n in os.listdir(tmp_path) if n.endswith(".log"))
    assert names == [f"{b:020d}.log" for b in bases]
    for name in names[:-1]:
        assert 0 < os.path.getsize(tmp_path / name) <= 2000


def test_a_batch_larger_than_a_segment_gets_a_segment_of_its_own(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path, segment_bytes=1000) as log:
        log.append_records(op(0), TS)
        log.append_records([(b"big", b"x" * 5000)], TS)
        log.append_records(op(1), TS)
        assert log.segment_base_offsets == [0, 3, 4]
        assert all_records(log)[3] == (3, b"big", b"x" * 5000)


def test_read_from_the_middle_of_a_batch_starts_at_that_batch(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path, segment_bytes=3000, index_interval_bytes=512) as log:
        for i in range(100):
            log.append_records(op(i), TS)
        for offset in (0, 1, 2, 3, 151, 152, 299):
            first = split_batches(log.read(offset, 10_000))[0]
            h = read_batch_header(first)
            assert h.base_offset <= offset <= h.last_offset
            assert h.base_offset == offset - offset % 3


def test_read_with_small_max_bytes_returns_one_whole_batch(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path) as log:
        for i in range(10):
            log.append_records(op(i), TS)
        for max_bytes in (1, 10, 100):
            data = log.read(6, max_bytes)
            assert len(split_batches(data)) == 1
            assert read_batch_header(data).base_offset == 6


def test_reads_return_whole_batches_only_and_cover_the_log(tmp_path: Path) -> None:
    rng = random.Random(7)
    with SegmentLog.open(tmp_path, segment_bytes=4000) as log:
        for i in range(200):
            log.append_records(op(i, n=rng.randint(1, 5), value_size=rng.randint(0, 300)), TS)
        offset, seen = 0, []
        while offset < log.end_offset:
            max_bytes = rng.randint(1, 6000)
            data = log.read(offset, max_bytes)
            batches = split_batches(data)
            assert len(data) <= max_bytes or len(batches) == 1
            for raw in batches:
                seen.extend((r.offset, r.key, r.value) for r in iter_records(raw))
            offset = read_batch_header(batches[-1]).next_offset
        assert seen == all_records(log)


def test_read_stops_before_upper_offset(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path) as log:
        for i in range(5):
            log.append_records(op(i), TS)
        data = log.read(0, 1 << 20, upper_offset=9)
        assert [read_batch_header(b).base_offset for b in split_batches(data)] == [0, 3, 6]
        assert log.read(9, 1 << 20, upper_offset=9) == b""


def test_read_outside_the_log_is_offset_out_of_range(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path) as log:
        log.append_records(op(0), TS)
        assert log.read(3, 100) == b""
        with pytest.raises(OffsetOutOfRangeError, match="offset 4 is out of range"):
            log.read(4, 100)
        with pytest.raises(OffsetOutOfRangeError):
            log.read(-1, 100)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.tuples(st.integers(1, 6), st.integers(0, 700)), min_size=1, max_size=80),
    segment_bytes=st.integers(500, 20_000),
    interval=st.integers(1, 5000),
    data=st.data(),
)
def test_every_offset_reads_back_its_own_batch(
    tmp_path_factory: pytest.TempPathFactory,
    sizes: list[tuple[int, int]],
    segment_bytes: int,
    interval: int,
    data: st.DataObject,
) -> None:
    path = tmp_path_factory.mktemp("log")
    with SegmentLog.open(
        path, segment_bytes=segment_bytes, index_interval_bytes=interval, fsync_policy="none"
    ) as log:
        expected = {}
        for i, (n, vsize) in enumerate(sizes):
            recs = op(i, n=n, value_size=vsize)
            base, last = log.append_records(recs, TS + i)
            for o, (k, v) in zip(range(base, last + 1), recs, strict=True):
                expected[o] = (k, v)
        if data.draw(st.booleans()):
            log.close()
            log = SegmentLog.open(
                path,
                segment_bytes=segment_bytes,
                index_interval_bytes=interval,
                fsync_policy="none",
            )
        for offset in data.draw(st.lists(st.integers(0, log.end_offset - 1), max_size=20)):
            first = split_batches(log.read(offset, 1))[0]
            got = {r.offset: (r.key, r.value) for r in iter_records(first)}
            assert got[offset] == expected[offset]
        log.close()


# --- group commit and durability ----------------------------------------------------------------


def test_one_sync_makes_many_appends_durable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(log_module, "fsync_file", lambda fd: calls.append(fd))
    with SegmentLog.open(tmp_path) as log:
        calls.clear()
        for i in range(100):
            log.append_records(op(i), TS)
        assert calls == []  # appends never fsync
        assert log.durable_offset == 0
        assert log.sync() == 300
        assert len(calls) == 1
        assert log.durable_offset == 300
        log.sync()
        assert len(calls) == 1  # nothing new to sync


def test_rolling_fsyncs_the_old_segment_and_sync_fsyncs_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files: list[int] = []
    dirs: list[str] = []
    monkeypatch.setattr(log_module, "fsync_file", lambda fd: files.append(fd))
    monkeypatch.setattr(log_module, "fsync_dir", lambda path: dirs.append(path))
    with SegmentLog.open(tmp_path, segment_bytes=500) as log:
        log.append_records(op(0), TS)
        log.sync()
        files.clear()
        dirs.clear()
        log.append_records(op(1), TS)
        log.append_records(op(2), TS)  # rolls: the unsynced first segment is fsynced first
        assert len(files) == 1 and dirs == []
        log.sync()
        assert len(files) == 2 and dirs == [str(tmp_path)]


def test_fsync_policy_none_never_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(log_module, "fsync_file", calls.append)
    monkeypatch.setattr(log_module, "fsync_dir", calls.append)
    with SegmentLog.open(tmp_path, fsync_policy="none", segment_bytes=300) as log:
        for i in range(20):
            log.append_records(op(i), TS)
        assert log.sync() == 60
    assert calls == []


def test_sync_can_run_in_a_worker_thread_while_appends_continue(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path) as log:
        for i in range(10):
            log.append_records(op(i), TS)
        pending = log.begin_sync()
        assert pending.target_offset == 30
        log.append_records(op(10), TS)  # arrives while the fsync is in flight
        worker = threading.Thread(target=pending.run)
        worker.start()
        log.append_records(op(11), TS)
        worker.join()
        assert log.finish_sync(pending) == 30  # not the later appends
        assert log.durable_offset == 30
        assert log.sync() == 36


def test_a_truncation_during_a_pending_sync_does_not_advance_the_durable_offset(
    tmp_path: Path,
) -> None:
    with SegmentLog.open(tmp_path, fsync_policy="none") as log:
        for i in range(4):
            log.append_records(op(i), TS)
        log.sync()
        log.append_records(op(4), TS)
        pending = log.begin_sync()
        log.truncate_to(12)
        log.append_records(op(5), TS)  # new, unsynced data at offsets 12-14
        pending.run()
        assert log.finish_sync(pending) == 12


def test_a_failed_background_fsync_fails_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = SegmentLog.open(tmp_path)
    log.append_records(op(0), TS)
    pending = log.begin_sync()
    with pytest.raises(RuntimeError, match="before the PendingSync has run"):
        log.finish_sync(pending)

    def broken(fd: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(log_module, "fsync_file", broken)
    pending.run()  # never raises: the error is reported by finish_sync
    assert isinstance(pending.error, OSError)
    with pytest.raises(LogFailedError, match="fsync failed"):
        log.finish_sync(pending)
    with pytest.raises(LogFailedError):
        log.append_records(op(1), TS)
    log.close()


def test_a_failed_fsync_fails_the_log_until_reopened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = SegmentLog.open(tmp_path)
    log.append_records(op(0), TS)

    def broken(fd: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(log_module, "fsync_file", broken)
    with pytest.raises(LogFailedError, match="fsync"):
        log.sync()
    with pytest.raises(LogFailedError, match="reopen"):
        log.append_records(op(1), TS)
    with pytest.raises(LogFailedError):
        log.read(0, 100)
    log.close()  # does not try to sync again
    monkeypatch.undo()
    with SegmentLog.open(tmp_path) as log:
        assert log.end_offset == 3


def test_a_failed_write_leaves_the_log_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with SegmentLog.open(tmp_path) as log:
        log.append_records(op(0), TS)
        size = log.size_bytes

        def half_then_enospc(fd: int, data: bytes | bytearray) -> None:
            os.write(fd, bytes(data[: len(data) // 2]))
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(log_module, "_write_all", half_then_enospc)
        with pytest.raises(OSError, match="No space"):
            log.append_records(op(1), TS)
        monkeypatch.undo()
        assert (log.end_offset, log.size_bytes) == (3, size)
        assert os.path.getsize(tmp_path / "00000000000000000000.log") == size
        assert log.append_records(op(1), TS) == (3, 5)
    with SegmentLog.open(tmp_path) as log:
        assert [o for o, _k, _v in all_records(log)] == list(range(6))


# --- truncation -----------------------------------------------------------------------------------


def test_truncate_to_rolls_back_the_last_operations(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path) as log:
        for i in range(5):
            log.append_records(op(i), TS)
        log.sync()
        log.truncate_to(9)
        assert (log.end_offset, log.durable_offset) == (9, 9)
        assert log.append_records(op(9), TS) == (9, 11)
        assert [k for _o, k, _v in all_records(log, 9)] == [k for k, _ in op(9)]
    with SegmentLog.open(tmp_path) as log:
        assert log.end_offset == 12
        assert all_records(log, 9)[0][1] == b"key-9-0"


def test_truncate_to_across_segments_deletes_later_files(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path, segment_bytes=600) as log:
        for i in range(20):
            log.append_records(op(i), TS)
        bases = log.segment_base_offsets
        cut = bases[2]
        log.truncate_to(cut)
        assert log.segment_base_offsets == bases[:3]
        assert log.end_offset == cut
        assert log.read(cut, 100) == b""
        log.truncate_to(4 * 3)
        assert log.end_offset == 12
        assert len([n for n in os.listdir(tmp_path) if n.endswith(".log")]) == len(log.segment_base_offsets)
    with SegmentLog.open(tmp_path, segment_bytes=600) as log:
        assert log.end_offset == 12
        assert [o for o, _k, _v in all_records(log)] == list(range(12))


def test_truncate_to_inside_a_batch_or_outside_the_log_is_refused(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path) as log:
        log.append_records(op(0), TS)
        with pytest.raises(ValueError, match="inside the batch"):
            log.truncate_to(1)
        with pytest.raises(OffsetOutOfRangeError):
            log.truncate_to(4)
        log.truncate_to(0)
        assert (log.end_offset, log.size_bytes) == (0, 0)


def test_truncate_keeps_the_timestamp_index_exact(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path, index_interval_bytes=1) as log:
        log.append_records(op(0), TS + 100)
        log.append_records(op(1), TS + 900)
        log.truncate_to(3)
        assert log.offset_for_timestamp(TS + 500) is None
        log.append_records(op(2), TS + 600)
        assert log.offset_for_timestamp(TS + 500) == (3, TS + 600)


# --- data plane: client batches ------------------------------------------------------------------


def test_append_batch_assigns_offsets_by_rewriting_the_base_offset(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path) as log:
        log.append_records(op(0), TS)
        raw = client_batch(4)
        assert log.append_batch(memoryview(raw), partition_leader_epoch=7) == (3, 6)
        stored = split_batches(log.read(3, 1 << 20))[0]
        # only the base offset (bytes 0-7) and the leader epoch (12-15) changed
        assert stored[8:12] == raw[8:12] and stored[16:] == raw[16:]
        assert stored[:8] != raw[:8] and stored[12:16] != raw[12:16]
        h = verify_crc(stored)
        assert (h.base_offset, h.partition_leader_epoch) == (3, 7)
        peer = KpBatch(stored)
        assert peer.validate_crc()
        assert [(r.offset, r.key) for r in peer] == [(3 + i, b"k%d" % i) for i in range(4)]
        assert log.end_offset == 7


def test_compressed_client_batches_are_stored_opaquely(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path) as log:
        raw = client_batch(10, compression=1, value=b"z" * 500)  # gzip
        assert log.append_batch(raw) == (0, 9)
        assert log.append_batch(client_batch(2)) == (10, 11)
        records = MemoryRecords(log.read(0, 1 << 20))
        offsets = []
        while records.has_next():
            offsets.extend(r.offset for r in records.next_batch())
        assert offsets == list(range(12))


def test_invalid_client_batches_append_nothing(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path) as log:
        damaged = bytearray(client_batch(3))
        damaged[-2] ^= 0x40
        with pytest.raises(CorruptBatchError, match="CRC"):
            log.append_batch(damaged)
        with pytest.raises(InvalidBatchError, match="exactly one"):
            log.append_batch(client_batch(1) + client_batch(1))
        assert (log.end_offset, log.size_bytes) == (0, 0)


def test_offset_for_timestamp_finds_the_first_record_at_or_after(tmp_path: Path) -> None:
    timestamps = [TS + 50, TS + 10, TS + 300, TS + 200, TS + 200, TS + 1000]
    with SegmentLog.open(tmp_path, segment_bytes=400, index_interval_bytes=100) as log:
        for ts in timestamps:
            log.append_records([(b"k", b"v" * 50)], ts)
        log.append_batch(client_batch(3, ts=TS + 2000))  # record timestamps 2000, 2001, 2002
        log.append_batch(client_batch(3, ts=TS + 3000, compression=1))
        stamps = [*timestamps, TS + 2000, TS + 2001, TS + 2002]
        for target in [TS, TS + 11, TS + 60, TS + 250, TS + 1000, TS + 2001, TS + 2002]:
            want = next(o for o, ts in enumerate(stamps) if ts >= target)
            assert log.offset_for_timestamp(target) == (want, stamps[want])
        assert log.offset_for_timestamp(TS + 2500) == (9, TS + 3002)  # compressed: batch base
        assert log.offset_for_timestamp(TS + 5000) is None


# --- lifecycle ------------------------------------------------------------------------------------


def test_a_log_directory_can_be_open_only_once(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path), pytest.raises(LogLockedError, match="in use"):
        SegmentLog.open(tmp_path)
    SegmentLog.open(tmp_path).close()


def test_close_is_idempotent_and_closed_logs_refuse_work(tmp_path: Path) -> None:
    log = SegmentLog.open(tmp_path)
    log.append_records(op(0), TS)
    log.close()
    log.close()
    assert log.closed
    with pytest.raises(LogFailedError, match="closed"):
        log.append_records(op(1), TS)


def test_unrelated_files_in_the_directory_are_ignored(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "123.log").write_bytes(b"not a segment name")
    with SegmentLog.open(tmp_path) as log:
        log.append_records(op(0), TS)
    with SegmentLog.open(tmp_path) as log:
        assert log.end_offset == 3


def test_open_rejects_bad_settings(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="segment_bytes"):
        SegmentLog.open(tmp_path, segment_bytes=0)
    with pytest.raises(ValueError, match="fsync_policy"):
        SegmentLog.open(tmp_path, fsync_policy="always")  # type: ignore[arg-type]


def test_build_batch_bytes_equal_what_append_records_stores(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path) as log:
        log.append_records(op(0), TS)
        log.append_records(op(1), TS + 5)
        assert log.read(3, 1 << 20) == build_batch(op(1), base_offset=3, timestamp_ms=TS + 5)
