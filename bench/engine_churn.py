"""The soak's workload (bench/soak.py) on the sans-IO engine alone, in simulated time: what the
coordinator state keeps as members come and go, without a gateway, sockets or the log.

`python -m bench.engine_churn [--seconds 2400] [--members 10000] [--groups 100] [--churn 10]
[--uniform] [--log DIR] [--json]` joins `members` KIP-848 consumer members (one topic of members/groups
partitions, every group subscribed to it), then every simulated second `--churn` members go
(half leave with epoch -1, half go silent so their session timer expires them, as Kafka's
`group.consumer.session.timeout.ms`) and as many join random groups; every member heartbeats
every `group.consumer.heartbeat.interval.ms` (5 s), echoing a new assignment in its next
heartbeat as a real client does. A member's epoch in each request is a new int object, as one
decoded from the wire is.

With `--log DIR` the shard journals to a new coordinator log in DIR (`CoordinatorStorage`, no
fsync) and compacts it as the server's shard runtime does, at the soak's threshold
(`coordinator.compaction.min.bytes=1048576`): passes 1 and 2 in the worker process
(`records.compaction_worker`), the written file validated and swapped in here; so the records
layer (encoding, segments and their index, tombstones kept `log.cleaner.delete.retention.ms`)
is measured with the engine.

Members start in groups drawn at random (`bench.soak.random_group_sizes`, the churn's own
stationary distribution) or, with `--uniform`, exactly members/groups in each.

Every `--sample-seconds` it prints the interpreter's live blocks (`sys.getallocatedblocks()`)
and a census of the members' epochs above Python's small-int cache (256): how many epoch
references, how many distinct int objects they use, how many distinct values. A member's
epochs are its member epoch, its previous epoch and the epoch of each partition it holds
(Kafka 4.3 assignment epochs); members sharing the group's epoch object keep the objects near
the distinct values. Nothing here is timed: it runs as fast as the engine goes (about a
simulated minute per 3 CPU seconds).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import uuid
from dataclasses import dataclass
from typing import Any

from bench.soak import random_group_sizes
from engine.config import CoordinatorConfig
from engine.consumer.api import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from engine.consumer.group import ConsumerGroup
from engine.context import RequestContext
from engine.ids import SeededIds
from engine.metadata import MetadataImage, TopicImage, topic_id_for
from engine.shard import Shard
from gateway.allocator import mallinfo2
from gateway.coordinator_storage import CompactionPolicy, CoordinatorStorage
from records.compaction import write_compaction
from records.compaction_worker import clean_in_worker, shutdown_worker
from records.consumer_group import TopicPartitions

TOPIC = "soak-topic"
COMPACTION_MIN_BYTES = 1 << 20  # bench.soak's coordinator.compaction.min.bytes
SMALL_INT_MAX = 256


@dataclass
class _Member:
    group: str
    member_id: str
    epoch: int = 0
    owned: tuple[TopicPartitions, ...] | None = None
    due: int = 0


def _wire(epoch: int) -> int:
    """The epoch as a decoded request field holds it: an int object of its own."""
    return int(str(epoch))


class Sim:
    def __init__(
        self, members: int, groups: int, seed: int, uniform: bool, log_dir: str | None = None
    ) -> None:
        self.rng = random.Random(seed)
        per = members // groups
        tid = topic_id_for(TOPIC)
        image = MetadataImage([TopicImage(tid, TOPIC, per)])
        self.storage: CoordinatorStorage | None = None
        if log_dir is None:
            self.shard = Shard(CoordinatorConfig(), SeededIds(seed), image)
        else:
            # The shard journaled to a real coordinator log, compacted in place when the soak's
            # threshold says so: the records layer (encoding, segments, their index) included.
            self.storage = CoordinatorStorage.open(
                log_dir,
                config=CoordinatorConfig(),
                ids=SeededIds(seed),
                image=image,
                now_ms=1_000_000,
                fsync_policy="none",
            )
            self.shard = self.storage.shard
        self.compactions = 0
        self.ctx = RequestContext("engine-churn", "/127.0.0.1", 1)
        self.groups = [f"soak-group-{g}" for g in range(groups)]
        sizes = [per] * groups if uniform else random_group_sizes(per * groups, groups, self.rng)
        self.members: dict[str, _Member] = {}
        self.now = 1_000_000
        self.heartbeats = 0
        self.errors: dict[int, int] = {}
        for g, size in zip(self.groups, sizes, strict=True):
            for _ in range(size):
                m = _Member(g, str(uuid.UUID(int=self.rng.getrandbits(128))))
                self.members[m.member_id] = m
        order = list(self.members.values())
        for i, m in enumerate(order):
            m.due = self.now + 5000 * i // len(order)
        for _ in range(3):  # join, take the assignment, echo it
            for m in order:
                self._heartbeat(m)

    def _heartbeat(self, m: _Member) -> None:
        if m.epoch == 0:
            req = ConsumerGroupHeartbeatRequest(
                group_id=m.group,
                member_id=m.member_id,
                member_epoch=0,
                rebalance_timeout_ms=60000,
                subscribed_topic_names=[TOPIC],
                topic_partitions=[],
            )
        else:
            req = ConsumerGroupHeartbeatRequest(
                group_id=m.group, member_id=m.member_id, member_epoch=_wire(m.epoch), topic_partitions=m.owned
            )
        out = self.shard.consumer_group_heartbeat(req, self.ctx, self.now)
        r = out.response
        assert isinstance(r, ConsumerGroupHeartbeatResponse)
        self.heartbeats += 1
        if r.error_code:
            self.errors[r.error_code] = self.errors.get(r.error_code, 0) + 1
            m.epoch, m.owned = 0, None  # fenced: rejoin, as KIP-848 clients do
            return
        if m.owned is not None and m.epoch != 0:
            m.owned = None  # echoed
        # The engine's object, not a copy: the load generator's own ints would count here
        # (10,000 of them once epochs pass 256), where the soak's are in another process.
        m.epoch = r.member_epoch
        if r.assignment is not None:
            m.owned = tuple(TopicPartitions(tp.topic_id, tuple(tp.partitions)) for tp in r.assignment)

    def second(self, churn: int) -> None:
        end = self.now + 1000
        for _ in range(churn):
            victim = self.members.pop(self.rng.choice(list(self.members)))
            if self.rng.random() < 0.5:
                req = ConsumerGroupHeartbeatRequest(
                    group_id=victim.group, member_id=victim.member_id, member_epoch=-1
                )
                self.shard.consumer_group_heartbeat(req, self.ctx, self.now)
            new = _Member(self.rng.choice(self.groups), str(uuid.UUID(int=self.rng.getrandbits(128))))
            new.due = self.now
            self.members[new.member_id] = new
        # heartbeats due this second, in time order, with the session timers between them
        due = sorted((m for m in self.members.values() if m.due < end), key=lambda m: m.due)
        for m in due:
            self.now = max(self.now, m.due)
            self.shard.expire(self.now)
            self._heartbeat(m)
            m.due = self.now + 5000
        self.now = end
        self.shard.expire(self.now)
        if self.storage is not None:
            self._compact()

    def _compact(self) -> None:
        """As the server's shard runtime compacts (`gateway.groups.runtime`): passes 1 and 2 in
        the worker process, the written file validated here, then the swap; inline, not on a
        thread, since nothing else runs meanwhile."""
        assert self.storage is not None
        self.storage.log.sync()
        job = self.storage.begin_compaction(self.now, CompactionPolicy(min_bytes=COMPACTION_MIN_BYTES))
        if job is None:
            return
        write_compaction(job, None, lambda: None, clean_in_worker)
        self.storage.finish_compaction(job)
        self.compactions += 1


def epoch_census(groups: list[ConsumerGroup]) -> dict[str, int]:
    """Members' epochs above the small-int cache: references, int objects, distinct values."""
    refs = 0
    objects: set[int] = set()
    values: set[int] = set()
    group_values: set[tuple[str, int]] = set()
    for g in groups:
        for m in g.members.values():
            for e in (m.member_epoch, m.previous_member_epoch):
                if e > SMALL_INT_MAX:
                    refs += 1
                    objects.add(id(e))
                    values.add(e)
                    group_values.add((g.group_id, e))
            for parts in m.assignment_epochs.values():
                for e in parts.values():
                    if e > SMALL_INT_MAX:
                        refs += 1
                        objects.add(id(e))
                        values.add(e)
                        group_values.add((g.group_id, e))
    return {
        "epoch_refs": refs,
        "epoch_objects": len(objects),
        "epoch_values": len(values),
        "epoch_group_values": len(group_values),
    }


