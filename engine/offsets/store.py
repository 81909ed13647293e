"""The offsets store and its replay (Kafka `OffsetMetadataManager.replay`).

Offsets are keyed by group id only, so they survive group conversions (classic <-> consumer) and
outlive groups: an offset commit for a group that has no group record creates a "simple" classic
group on replay, as Kafka does. Only committed offsets are stored here: a transaction's offsets
are pending outside the log (`engine.offsets.transactional`, upstream mode) and are written as
regular OffsetCommit records once the transaction committed.
"""

from __future__ import annotations

from typing import TypeAlias

from records.offsets import OffsetCommitKey, OffsetCommitValue

OffsetAndMetadata: TypeAlias = OffsetCommitValue
"""A committed offset in memory: offset, leader epoch (-1: none), metadata, commit timestamp and
expire timestamp (-1 unless a legacy v1 value carried one). It is the record value itself, the
same five fields, so that replay keeps the decoded value as it is: a load replays up to millions
of offset records, and copying each into an object of its own costs a measurable share of it."""


class OffsetStore:
    __slots__ = ("_by_group",)

    def __init__(self) -> None:
        # group -> topic -> partition -> offset
        self._by_group: dict[str, dict[str, dict[int, OffsetAndMetadata]]] = {}

    def get(self, group: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        t = self._by_group.get(group, {}).get(topic)
        return None if t is None else t.get(partition)

    def group(self, group: str) -> dict[str, dict[int, OffsetAndMetadata]]:
        return self._by_group.get(group, {})

    def has_offsets(self, group: str) -> bool:
        return bool(self._by_group.get(group))

    def group_ids(self) -> list[str]:
        return list(self._by_group)

    def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        if value is None:
            topics = self._by_group.get(key.group)
            if topics is None:
                return
            parts = topics.get(key.topic)
            if parts is None:
                return
            parts.pop(key.partition, None)
            if not parts:
                del topics[key.topic]
            if not topics:
                del self._by_group[key.group]
            return
        # get-then-insert rather than setdefault({}): no throwaway dicts on the replay path.
        topics = self._by_group.get(key.group)
        if topics is None:
            topics = self._by_group[key.group] = {}
        parts = topics.get(key.topic)
        if parts is None:
            parts = topics[key.topic] = {}
        parts[key.partition] = value

    def snapshot(self) -> dict[str, dict[str, dict[int, OffsetAndMetadata]]]:
        return {g: {t: dict(p) for t, p in ts.items()} for g, ts in self._by_group.items()}
