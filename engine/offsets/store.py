"""The offsets store and its replay (spec §6, §7.2; Kafka `OffsetMetadataManager.replay`).

Offsets are keyed by group id only, so they survive group conversions (classic <-> consumer) and
outlive groups: an offset commit for a group that has no group record creates a "simple" classic
group on replay, as Kafka does. Transactional offsets (TxnOffsetCommit) are not served by
groupshift, so there are no pending transactional offsets here.
"""

from __future__ import annotations

from dataclasses import dataclass

from records.construct import positional_constructor
from records.offsets import OffsetCommitKey, OffsetCommitValue


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int  # -1: none
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # only legacy (v1) values carry one

    def value(self) -> OffsetCommitValue:
        return OffsetCommitValue(
            self.offset, self.leader_epoch, self.metadata, self.commit_timestamp, self.expire_timestamp
        )

    @staticmethod
    def from_value(v: OffsetCommitValue) -> OffsetAndMetadata:
        return _new_offset_and_metadata(
            v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp
        )


# Replay builds one of these per offset record: without __init__'s per-field object.__setattr__.
_new_offset_and_metadata = positional_constructor(OffsetAndMetadata)


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
        parts[key.partition] = _new_offset_and_metadata(
            value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, value.expire_timestamp
        )

    def snapshot(self) -> dict[str, dict[str, dict[int, OffsetAndMetadata]]]:
        return {g: {t: dict(p) for t, p in ts.items()} for g, ts in self._by_group.items()}