def run(
    members: int,
    groups: int,
    seconds: int,
    churn: int,
    sample_s: int,
    seed: int,
    uniform: bool,
    log_dir: str | None = None,
) -> dict[str, Any]:
    sim = Sim(members, groups, seed, uniform, log_dir)
    try:
        return _run(sim, members, groups, seconds, churn, sample_s, uniform)
    finally:
        if sim.storage is not None:
            sim.storage.close()
            shutdown_worker()


def _run(
    sim: Sim, members: int, groups: int, seconds: int, churn: int, sample_s: int, uniform: bool
) -> dict[str, Any]:
    samples: list[dict[str, Any]] = []
    for t in range(seconds + 1):
        if t % sample_s == 0:
            gc.collect()
            glibc = mallinfo2()
            cgs = [g for g in sim.shard.groups.values() if isinstance(g, ConsumerGroup)]
            sizes = [len(g.members) for g in cgs]
            samples.append(
                {
                    "t": t,
                    "blocks": sys.getallocatedblocks(),
                    # glibc's bytes in use (heap and mmapped chunks): the blocks above 512 bytes
                    "glibc_in_use": -1 if glibc is None else glibc["uordblks"] + glibc["hblkhd"],
                    "members": sum(sizes),
                    "group_size_min": min(sizes),
                    "group_size_max": max(sizes),
                    "max_group_epoch": max(g.group_epoch for g in cgs),
                    "timers": len(sim.shard.timers),
                    "compactions": sim.compactions,
                    **epoch_census(cgs),
                }
            )
        if t < seconds:
            sim.second(churn)
    return {
        "scenario": "engine_churn",
        "members": members,
        "groups": groups,
        "churn_per_s": churn,
        "seconds": seconds,
        "start": "uniform" if uniform else "random",
        "heartbeats": sim.heartbeats,
        "errors": {str(k): v for k, v in sorted(sim.errors.items())},
        "samples": samples,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.engine_churn", description=__doc__.splitlines()[0])
    p.add_argument("--members", type=int, default=10000)
    p.add_argument("--groups", type=int, default=100)
    p.add_argument("--seconds", type=int, default=2400)
    p.add_argument("--churn", type=int, default=10)
    p.add_argument("--sample-seconds", type=int, default=300)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--uniform", action="store_true", help="exactly members/groups in each group at the start")
    p.add_argument(
        "--log",
        metavar="DIR",
        help="journal to a coordinator log in DIR (a new one), compacted as the soak's is",
    )
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    res = run(a.members, a.groups, a.seconds, a.churn, a.sample_seconds, a.seed, a.uniform, a.log)
    if a.json:
        print(json.dumps(res))
        return 0
    print(
        f"engine churn: {res['members']} members, {res['groups']} groups, {res['churn_per_s']}/s, "
        f"start {res['start']}; {res['heartbeats']} heartbeats, errors {res['errors']}"
    )
    print(
        "     t   blocks  glibc MB  members  sizes    epoch  timers"
        "  epoch refs/objects/values/(group, value) (>256)"
    )
    for s in res["samples"]:
        sizes = f"{s['group_size_min']:3d}-{s['group_size_max']:<3d}"
        census = f"{s['epoch_refs']}/{s['epoch_objects']}/{s['epoch_values']}/{s['epoch_group_values']}"
        print(
            f"{s['t']:6d} {s['blocks']:8d} {s['glibc_in_use'] / 2**20:9.2f} {s['members']:8d} {sizes}"
            f" {s['max_group_epoch']:7d} {s['timers']:7d}  {census}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
