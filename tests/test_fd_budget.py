"""File descriptors as a budget: suspended segment logs, the LRU of open partition logs
(`log.open.files.max`), the node's partition budget (`max.partitions`) and creations that fail
midway (issue "Bounded, never blocked, never destroys", point 3)."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

import records.log
from gateway.dataplane.plane import DataPlane, TopicError
from gateway.dataplane.store import (
    MIN_OPEN_FILES,
    OpenFileBudget,
    PartitionStore,
    SegmentPartitionStore,
    descriptor_limit,
    open_files_budget,
    open_segment_store,
)
from records.errors import LogCorruptionError, LogFailedError
from records.log import SegmentLog
from records.segment import segment_name
from tests.record_batches import make_batch


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# -- SegmentLog.suspend / resume ------------------------------------------------------------------


def test_suspend_fsyncs_then_closes_every_file_and_resume_serves_without_a_rescan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = SegmentLog.open(tmp_path / "p", segment_bytes=200)
    for i in range(6):
        log.append_batch(make_batch([f"v{i}".encode() * 20]))
    assert len(log.segment_base_offsets) > 2 and log.open_files == 1 + len(log.segment_base_offsets)
    events: list[str] = []
    real_fsync = records.log.fsync_file
    monkeypatch.setattr(records.log, "fsync_file", lambda fd: (events.append("fsync"), real_fsync(fd)))
    before = open_fds()
    log.suspend()
    assert events, "suspend() fsyncs what is not durable before it closes"
    assert log.durable_offset == log.end_offset == 6
    assert log.suspended and log.open_files == 0
    assert open_fds() == before - (1 + len(log.segment_base_offsets))
    assert log.end_offset == 6 and log.start_offset == 0  # still answered from memory
    with pytest.raises(LogFailedError, match="suspended"):
        log.read(0, 1000)
    log.resume()
    assert open_fds() == before
    assert b"v3" * 20 in log.read(3, 1)
    log.append_batch(make_batch([b"after"]))
    log.close()
    with SegmentLog.open(tmp_path / "p") as again:
        assert again.end_offset == 7


def test_a_suspended_log_gives_its_directory_lock_back(tmp_path: Path) -> None:
    log = SegmentLog.open(tmp_path / "p")
    log.suspend()
    other = SegmentLog.open(tmp_path / "p")  # the .lock is free while suspended
    with pytest.raises(records.log.LogLockedError):
        log.resume()
    other.close()
    log.resume()
    log.close()


def test_resume_refuses_a_segment_changed_while_closed(tmp_path: Path) -> None:
    log = SegmentLog.open(tmp_path / "p")
    log.append_batch(make_batch([b"a"]))
    log.suspend()
    with open(tmp_path / "p" / segment_name(0), "ab") as f:
        f.write(b"junk")
    before = open_fds()
    with pytest.raises(LogCorruptionError, match="when it was closed"):
        log.resume()
    assert log.suspended and open_fds() == before  # nothing leaked, still suspended
    log.close()


def test_closing_a_suspended_log_is_quiet(tmp_path: Path) -> None:
    log = SegmentLog.open(tmp_path / "p")
    log.suspend()
    log.close()
    assert log.closed
    with pytest.raises(LogFailedError, match="closed"):
        log.resume()


def test_sealed_segments_closed_between_reads_hold_two_descriptors_however_many_segments(
    tmp_path: Path,
) -> None:
    before = open_fds()
    log = SegmentLog.open(tmp_path / "p", segment_bytes=200, keep_sealed_open=False)
    for i in range(30):
        log.append_batch(make_batch([f"v{i:02d}".encode() * 20], timestamps_ms=[1000 + i]))
    assert len(log.segment_base_offsets) >= 10
    assert log.open_files == 2 and open_fds() == before + 2
    data = log.read(0, 1 << 20)
    assert all(f"v{i:02d}".encode() * 20 in data for i in range(30))
    assert [h.base_offset for h, _raw in log.batches()] == list(range(30))
    headers = [h for h, _raw in log.batches()]
    for t in (headers[3].max_timestamp, headers[17].max_timestamp):
        found = log.offset_for_timestamp(t)  # in a sealed segment
        assert found is not None
        assert found.offset == next(h.base_offset for h in headers if h.max_timestamp >= t)
    assert open_fds() == before + 2  # every read closed what it opened
    log.suspend()
    assert open_fds() == before
    log.resume()
    assert open_fds() == before + 2
    log.truncate_to(5)  # into a sealed segment: it becomes the active one
    log.append_batch(make_batch([b"new"]))
    assert log.end_offset == 6 and b"new" in log.read(5, 1000)
    with pytest.raises(ValueError, match="compaction needs the sealed segments open"):
        log._sealed_segments()
    log.close()
    assert open_fds() == before
    with SegmentLog.open(tmp_path / "p", keep_sealed_open=False) as again:
        assert again.end_offset == 6 and again.open_files == 2


# -- the budget ---------------------------------------------------------------------------------


def test_budget_from_the_descriptor_limit() -> None:
    assert open_files_budget(0, limit=1024) == 256
    assert open_files_budget(0, limit=512) == 128
    assert open_files_budget(0, limit=20) == MIN_OPEN_FILES
    assert open_files_budget(300, limit=1024) == 300
    with pytest.raises(ValueError, match=r"log.open.files.max=600 .*ulimit -n = 1024"):
        open_files_budget(600, limit=1024)


def test_many_partitions_stay_within_the_budget_and_read_back_after_eviction(tmp_path: Path) -> None:
    budget = OpenFileBudget(40)
    before = open_fds()
    stores: list[SegmentPartitionStore] = []
    for i in range(300):
        stores.append(SegmentPartitionStore.open(tmp_path / f"t-{i}", segment_bytes=300, budget=budget))
        assert open_fds() - before <= 40
    for round_ in range(3):
        for i, s in enumerate(stores):
            s.append_batch(make_batch([f"{i}:{round_}".encode() * 10]))
            assert open_fds() - before <= 40
    assert budget.open_files <= 40 and budget.suspensions > 500
    for i, s in enumerate(stores):
        assert s.end_offset == 3
        data = s.read(0, 1 << 20)
        for round_ in range(3):
            assert f"{i}:{round_}".encode() * 10 in data
        s.sync()
    for s in stores:
        s.close()
    assert open_fds() == before and budget.open_files == 0 and budget.open_logs == 0
    # Suspension fsynced everything: the reopened logs hold every append.
    for i in range(0, 300, 37):
        with SegmentLog.open(tmp_path / f"t-{i}") as log:
            assert log.end_offset == 3


def test_a_store_in_use_is_not_suspended(tmp_path: Path) -> None:
    budget = OpenFileBudget(4)
    busy = SegmentPartitionStore.open(tmp_path / "busy", budget=budget)
    with busy._lock:  # another thread is using it (a worker's fsync, say)
        others = [SegmentPartitionStore.open(tmp_path / f"o{i}", budget=budget) for i in range(3)]
    assert not busy.log.suspended
    busy.append_batch(make_batch([b"x"]))
    for s in [busy, *others]:
        s.close()


# -- the data plane ----------------------------------------------------------------------------


def test_a_data_dir_with_more_partitions_than_the_budget_opens_within_it(tmp_path: Path) -> None:
    before = open_fds()
    plane = DataPlane(tmp_path, open_files_max=MIN_OPEN_FILES)
    plane.create_topic("wide", 200)
    assert open_fds() - before <= MIN_OPEN_FILES + 4  # + the data dir's .lock
    p = plane.partition("wide", 150)
    assert p is not None
    p.append(make_batch([b"kept"]))
    asyncio.run(p.make_durable())
    asyncio.run(plane.close())
    assert open_fds() == before

    plane = DataPlane(tmp_path, open_files_max=MIN_OPEN_FILES)
    assert open_fds() - before <= MIN_OPEN_FILES + 4
    p = plane.partition("wide", 150)
    assert p is not None and p.high_watermark == 1 and b"kept" in p.store.read(0, 1000)
    asyncio.run(plane.close())


def test_partitions_beyond_max_partitions_are_refused_with_policy_violation(tmp_path: Path) -> None:
    plane = DataPlane(tmp_path, max_partitions=10)
    plane.create_topic("a", 6)
    with pytest.raises(TopicError) as e:
        plane.create_topic("b", 5)
    assert e.value.code == ErrorCode.policy_violation
    assert e.value.message == (
        "Adding 5 partitions would make 11 partitions on this node, more than max.partitions=10 (6 exist)."
    )
    assert plane.topic("b") is None and not (tmp_path / "b-0").exists()
    with pytest.raises(TopicError) as e:
        asyncio.run(plane.add_partitions("a", 11))
    assert e.value.code == ErrorCode.policy_violation
    topic = plane.topic("a")
    assert topic is not None and topic.partitions == 6 and not (tmp_path / "a-6").exists()
    plane.create_topic("b", 4)  # exactly the budget
    asyncio.run(plane.auto_create(["c"]))  # Metadata's auto-creation: refused the same way
    assert plane.topic("c") is None and not (tmp_path / "c-0").exists()
    asyncio.run(plane.close())


def test_a_creation_failing_midway_removes_only_what_it_created(tmp_path: Path) -> None:
    calls = 0

    def failing_store(
        path: Path, *, segment_bytes: int, fsync_policy: str, budget: OpenFileBudget | None = None
    ) -> PartitionStore:
        nonlocal calls
        calls += 1
        if calls > 5:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE), str(path / segment_name(0)))
        return open_segment_store(path, segment_bytes=segment_bytes, fsync_policy=fsync_policy, budget=budget)

    plane = DataPlane(tmp_path, open_store=failing_store)
    (tmp_path / "t-7").mkdir()  # someone else's directory where partition 7 goes
    (tmp_path / "t-7" / "theirs").write_text("kept")
    before = open_fds()
    with pytest.raises(TopicError) as e:
        plane.create_topic("t", 10)
    assert e.value.code == ErrorCode.kafka_storage_error
    assert "Too many open files" in e.value.message and "10 partitions of topic 't'" in e.value.message
    assert "were removed" in e.value.message
    assert plane.topic("t") is None and plane.partition("t", 0) is None
    assert open_fds() == before
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("t-"))
    assert len(left) == 1 and left[0].startswith("t-7.") and left[0].endswith("-stray")
    assert (tmp_path / left[0] / "theirs").read_text() == "kept"
    asyncio.run(plane.close())
    reopened = DataPlane(tmp_path)  # and the server starts again
    assert reopened.topic("t") is None
    asyncio.run(reopened.close())


def test_a_budget_beyond_the_descriptor_limit_refuses_to_start_having_changed_nothing(tmp_path: Path) -> None:
    limit = descriptor_limit()
    with pytest.raises(ValueError, match=rf"log.open.files.max={limit} .*ulimit -n = {limit}"):
        DataPlane(tmp_path, open_files_max=limit)
    assert list(tmp_path.iterdir()) == []
