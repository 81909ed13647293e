"""Segment log figures: group-commit append throughput, data-plane appends, replay and compaction.

* append (coordinator): operations of 3 coordinator-sized records (key ~30 B, value ~60 B), one
  batch each, `sync()` after every group -- 100 operations per sync and 1 per sync with real
  fsync (policy "batch"), and 100 per sync with policy "none" (no fsync: the CPU cost alone);
* append_batch (data plane): client batches of 100 records x 100 B, offsets assigned in place;
* replay: a log of 1,000,000 coordinator-sized records (3-5 per batch) is written, closed, then
  timed: open (recovery: every batch's CRC checked, index built) + iterate every record's key
  and value bytes. Goal: <= 5 s for 1,000,000 records;
* compaction of that log (200,000 distinct keys).

    python -m bench.log [--json] [--records N] [--dir PATH]

fsync figures depend entirely on the disk (and on whether it honours flushes).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

from records.batch import build_batch, iter_raw_records
from records.compaction import compact
from records.durability import FsyncPolicy
from records.log import SegmentLog

REPLAY_GOAL_S = 5.0
TS = 1_700_000_000_000


def coordinator_op(
    rng: random.Random, i: int, n: int = 3, keys: int = 200_000
) -> list[tuple[bytes | None, bytes | None]]:
    """n records shaped like __consumer_offsets ones: ~30-byte keys, ~60-byte values."""
    out: list[tuple[bytes | None, bytes | None]] = []
    for _ in range(n):
        k = rng.randrange(keys)
        out.append(
            (
                b"\x00\x01\x00\x0cgroup-%06d\x00\x06topic\x00\x00\x00%c" % (k, k % 200 + 32),
                b"\x00\x03" + i.to_bytes(8, "big") + b"\xff\xff\xff\xff" + b"m" * 46,
            )
        )
    return out


def bench_append(
    path: str, policy: FsyncPolicy, ops_per_sync: int, seconds: float
) -> dict[str, Any]:
    rng = random.Random(1)
    ops = [coordinator_op(rng, i) for i in range(1000)]
    with SegmentLog.open(path, fsync_policy=policy) as log:
        append = log.append_records
        n_ops = syncs = 0
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            for j in range(ops_per_sync):
                append(ops[(n_ops + j) % 1000], TS)
            n_ops += ops_per_sync
            log.sync()
            syncs += 1
        elapsed = time.perf_counter() - start
    return {
        "fsync_policy": policy,
        "ops_per_sync": ops_per_sync,
        "records_per_op": 3,
        "ops_per_s": round(n_ops / elapsed),
        "records_per_s": round(3 * n_ops / elapsed),
        "syncs_per_s": round(syncs / elapsed),
        "us_per_sync": round(1e6 * elapsed / syncs, 1),
    }


def bench_append_batch(path: str, seconds: float) -> dict[str, Any]:
    raw = build_batch([(b"key-%04d" % i, b"v" * 100) for i in range(100)], timestamp_ms=TS)
    with SegmentLog.open(path, fsync_policy="none") as log:
        n = 0
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            for _ in range(100):
                log.append_batch(raw)
            n += 100
        log.sync()
        elapsed = time.perf_counter() - start
        # Fetch-style reads of the whole log in 1 MiB responses.
        t0 = time.perf_counter()
        offset, read_bytes = 0, 0
        while offset < log.end_offset:
            data = log.read(offset, 1 << 20)
            read_bytes += len(data)
            offset += len(data) // len(raw) * 100  # all batches have the same size
        read_elapsed = time.perf_counter() - t0
    return {
        "batch_records": 100,
        "batch_bytes": len(raw),
        "batches_per_s": round(n / elapsed),
        "records_per_s": round(100 * n / elapsed),
        "mb_per_s": round(n * len(raw) / elapsed / 1e6, 1),
        "fetch_mb_per_s": round(read_bytes / read_elapsed / 1e6, 1),
    }


def build_replay_log(path: str, records: int) -> dict[str, Any]:
    rng = random.Random(2)
    start = time.perf_counter()
    written = 0
    with SegmentLog.open(path, fsync_policy="none") as log:
        i = 0
        while written < records:
            n = min(rng.randint(3, 5), records - written)
            log.append_records(coordinator_op(rng, i, n), TS + i)
            written += n
            i += 1
        size = log.size_bytes
        batches = i
    return {
        "records": written,
        "batches": batches,
        "bytes": size,
        "build_s": round(time.perf_counter() - start, 2),
    }


def bench_replay(path: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    log = SegmentLog.open(path, fsync_policy="none")
    t1 = time.perf_counter()
    count = 0
    key_bytes = value_bytes = 0
    for _header, raw in log.batches():
        for _od, _td, key, value, _h in iter_raw_records(raw):
            count += 1
            key_bytes += len(key) if key is not None else 0
            value_bytes += len(value) if value is not None else 0
    t2 = time.perf_counter()
    log.close()
    total = t2 - t0
    return {
        "records": count,
        "open_s": round(t1 - t0, 3),
        "iterate_s": round(t2 - t1, 3),
        "load_s": round(total, 3),
        "records_per_s": round(count / total),
        "goal_s": REPLAY_GOAL_S,
        "goal_met": total <= REPLAY_GOAL_S * count / 1_000_000,
    }


def bench_compaction(path: str) -> dict[str, Any]:
    with SegmentLog.open(path, fsync_policy="none") as log:
        t0 = time.perf_counter()
        res = compact(log, now_ms=TS, tombstone_retention_ms=86_400_000)
        elapsed = time.perf_counter() - t0
    return {
        "seconds": round(elapsed, 2),
        "records_before": res.records_before,
        "records_kept": res.records_kept,
        "bytes_before": res.bytes_before,
        "bytes_after": res.bytes_after,
    }


def run(records: int, base_dir: str | None, seconds: float) -> dict[str, Any]:
    root = tempfile.mkdtemp(prefix="bench-log-", dir=base_dir)
    try:
        fresh: Callable[[str], str] = lambda name: os.path.join(root, name)  # noqa: E731
        out: dict[str, Any] = {
            "append": [
                bench_append(fresh("a1"), "batch", 100, seconds),
                bench_append(fresh("a2"), "batch", 1, seconds),
                bench_append(fresh("a3"), "none", 100, seconds),
            ],
            "append_batch": bench_append_batch(fresh("dp"), seconds),
        }
        out["replay_log"] = build_replay_log(fresh("replay"), records)
        out["replay"] = bench_replay(fresh("replay"))
        out["compaction"] = bench_compaction(fresh("replay"))
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--records", type=int, default=1_000_000, help="records in the replay log")
    ap.add_argument("--dir", default=None, help="where to write the logs (default: a temp dir)")
    ap.add_argument("--seconds", type=float, default=2.0, help="duration of each append run")
    args = ap.parse_args()
    res = run(args.records, args.dir, args.seconds)
    if args.json:
        print(json.dumps(res))
        return
    print("append_records + sync (3 records of ~30 B key / ~60 B value per operation)")
    print(
        f"  {'policy':<8}{'ops/sync':>9}{'ops/s':>12}{'records/s':>12}"
        f"{'syncs/s':>10}{'us/sync':>10}"
    )
    for a in res["append"]:
        print(
            f"  {a['fsync_policy']:<8}{a['ops_per_sync']:>9}{a['ops_per_s']:>12,}"
            f"{a['records_per_s']:>12,}{a['syncs_per_s']:>10,}{a['us_per_sync']:>10}"
        )
    d = res["append_batch"]
    print(
        f"append_batch (data plane, {d['batch_records']} records / {d['batch_bytes']} B per batch,"
        " policy none)"
    )
    print(
        f"  {d['batches_per_s']:,} batches/s = {d['records_per_s']:,} records/s = "
        f"{d['mb_per_s']} MB/s; fetch (1 MiB reads) {d['fetch_mb_per_s']} MB/s"
    )
    b, r = res["replay_log"], res["replay"]
    verdict = "met" if r["goal_met"] else "NOT met"
    print(
        f"replay of {b['records']:,} records in {b['batches']:,} batches "
        f"({b['bytes'] / 1e6:.1f} MB, built in {b['build_s']} s)"
    )
    print(
        f"  open/recover {r['open_s']} s + iterate keys/values {r['iterate_s']} s = "
        f"{r['load_s']} s ({r['records_per_s']:,} records/s); goal <= {REPLAY_GOAL_S} s"
        f" per 1,000,000: {verdict}"
    )
    c = res["compaction"]
    print(
        f"compaction of that log: {c['records_before']:,} -> {c['records_kept']:,} records, "
        f"{c['bytes_before'] / 1e6:.1f} -> {c['bytes_after'] / 1e6:.1f} MB in {c['seconds']} s"
    )


if __name__ == "__main__":
    main()
