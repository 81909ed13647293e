"""The running server compacts its coordinator logs (Kafka's log cleaner on `__consumer_offsets`),
so a shard that keeps committing the same offsets keeps a bounded log, and a restart rebuilds
exactly the state it had.

The shard runtime is driven on a real event loop with a real segment log; compaction runs as
the server runs it: triggered by the `CompactionPolicy` when the shard is idle, the compacted
segment written by the worker thread while operations go on, swapped in on the loop.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from engine.context import RequestContext
from engine.ids import SeededIds
from engine.offsets.api import (
    CommitPartition,
    CommitTopic,
    FetchTopic,
    OffsetCommitRequest,
    OffsetFetchGroupRequest,
)
from gateway.coordinator_storage import CompactionPolicy, CoordinatorStorage
from gateway.groups.runtime import ShardRuntime
from tests.storage_workload import CONFIG, IMAGE, persisted

CTX = RequestContext("committer", "/127.0.0.1", 9)
PARTITIONS = 6
COMMITS = 50_000
POLICY = CompactionPolicy(min_dirty_ratio=0.5, min_bytes=256 * 1024)
# Worst case: the clean part, plus min_bytes written before the trigger, plus what is appended
# while the worker thread writes the compacted segment.
BOUND = 1024 * 1024
MIN_COMMIT_BYTES = 80


def open_storage(path: Path, now: int) -> CoordinatorStorage:
    return CoordinatorStorage.open(
        str(path), config=CONFIG, ids=SeededIds(5), image=IMAGE, now_ms=now, fsync_policy="none"
    )


def commit(group: str, i: int) -> Any:
    topic = "foo" if i % 2 else "bar"
    req = OffsetCommitRequest(
        group, topics=[CommitTopic(topic, [CommitPartition(i % PARTITIONS, i, committed_metadata=f"m{i}")])]
    )
    return lambda c, now: c.offset_commit(req, CTX, now)


def committed(runtime: ShardRuntime, group: str) -> dict[tuple[str, int], tuple[int, str | None]]:
    topics = [FetchTopic(t, list(range(PARTITIONS))) for t in ("foo", "bar")]
    (answer,) = runtime.shard.offset_fetch([OffsetFetchGroupRequest(group, topics)])
    return {
        (t.name, p.partition_index): (p.committed_offset, p.metadata)
        for t in answer.topics
        for p in t.partitions
    }


async def drive(runtime: ShardRuntime, commits: int) -> int:
    """Commit `commits` times (in flights of 64, as a busy client would); the largest log size
    seen."""
    largest = 0
    for start in range(0, commits, 64):
        pending = []
        for i in range(start, min(start + 64, commits)):
            result = runtime.run(commit("g1" if i % 3 else "g2", i))
            if isinstance(result, asyncio.Future):
                pending.append(result)
        for fut in pending:
            answer = await fut
            assert all(p.error_code == 0 for t in answer.topics for p in t.partitions)
        largest = max(largest, runtime.storage.log.size_bytes)
        # A client paced by its own round trips: while the worker thread writes a compacted
        # segment, the next flight waits for it. Without this the bound would measure how much
        # CPU the worker thread gets on a loaded machine (the loop can append faster than one
        # starved thread compacts), not whether compaction keeps the log bounded.
        for _ in range(600):
            if runtime._compaction is None:
                break
            await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)  # let a compaction in flight finish
    for _ in range(100):
        if runtime._compaction is None:
            break
        await asyncio.sleep(0.05)
    return largest


def test_fifty_thousand_commits_to_the_same_keys_keep_the_log_bounded(tmp_path: Path) -> None:
    path = tmp_path / "__consumer_offsets-0"
    runtime = ShardRuntime(0, lambda now: open_storage(path, now), compaction=POLICY)

    async def scenario() -> tuple[int, dict[str, Any], dict[str, Any]]:
        runtime.start(asyncio.get_running_loop())
        largest = await drive(runtime, COMMITS)
        state = persisted(runtime.shard)
        offsets = {g: committed(runtime, g) for g in ("g1", "g2")}
        runtime.close()
        return largest, state, offsets

    largest, state, offsets = asyncio.run(scenario())
    # a commit takes more than MIN_COMMIT_BYTES uncompacted (the sibling test): 50,000 would
    # take several times the bound
    assert COMMITS * MIN_COMMIT_BYTES > 3 * BOUND
    assert runtime.compactions >= 10
    assert largest < BOUND, f"log reached {largest} bytes"
    # every partition's latest commit survives, and the restarted shard equals the live one
    expected: dict[str, dict[tuple[str, int], tuple[int, str | None]]] = {"g1": {}, "g2": {}}
    for i in range(COMMITS):
        expected["g1" if i % 3 else "g2"][("foo" if i % 2 else "bar", i % PARTITIONS)] = (i, f"m{i}")
    assert {g: {k: v for k, v in o.items() if v[0] >= 0} for g, o in offsets.items()} == expected
    restarted = open_storage(path, 2_000_000_000_000)
    try:
        assert restarted.log.size_bytes < BOUND
        assert persisted(restarted.shard) == state
        again = ShardRuntime(0, lambda now: restarted)
        assert {g: committed(again, g) for g in ("g1", "g2")} == offsets
    finally:
        restarted.close()


def test_no_compaction_without_a_policy(tmp_path: Path) -> None:
    path = tmp_path / "__consumer_offsets-0"
    runtime = ShardRuntime(0, lambda now: open_storage(path, now))

    async def scenario() -> int:
        runtime.start(asyncio.get_running_loop())
        largest = await drive(runtime, 5_000)
        runtime.close()
        return largest

    assert asyncio.run(scenario()) > 5_000 * MIN_COMMIT_BYTES and runtime.compactions == 0


def test_a_burst_written_during_a_compaction_is_compacted_when_it_ends(tmp_path: Path) -> None:
    """Appends made while a compaction runs are dirty bytes the next compaction must take. A
    server that only re-checks the policy after more appends would leave a burst followed by
    silence uncompacted, so the check runs again as soon as a compaction is swapped in."""
    path = tmp_path / "__consumer_offsets-0"
    policy = CompactionPolicy(min_dirty_ratio=0.5, min_bytes=8192)
    runtime = ShardRuntime(0, lambda now: open_storage(path, now), compaction=policy)

    async def scenario() -> tuple[int, int]:
        runtime.start(asyncio.get_running_loop())
        i = 0
        while runtime._compaction is None:  # commit until the first compaction starts
            answer = runtime.run(commit("g1", i))
            i += 1
            if isinstance(answer, asyncio.Future):
                await answer
            assert i < 10_000
        # No await before the burst is appended: the first compaction cannot finish in between.
        burst = [runtime.run(commit("g1", j)) for j in range(i, i + 400)]
        for fut in burst:
            if isinstance(fut, asyncio.Future):
                await fut
        after_burst = runtime.storage.log.size_bytes
        for _ in range(400):  # then silence: no append until the compactions settle
            await asyncio.sleep(0.05)
            if runtime._compaction is None and runtime.compactions >= 2:
                break
        size = runtime.storage.log.size_bytes
        runtime.close()
        return after_burst, size

    after_burst, size = asyncio.run(scenario())
    assert 400 * MIN_COMMIT_BYTES > 8192 and after_burst > 400 * MIN_COMMIT_BYTES
    assert runtime.compactions >= 2
    assert size < 8192, f"the burst was left uncompacted: {size} bytes"
