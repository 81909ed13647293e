"""The topic metadata image the coordinator assigns from (KIP-848 "Assignment Process").

An immutable snapshot: topic name, topic id, partition count and per-partition racks. A new image
is an input to the engine; groups subscribed to a topic whose entry changed (created, deleted,
partition count, racks) refresh their subscription metadata on the next heartbeat, as Kafka's
`onNewMetadataImage` does.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

TopicId = uuid.UUID


@dataclass(frozen=True, slots=True)
class TopicImage:
    topic_id: TopicId
    name: str
    num_partitions: int
    # partition -> racks of its replicas; empty when racks are unknown
    partition_racks: Mapping[int, tuple[str, ...]] = field(default_factory=dict)


class MetadataImage:
    """Topics by name and by id, plus a version that grows with every change."""

    __slots__ = ("_by_id", "_by_name", "version")

    def __init__(self, topics: Iterable[TopicImage] = (), version: int = 0) -> None:
        self._by_name: dict[str, TopicImage] = {}
        self._by_id: dict[TopicId, TopicImage] = {}
        for t in topics:
            self._by_name[t.name] = t
            self._by_id[t.topic_id] = t
        self.version = version

    EMPTY: MetadataImage

    def topic(self, name: str) -> TopicImage | None:
        return self._by_name.get(name)

    def topic_by_id(self, topic_id: TopicId) -> TopicImage | None:
        return self._by_id.get(topic_id)

    def topic_names(self) -> Iterable[str]:
        return self._by_name.keys()

    def topics(self) -> Iterable[TopicImage]:
        return self._by_name.values()

    def __len__(self) -> int:
        return len(self._by_name)

    def with_topic(self, topic: TopicImage) -> MetadataImage:
        """A new image where `topic` is added or replaced (by name)."""
        topics = dict(self._by_name)
        old = topics.get(topic.name)
        if old is not None and old.topic_id != topic.topic_id:
            raise ValueError(f"topic {topic.name} already exists with id {old.topic_id}")
        topics[topic.name] = topic
        return MetadataImage(topics.values(), self.version + 1)

    def without_topic(self, name: str) -> MetadataImage:
        topics = dict(self._by_name)
        topics.pop(name, None)
        return MetadataImage(topics.values(), self.version + 1)

    def changed_topic_names(self, newer: MetadataImage) -> set[str]:
        """Names whose entry differs between this image and `newer` (created, deleted, changed)."""
        changed = {n for n, t in newer._by_name.items() if self._by_name.get(n) != t}
        changed.update(n for n in self._by_name if n not in newer._by_name)
        return changed


MetadataImage.EMPTY = MetadataImage()


def topic_id_for(name: str) -> TopicId:
    """A deterministic topic id for tests and the simulator (uuid5 of the name)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, "groupshift-topic:" + name)
