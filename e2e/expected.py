"""The record set every client round-trip produces and must read back exactly once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

PARTITIONS = 6
COUNT = 3000
PER_PARTITION = COUNT // PARTITIONS


def record(i: int) -> tuple[int, bytes, bytes]:
    """(partition, key, value) of the i-th record."""
    return i % PARTITIONS, f"key-{i}".encode(), f"value-{i}-".encode() + b"x" * (i % 50)


def assert_exactly_once(got: Iterable[tuple[int, int, bytes | None, bytes | None]]) -> None:
    """`got` holds (partition, offset, key, value) as consumed."""
    got = list(got)
    offsets = Counter((p, o) for p, o, _, _ in got)
    dupes = [po for po, n in offsets.items() if n > 1]
    assert not dupes, f"records consumed more than once: {dupes[:5]}"
    want = Counter(record(i) for i in range(COUNT))
    have = Counter((p, k, v) for p, _, k, v in got)
    missing = want - have
    extra = have - want
    assert not missing and not extra, (
        f"{sum(missing.values())} missing (e.g. {list(missing)[:3]}), "
        f"{sum(extra.values())} unexpected (e.g. {list(extra)[:3]})"
    )
    for p in range(PARTITIONS):
        assert sorted(o for q, o, _, _ in got if q == p) == list(range(PER_PARTITION)), (
            f"partition {p} offsets are not exactly 0..{PER_PARTITION - 1}"
        )
