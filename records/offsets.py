"""Committed offsets: record types 0 and 1 (Kafka `OffsetCommitKey` / `OffsetCommitValue`).

Value versions 0-4 are readable. Kafka writes version 1 when an explicit expire timestamp is
set (OffsetCommit v2-v4 retention), else version 3; version 4 (flexible) only when a tagged field
needs it. `topic_id` is not part of Kafka's value schema at the snapshot and is kept in memory
only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    RECORD_TYPE: ClassVar[int] = 1
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1
