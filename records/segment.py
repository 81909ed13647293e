"""One segment file of a log (Kafka `LogSegment`): `<20-digit base offset>.log`, v2 batches back
to back, plus the in-memory sparse index that makes reads fast without scanning.

Kafka keeps a sparse offset index and time index on disk (`.index`, `.timeindex`) with one
entry per `index.interval.bytes` (4096) of log. We keep the same sparse entries in memory only:
they are rebuilt by the full scan recovery does at open anyway, so storing them would add files
to keep consistent for no gain. Each entry holds a batch's base offset, its file position and the
running maximum timestamp up to the end of the entry's interval (monotonic, so it can be
bisected to answer "first batch with maxTimestamp >= t").
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator

from records.batch import (
    HEADER,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
)

__all__ = ["DEFAULT_INDEX_INTERVAL_BYTES", "SEGMENT_SUFFIX", "Segment", "parse_segment_name"]

SEGMENT_SUFFIX = ".log"
DEFAULT_INDEX_INTERVAL_BYTES = 4096
_READ_CHUNK = 1 << 20
_LOOKUP_CHUNK = 16 * 1024  # reads of an index lookup's scan (index entries are ~4 KiB apart)


def segment_name(base_offset: int) -> str:
    """Kafka's file name: the base offset zero-padded to 20 digits."""
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def parse_segment_name(name: str, suffix: str = SEGMENT_SUFFIX) -> int | None:
    """Base offset of a file called `<20 digits><suffix>`, else None."""
    if not name.endswith(suffix):
        return None
    stem = name[: -len(suffix)]
    if len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


