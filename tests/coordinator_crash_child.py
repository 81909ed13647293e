"""Child process of the coordinator SIGKILL test (tests/test_coordinator_crash.py): runs a load.

Usage: python -m tests.coordinator_crash_child DIR RUN

Opens a `CoordinatorStorage` on DIR (fsync policy "batch"), prints "ready", then loops forever:
run a group of 1-4 operations through the engine, `sync()` (the group commit), then print one
line acknowledging them:

    ack <n> <json>

`n` is the number of the last operation of the group: every operation up to n is durable. The
JSON object lists what the group did, so that the parent can check it after a crash:
`"commits"`: [group, topic, partition, offset] of each committed offset, and `"members"`:
[group, member id, member epoch] of each member that joined or heartbeated. A line is written
(with one write, flushed) only after `sync()` returned, so everything printed is acknowledged.

Operations are numbered from RUN * 1,000,000, so the offsets a run commits (an offset commit's
value is its operation number) are larger than every offset of earlier runs, and a partition's
latest durable value is always at least its last acknowledged one. Operations:

* an offset commit of 1-3 partitions of `foo`/`bar` in one of three "simple" groups;
* a consumer-group join (ConsumerGroupHeartbeat, epoch 0) of a new member in one of three
  consumer groups (at most `MAX_JOINS` per run, so the groups stay small);
* a heartbeat of a member this run joined, reporting the partitions it now owns (it moves
  towards its target assignment, writing records).

Members are never fenced: sessions last 10 minutes on the virtual clock and no timer is run.
Any error answer from the engine is unexpected here: the child then exits with status 3.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from typing import Any

import structlog

from engine.consumer.api import ConsumerGroupHeartbeatRequest
from engine.context import RequestContext
from engine.errors import Errors
from engine.ids import SeededIds
from engine.offsets.api import CommitPartition, CommitTopic, OffsetCommitRequest
from engine.outcome import Outcome
from gateway.coordinator_storage import CoordinatorStorage
from records.consumer_group import TopicPartitions
from tests.storage_workload import CONFIG, IMAGE

OPS_PER_RUN = 1_000_000
MAX_JOINS = 12
OFFSET_GROUPS = ("og-0", "og-1", "og-2")
CONSUMER_GROUPS = ("cg-0", "cg-1", "cg-2")
TOPICS = ("foo", "bar")
PARTITIONS = 6
CTX = RequestContext("crash-child", "/127.0.0.1", 9)


def virtual_now(run: int, op: int = 0) -> int:
    """The child's clock: strictly later in every run, 1 ms per operation."""
    return 1_700_000_000_000 + run * 10_000_000 + op


def open_storage(path: str, run: int) -> CoordinatorStorage:
    return CoordinatorStorage.open(
        path,
        config=CONFIG,
        ids=SeededIds(run),
        image=IMAGE,
        now_ms=virtual_now(run),
        fsync_policy="batch",
    )


def fail(what: str, response: Any) -> None:
    sys.stderr.write(f"unexpected answer to {what}: {response!r}\n")
    sys.stderr.flush()
    sys.exit(3)


class Load:
    def __init__(self, storage: CoordinatorStorage, run: int) -> None:
        self.storage = storage
        self.shard = storage.shard
        self.run = run
        self.rng = random.Random(run)
        self.joined: list[tuple[str, str]] = []  # (group, member id) joined by this run
        self.epochs: dict[tuple[str, str], int] = {}
        # Continuations to run once the operations' records are durable (Outcome.on_append).
        self.after_sync: list[Callable[[Errors], Any]] = []

    def track(self, out: Outcome[Any]) -> Any:
        if out.on_append is not None:
            self.after_sync.append(out.on_append)
        return out.response

    def synced(self) -> None:
        conts, self.after_sync = self.after_sync, []
        for cont in conts:
            self.track(cont(Errors.NONE))

    def operation(self, n: int, now: int, done: dict[str, list[list[Any]]]) -> None:
        r = self.rng.random()
        if r < 0.2 and len(self.joined) < MAX_JOINS:
            self.join(n, now, done)
        elif r < 0.4 and self.joined:
            self.heartbeat(now, done)
        else:
            self.commit(n, now, done)

    def commit(self, n: int, now: int, done: dict[str, list[list[Any]]]) -> None:
        group = self.rng.choice(OFFSET_GROUPS)
        topics: dict[str, list[int]] = {}
        for _ in range(self.rng.randint(1, 3)):
            parts = topics.setdefault(self.rng.choice(TOPICS), [])
            p = self.rng.randrange(PARTITIONS)
            if p not in parts:
                parts.append(p)
        req = OffsetCommitRequest(
            group,
            topics=[CommitTopic(t, [CommitPartition(p, n) for p in ps]) for t, ps in topics.items()],
        )
        resp = self.track(self.shard.offset_commit(req, CTX, now))
        if (
            resp is None
            or resp.error_code != 0
            or any(p.error_code != 0 for t in resp.topics for p in t.partitions)
        ):
            fail("OffsetCommit", resp)
        for t, ps in topics.items():
            for p in ps:
                done["commits"].append([group, t, p, n])

    def join(self, n: int, now: int, done: dict[str, list[list[Any]]]) -> None:
        group = self.rng.choice(CONSUMER_GROUPS)
        member = f"r{self.run}-m{n}"
        resp = self.track(
            self.shard.consumer_group_heartbeat(
                ConsumerGroupHeartbeatRequest(
                    group,
                    member,
                    0,
                    rebalance_timeout_ms=30_000,
                    subscribed_topic_names=list(self.rng.choice([("foo",), ("foo", "bar")])),
                    topic_partitions=[],
                ),
                CTX,
                now,
            )
        )
        if resp is None or resp.error_code != 0 or resp.member_id not in (None, member):
            fail("ConsumerGroupHeartbeat (join)", resp)
        self.joined.append((group, member))
        self.epochs[(group, member)] = resp.member_epoch
        done["members"].append([group, member, resp.member_epoch])

    def heartbeat(self, now: int, done: dict[str, list[list[Any]]]) -> None:
        group, member = self.rng.choice(self.joined)
        g = self.shard.consumer_group(group)
        if g is None or member not in g.members:
            fail("lookup of a joined member", (group, member))
            return
        owned = [TopicPartitions(t, p) for t, p in g.members[member].assigned_partitions.items()]
        resp = self.track(
            self.shard.consumer_group_heartbeat(
                ConsumerGroupHeartbeatRequest(
                    group, member, self.epochs[(group, member)], topic_partitions=owned
                ),
                CTX,
                now,
            )
        )
        if resp is None or resp.error_code != 0:
            fail("ConsumerGroupHeartbeat", resp)
        self.epochs[(group, member)] = resp.member_epoch
        done["members"].append([group, member, resp.member_epoch])


def main() -> None:
    path, run = sys.argv[1], int(sys.argv[2])
    # stdout carries the acknowledgements only; log lines (load, truncated tails) go to stderr.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    storage = open_storage(path, run)
    load = Load(storage, run)
    print("ready", flush=True)
    n = run * OPS_PER_RUN
    out = sys.stdout
    while True:
        done: dict[str, list[list[Any]]] = {"commits": [], "members": []}
        for _ in range(load.rng.randint(1, 4)):
            n += 1
            load.operation(n, virtual_now(run, n - run * OPS_PER_RUN), done)
        storage.sync()
        load.synced()
        out.write(f"ack {n} {json.dumps(done, separators=(',', ':'))}\n")
        out.flush()


if __name__ == "__main__":
    main()
