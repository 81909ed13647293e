"""Crash consistency of SegmentLog: torn tails at every byte, corruption, and real SIGKILLs.

Recovery rule under test (records.recovery): a bad spot in the last segment with no valid
batch after it is a torn tail and is truncated with a `log.truncated_tail` warning; any other
bad spot is a `LogCorruptionError` naming the file and byte position.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
from structlog.testing import capture_logs

from records.batch import iter_records, read_batch_header
from records.errors import LogCorruptionError
from records.log import SegmentLog
from tests.crash_zygote import Zygote
from tests.log_crash_child import SEGMENT_BYTES, expected_key, expected_value

TS = 1_700_000_000_000
ROOT = Path(__file__).resolve().parent.parent

Snapshot = list[tuple[int, bytes | None, bytes | None]]


def snapshot(log: SegmentLog) -> Snapshot:
    return [(r.offset, r.key, r.value) for _h, raw in log.batches() for r in iter_records(raw)]


def raw_batches(log: SegmentLog) -> list[bytes]:
    """Every batch the log serves, byte for byte: equal lists decode to equal snapshots, and a
    comparison costs a fraction of decoding every record (a loop that reopens a log a thousand
    times spent most of its time in `snapshot`)."""
    return [bytes(raw) for _h, raw in log.batches()]


def random_op(rng: random.Random, i: int) -> list[tuple[bytes | None, bytes | None]]:
    return [
        (
            f"op{i}-k{j}".encode(),
            None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 300)),
        )
        for j in range(rng.randint(1, 5))
    ]


def segment_files(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.name.endswith(".log"))


def batch_positions(path: Path) -> list[tuple[int, int]]:
    """(position, size) of every batch in a segment file."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        size = read_batch_header(data, pos).size
        out.append((pos, size))
        pos += size
    return out


def build_log(path: Path, n_ops: int, seed: int, segment_bytes: int = 6000) -> Snapshot:
    rng = random.Random(seed)
    with SegmentLog.open(path, segment_bytes=segment_bytes, fsync_policy="none") as log:
        for i in range(n_ops):
            log.append_records(random_op(rng, i), TS + i)
        return snapshot(log)


# --- torn tails at every byte -------------------------------------------------------------------


@pytest.mark.parametrize("final_alone", [False, True], ids=["mid-segment", "first-in-segment"])
def test_every_torn_length_of_the_final_batch_recovers_the_complete_batches(
    tmp_path: Path, final_alone: bool
) -> None:
    src = tmp_path / "src"
    rng = random.Random(11)
    with SegmentLog.open(src, segment_bytes=6000, fsync_policy="none") as log:
        for i in range(60):
            log.append_records(random_op(rng, i), TS + i)
        if final_alone:
            log.append_records([(b"filler", b"f" * 6000)], TS)  # fills a segment: next one rolls
        before, before_raw = snapshot(log), raw_batches(log)
        end_before = log.end_offset
        final = [(b"final-%d" % j, bytes([j]) * 250) for j in range(4)]
        log.append_records(final, TS + 99)
        after, after_raw = snapshot(log), raw_batches(log)
    assert after[: len(before)] == before and [r[1] for r in after[len(before) :]] == [k for k, _v in final]
    last = segment_files(src)[-1]
    content = last.read_bytes()
    final_pos, final_size = batch_positions(last)[-1]
    assert final_pos + final_size == len(content)
    assert (final_pos == 0) == final_alone

    work = tmp_path / "work"
    shutil.copytree(src, work)
    work_last = work / last.name
    for cut in range(final_size + 1):
        work_last.write_bytes(content[: final_pos + cut])
        with capture_logs() as logs, SegmentLog.open(work, fsync_policy="none") as log:
            complete = cut == final_size
            assert log.end_offset == (end_before + 4 if complete else end_before)
            # byte for byte the batches of `after` or `before` (their records, decoded once above)
            assert raw_batches(log) == (after_raw if complete else before_raw)
            if cut in (0, final_size):
                assert snapshot(log) == (after if complete else before)
        torn = [e for e in logs if e["event"] == "log.truncated_tail"]
        if cut in (0, final_size):
            assert torn == []
        else:
            assert len(torn) == 1
            assert torn[0]["file"] == str(work_last)
            assert torn[0]["position"] == final_pos
            assert torn[0]["truncated_bytes"] == cut
            assert os.path.getsize(work_last) == final_pos


