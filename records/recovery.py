"""Recovery at open: validate every batch of every segment, cut a torn tail, refuse corruption.

Kafka recovers the segments after its recovery point and truncates at the first invalid batch
(`LogSegment.recover`). groupshift validates the whole log at every open (the full scan also
builds the in-memory index, and a coordinator log is replayed in full anyway) and tells a torn
tail from corruption instead of truncating blindly:

* A batch is valid when its 61-byte header is complete, magic is 2, batchLength is at least 49,
  the batch ends inside the file, its CRC-32C matches, lastOffsetDelta and recordsCount are not
  negative, and its base offset is not below the end of the previous batch (offsets increase;
  compaction may leave gaps).
* The **first invalid batch ("bad spot") of the last segment** is a torn tail when no valid
  batch starts anywhere after it in the file: a crash cut the last write short, or left
  garbage/zeros past the last complete batch. The segment is truncated at the bad spot and the
  event `log.truncated_tail` is logged (file, position, reason, bytes dropped).
* If a valid batch -- correct CRC and a base offset not below the expected next offset --
  starts after the bad spot, the damage is in the middle of the log: data that was once written
  whole is now wrong. That, any invalid batch in a segment that is not the last one, and a
  complete batch with a valid CRC whose offsets do not follow (the base offset is outside the
  CRC, as in Kafka; a torn write cannot produce this) raise `LogCorruptionError` with the file
  and byte position. Nothing is skipped silently; an operator
  may choose `on_corruption="truncate"` to cut the log at the bad spot instead.

Why this rule is sound here: writes only ever append to the last segment, and rolling to a new
segment first fsyncs the old one (`records.durability`), so a crash can damage only bytes after
the last complete batch of the last segment. A false "mid-log" verdict needs a valid CRC-32C
over random bytes that also carries a plausible base offset -- or a record value that embeds a
whole batch with such an offset inside the torn batch; the operator override covers that.

Limit (shared with Kafka): a damaged base offset of the very last batch that makes it jump
forward cannot be told from a legitimate gap (compaction leaves gaps), so it is accepted.

Interrupted compactions (`records.compaction`) are finished or discarded first:
`<base>.log.cleaned` files are incomplete outputs and are deleted; a `<base>.log.swap` file is a
complete, fsynced output that replaces every segment whose base offset lies in
[base, swap end offset), so those segments are deleted and the swap is renamed to `<base>.log`.
"""

from __future__ import annotations

import mmap
import os
from typing import Literal, NamedTuple

from crc32c import crc32c

from records.batch import CRC_START, HEADER, LOG_OVERHEAD, MAGIC, MIN_BATCH_LENGTH
from records.durability import fsync_dir
from records.errors import LogCorruptionError
from records.logger import get_logger
from records.segment import Segment, parse_segment_name

__all__ = [
    "CLEANED_SUFFIX",
    "SWAP_SUFFIX",
    "BadSpot",
    "OnCorruption",
    "find_valid_batch_after",
    "finish_interrupted_compaction",
    "scan_segment",
]

CLEANED_SUFFIX = ".log.cleaned"
SWAP_SUFFIX = ".log.swap"

OnCorruption = Literal["error", "truncate"]

_HEADER_SIZE = HEADER.size
_MAGIC_BYTE = bytes([MAGIC])
_MAGIC_POS = 16


class BadSpot(NamedTuple):
    """The first invalid batch of a segment: position, reason, the offset expected there, and
    whether the batch is complete with a valid CRC (then only its offsets are wrong, which a
    torn write cannot cause: it is corruption wherever it is)."""

    position: int
    reason: str
    expected_offset: int
    complete: bool = False


def scan_segment(seg: Segment, file_size: int) -> BadSpot | None:
    """Validate the batches of `seg`'s file from the start, noting each valid one in its index.

    Stops at the first invalid batch and returns where and why; returns None when the whole
    file is valid. Afterwards `seg.size` is the end of the last valid batch.
    """
    if file_size == 0:
        return None
    with mmap.mmap(seg.fd, file_size, access=mmap.ACCESS_READ) as mm:
        mv = memoryview(mm)
        try:
            return _scan(seg, mm, mv, file_size)
        finally:
            mv.release()


