"""The process's memory allocators, seen from inside: pymalloc's arenas and glibc's malloc.

No Kafka behaviour; this serves issue 27's soak bound (RSS flat after warm-up,
docs/robustness.md, Soak). The interpreter's live blocks (`sys.getallocatedblocks`) can stay flat
while RSS rises, because two allocators sit between them and the kernel: pymalloc (objects of up
to 512 bytes, in 1 MiB arenas it returns only when every block in one is free) and glibc's malloc
(everything larger, and every C extension), whose freed memory stays in its heaps unless the top
of a heap is free or `malloc_trim` hands the free pages back. This module reads both, so a soak
can tell which one grows, and caps glibc's arenas (setting `malloc.arena.max`).

Debug hook (off by default): with `GROUPSHIFT_MALLOC_STATS=FILE` a daemon thread appends one JSON
line every `GROUPSHIFT_MALLOC_STATS_EVERY` seconds (default 60) with RSS, pymalloc's arena counts
and glibc's `mallinfo2` figures. Off glibc (musl, macOS), the glibc figures are absent and
the arena cap does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


class _MallInfo2(ctypes.Structure):
    """glibc's `struct mallinfo2` (glibc 2.33+): every field a size_t."""

    names = (
        "arena",
        "ordblks",
        "smblks",
        "hblks",
        "hblkhd",
        "usmblks",
        "fsmblks",
        "uordblks",
        "fordblks",
        "keepcost",
    )
    _fields_ = [(name, ctypes.c_size_t) for name in names]


def _load_glibc() -> ctypes.CDLL | None:
    """glibc, when this process runs on it (`mallinfo2` and `mallopt` are glibc's)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.mallinfo2  # noqa: B018 - only glibc (2.33+) has it
    except (OSError, AttributeError):
        return None
    return libc


_GLIBC = _load_glibc()


def glibc_available() -> bool:
    return _GLIBC is not None


def mallinfo2() -> dict[str, int] | None:
    """glibc's totals over all its arenas: `arena` bytes obtained with brk/heaps, `hblkhd` bytes
    in mmapped chunks, `uordblks` in use, `fordblks` free inside the heaps (what RSS keeps that
    no object holds), `keepcost` the releasable top."""
    if _GLIBC is None or not hasattr(_GLIBC, "mallinfo2"):
        return None
    fn = _GLIBC.mallinfo2
    fn.restype = _MallInfo2
    info = fn()
    return {name: int(getattr(info, name)) for name in _MallInfo2.names}


_STAT_LINE = re.compile(r"^# ([a-z ]+?)\s*=\s*([\d,]+)\s*$")


def pymalloc_stats() -> dict[str, int]:
    """pymalloc's own totals (`sys._debugmallocstats`, which prints to the C stderr: the
    descriptor is pointed at a temporary file for the call), e.g. `arenas allocated current`,
    `arenas highwater mark`, `bytes in allocated blocks`, `bytes in available blocks` (free
    blocks inside used pools: fragmentation). Debug use only: another thread's stderr output
    during the call would land in the file."""
    with tempfile.TemporaryFile(mode="w+b") as out:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(out.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read().decode("ascii", "replace")
    stats: dict[str, int] = {}
    for line in text.splitlines():
        m = _STAT_LINE.match(line)
        if m:
            stats[m.group(1)] = int(m.group(2).replace(",", ""))
    return stats


def _rss_bytes() -> dict[str, int]:
    """RSS, and its anonymous and file-backed parts (shared libraries, mapped files), in bytes."""
    found: dict[str, int] = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "RssAnon", "RssFile"):
                    found[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return {
        "rss": found.get("VmRSS", -1),
        "rss_anon": found.get("RssAnon", -1),
        "rss_file": found.get("RssFile", -1),
    }


def sample() -> dict[str, Any]:
    """One reading of both allocators, with RSS and the live block count."""
    py = pymalloc_stats()
    return {
        "t": time.time(),
        **_rss_bytes(),
        "py_blocks": sys.getallocatedblocks(),
        "pymalloc_arenas": py.get("arenas allocated current", -1),
        "pymalloc_arenas_highwater": py.get("arenas highwater mark", -1),
        "pymalloc_allocated_bytes": py.get("bytes in allocated blocks", -1),
        "pymalloc_available_bytes": py.get("bytes in available blocks", -1),
        "pymalloc_free_pools_bytes": py.get("bytes in unused pools", -1),
        "glibc": mallinfo2(),
        "threads": threading.active_count(),
    }


def start_stats_dump(path: Path, every_s: float) -> threading.Event:
    """The debug hook: one `sample()` as a JSON line appended to `path` now and every
    `every_s` seconds, from a daemon thread (the event loop never waits for one), until the
    returned event is set. The server never sets it (the hook lives as long as the process); a
    caller that outlives its interest must, because each sample points the process's stderr
    descriptor at a temporary file for a moment."""
    path.parent.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()

    def dump_until_stopped() -> None:
        while not stop.is_set():
            line = json.dumps(sample())
            with path.open("a") as f:
                f.write(line + "\n")
            stop.wait(every_s)

    threading.Thread(target=dump_until_stopped, name="malloc-stats-dump", daemon=True).start()
    return stop


_M_ARENA_MAX = -8  # mallopt's parameter number (glibc malloc.h)


def set_arena_max(arenas: int) -> bool:
    """Caps glibc's malloc arenas (`mallopt(M_ARENA_MAX, arenas)`, as the `MALLOC_ARENA_MAX`
    environment variable does). Called at start-up, before the server's threads allocate: a
    thread that malloc finds contended gets an arena of its own (up to 8 per core by default),
    and each arena keeps its freed memory apart from the others. True when glibc accepted it."""
    if _GLIBC is None or arenas <= 0:
        return False
    return bool(_GLIBC.mallopt(ctypes.c_int(_M_ARENA_MAX), ctypes.c_int(arenas)))
