"""Steady-state ConsumerGroupHeartbeat throughput of the sans-IO engine, in process.

One consumer group of 10,000 stable members on one topic; every member heartbeats in turn with
nothing changed (epoch = group epoch, null fields), which is what a healthy fleet sends all day.
The group is built from records (what a restart would load), then every member heartbeats once
so session timers exist, then the timed loop runs. Goal (issue 2): >= 150,000 heartbeats/s.

    python -m bench.engine_heartbeat [--json] [--members N] [--seconds S]
"""

from __future__ import annotations

import argparse
import json
import time

from engine.config import CoordinatorConfig
from engine.consumer import record_builders as rb
from engine.consumer.api import ConsumerGroupHeartbeatRequest
from engine.consumer.member import ConsumerGroupMember
from engine.context import RequestContext
from engine.ids import SeededIds
from engine.metadata import MetadataImage, TopicImage, topic_id_for
from engine.shard import Shard
from records.consumer_group import TopicMetadata

GOAL = 150_000


def build(members: int, partitions_per_member: int = 1) -> tuple[Shard, list[ConsumerGroupHeartbeatRequest]]:
    topic = "events"
    tid = topic_id_for(topic)
    n_parts = members * partitions_per_member
    shard = Shard(CoordinatorConfig(), SeededIds(1), MetadataImage([TopicImage(tid, topic, n_parts)]))
    gid, epoch = "bench-group", 5
    recs = []
    ms = []
    for i in range(members):
        parts = tuple(range(i * partitions_per_member, (i + 1) * partitions_per_member))
        m = ConsumerGroupMember(
            member_id=f"member-{i:05d}",
            client_id="bench",
            client_host="/127.0.0.1",
            subscribed_topic_names=(topic,),
            rebalance_timeout_ms=300000,
            member_epoch=epoch,
            previous_member_epoch=epoch - 1,
            assigned_partitions={tid: parts},
        )
        ms.append(m)
        recs.append(rb.member_metadata(gid, m))
    recs.append(rb.subscription_metadata(gid, [TopicMetadata(tid, topic, n_parts)]))
    recs.append(rb.group_epoch(gid, epoch))
    recs.extend(rb.target_member(gid, m.member_id, m.assigned_partitions) for m in ms)
    recs.append(rb.target_epoch(gid, epoch))
    recs.extend(rb.current_assignment(gid, m) for m in ms)
    shard.apply(recs)
    reqs = [
        ConsumerGroupHeartbeatRequest(group_id=gid, member_id=m.member_id, member_epoch=epoch) for m in ms
    ]
    return shard, reqs


def run(members: int, seconds: float) -> dict[str, float]:
    shard, reqs = build(members)
    ctx = RequestContext("bench", "/127.0.0.1", 1)
    now = 1_000
    for r in reqs:  # first round creates the session timers
        out = shard.consumer_group_heartbeat(r, ctx, now)
        assert out.response.error_code == 0 and not out.records  # type: ignore[union-attr]
    hb = shard.consumer_group_heartbeat
    count = 0
    cpu_start = time.process_time()
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        now += 1
        for r in reqs:
            hb(r, ctx, now)
        count += len(reqs)
        if time.perf_counter() >= deadline:
            break
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    rate = count / elapsed
    return {
        "members": members,
        "heartbeats": count,
        "seconds": round(elapsed, 3),
        "heartbeats_per_s": round(rate),
        "us_per_heartbeat": round(1e6 / rate, 2),
        # per CPU-second: what a loaded machine (other processes on the core) disturbs least
        "cpu_seconds": round(cpu, 3),
        "heartbeats_per_cpu_s": round(count / cpu),
        "cpu_us_per_heartbeat": round(1e6 * cpu / count, 2),
        "goal_per_s": GOAL,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--members", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    res = run(args.members, args.seconds)
    if args.json:
        print(json.dumps(res))
    else:
        verdict = "met" if res["heartbeats_per_s"] >= GOAL else "NOT met"
        print(f"steady ConsumerGroupHeartbeat, {res['members']:,} members, one core, in process")
        print(
            f"  {res['heartbeats_per_s']:,.0f} heartbeats/s ({res['us_per_heartbeat']} us each)"
            f" over {res['heartbeats']:,} heartbeats; goal {GOAL:,}/s: {verdict}"
        )
        cpu_rate, cpu_us = res["heartbeats_per_cpu_s"], res["cpu_us_per_heartbeat"]
        print(f"  {cpu_rate:,.0f} per CPU-second ({cpu_us} CPU-us each)")


if __name__ == "__main__":
    main()