def _scan(seg: Segment, mm: mmap.mmap, mv: memoryview, size: int) -> BadSpot | None:
    unpack = HEADER.unpack_from
    note = seg.note_batch
    p = 0
    expected = seg.base_offset
    while p < size:
        if size - p < _HEADER_SIZE:
            return BadSpot(p, f"incomplete batch header ({size - p} bytes)", expected)
        base, length, _ple, magic, crc, _attr, lod, _fts, max_ts, _pid, _pe, _bs, count = unpack(mm, p)
        if magic != MAGIC:
            return BadSpot(p, f"bad magic byte {magic}", expected)
        if length < MIN_BATCH_LENGTH:
            return BadSpot(p, f"batch length {length} below minimum {MIN_BATCH_LENGTH}", expected)
        end = p + LOG_OVERHEAD + length
        if end > size:
            return BadSpot(p, f"batch of {length + LOG_OVERHEAD} bytes extends past end of file", expected)
        if crc32c(mv[p + CRC_START : end]) != crc:
            return BadSpot(p, "CRC mismatch", expected)
        if lod < 0 or count < 0:
            return BadSpot(p, f"negative lastOffsetDelta {lod} or record count {count}", expected, True)
        if base < expected:
            return BadSpot(p, f"base offset {base} below expected {expected}", expected, True)
        expected = base + lod + 1
        note(p, base, expected, max_ts, end - p)
        p = end
    return None


def find_valid_batch_after(fd: int, file_size: int, bad: BadSpot) -> int | None:
    """Position of the first valid batch starting after `bad.position`, or None.

    Candidates are found by their magic byte; each must have a sane length that fits in the
    file, a base offset not below `bad.expected_offset`, and a matching CRC.
    """
    start = bad.position + 1
    if file_size - start < _HEADER_SIZE:
        return None
    with mmap.mmap(fd, file_size, access=mmap.ACCESS_READ) as mm:
        mv = memoryview(mm)
        try:
            i = mm.find(_MAGIC_BYTE, start + _MAGIC_POS)
            while i != -1:
                c = i - _MAGIC_POS
                if c + _HEADER_SIZE > file_size:
                    return None
                base, length, _ple, _magic, crc, _a, lod, *_rest = HEADER.unpack_from(mm, c)
                end = c + LOG_OVERHEAD + length
                if (
                    length >= MIN_BATCH_LENGTH
                    and end <= file_size
                    and lod >= 0
                    and base >= bad.expected_offset
                    and crc32c(mv[c + CRC_START : end]) == crc
                ):
                    return c
                i = mm.find(_MAGIC_BYTE, i + 1)
            return None
        finally:
            mv.release()


def finish_interrupted_compaction(directory: str, *, index_interval: int, sync: bool) -> None:
    """Delete `.cleaned` leftovers and install any complete `.swap` segment (see module doc)."""
    log = get_logger()
    names = sorted(os.listdir(directory))
    changed = False
    for name in names:
        if parse_segment_name(name, CLEANED_SUFFIX) is not None:
            os.unlink(os.path.join(directory, name))
            log.info("log.compaction_discarded", file=os.path.join(directory, name))
            changed = True
    for name in names:
        base = parse_segment_name(name, SWAP_SUFFIX)
        if base is None:
            continue
        swap_path = os.path.join(directory, name)
        seg = Segment.open_file(swap_path, base, index_interval, create=False)
        try:
            size = os.fstat(seg.fd).st_size
            bad = scan_segment(seg, size)
            if bad is not None:
                raise LogCorruptionError(swap_path, bad.position, bad.reason)
            end = seg.next_offset
        finally:
            seg.close()
        if end == base:  # compaction never writes an empty swap; the inputs are all still here
            os.unlink(swap_path)
            log.warning("log.compaction_discarded", file=swap_path, reason="empty swap segment")
            changed = True
            continue
        replaced = []
        for other in sorted(os.listdir(directory)):
            other_base = parse_segment_name(other)
            if other_base is not None and base <= other_base < end:
                os.unlink(os.path.join(directory, other))
                replaced.append(other)
        final = os.path.join(directory, name[: -len(SWAP_SUFFIX)] + ".log")
        os.rename(swap_path, final)
        log.info("log.compaction_completed", file=final, replaced=replaced)
        changed = True
    if changed and sync:
        fsync_dir(directory)
