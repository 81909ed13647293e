"""Start-up rules that keep a data directory safe, after Kafka's `LogManager` and `MetaProperties`.

Kafka's `LogManager` locks each log directory (`.lock`, an exclusive file lock) in its
constructor, before it loads or changes anything there, so a second broker on the same
directory fails at once and touches nothing. A partition directory whose topic the metadata does
not know is not deleted but renamed aside as `<topic>-<partition>.<uuid>-stray` (KIP-858's stray
logs) for the operator to inspect; only the directories of a topic the operator deleted are
removed (renamed `<topic>-<partition>.<uuid>-delete` first, then deleted). A damaged
`meta.properties` stops the broker with an error naming the file.

groupshift keeps the same rules for its data directory: `DataDirLock` is the `.lock`,
`rename_aside` makes `-stray` and `-delete` directories, and `load_or_create_meta` reads
`meta.properties` (cluster.id, node.id) or refuses it with the file named. What the topic
registry (`topics.json`) must hold is checked in `gateway.dataplane.topics`; the refusals and
the `--ignore-topics-file` override are in `gateway.dataplane.plane`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import uuid
from pathlib import Path

from engine.ids import kafka_uuid_string
from gateway.dataplane.durable import fsync_dir, write_atomically

LOCK_FILE = ".lock"  # Kafka's name in a log directory
META_FILE = "meta.properties"
STRAY_SUFFIX = "-stray"
DELETE_SUFFIX = "-delete"
DAMAGED_SUFFIX = "-damaged"
# `<topic>-<partition>.<32 hex digits>-delete`: the only name `rename_aside` gives for deletion.
_DELETE_DIR = re.compile(r".+-\d+\.[0-9a-f]{32}" + re.escape(DELETE_SUFFIX))
# The flag that starts a server whose topics.json is missing or damaged (README, Serving).
IGNORE_TOPICS_FLAG = "--ignore-topics-file"


class DataDirError(ValueError):
    """The data directory cannot be used as it is; the message names the file and the way out."""


class DataDirLockedError(DataDirError):
    """Another process holds the data directory's `.lock`."""


class DataDirLock:
    """An exclusive `flock` on `<data dir>/.lock`, held for the whole life of the server.

    The holder's process id is written into the file so that a refused second server can say
    who holds it (Kafka's `.lock` is empty; the lock itself is what counts, the text is only a
    hint). The lock goes with the descriptor: closing it, or the process ending however it
    ends (SIGKILL included), releases it, so a crash never leaves a stale lock behind.
    """

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def acquire(cls, data_dir: Path) -> DataDirLock:
        """Create `data_dir` if needed and lock it; `DataDirLockedError` if another process has it."""
        data_dir.mkdir(parents=True, exist_ok=True)
        path = data_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            by = f"process {holder}" if holder else "another process"
            raise DataDirLockedError(
                f"data directory {data_dir} is in use by another open log: {by} holds {path} "
                "(another groupshift server); stop that one first, nothing was read or changed here"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        with contextlib.suppress(OSError):  # the hint only: the lock is already ours
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(path, fd)

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def release(self) -> None:
        """Drop the lock (idempotent). The file stays: removing it could race a new holder."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __del__(self) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        text = os.pread(fd, 32, 0).decode("ascii").strip()
        if text.isdigit():
            return text
    return ""


def rename_aside(path: Path, suffix: str) -> Path:
    """Rename `path` to `<name>.<32 hex digits><suffix>` in the same directory, durably.

    Kafka's names: `-stray` for a directory no topic owns (kept for the operator), `-delete`
    for one of a deleted topic (removed next). The random part makes every name new, so
    nothing that is already aside is ever replaced.
    """
    target = path.with_name(f"{path.name}.{uuid.uuid4().hex}{suffix}")
    os.rename(path, target)
    fsync_dir(path.parent)
    return target


_ASIDE_DIR = re.compile(r"(.+)-\d+\.[0-9a-f]{32}" + re.escape(STRAY_SUFFIX))


def stray_topic(name: str) -> str | None:
    """The topic name of a `<topic>-<n>.<32 hex>-stray` directory, else None."""
    m = _ASIDE_DIR.fullmatch(name)
    return None if m is None else m.group(1)


def is_delete_dir(name: str) -> bool:
    """A directory `rename_aside(..., DELETE_SUFFIX)` made: the only kind removed at start-up."""
    return _DELETE_DIR.fullmatch(name) is not None


def read_properties(path: Path) -> dict[str, str]:
    """Java-properties `key=value` lines, as Kafka writes `meta.properties`."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def load_or_create_meta(data_dir: Path, node_id: int) -> str:
    """The cluster id from `meta.properties`, written first if the directory is new.

    A file that cannot be read, lacks `cluster.id` or has a `node.id` that is not a number is
    refused with its path (Kafka stops on a damaged `meta.properties` likewise): a new cluster
    id would silently make every client see another cluster.
    """
    path = data_dir / META_FILE
    if not path.exists():
        cluster_id = kafka_uuid_string(uuid.uuid4().bytes)
        write_atomically(path, f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n".encode())
        return cluster_id
    try:
        props = read_properties(path)
    except (OSError, UnicodeDecodeError) as e:
        raise _damaged_meta(path, f"cannot be read: {getattr(e, 'strerror', None) or e}") from None
    cluster_id = props.get("cluster.id", "")
    if not cluster_id:
        raise _damaged_meta(path, "no cluster.id")
    stored_text = props.get("node.id", str(node_id))
    if not stored_text.isdigit():
        raise _damaged_meta(path, f"node.id is not a number: {stored_text[:40]!r}")
    stored = int(stored_text)
    if stored != node_id:
        raise ValueError(f"node.id={node_id} does not match node.id={stored} stored in {path}")
    return cluster_id


def _damaged_meta(path: Path, problem: str) -> DataDirError:
    return DataDirError(
        f"{path} is damaged ({problem}): it holds this node's cluster.id and node.id; restore it "
        "from a backup (or write version=1, cluster.id=..., node.id=... again), or remove it and "
        "start with --force-data-dir to give the node a new cluster.id"
    )
