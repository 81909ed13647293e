"""Which shard owns a group (Kafka `GroupCoordinatorService.partitionFor`).

Kafka maps a group id to `__consumer_offsets` partition `Utils.abs(groupId.hashCode()) %
offsets.topic.num.partitions`, with Java's String.hashCode over UTF-16 code units and `abs` of
Integer.MIN_VALUE taken as 0. groupshift uses the same function, so shard N holds exactly the
groups of `__consumer_offsets` partition N and logs can be compared with a real cluster's.
"""

from __future__ import annotations

from functools import lru_cache


def java_string_hash(s: str) -> int:
    h = 0
    for unit in _utf16_units(s):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 0x100000000 if h >= 0x80000000 else h


def _utf16_units(s: str) -> list[int]:
    data = s.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


@lru_cache(maxsize=1 << 16)  # every request of a group hashes its id: remember the busy ones
def partition_for(group_id: str, num_partitions: int) -> int:
    h = java_string_hash(group_id)
    return 0 if h == -0x80000000 else abs(h) % num_partitions
