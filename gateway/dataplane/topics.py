"""Topic metadata: names, stable topic ids, partition counts, persisted in the data directory.

Kafka's rules kept here:
  * names (`org.apache.kafka.common.internals.Topic.validate`): non-empty, not "." or "..",
    at most 249 characters, only ASCII alphanumerics, '.', '_' and '-'; and two names that
    differ only by '.' vs '_' collide (their metric names would) -> INVALID_TOPIC_EXCEPTION;
  * every topic has a random, non-zero UUID id assigned at creation (KIP-516) that never
    changes; clients such as librdkafka fetch and look up metadata by it;
  * partitions can only be added, never removed.

The registry file (`topics.json`) is replaced atomically on every change, so a crash or SIGKILL
leaves either the old or the new topic set, and ids survive restarts. A file that is not the
registry (not JSON, another shape, an illegal name, a bad id, duplicates) is refused with
`TopicsFileError` naming it: the registry says which partition directories are owned, so a
registry read wrongly would make acknowledged partitions look unowned.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gateway.dataplane.datadir import DataDirError
from gateway.dataplane.durable import write_atomically

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")

TOPICS_FILE = "topics.json"

ChangeKind = Literal["created", "deleted", "partitions_added"]


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int


@dataclass(frozen=True, slots=True)
class TopicChange:
    """One metadata change, as the group layer must see it (subscribed-topic rebalance rules)."""

    kind: ChangeKind
    topic: TopicInfo  # the topic after the change (for "deleted": as it was)
    previous_partitions: int | None = None  # for "partitions_added"


def topic_name_error(name: str) -> str | None:
    """Kafka's message for an illegal topic name (Kafka 4.x wording), or None if it is legal."""
    if not name:
        return "Topic name is invalid: the empty string is not allowed"
    if name in (".", ".."):
        return f"Topic name is invalid: '{name}' is not allowed"
    if len(name) > MAX_NAME_LENGTH:
        return (
            f"Topic name is invalid: the length of '{name}' is longer than the max allowed length "
            f"{MAX_NAME_LENGTH}"
        )
    if not _LEGAL.fullmatch(name):
        return (
            f"Topic name is invalid: '{name}' contains one or more characters other than ASCII "
            "alphanumerics, '.', '_' and '-'"
        )
    return None


class TopicsFileError(DataDirError):
    """`topics.json` exists but is not a topic registry; `problem` says why, briefly."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path} is damaged ({problem})")
        self.path = path
        self.problem = problem


def _parse_registry(path: Path, text: str) -> list[TopicInfo]:
    """The topics of a `topics.json` text, or `TopicsFileError` for the first thing wrong."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise TopicsFileError(path, f"not JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("topics"), list):
        raise TopicsFileError(path, 'expected an object with a "topics" list')
    topics: list[TopicInfo] = []
    names: set[str] = set()
    ids: set[uuid.UUID] = set()
    for i, t in enumerate(doc["topics"]):
        if not isinstance(t, dict):
            raise TopicsFileError(path, f"topics[{i}] is not an object")
        name, topic_id, partitions = t.get("name"), t.get("topic_id"), t.get("partitions")
        if not isinstance(name, str) or topic_name_error(name) is not None:
            raise TopicsFileError(path, f"topics[{i}].name is not a legal topic name: {str(name)[:60]!r}")
        try:
            tid = uuid.UUID(str(topic_id))
        except ValueError:
            raise TopicsFileError(
                path, f"topics[{i}].topic_id is not a UUID: {str(topic_id)[:60]!r}"
            ) from None
        if type(partitions) is not int or partitions <= 0:
            raise TopicsFileError(path, f"topics[{i}].partitions is not a positive integer")
        if name in names or tid in ids:
            raise TopicsFileError(path, f"topics[{i}] repeats the name or id of an earlier topic")
        names.add(name)
        ids.add(tid)
        topics.append(TopicInfo(name, tid, partitions))
    return topics


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


