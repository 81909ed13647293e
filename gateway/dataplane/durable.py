"""Crash-safe small-file replacement: write a temp file, fsync it, rename, fsync the directory.

After `write_atomically` returns, a reader (or a restart after SIGKILL or power loss) sees
either the old content or the new one, never a mix: `rename` is atomic within a directory and
the directory fsync makes the new name itself durable.
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
