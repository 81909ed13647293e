"""A memory-limited cgroup for a server under test: "a test under a memory limit of 512 MiB is
not OOM-killed" (docs/robustness.md, Bounds), checked with the kernel's own limit rather than
only with an RSS budget.

The server is started inside a new child of the cgroup-v1 memory hierarchy (the one this
machine kind mounts at /sys/fs/cgroup/memory; cgroup v2's unified hierarchy is used when it has
the memory controller instead): it joins the group before it execs (`GatewayProcess.start(...,
cgroup=)`), so all its memory is charged there. `memory.limit_in_bytes` (and the memory+swap
limit, so swap cannot hide an overrun) is the limit. The kernel OOM-kills the process when it would
go over; `oom_kills()` reads the count. The cgroup is removed when the process has exited.
Without a writable memory controller the caller skips with the reason.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup/unified")


class CgroupUnavailable(RuntimeError):
    """No writable memory controller here; the message says which paths were tried."""


class MemoryCgroup:
    def __init__(self, path: Path, v1: bool) -> None:
        self.path = path
        self.v1 = v1

    @classmethod
    def create(cls, name: str, limit_bytes: int) -> MemoryCgroup:
        for root, v1 in ((V1_ROOT, True), (V2_ROOT, False)):
            probe = root / ("memory.limit_in_bytes" if v1 else "cgroup.subtree_control")
            if not probe.exists() or (not v1 and "memory" not in probe.read_text()):
                continue
            path = root / name
            try:
                path.mkdir(exist_ok=True)
                group = cls(path, v1)
                group._set_limit(limit_bytes)
            except OSError as e:
                with contextlib.suppress(OSError):
                    path.rmdir()
                raise CgroupUnavailable(f"cannot make a memory cgroup at {path}: {e}") from e
            return group
        raise CgroupUnavailable(f"no writable memory controller at {V1_ROOT} or {V2_ROOT}")

    def _set_limit(self, limit: int) -> None:
        if self.v1:
            (self.path / "memory.limit_in_bytes").write_text(str(limit))
            memsw = self.path / "memory.memsw.limit_in_bytes"
            if memsw.exists():
                memsw.write_text(str(limit))
        else:
            (self.path / "memory.max").write_text(str(limit))
            swap = self.path / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")

    def oom_kills(self) -> int:
        name, key = ("memory.oom_control", "oom_kill") if self.v1 else ("memory.events", "oom_kill")
        for line in (self.path / name).read_text().splitlines():
            k, _, v = line.partition(" ")
            if k == key:
                return int(v)
        return 0

    def peak_bytes(self) -> int:
        name = "memory.max_usage_in_bytes" if self.v1 else "memory.peak"
        with contextlib.suppress(OSError, ValueError):
            return int((self.path / name).read_text())
        return 0

    def remove(self, wait_s: float = 10.0) -> None:
        """Remove the group once its processes have exited; the kernel may take a moment after
        a process is reaped before the group is empty (EBUSY meanwhile)."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.1)


@contextlib.contextmanager
def memory_limited(name: str, limit_bytes: int) -> Iterator[MemoryCgroup]:
    """A new memory cgroup for the duration (removed after, once its processes have exited)."""
    group = MemoryCgroup.create(f"groupshift-test-{os.getpid()}-{name}", limit_bytes)
    try:
        yield group
    finally:
        group.remove()
