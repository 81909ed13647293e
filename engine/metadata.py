"""The topic metadata image the coordinator assigns from (KIP-848 "Assignment Process").

An immutable snapshot: topic name, topic id, partition count and per-partition racks. A new image
is an input to the engine; groups subscribed to a topic whose entry changed (created, deleted,
partition count, racks) refresh their subscription metadata on the next heartbeat, as Kafka's
`onNewMetadataImage` does.
"""

from __future__ import annotations

import uuid
import weakref
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
    """Topics by name and by id, plus a version that grows with every change.

    An image derived from another (`with_topics`, `with_topic`, `without_topic`) remembers, by
    weak reference, which image it came from and which names it changed, so that
    `changed_topic_names` between the two costs the size of the change, not of the cluster:
    every coordinator shard compares images on every topic change, and with thousands of topics
    a full comparison per shard would stall the event loop."""

    __slots__ = ("__weakref__", "_base", "_by_id", "_by_name", "_changed", "_delta", "version")

    def __init__(self, topics: Iterable[TopicImage] = (), version: int = 0) -> None:
        self._by_name: dict[str, TopicImage] = {}
        self._by_id: dict[TopicId, TopicImage] = {}
        for t in topics:
            self._by_name[t.name] = t
            self._by_id[t.topic_id] = t
        self.version = version
        self._base: weakref.ref[MetadataImage] | None = None
        self._changed: frozenset[str] = frozenset()
        # The last `delta` asked of this image: (the older image, by weak reference; the delta)
        self._delta: tuple[weakref.ref[MetadataImage], TopicDelta] | None = None

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
        return self.with_topics((topic,))

    def with_topics(
        self, topics: Iterable[TopicImage], removed: Iterable[str] = (), versions: int = 1
    ) -> MetadataImage:
        """A new image, `versions` later, where `topics` are added or replaced (by name) and the
        names in `removed` are gone: one copy of the topic table for a whole batch of changes."""
        by_name = dict(self._by_name)
        changed = set()
        for name in removed:
            if by_name.pop(name, None) is not None:
                changed.add(name)
        for topic in topics:
            old = by_name.get(topic.name)
            if old is not None and old.topic_id != topic.topic_id:
                raise ValueError(f"topic {topic.name} already exists with id {old.topic_id}")
            by_name[topic.name] = topic
            if self._by_name.get(topic.name) != topic:
                changed.add(topic.name)
            else:
                changed.discard(topic.name)  # removed and put back as it was
        image = MetadataImage(by_name.values(), self.version + versions)
        image._base = weakref.ref(self)
        image._changed = frozenset(changed)
        return image

    def without_topic(self, name: str) -> MetadataImage:
        return self.with_topics((), removed=(name,))

    def changed_topic_names(self, newer: MetadataImage) -> set[str]:
        """Names whose entry differs between this image and `newer` (created, deleted, changed).

        When `newer` was derived from this very image the answer is the change recorded then
        (every coordinator shard asks for the same pair); otherwise every entry is compared,
        identical objects first (images derived from one another share them)."""
        if newer._base is not None and newer._base() is self:
            return set(newer._changed)
        mine = self._by_name
        changed = {n for n, t in newer._by_name.items() if (o := mine.get(n)) is not t and o != t}
        changed.update(n for n in mine if n not in newer._by_name)
        return changed

    def delta(self, newer: MetadataImage) -> TopicDelta:
        """What changed from this image to `newer`, computed once per pair and kept on `newer`:
        every coordinator shard (50 by default) installs the same new image, and each used to
        compute the same sets again on the event loop."""
        cached = newer._delta
        if cached is not None and cached[0]() is self:
            return cached[1]
        changed = frozenset(self.changed_topic_names(newer))
        mine, theirs = self._by_name, newer._by_name
        deleted = frozenset(n for n in changed if n not in theirs)
        created = frozenset(n for n in changed if n not in mine)
        delta = TopicDelta(changed, created | deleted, deleted)
        newer._delta = (weakref.ref(self), delta)
        return delta


@dataclass(frozen=True, slots=True)
class TopicDelta:
    """Topic names that differ between two images (`MetadataImage.delta`)."""

    changed: frozenset[str]  # created, deleted, or with another partition count or racks
    created_or_deleted: frozenset[str]
    deleted: frozenset[str]


# A module constant, not a class attribute set after the class: mypyc (the compiled build) cannot
# assign to a native class's attributes from outside it.
EMPTY_IMAGE = MetadataImage()


def topic_id_for(name: str) -> TopicId:
    """A deterministic topic id for tests and the simulator (uuid5 of the name)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, "groupshift-topic:" + name)