def test_appends_continue_after_a_torn_tail(tmp_path: Path) -> None:
    before = build_log(tmp_path, 20, seed=3)
    last = segment_files(tmp_path)[-1]
    with last.open("ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x50\x00\x00\x01\x00")  # half a batch header
    with SegmentLog.open(tmp_path) as log:
        assert snapshot(log) == before
        end = log.end_offset
        assert log.append_records([(b"after", b"crash")], TS) == (end, end)
    with SegmentLog.open(tmp_path) as log:
        assert snapshot(log) == [*before, (end, b"after", b"crash")]


def test_zero_filled_garbage_after_the_last_batch_is_a_torn_tail(tmp_path: Path) -> None:
    before = build_log(tmp_path, 20, seed=4)
    last = segment_files(tmp_path)[-1]
    size = last.stat().st_size
    with last.open("ab") as f:
        f.write(bytes(8192))
    with capture_logs() as logs, SegmentLog.open(tmp_path) as log:
        assert snapshot(log) == before
    assert [e["reason"] for e in logs if e["event"] == "log.truncated_tail"] == ["bad magic byte 0"]
    assert last.stat().st_size == size


# --- corruption ---------------------------------------------------------------------------------


def flip(path: Path, pos: int, mask: int = 0x5A) -> None:
    data = bytearray(path.read_bytes())
    data[pos] ^= mask
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("where", ["length", "magic", "crc-covered", "record-bytes"])
def test_a_flipped_byte_in_a_middle_batch_stops_startup_naming_file_and_position(
    tmp_path: Path, where: str
) -> None:
    build_log(tmp_path, 40, seed=5)
    last = segment_files(tmp_path)[-1]
    batches = batch_positions(last)
    assert len(batches) >= 3
    pos, size = batches[len(batches) // 2]
    offset_in_batch = {"length": 10, "magic": 16, "crc-covered": 30, "record-bytes": size - 3}
    flip(last, pos + offset_in_batch[where])
    damaged = last.read_bytes()
    with pytest.raises(LogCorruptionError) as info:
        SegmentLog.open(tmp_path)
    err = info.value
    assert (err.file, err.position) == (str(last), pos)
    assert "not a torn tail" in err.reason
    assert str(last) in str(err) and f"byte position {pos}" in str(err)
    assert last.read_bytes() == damaged  # nothing was truncated: the operator decides
    SegmentLog.open(tmp_path, on_corruption="truncate").close()  # the lock was released


def test_a_flipped_byte_in_a_non_last_segment_stops_startup(tmp_path: Path) -> None:
    build_log(tmp_path, 60, seed=6)
    files = segment_files(tmp_path)
    assert len(files) >= 3
    victim = files[1]
    pos, size = batch_positions(victim)[-1]  # even its last batch: it is not the log's tail
    flip(victim, pos + size - 1)
    with pytest.raises(LogCorruptionError, match="CRC mismatch") as info:
        SegmentLog.open(tmp_path)
    assert (info.value.file, info.value.position) == (str(victim), pos)


def test_a_flipped_byte_in_the_tail_batch_is_truncated_with_a_warning(tmp_path: Path) -> None:
    full = build_log(tmp_path, 40, seed=7)
    last = segment_files(tmp_path)[-1]
    pos, size = batch_positions(last)[-1]
    n_last = read_batch_header(last.read_bytes(), pos).record_count
    flip(last, pos + size // 2)
    with capture_logs() as logs, SegmentLog.open(tmp_path) as log:
        assert snapshot(log) == full[:-n_last]
    (event,) = [e for e in logs if e["event"] == "log.truncated_tail"]
    assert event["log_level"] == "warning"
    assert (event["file"], event["position"], event["reason"]) == (str(last), pos, "CRC mismatch")


def test_a_damaged_base_offset_before_the_tail_is_corruption(tmp_path: Path) -> None:
    """The base offset is outside the CRC: a complete batch whose CRC holds but whose offset
    does not follow was not torn by a crash, so it must not be cut off as a torn tail."""
    build_log(tmp_path, 20, seed=10)
    last = segment_files(tmp_path)[-1]
    batches = batch_positions(last)
    flip(last, batches[-2][0], 0x01)  # highest byte of the second-to-last batch's base offset
    with pytest.raises(LogCorruptionError, match="below expected") as info:
        SegmentLog.open(tmp_path)  # the last batch no longer follows it
    assert (info.value.file, info.value.position) == (str(last), batches[-1][0])


def test_operator_can_choose_to_truncate_at_mid_log_corruption(tmp_path: Path) -> None:
    full = build_log(tmp_path, 60, seed=8)
    files = segment_files(tmp_path)
    victim = files[1]
    pos, _ = batch_positions(victim)[1]
    flip(victim, pos + 40)
    with capture_logs() as logs, SegmentLog.open(tmp_path, on_corruption="truncate") as log:
        kept = snapshot(log)
        assert kept == full[: len(kept)]
        assert log.segment_base_offsets == [int(f.name[:20]) for f in files[:2]]
    events = [e for e in logs if e["event"] == "log.truncated_corruption"]
    assert events[0]["file"] == str(victim) and events[0]["position"] == pos
    assert len(events) == 1 + len(files) - 2  # the cut, then each later segment removed


def test_overlapping_segments_are_corruption(tmp_path: Path) -> None:
    build_log(tmp_path, 60, seed=9)
    files = segment_files(tmp_path)
    # Rename the third segment to a base offset inside the second segment's range.
    second_base = int(files[1].name[:20])
    files[2].rename(tmp_path / f"{second_base + 1:020d}.log")
    with pytest.raises(LogCorruptionError, match="past the next segment's base"):
        SegmentLog.open(tmp_path)


# --- real process crashes ---------------------------------------------------------------------


def _check_content(log: SegmentLog, verified_end: int) -> None:
    """From `verified_end` (a batch boundary checked by an earlier reopen) to the end, offsets
    are dense and every record holds the bytes the child derived from its offset. Earlier
    batches were checked before; open() has just re-validated all CRCs and offset order."""
    expected = verified_end
    for header, raw in log.batches(verified_end):
        assert header.base_offset == expected
        for r in iter_records(raw):
            assert r.key == expected_key(r.offset)
            assert r.value is not None
            assert r.value == expected_value(r.offset, len(r.value))
        expected = header.next_offset
    assert expected == log.end_offset


@pytest.fixture
def zygote() -> Iterator[Zygote]:
    """The children are forked by one zygote that imported tests.log_crash_child once
    (tests/crash_zygote.py): real processes, without an interpreter start each."""
    with Zygote("tests.log_crash_child", ROOT) as z:
        yield z


@pytest.mark.e2e
def test_sigkill_at_random_moments_never_loses_an_acknowledged_offset(tmp_path: Path, zygote: Zygote) -> None:
    rng = random.Random(20240611)
    path = tmp_path / "log"
    acked = -1
    verified_end = 0
    torn_tails = 0
    started = time.monotonic()
    for run in range(50):
        stderr_path = tmp_path / f"child-{run}.err"
        with stderr_path.open("w") as stderr:
            pid, stdout = zygote.start([str(path), str(run), str(rng.choice([1, 4, 16]))], stderr)
        lines: list[str] = []
        ready = threading.Event()

        def read(stream: IO[str] = stdout, lines: list[str] = lines, ready: threading.Event = ready) -> None:
            with stream:
                for line in stream:
                    lines.append(line)
                    ready.set()
            ready.set()

        reader = threading.Thread(target=read)
        reader.start()
        assert ready.wait(20), "child did not start"
        assert lines and lines[0] == "ready\n", stderr_path.read_text()
        time.sleep(rng.uniform(0.0, 0.1))
        os.kill(pid, signal.SIGKILL)
        assert zygote.wait(pid, 20) == -signal.SIGKILL
        reader.join(20)
        acks = [int(line) for line in lines[1:] if line.endswith("\n")]
        assert acks == sorted(acks)
        if acks:
            assert acks[0] > acked  # the child resumed after everything acknowledged before
            acked = acks[-1]

        with capture_logs() as logs, SegmentLog.open(path, segment_bytes=SEGMENT_BYTES) as log:
            assert log.end_offset > acked, f"run {run}: acknowledged offset {acked} lost"
            _check_content(log, verified_end)
            verified_end = log.end_offset
        torn_tails += sum(e["event"] == "log.truncated_tail" for e in logs)
    assert acked > 1000
    with SegmentLog.open(path, segment_bytes=SEGMENT_BYTES) as log:
        _check_content(log, 0)
        segments = len(log.segment_base_offsets)
    print(
        f"\n50 SIGKILLs in {time.monotonic() - started:.1f}s: last acked offset {acked}, "
        f"{segments} segments, {torn_tails} torn tails truncated"
    )
