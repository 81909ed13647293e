"""Class-data sharing (JDK 13+ dynamic AppCDS) archives that make Kafka's JVMs start faster.

Most of a Kafka node's start on a small machine is loading and verifying classes. The first
JVM of a release's broker (or tools) runs with `-XX:ArchiveClassesAtExit`, so the JVM writes the
classes it loaded into an archive when it exits; later JVMs map that archive with
`-XX:SharedArchiveFile` instead of loading the classes again (measured in
docs/kafka-in-the-loop.md). An archive is only valid for the JDK and the classpath that made it,
so its name carries a digest of both, and it is adopted (renamed into place) only after a clean
exit, so a JVM killed while writing leaves nothing behind. A JVM that finds an archive unusable
prints a warning and starts normally. `GROUPSHIFT_KAFKA_CDS=0` turns this off.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import time
import uuid
from pathlib import Path

from harness.kafka_dist.maven import KafkaDist


@functools.cache
def _jdk_identity() -> str:
    java = shutil.which("java")
    if java is None:
        return "none"
    real = os.path.realpath(java)
    return f"{real}:{os.stat(real).st_mtime_ns}"


def archive_path(dist: KafkaDist) -> Path | None:
    """Where the archive of this dist on this JDK lives, or None when CDS is turned off."""
    if os.environ.get("GROUPSHIFT_KAFKA_CDS", "1") == "0":
        return None
    digest = hashlib.sha256(f"{_jdk_identity()}|{dist.classpath}".encode()).hexdigest()[:12]
    return dist.home / f"{dist.component}-{digest}.jsa"


def _drop_stale(archive: Path, age_seconds: float = 3600.0) -> None:
    """Remove archives-in-progress of JVMs that were never stopped through us (over an hour old)."""
    for leftover in archive.parent.glob(f".{archive.name}.*"):
        with contextlib.suppress(OSError):
            if time.time() - leftover.stat().st_mtime > age_seconds:
                leftover.unlink()


class CdsSession:
    """The JVM options for one process and, if it is the one making the archive, its adoption."""

    def __init__(self, dist: KafkaDist) -> None:
        self.archive = archive_path(dist)
        self.pending: Path | None = None
        self.options: list[str] = []
        if self.archive is None:
            return
        if self.archive.exists():
            self.options = [f"-XX:SharedArchiveFile={self.archive}"]
        else:
            _drop_stale(self.archive)
            self.pending = self.archive.with_name(f".{self.archive.name}.{uuid.uuid4().hex[:8]}")
            self.options = [f"-XX:ArchiveClassesAtExit={self.pending}"]

    def finish(self, exit_code: int | None) -> None:
        """After the JVM exited: keep the archive if the exit was clean, else drop it."""
        pending, self.pending = self.pending, None
        if pending is None or self.archive is None:
            return
        clean = exit_code in (0, 143)  # 143: exited on SIGTERM after its shutdown hooks
        if clean and pending.exists() and pending.stat().st_size > 0 and not self.archive.exists():
            os.replace(pending, self.archive)
        else:
            with contextlib.suppress(OSError):
                pending.unlink()