class TopicRegistry:
    """Topics by name and by id, durable in `<data dir>/topics.json`."""

    def __init__(self, path: Path, topics: list[TopicInfo]) -> None:
        self._path = path
        self._by_name = {t.name: t for t in topics}
        self._by_id = {t.topic_id: t for t in topics}
        self._collisions = {_collision_key(t.name): t.name for t in topics}

    @classmethod
    def load(cls, data_dir: Path) -> TopicRegistry:
        """The registry of `data_dir` (empty if it has no `topics.json`); `TopicsFileError` if
        the file is there but damaged."""
        path = data_dir / TOPICS_FILE
        topics: list[TopicInfo] = []
        if path.exists():
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError as e:
                raise TopicsFileError(path, f"not UTF-8 text: {e.reason}") from None
            except OSError as e:
                raise TopicsFileError(path, f"cannot be read: {e.strerror or e}") from None
            topics = _parse_registry(path, text)
        return cls(path, topics)

    @classmethod
    def empty(cls, data_dir: Path) -> TopicRegistry:
        """A registry with no topics (not written until `persist` or the first change)."""
        return cls(data_dir / TOPICS_FILE, [])

    def persist(self) -> None:
        """Write the registry as it is (a new data directory gets its `topics.json` at once, so
        that a missing file later means a lost one)."""
        self._persist(self._by_name)

    def _persist(self, by_name: Mapping[str, TopicInfo]) -> None:
        doc = {
            "version": 1,
            "topics": [
                {"name": t.name, "topic_id": str(t.topic_id), "partitions": t.partitions}
                for t in sorted(by_name.values(), key=lambda t: t.name)
            ],
        }
        write_atomically(self._path, json.dumps(doc, indent=1).encode())

    # -- reads --------------------------------------------------------------------------------

    def get(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[TopicInfo]:
        return sorted(self._by_name.values(), key=lambda t: t.name)

    def __len__(self) -> int:
        return len(self._by_name)

    def collides_with(self, name: str) -> str | None:
        """An existing topic whose name collides with `name` ('.' vs '_'), if any."""
        other = self._collisions.get(_collision_key(name))
        return other if other is not None and other != name else None

    # -- a batch of new topics, written off the event loop ---------------------------------------

    def staged(self, topics: Iterable[TopicInfo]) -> dict[str, TopicInfo]:
        """The registry as it will be with `topics` added (for `write`; nothing changes yet)."""
        return {**self._by_name, **{t.name: t for t in topics}}

    def write(self, by_name: Mapping[str, TopicInfo]) -> None:
        """Make `by_name` (from `staged`) the durable registry without changing this object's
        view; safe in a worker thread, as `by_name` is a copy. `install` follows on success."""
        self._persist(by_name)

    def install(self, topics: Iterable[TopicInfo]) -> None:
        """Make `topics`, already written by `write`, visible."""
        for topic in topics:
            self._by_name[topic.name] = topic
            self._by_id[topic.topic_id] = topic
            self._collisions[_collision_key(topic.name)] = topic.name

    def staged_without(self, name: str) -> dict[str, TopicInfo]:
        """The registry as it will be without `name` (for `write`; nothing changes yet)."""
        return {n: t for n, t in self._by_name.items() if n != name}

    def uninstall(self, name: str) -> TopicInfo:
        """Forget `name`, whose removal `write` made durable."""
        topic = self._by_name.pop(name)
        del self._by_id[topic.topic_id]
        self._collisions.pop(_collision_key(name), None)
        return topic

    # -- changes (each durable before it returns) ----------------------------------------------

    def add(self, topic: TopicInfo) -> None:
        name = topic.name
        if name in self._by_name or topic.topic_id in self._by_id:
            raise KeyError(name)
        self._persist({**self._by_name, name: topic})
        self._by_name[name] = topic
        self._by_id[topic.topic_id] = topic
        self._collisions[_collision_key(name)] = name

    def delete(self, name: str) -> TopicInfo:
        topic = self._by_name[name]
        remaining = dict(self._by_name)
        del remaining[name]
        self._persist(remaining)
        del self._by_name[name]
        del self._by_id[topic.topic_id]
        self._collisions.pop(_collision_key(name), None)
        return topic
