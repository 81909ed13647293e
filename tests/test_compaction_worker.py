"""Compaction's two passes in a worker process (`records.compaction_worker`): the same bytes
as in the server's own thread, a dead worker costs one abandoned compaction and no data, and
the worker dies with the server."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from records.compaction import (
    CompactionResult,
    KeyFn,
    abandon_compaction,
    begin_compaction,
    compact,
    finish_compaction,
    write_compaction,
)
from records.compaction_worker import WorkerDied, clean_in_worker, shutdown_worker, worker_pid
from records.log import SegmentLog
from tests.test_compaction import TS, records_by_offset, replay, workload

pytestmark = pytest.mark.e2e  # starts child processes


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _segment_bytes(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.suffix == ".log"}


def test_the_worker_writes_the_same_segment_as_the_thread(tmp_path: Path) -> None:
    here, there = tmp_path / "thread", tmp_path / "worker"
    with SegmentLog.open(here, segment_bytes=3000) as log:
        workload(log, random.Random(7), ops=600, keys=50)
    shutil.copytree(here, there)
    with SegmentLog.open(here, segment_bytes=3000) as a, SegmentLog.open(there, segment_bytes=3000) as b:
        state = replay(a)
        in_thread = compact(a, now_ms=TS + 10**6, tombstone_retention_ms=0)
        in_worker = compact(b, now_ms=TS + 10**6, tombstone_retention_ms=0, cleaner=clean_in_worker)
        assert in_worker == in_thread and in_worker.tombstones_dropped > 0
        assert replay(b) == state
    assert _segment_bytes(there) == _segment_bytes(here)
    assert worker_pid() is not None and worker_pid() != os.getpid()


def _compact_as_the_server_does(log: SegmentLog, key_fn: KeyFn | None = None) -> CompactionResult:
    """`gateway.groups.runtime`: write in the worker; any error there abandons the job."""
    job = begin_compaction(log, now_ms=TS, tombstone_retention_ms=10**9, key_fn=key_fn)
    assert job is not None
    try:
        write_compaction(job, cleaner=clean_in_worker)
    except BaseException:
        abandon_compaction(job)
        raise
    return finish_compaction(job)


def die(_key: bytes) -> bytes:
    """A key function that kills the process it runs in: the worker, mid-task."""
    os._exit(3)


def test_a_worker_killed_while_idle_is_replaced_for_the_next_compaction(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path, segment_bytes=2000) as log:
        workload(log, random.Random(8), ops=300, keys=30)
        _compact_as_the_server_does(log)
        first = worker_pid()
        assert first is not None
        os.kill(first, signal.SIGKILL)
        while _alive(first):
            time.sleep(0.01)
        workload(log, random.Random(9), ops=300, keys=30)
        state = replay(log)
        result = _compact_as_the_server_does(log)
        assert result.records_kept < result.records_before and replay(log) == state
        assert worker_pid() not in (None, first)


def test_a_worker_dying_mid_task_abandons_that_compaction_and_loses_nothing(tmp_path: Path) -> None:
    with SegmentLog.open(tmp_path, segment_bytes=2000) as log:
        workload(log, random.Random(10), ops=300, keys=30)
        before, state = records_by_offset(log), replay(log)
        with pytest.raises(WorkerDied, match="exit code 3"):
            _compact_as_the_server_does(log, key_fn=die)
        assert records_by_offset(log) == before  # nothing lost, nothing half-installed
        assert not [n for n in os.listdir(tmp_path) if n.endswith((".cleaned", ".swap"))]
        log.append_records([(b"key-1", b"after")], TS)
        state[b"key-1"] = b"after"
        result = _compact_as_the_server_does(log)
        assert result.records_kept < result.records_before
        assert replay(log) == state


def test_the_worker_dies_with_its_parent(tmp_path: Path) -> None:
    """A server killed with SIGKILL leaves no cleaner behind to race its restarted self."""
    script = textwrap.dedent(
        f"""
        import random, sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from records.compaction import compact
        from records.compaction_worker import clean_in_worker, worker_pid
        from records.log import SegmentLog
        from tests.test_compaction import TS, workload
        with SegmentLog.open({str(tmp_path)!r}, segment_bytes=2000) as log:
            workload(log, random.Random(3), ops=100, keys=10)
            compact(log, now_ms=TS, tombstone_retention_ms=0, cleaner=clean_in_worker)
        print(worker_pid(), flush=True)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), f"worker {child} outlived its parent"


def test_ctrl_c_is_for_the_server_not_the_worker(tmp_path: Path) -> None:
    """A terminal's Ctrl-C signals the server's whole process group; the worker must not die of
    it mid-compaction (the server stops it at shutdown)."""
    with SegmentLog.open(tmp_path, segment_bytes=2000) as log:
        workload(log, random.Random(11), ops=300, keys=30)
        _compact_as_the_server_does(log)
        pid = worker_pid()
        assert pid is not None
        os.kill(pid, signal.SIGINT)
        time.sleep(0.3)
        assert _alive(pid)
        workload(log, random.Random(12), ops=300, keys=30)
        state = replay(log)
        _compact_as_the_server_does(log)
        assert worker_pid() == pid and replay(log) == state


def test_the_worker_imports_neither_asyncio_nor_structlog() -> None:
    """The worker is a second process for as long as the server runs: what it imports is
    memory it keeps (structlog brings asyncio, about 8 MB)."""
    code = "import sys, records.compaction_worker; print(sorted({'asyncio', 'structlog'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=os.getcwd()
    )
    assert out.stdout.strip() == "[]", out.stdout


def teardown_module() -> None:
    shutdown_worker()
