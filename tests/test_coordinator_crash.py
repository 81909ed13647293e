"""Crash consistency of a coordinator shard: real SIGKILLs of a process running engine operations.

The child (tests/coordinator_crash_child.py) opens a `CoordinatorStorage` with fsync policy
"batch", runs offset commits, consumer-group joins and heartbeats through the engine, and after
each group commit prints what it acknowledged. The parent kills it at a random moment, reopens
the storage (log recovery, replay into a fresh shard, load duties) and checks that every
acknowledged operation is there: each acknowledged committed offset with at least its value,
each acknowledged member in its group with at least its acknowledged epoch. Then the next child
reopens the same directory and continues. The children are forked by one zygote process
(tests/crash_zygote.py) that imported the child's module once: real processes, without a
second of imports each. (tests/test_log_crash.py does the same one layer down,
for raw log appends.)
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
from structlog.testing import capture_logs

from gateway.coordinator_storage import CoordinatorStorage
from tests.coordinator_crash_child import open_storage, virtual_now
from tests.crash_zygote import Zygote

pytestmark = pytest.mark.e2e  # starts child processes

ROOT = Path(__file__).resolve().parent.parent
KILLS = 50


def check(
    storage: CoordinatorStorage,
    offsets: dict[tuple[str, str, int], int],
    members: dict[tuple[str, str], int],
    run: int,
) -> None:
    shard = storage.shard
    for (group, topic, partition), value in offsets.items():
        stored = shard.offsets.get(group, topic, partition)
        assert stored is not None, f"run {run}: acknowledged offset {group}/{topic}-{partition} lost"
        assert stored.offset >= value, (
            f"run {run}: {group}/{topic}-{partition} is {stored.offset}, acknowledged {value}"
        )
    for (group, member_id), epoch in members.items():
        g = shard.consumer_group(group)
        assert g is not None, f"run {run}: group {group} of acknowledged member {member_id} lost"
        m = g.members.get(member_id)
        assert m is not None, f"run {run}: acknowledged member {member_id} missing from {group}"
        assert m.member_epoch >= epoch, (
            f"run {run}: member {member_id} has epoch {m.member_epoch}, acknowledged {epoch}"
        )


@pytest.fixture
def zygote() -> Iterator[Zygote]:
    with Zygote("tests.coordinator_crash_child", ROOT) as z:
        yield z


def test_sigkill_at_random_moments_never_loses_an_acknowledged_operation(
    tmp_path: Path, zygote: Zygote
) -> None:
    rng = random.Random(20250301)
    path = tmp_path / "__consumer_offsets-0"
    offsets: dict[tuple[str, str, int], int] = {}
    members: dict[tuple[str, str], int] = {}
    acked_ops = 0
    torn_tails = 0
    started = time.monotonic()
    for run in range(1, KILLS + 1):
        stderr_path = tmp_path / f"child-{run}.err"
        with stderr_path.open("w") as stderr:
            pid, stdout = zygote.start([str(path), str(run)], stderr)
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
        assert ready.wait(30), "child did not start"
        assert lines and lines[0] == "ready\n", stderr_path.read_text()
        time.sleep(rng.uniform(0.0, 0.15))
        os.kill(pid, signal.SIGKILL)
        code = zygote.wait(pid, 30)
        reader.join(30)
        assert code == -signal.SIGKILL, f"child exited with {code}: {stderr_path.read_text()}"

        last = run * 1_000_000
        for line in lines[1:]:
            if not line.endswith("\n"):
                continue  # cut by the kill: the rest of it was never written
            word, n, details = line.split(" ", 2)
            assert word == "ack" and int(n) > last
            last = int(n)
            acked_ops += 1
            done = json.loads(details)
            for group, topic, partition, value in done["commits"]:
                offsets[(group, topic, partition)] = value  # values grow: the latest is the max
            for group, member_id, epoch in done["members"]:
                members[(group, member_id)] = epoch

        with capture_logs() as logs:
            storage = open_storage(str(path), run)
        try:
            check(storage, offsets, members, run)
        finally:
            storage.close()
        torn_tails += sum(e["event"] == "log.truncated_tail" for e in logs)

    elapsed = time.monotonic() - started
    assert len(members) >= 20 and len(offsets) >= 20, (len(members), len(offsets))
    # One last reopen as a fresh process would see it, at a later time (timers not run).
    storage = open_storage(str(path), KILLS + 1)
    try:
        check(storage, offsets, members, KILLS + 1)
        end = storage.end_offset
        assert storage.shard.now_ms == virtual_now(KILLS + 1)
    finally:
        storage.close()
    print(
        f"\n{KILLS} SIGKILLs in {elapsed:.1f}s: {acked_ops} acknowledged group commits, "
        f"{len(offsets)} offsets and {len(members)} members checked, log end offset {end}, "
        f"{torn_tails} torn tails truncated"
    )
