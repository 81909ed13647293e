"""`DataPlane.create_topics`: a request's topics created together with their file work on a
worker thread; visible only when complete; one batch notification; a failure (descriptors
exhausted) leaves nothing behind and answers KAFKA_STORAGE_ERROR with the reason; `auto_create`
(Metadata) and `delete_topic` take the same serialised path."""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from engine.metadata import MetadataImage
from gateway.dataplane.plane import DataPlane, NewTopic, TopicError
from gateway.dataplane.store import OpenFileBudget, PartitionStore, open_segment_store
from gateway.dataplane.topics import TopicChange, TopicInfo, TopicRegistry


def test_batch_is_created_in_one_notification_and_is_durable(tmp_path: Path) -> None:
    plane = DataPlane(tmp_path)
    batches: list[tuple[Sequence[TopicChange], MetadataImage]] = []
    plane.subscribe_batches(lambda changes, image: batches.append((changes, image)))
    before = plane.metadata_image()
    new = [NewTopic(f"t{i}", 2) for i in range(20)]
    new += [NewTopic("t3", 1), NewTopic("a.b", 1), NewTopic("a_b", 1), NewTopic("", 1)]
    results = asyncio.run(plane.create_topics(new))
    assert all(isinstance(r, TopicInfo) for r in results[:20])
    assert isinstance(results[21], TopicInfo)  # a.b
    errors = [(r.code, r.message) for r in (results[20], *results[22:]) if isinstance(r, TopicError)]
    assert errors == [
        (ErrorCode.topic_already_exists, "Topic 't3' already exists."),
        (ErrorCode.invalid_topic_exception, "Topic 'a_b' collides with existing topic: a.b"),
        (ErrorCode.invalid_topic_exception, "Topic name is invalid: the empty string is not allowed"),
    ]
    (changes, image), *rest = batches
    names = [f"t{i}" for i in range(20)] + ["a.b"]
    assert not rest and [c.topic.name for c in changes] == names
    assert image is plane.metadata_image() and image.version == before.version + 21
    assert before.changed_topic_names(image) == set(names)
    assert plane.partition("t19", 1) is not None
    assert {t.name for t in TopicRegistry.load(tmp_path).all()} == set(names)
    asyncio.run(plane.close())


def test_descriptor_exhaustion_leaves_nothing_half_created(tmp_path: Path) -> None:
    opened = 0

    def failing_store(
        path: Path, *, segment_bytes: int, fsync_policy: str, budget: OpenFileBudget | None = None
    ) -> PartitionStore:
        nonlocal opened
        opened += 1
        if opened > 5:
            raise OSError(errno.EMFILE, "Too many open files", str(path))
        return open_segment_store(path, segment_bytes=segment_bytes, fsync_policy=fsync_policy, budget=budget)

    plane = DataPlane(tmp_path, open_store=failing_store)
    seen: list[Any] = []
    plane.subscribe_batches(lambda changes, image: seen.append(changes))
    results = asyncio.run(plane.create_topics([NewTopic("wide", 10), NewTopic("narrow", 1)]))
    assert all(isinstance(r, TopicError) for r in results)
    for r in results:
        assert isinstance(r, TopicError)
        assert r.code == ErrorCode.kafka_storage_error and "Too many open files" in r.message
    assert plane.topic("wide") is None and plane.partition("wide", 0) is None and not seen
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(("wide", "narrow"))]
    assert TopicRegistry.load(tmp_path).get("wide") is None
    asyncio.run(plane.close())
    # descriptors back: the same names can be created, and survive a restart
    plane = DataPlane(tmp_path)
    assert all(isinstance(r, TopicInfo) for r in asyncio.run(plane.create_topics([NewTopic("wide", 10)])))
    asyncio.run(plane.close())
    plane = DataPlane(tmp_path)
    assert plane.topic("wide") is not None and plane.partition("wide", 9) is not None
    asyncio.run(plane.close())


def test_auto_create_and_delete(tmp_path: Path) -> None:
    plane = DataPlane(tmp_path, num_partitions=3)

    async def scenario() -> None:
        await plane.auto_create(["a", "b", "a", "bad/name"])
        assert plane.topic("a") is not None and plane.topic("b") is not None
        assert plane.topic("a").partitions == 3  # type: ignore[union-attr]
        deleted = await plane.delete_topic("a")
        assert deleted.name == "a" and plane.topic("a") is None
        await plane.close()

    asyncio.run(scenario())
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("a-")]
    assert {t.name for t in TopicRegistry.load(tmp_path).all()} == {"b"}