class Segment:
    """An open segment file and its sparse index. Positions are byte offsets in the file."""

    __slots__ = (
        "_idx_off",
        "_idx_pos",
        "_idx_ts",
        "_index_interval",
        "_since_index",
        "base_offset",
        "fd",
        "next_offset",
        "path",
        "size",
    )

    def __init__(self, path: str, base_offset: int, fd: int, index_interval: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.fd = fd
        self.size = 0
        self.next_offset = base_offset  # offset after the last batch (base if empty)
        self._index_interval = index_interval
        # Machine integers in one buffer each, not lists of int objects: a log holds thousands
        # of entries, rebuilt at every compaction, and as objects they would be that many small
        # allocations interleaved with the server's own (docs/robustness.md, soak).
        self._idx_off: array[int] = array("q")
        self._idx_pos: array[int] = array("q")
        self._idx_ts: array[int] = array("q")
        self._since_index = 0

    @classmethod
    def open_file(cls, path: str, base_offset: int, index_interval: int, *, create: bool) -> Segment:
        flags = os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        if create:
            flags |= os.O_CREAT | os.O_EXCL
        fd = os.open(path, flags, 0o644)
        return cls(path, base_offset, fd, index_interval)

    def __repr__(self) -> str:
        return (
            f"Segment({os.path.basename(self.path)}, size={self.size}, "
            f"offsets=[{self.base_offset}, {self.next_offset}))"
        )

    @property
    def max_timestamp(self) -> int:
        return self._idx_ts[-1] if self._idx_ts else NO_TIMESTAMP

    @property
    def index_entries(self) -> int:
        return len(self._idx_off)

    # --- index maintenance ---------------------------------------------------------------------

    def note_batch(self, pos: int, base_offset: int, next_offset: int, max_ts: int, size: int) -> None:
        """Record that a batch of `size` bytes now sits at `pos` (the segment's current end)."""
        if not self._idx_off or self._since_index >= self._index_interval:
            prev = self._idx_ts[-1] if self._idx_ts else max_ts
            self._idx_off.append(base_offset)
            self._idx_pos.append(pos)
            self._idx_ts.append(max(prev, max_ts))
            self._since_index = 0
        elif max_ts > self._idx_ts[-1]:
            self._idx_ts[-1] = max_ts
        self._since_index += size
        self.size = pos + size
        self.next_offset = next_offset

    def reset_to(self, pos: int) -> None:
        """Forget every batch at or after `pos` (a batch boundary); the caller truncates the file.

        The index entry whose interval contains `pos` is dropped and its surviving batches are
        noted again from the file, so the running maximum timestamp stays exact.
        """
        cut = max(bisect_left(self._idx_pos, pos) - 1, 0)
        start = self._idx_pos[cut] if self._idx_pos else 0
        del self._idx_off[cut:], self._idx_pos[cut:], self._idx_ts[cut:]
        self.size = start
        self.next_offset = self.base_offset
        self._since_index = self._index_interval  # the next noted batch opens an entry
        for p, h in self.scan(start, pos):
            self.note_batch(p, h.base_offset, h.next_offset, h.max_timestamp, h.size)
        if self.size != pos:
            raise ValueError(f"position {pos} is not a batch boundary in {self.path}")

    # --- reading -------------------------------------------------------------------------------

    def scan(
        self, start: int, end: int | None = None, chunk_bytes: int = _READ_CHUNK
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Yield (position, header) of each batch from `start` (a batch boundary) to `end`.

        Reads in chunks of `chunk_bytes` (a lookup that expects to stop early reads less); the
        file content up to `size` was validated by recovery or written by this process, so
        headers are trusted here.
        """
        stop = self.size if end is None else end
        pos = start
        while pos < stop:
            chunk = os.pread(self.fd, min(chunk_bytes, stop - pos), pos)
            p = 0
            n = len(chunk)
            while p + RECORD_BATCH_OVERHEAD <= n:
                h = BatchHeader._make(HEADER.unpack_from(chunk, p))
                yield pos + p, h
                p += h.batch_length + LOG_OVERHEAD
            if p == 0:  # a header straddles the chunk end: read it on its own
                h = BatchHeader._make(HEADER.unpack_from(os.pread(self.fd, RECORD_BATCH_OVERHEAD, pos), 0))
                yield pos, h
                p = h.batch_length + LOG_OVERHEAD
            pos += p

    def batches(self, start: int = 0) -> Iterator[tuple[int, BatchHeader, bytes]]:
        """Yield (position, header, raw bytes) of each whole batch from position `start`."""
        pos = start
        stop = self.size
        while pos < stop:
            chunk = os.pread(self.fd, min(_READ_CHUNK, stop - pos), pos)
            p = 0
            n = len(chunk)
            while p + RECORD_BATCH_OVERHEAD <= n:
                h = BatchHeader._make(HEADER.unpack_from(chunk, p))
                end = p + h.batch_length + LOG_OVERHEAD
                if end > n:
                    break
                yield pos + p, h, chunk[p:end]
                p = end
            if p == 0:  # one batch larger than the chunk
                h = BatchHeader._make(HEADER.unpack_from(os.pread(self.fd, RECORD_BATCH_OVERHEAD, pos), 0))
                raw = os.pread(self.fd, h.size, pos)
                yield pos, h, raw
                p = h.size
            pos += p

    def position_for(self, offset: int) -> int:
        """Position of the first batch whose last offset is >= `offset` (`size` if none)."""
        i = bisect_right(self._idx_off, offset) - 1
        start = self._idx_pos[i] if i >= 0 else 0
        # The batch is at most one index interval (plus a batch) away: read little at a time.
        for pos, h in self.scan(start, chunk_bytes=_LOOKUP_CHUNK):
            if h.base_offset + h.last_offset_delta >= offset:
                return pos
        return self.size

    def position_for_timestamp(self, timestamp: int) -> int | None:
        """Position of the first batch with maxTimestamp >= `timestamp`, or None."""
        i = bisect_left(self._idx_ts, timestamp)
        if i >= len(self._idx_ts):
            return None
        for pos, h in self.scan(self._idx_pos[i], chunk_bytes=_LOOKUP_CHUNK):
            if h.max_timestamp >= timestamp:
                return pos
        return None  # pragma: no cover - the index guarantees a hit

    def read_whole_batches(
        self, pos: int, max_bytes: int, upper_offset: int | None, at_least_one: bool
    ) -> tuple[bytes, bool]:
        """Read whole batches from `pos` (a batch boundary) totalling at most `max_bytes`.

        With `at_least_one`, the first batch is returned even if larger than `max_bytes`
        (Kafka's rule, so a consumer can always make progress). Batches whose last offset
        reaches `upper_offset` or beyond are not returned. Returns (data, stopped): `stopped`
        is True when a limit ended the read before the end of the segment.
        """
        want = min(max_bytes, self.size - pos)
        chunk = os.pread(self.fd, want, pos) if want > 0 else b""
        p = 0
        n = len(chunk)
        while p + RECORD_BATCH_OVERHEAD <= n:
            h = BatchHeader._make(HEADER.unpack_from(chunk, p))
            end = p + h.batch_length + LOG_OVERHEAD
            if end > n:
                break
            if upper_offset is not None and h.next_offset > upper_offset:
                return chunk[:p], True
            p = end
        if p == 0 and at_least_one and pos < self.size:
            h = BatchHeader._make(HEADER.unpack_from(os.pread(self.fd, RECORD_BATCH_OVERHEAD, pos), 0))
            if upper_offset is not None and h.next_offset > upper_offset:
                return b"", True
            return os.pread(self.fd, h.size, pos), pos + h.size < self.size
        data = chunk if p == n else chunk[:p]
        return data, pos + p < self.size

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
