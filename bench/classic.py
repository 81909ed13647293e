"""Classic group throughput of the sans-IO engine (issue 3).

A 1,000-member classic consumer group: (1) a full rebalance, i.e. every member sends JoinGroup
again, the join phase completes, the leader sends SyncGroup with 1,000 assignments, the record
is acknowledged as durable and every member's SyncGroup is answered; (2) steady Heartbeat
requests per second with nothing changing.

    python -m bench.classic [--json] [--members N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import struct
import time
from typing import Any

from engine.classic.api import HeartbeatRequest, JoinGroupRequest, SyncGroupRequest
from engine.classic.member import Protocol
from engine.config import CoordinatorConfig
from engine.context import RequestContext
from engine.errors import Errors
from engine.ids import SeededIds
from engine.outcome import Outcome, Pending
from engine.shard import Shard

SUBSCRIPTION = struct.pack(">hih", 0, 1, 6) + b"events" + struct.pack(">i", -1)
PROTOCOLS = (Protocol("range", SUBSCRIPTION),)


class Driver:
    def __init__(self) -> None:
        cfg = CoordinatorConfig.from_kafka({"group.initial.rebalance.delay.ms": 0})
        self.shard = Shard(cfg, SeededIds(1))
        self.now = 1000
        self.done: dict[Pending, Any] = {}
        self.ctx = RequestContext("bench", "/127.0.0.1", 5)

    def run(self, out: Outcome[Any]) -> Any:
        for h, r in out.completions:
            self.done[h] = r
        if out.on_append is not None:
            self.run(out.on_append(Errors.NONE))
        return out.response

    def join(self, member_id: str) -> Any:
        req = JoinGroupRequest("bench", 30000, 60000, member_id, "consumer", PROTOCOLS)
        return self.run(self.shard.join_group(req, self.ctx, self.now))


def build(members: int) -> tuple[Driver, list[str], int]:
    d = Driver()
    handles = [d.join(d.join("").member_id) for _ in range(members)]  # MEMBER_ID_REQUIRED round trip
    d.now += 1
    for out in d.shard.expire(d.now):
        d.run(out)
    ids = [d.done[h].member_id for h in handles]
    gen = d.done[handles[0]].generation_id
    leader = d.done[handles[0]].leader
    d.run(
        d.shard.sync_group(
            SyncGroupRequest("bench", gen, leader, None, "consumer", "range", [(m, b"a" * 40) for m in ids]),
            d.ctx,
            d.now,
        )
    )
    for m in ids:
        if m != leader:
            d.run(
                d.shard.sync_group(SyncGroupRequest("bench", gen, m, None, "consumer", "range"), d.ctx, d.now)
            )
    return d, ids, gen


def full_rebalance(d: Driver, ids: list[str], gen: int) -> tuple[float, int]:
    start = time.perf_counter()
    handles = [d.join(m) for m in ids]  # the leader's join starts the rebalance; the last completes it
    results = [d.done[h] if isinstance(h, Pending) else h for h in handles]
    new_gen = results[0].generation_id
    leader = results[0].leader
    assert all(r.generation_id == new_gen for r in results)
    syncs = [
        d.run(
            d.shard.sync_group(SyncGroupRequest("bench", new_gen, m, None, "consumer", "range"), d.ctx, d.now)
        )
        for m in ids
        if m != leader
    ]
    d.run(
        d.shard.sync_group(
            SyncGroupRequest(
                "bench", new_gen, leader, None, "consumer", "range", [(m, b"b" * 40) for m in ids]
            ),
            d.ctx,
            d.now,
        )
    )
    assert all(d.done[s].error_code == 0 for s in syncs)
    return time.perf_counter() - start, new_gen


def heartbeats(d: Driver, ids: list[str], gen: int, seconds: float) -> float:
    reqs = [HeartbeatRequest("bench", gen, m) for m in ids]
    hb = d.shard.heartbeat
    ctx = d.ctx
    count = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        d.now += 1
        for r in reqs:
            hb(r, ctx, d.now)
        count += len(reqs)
    return count / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    d, ids, gen = build(args.members)
    times = []
    for _ in range(args.rounds):
        t, gen = full_rebalance(d, ids, gen)
        times.append(t)
    rate = heartbeats(d, ids, gen, 2.0)
    res = {
        "members": args.members,
        "full_rebalance_ms_median": round(statistics.median(times) * 1000, 1),
        "full_rebalance_ms_min": round(min(times) * 1000, 1),
        "heartbeats_per_s": round(rate),
    }
    if args.json:
        print(json.dumps(res))
    else:
        print(f"classic group of {args.members:,} members, in process, one core")
        print(
            f"  full rebalance (all rejoin, leader syncs {args.members:,} assignments, all synced): "
            f"{res['full_rebalance_ms_median']} ms median, "
            f"{res['full_rebalance_ms_min']} ms min over {args.rounds}"
        )
        print(f"  steady Heartbeat: {res['heartbeats_per_s']:,} requests/s")


if __name__ == "__main__":
    main()
