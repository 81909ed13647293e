"""gateway.allocator: the allocator readings the soak decomposes RSS with, and the glibc settings
(`malloc.arena.max`; docs/robustness.md, Soak)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gateway import allocator
from gateway.config import ConfigError, build_config

glibc_only = pytest.mark.skipif(not allocator.glibc_available(), reason="glibc's malloc only")


def test_pymalloc_stats_read_the_arena_counts() -> None:
    stats = allocator.pymalloc_stats()
    assert stats["arenas allocated current"] >= 1
    assert stats["arenas highwater mark"] >= stats["arenas allocated current"]
    before = stats["bytes in allocated blocks"]
    kept = [object() for _ in range(100_000)]  # 1.6 MB of 16-byte blocks
    assert allocator.pymalloc_stats()["bytes in allocated blocks"] > before + 1_000_000
    del kept


@glibc_only
def test_glibc_readings_count_freed_heap_memory() -> None:
    info = allocator.mallinfo2()
    assert info is not None and info["uordblks"] > 0 and info["arena"] >= info["fordblks"]
    # 100 MB in 10,000 chunks of 10 KB (under the mmap threshold: inside the heap), all freed
    # but the last, so the heap's top cannot shrink: glibc keeps them as free heap bytes.
    chunks = [bytearray(10_000) for _ in range(10_000)]
    last = bytearray(10_000)
    del chunks
    after = allocator.mallinfo2()
    assert after is not None and after["fordblks"] > 80_000_000
    del last


def _dump_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "malloc-stats-dump"]


def test_the_stats_hook_writes_json_lines(tmp_path: Path) -> None:
    out = tmp_path / "stats" / "malloc.jsonl"
    stop = allocator.start_stats_dump(out, 0.05)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 2):
            time.sleep(0.05)
    finally:
        # The thread must not outlive the test: each sample redirects this process's stderr
        # descriptor and opens files, which later tests (descriptor counts, fd capture) see.
        stop.set()
        stop_seen = time.monotonic() + 5
        while time.monotonic() < stop_seen and _dump_threads():
            time.sleep(0.02)
    assert not _dump_threads()
    first = json.loads(out.read_text().splitlines()[0])
    assert first["rss"] > first["rss_anon"] > 0 and first["py_blocks"] > 0
    assert first["pymalloc_arenas"] >= 1


def test_the_settings() -> None:
    c = build_config({})
    assert c.malloc_arena_max == 2
    assert build_config({"malloc.arena.max": "0"}).malloc_arena_max == 0
    with pytest.raises(ConfigError, match=r"malloc\.arena\.max"):
        build_config({"malloc.arena.max": "-1"})
    assert not allocator.set_arena_max(0)  # 0 leaves glibc's default alone


@glibc_only
@pytest.mark.e2e  # it starts a process (tests/test_e2e_marks.py)
def test_the_arena_cap_is_accepted_by_glibc() -> None:
    # A child process: the cap stays for the life of the process that sets it.
    code = "from gateway.allocator import set_arena_max; assert set_arena_max(2)"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
