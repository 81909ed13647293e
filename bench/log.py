"""Segment log figures: group-commit append throughput, data-plane appends, replay and compaction.

* append (coordinator): operations of 3 coordinator-sized records (key ~30 B, value ~60 B), one
  batch each, `sync()` after every group -- 100 operations per sync and 1 per sync with real
  fsync (policy "batch"), and 100 per sync with policy "none" (no fsync: the CPU cost alone);
* append_batch (data plane): client batches of 100 records x 100 B, offsets assigned in place;
* replay: a log of 1,000,000 coordinator-sized records (3-5 per batch) is written, closed, then
  timed: open (recovery: every batch's CRC checked, index built) + iterate every record's key
  and value bytes. Goal: <= 5 s for 1,000,000 records;
* compaction of that log (200,000 distinct keys);
* load (the full path of a shard's startup): a coordinator log of 1,000,000 real records is
  built through `records.codec` + `SegmentLog.append_records` -- mostly OffsetCommit records
  (one batch per OffsetCommit request of 1-8 partitions, 6,000 groups, each partition committed
  many times over), plus the KIP-848 records (k3-k8) of 150 consumer groups per million records,
  20 members each, every member joining (its k5, the group's k3/k4, the changed k7s, k6, its
  k8) and reconciling (k8s) -- then `CoordinatorStorage.open` is timed: log recovery + decode +
  replay into the engine + load duties. Split: recovery (`SegmentLog.open` alone), read +
  decode (batches iterated and every record decoded, no replay), replay (the rest of
  `load_shard`), duties (`Shard.on_loaded`, and the garbage collection the load deferred). The
  log is in the page cache (just written). Goal: <= 5 s for 1,000,000 records. The CPU time is
  printed too: the wall time depends on what else the machine runs.

    python -m bench.log [--json] [--records N] [--load-records N] [--only PART] [--profile FILE]
                        [--dir PATH]

fsync figures depend entirely on the disk (and on whether it honours flushes).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import tempfile
import time
import uuid
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


def bench_append(path: str, policy: FsyncPolicy, ops_per_sync: int, seconds: float) -> dict[str, Any]:
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


# --- the full load path: CoordinatorStorage.open on a log of real coordinator records ---------

LOAD_TOPICS = 40
LOAD_PARTITIONS = 60
LOAD_OFFSET_GROUPS = 6000
LOAD_CONSUMER_GROUPS = 150
LOAD_MEMBERS_PER_GROUP = 20


def _load_image() -> Any:
    from engine.metadata import MetadataImage, TopicImage

    return MetadataImage(
        TopicImage(uuid.UUID(int=0xB000 + i), f"topic-{i:02d}", LOAD_PARTITIONS) for i in range(LOAD_TOPICS)
    )


class _CoordinatorLogWriter:
    """Appends engine-shaped operations (one batch each) to a log through records.codec."""

    def __init__(self, log: SegmentLog) -> None:
        self.log = log
        self.records = 0
        self.batches = 0
        self.now = TS
        self.counts: dict[str, int] = {}

    def op(self, records: list[Any]) -> None:
        from records.codec import encode_record

        self.now += 1
        self.log.append_records([encode_record(r) for r in records], self.now)
        self.records += len(records)
        self.batches += 1
        for r in records:
            name = type(r.key).__name__.removesuffix("Key")
            self.counts[name] = self.counts.get(name, 0) + 1


def _consumer_group_ops(rng: random.Random, w: _CoordinatorLogWriter, g: int) -> None:
    """One KIP-848 group: every member joins (the records of a join, as the engine writes them),
    then members reconcile towards the target of the final epoch."""
    from records.consumer_group import (
        ConsumerGroupCurrentMemberAssignmentKey as K8,
    )
    from records.consumer_group import (
        ConsumerGroupCurrentMemberAssignmentValue as V8,
    )
    from records.consumer_group import (
        ConsumerGroupMemberMetadataKey as K5,
    )
    from records.consumer_group import (
        ConsumerGroupMemberMetadataValue as V5,
    )
    from records.consumer_group import (
        ConsumerGroupMetadataKey as K3,
    )
    from records.consumer_group import (
        ConsumerGroupMetadataValue as V3,
    )
    from records.consumer_group import (
        ConsumerGroupPartitionMetadataKey as K4,
    )
    from records.consumer_group import (
        ConsumerGroupPartitionMetadataValue as V4,
    )
    from records.consumer_group import (
        ConsumerGroupTargetAssignmentMemberKey as K7,
    )
    from records.consumer_group import (
        ConsumerGroupTargetAssignmentMemberValue as V7,
    )
    from records.consumer_group import (
        ConsumerGroupTargetAssignmentMetadataKey as K6,
    )
    from records.consumer_group import (
        ConsumerGroupTargetAssignmentMetadataValue as V6,
    )
    from records.consumer_group import TopicMetadata, TopicPartitions
    from records.coordinator import CoordinatorRecord as R

    gid = f"consumer-group-{g:04d}"
    topic = g % LOAD_TOPICS
    tid = uuid.UUID(int=0xB000 + topic)
    members = [f"{uuid.UUID(int=rng.getrandbits(128))}"[:22] for _ in range(LOAD_MEMBERS_PER_GROUP)]
    targets: dict[str, tuple[int, ...]] = {}

    def target_of(joined: list[str]) -> dict[str, tuple[int, ...]]:
        return {
            m: tuple(p for p in range(LOAD_PARTITIONS) if p % len(joined) == i) for i, m in enumerate(joined)
        }

    for epoch, m in enumerate(members, 1):
        joined = members[:epoch]
        new_targets = target_of(joined)
        recs = [
            R(
                K5(gid, m),
                V5(None, None, f"client-{epoch}", "/10.0.0.1", (f"topic-{topic:02d}",), None, 45_000, None),
            ),
        ]
        if epoch == 1:
            recs.append(R(K4(gid), V4((TopicMetadata(tid, f"topic-{topic:02d}", LOAD_PARTITIONS),))))
        recs.append(R(K3(gid), V3(epoch)))
        for mid, parts in new_targets.items():
            if targets.get(mid) != parts:
                recs.append(R(K7(gid, mid), V7((TopicPartitions(tid, parts),))))
        recs.append(R(K6(gid), V6(epoch)))
        owned = new_targets[m] if epoch == 1 else ()
        recs.append(R(K8(gid, m), V8(epoch, 0, 0, (TopicPartitions(tid, owned),) if owned else ())))
        targets = new_targets
        w.op(recs)
    final = len(members)
    for m in members:  # revoke what moved (state 1), then take the target (stable)
        w.op([R(K8(gid, m), V8(final, final - 1, 1, (), ()))])
        w.op([R(K8(gid, m), V8(final, final, 0, (TopicPartitions(tid, targets[m]),), ()))])


def build_coordinator_log(path: str, records: int, seed: int = 3) -> dict[str, Any]:
    """A coordinator log of `records` records (see the module doc); returns its figures."""
    from records.coordinator import CoordinatorRecord
    from records.offsets import OffsetCommitKey, OffsetCommitValue

    rng = random.Random(seed)
    start = time.perf_counter()
    with SegmentLog.open(path, fsync_policy="none") as log:
        w = _CoordinatorLogWriter(log)
        # Consumer groups (150 per million records) spread over the first part of the log: one
        # every `every` offset-commit batches (~4.5 records each).
        n_groups = max(1, round(LOAD_CONSUMER_GROUPS * records / 1_000_000))
        pending_groups = list(range(n_groups))
        every = max(1, records // 5 // n_groups)
        groups = [f"app-{g:05d}" for g in range(LOAD_OFFSET_GROUPS)]
        i = 0
        while w.records < records:
            if pending_groups and i % every == 0:
                _consumer_group_ops(rng, w, pending_groups.pop(0))
            i += 1
            # Half the commits from any group, half from a busy few (a skewed distribution).
            g = rng.randrange(LOAD_OFFSET_GROUPS) if rng.random() < 0.5 else int(rng.paretovariate(1.2) * 7)
            group = groups[g % LOAD_OFFSET_GROUPS]
            topic = f"topic-{g % LOAD_OFFSET_GROUPS % LOAD_TOPICS:02d}"
            first = rng.randrange(LOAD_PARTITIONS)
            n = min(rng.randint(1, 8), records - w.records)
            if n <= 0:  # a consumer group's records took the last ones
                break
            w.op(
                [
                    CoordinatorRecord(
                        OffsetCommitKey(group, topic, (first + j) % LOAD_PARTITIONS),
                        OffsetCommitValue(rng.randrange(1 << 40), -1 if j % 2 else 17, "", w.now),
                    )
                    for j in range(n)
                ]
            )
        size = log.size_bytes
    return {
        "records": w.records,
        "batches": w.batches,
        "bytes": size,
        "by_type": dict(sorted(w.counts.items(), key=lambda kv: -kv[1])),
        "consumer_groups": n_groups - len(pending_groups),
        "members": (n_groups - len(pending_groups)) * LOAD_MEMBERS_PER_GROUP,
        "build_s": round(time.perf_counter() - start, 2),
    }


def bench_load(path: str, profile: str | None = None) -> dict[str, Any]:
    """Time CoordinatorStorage.open on the log at `path`, and the parts of it (module doc)."""
    from engine.config import CoordinatorConfig
    from engine.ids import SeededIds
    from gateway.coordinator_storage import CoordinatorStorage
    from records.codec import decode_record

    image = _load_image()
    config = CoordinatorConfig()
    now = TS + 10**9
    # Recovery alone: open (every batch's CRC checked, the index built), close.
    t0 = time.perf_counter()
    SegmentLog.open(path, fsync_policy="none").close()
    recovery = time.perf_counter() - t0
    # Read + decode alone, no replay: load_shard's loop without its replay.
    log = SegmentLog.open(path, fsync_policy="none")
    gc.disable()
    t0 = time.perf_counter()
    for header, raw in log.batches():
        for _od, _td, key, value, _hd in iter_raw_records(raw, 0, header):
            decode_record(key, value)  # type: ignore[arg-type]
    read_decode = time.perf_counter() - t0
    gc.enable()
    log.close()
    # The whole path.
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    t0, c0 = time.perf_counter(), time.process_time()
    storage = CoordinatorStorage.open(
        path, config=config, ids=SeededIds(1), image=image, now_ms=now, fsync_policy="none"
    )
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    if profiler is not None and profile:
        profiler.disable()
        profiler.dump_stats(profile)
    stats = storage.load_stats
    assert stats is not None
    shard = storage.shard
    groups = len(shard.groups)
    members = sum(len(getattr(g, "members", ())) for g in shard.groups.values())
    offsets = sum(len(p) for g in shard.offsets.group_ids() for p in shard.offsets.group(g).values())
    storage.close()
    replay = max(stats.seconds - read_decode, 0.0)
    duties = max(total - recovery - stats.seconds, 0.0)
    return {
        "records": stats.records,
        "total_s": round(total, 3),
        "total_cpu_s": round(cpu, 3),
        "recovery_s": round(recovery, 3),
        "read_decode_s": round(read_decode, 3),
        "replay_s": round(replay, 3),
        "duties_s": round(duties, 3),
        "records_per_s": round(stats.records / total),
        "groups": groups,
        "members": members,
        "offsets": offsets,
        "goal_s": REPLAY_GOAL_S,
        "goal_met": total <= REPLAY_GOAL_S * stats.records / 1_000_000,
    }


PARTS = ("append", "append_batch", "replay", "compaction", "load")


def run(
    records: int,
    base_dir: str | None,
    seconds: float,
    load_records: int = 1_000_000,
    only: tuple[str, ...] = PARTS,
    profile: str | None = None,
) -> dict[str, Any]:
    root = tempfile.mkdtemp(prefix="bench-log-", dir=base_dir)
    try:
        fresh: Callable[[str], str] = lambda name: os.path.join(root, name)  # noqa: E731
        out: dict[str, Any] = {}
        if "append" in only:
            out["append"] = [
                bench_append(fresh("a1"), "batch", 100, seconds),
                bench_append(fresh("a2"), "batch", 1, seconds),
                bench_append(fresh("a3"), "none", 100, seconds),
            ]
        if "append_batch" in only:
            out["append_batch"] = bench_append_batch(fresh("dp"), seconds)
        if "replay" in only or "compaction" in only:
            out["replay_log"] = build_replay_log(fresh("replay"), records)
        if "replay" in only:
            out["replay"] = bench_replay(fresh("replay"))
        if "compaction" in only:
            out["compaction"] = bench_compaction(fresh("replay"))
        if "load" in only:
            out["load_log"] = build_coordinator_log(fresh("load"), load_records)
            out["load"] = bench_load(fresh("load"), profile)
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--records", type=int, default=1_000_000, help="records in the replay log")
    ap.add_argument("--dir", default=None, help="where to write the logs (default: a temp dir)")
    ap.add_argument("--seconds", type=float, default=2.0, help="duration of each append run")
    ap.add_argument("--load-records", type=int, default=1_000_000, help="records in the coordinator load log")
    ap.add_argument("--only", action="append", choices=PARTS, help="run only this part (repeatable)")
    ap.add_argument("--profile", metavar="FILE", help="cProfile the load into FILE (pstats)")
    args = ap.parse_args()
    only = tuple(args.only) if args.only else PARTS
    res = run(args.records, args.dir, args.seconds, args.load_records, only, args.profile)
    if args.json:
        print(json.dumps(res))
        return
    if "append" in res:
        print("append_records + sync (3 records of ~30 B key / ~60 B value per operation)")
        print(f"  {'policy':<8}{'ops/sync':>9}{'ops/s':>12}{'records/s':>12}{'syncs/s':>10}{'us/sync':>10}")
        for a in res["append"]:
            print(
                f"  {a['fsync_policy']:<8}{a['ops_per_sync']:>9}{a['ops_per_s']:>12,}"
                f"{a['records_per_s']:>12,}{a['syncs_per_s']:>10,}{a['us_per_sync']:>10}"
            )
    if "append_batch" in res:
        d = res["append_batch"]
        print(
            f"append_batch (data plane, {d['batch_records']} records / {d['batch_bytes']} B per "
            "batch, policy none)"
        )
        print(
            f"  {d['batches_per_s']:,} batches/s = {d['records_per_s']:,} records/s = "
            f"{d['mb_per_s']} MB/s; fetch (1 MiB reads) {d['fetch_mb_per_s']} MB/s"
        )
    if "replay" in res:
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
    if "compaction" in res:
        c = res["compaction"]
        print(
            f"compaction of that log: {c['records_before']:,} -> {c['records_kept']:,} records, "
            f"{c['bytes_before'] / 1e6:.1f} -> {c['bytes_after'] / 1e6:.1f} MB in {c['seconds']} s"
        )
    if "load" in res:
        b, r = res["load_log"], res["load"]
        verdict = "met" if r["goal_met"] else "NOT met"
        mix = ", ".join(f"{n} {c:,}" for n, c in b["by_type"].items())
        print(
            f"load (CoordinatorStorage.open) of {b['records']:,} records in {b['batches']:,} "
            f"batches ({b['bytes'] / 1e6:.1f} MB, built in {b['build_s']} s): {mix}"
        )
        print(
            f"  {r['total_s']} s (CPU {r['total_cpu_s']} s) = recovery {r['recovery_s']} s + read/decode "
            f"{r['read_decode_s']} s + replay {r['replay_s']} s + load duties {r['duties_s']} s "
            f"({r['records_per_s']:,} records/s; {r['groups']:,} groups, {r['members']:,} "
            f"members, {r['offsets']:,} offsets); goal <= {REPLAY_GOAL_S} s per 1,000,000: "
            f"{verdict}"
        )


if __name__ == "__main__":
    main()
