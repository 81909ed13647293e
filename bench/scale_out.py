"""Scale-out benchmark (docs/scale-out.md): steady heartbeats with 1, 2 and 3 groupshift nodes
sharing coordinator shards kept on a Kafka cluster, and the failover time after a SIGKILL.

    python -m bench.scale_out [--json] [--kafka 3.9] [--brokers 1] [--members 3000] [--groups 30]
                              [--seconds 5] [--session-ms 10000] [--nodes 1,2,3]

* Heartbeats/s: the same `--groups` KIP-848 groups (`--members` members in all) are spread over
  the shards (`--shards`, equally many groups per shard), so each node serves the groups of the
  shards it owns; one load generator (this process, bench.heartbeats' pipelined driver) sends
  every group's steady ConsumerGroupHeartbeats to the node that owns it, all nodes at once.
  Each node is pinned to one core (`os.sched_setaffinity` on all its threads: node i on core
  i mod cores). Also reported: requests per second of gateway CPU, which does not depend on how
  many cores the machine has.
* Failover: with the largest fleet, one node is SIGKILLed; the time until every group it
  coordinated is served again (FindCoordinator at a survivor names a live owner, and OffsetFetch
  there answers without error), next to the fleet session timeout it is bounded by.

On a machine with fewer cores than nodes + 1 (the load generator needs one too) the nodes share
cores and the figures show the sharing, not the design: see docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.heartbeats import (
    CGH_TOPIC,
    CLIENT_ID,
    _call_all,
    _cgh,
    _check,
    _clients,
    _drive,
    _join_consumer_members,
    cpu_seconds,
    percentile,
)
from e2e.harness import GatewayProcess
from e2e.scaleout import create_topic, wait_fleet
from gateway.groups.routing import partition_for
from protocol.client import WireClient, make_request
from protocol.codec import encode_request

try:
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None  # type: ignore[assignment]

NODE_BASE = 1001
SETTINGS = (
    "coordinator.fsync.policy=none",
    "group.consumer.max.session.timeout.ms=3600000",
    "group.consumer.session.timeout.ms=1800000",
    "group.consumer.heartbeat.interval.ms=15000",
    "group.initial.rebalance.delay.ms=0",
    "group.max.session.timeout.ms=3600000",
    "upstream.metadata.max.age.ms=1000",
    "upstream.request.timeout.ms=10000",
    "upstream.coordinator.storage=kafka",
)


def pin(pid: int, cores: set[int]) -> bool:
    """Pin every thread of `pid` to `cores`; False where affinity cannot be set."""
    if not hasattr(os, "sched_setaffinity"):
        return False
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(tid), cores)
    except OSError:
        return False
    return True


def group_names(groups: int, shards: int) -> list[str]:
    """`groups` group ids, equally many per shard."""
    per = {s: 0 for s in range(shards)}
    out: list[str] = []
    i = 0
    while len(out) < groups:
        g = f"bench-so-{i}"
        i += 1
        s = partition_for(g, shards)
        if per[s] < -(-groups // shards):
            per[s] += 1
            out.append(g)
    return out


class Fleet:
    def __init__(self, base: Path, bootstrap: str, n: int, args: argparse.Namespace) -> None:
        tag = uuid.uuid4().hex[:8]
        self.ids = [NODE_BASE + i for i in range(n)]
        self.nodes: list[GatewayProcess] = []
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
        self.cores = cores
        self.pinned = True
        for i, nid in enumerate(self.ids):
            sets = [
                *SETTINGS,
                f"node.id={nid}",
                f"offsets.topic.num.partitions={args.shards}",
                f"upstream.coordinator.topic=bench-shards-{tag}",
                f"upstream.coordinator.fleet.group.id=bench-fleet-{tag}",
                f"upstream.coordinator.fleet.session.timeout.ms={args.session_ms}",
                f"upstream.coordinator.fleet.heartbeat.interval.ms={max(50, args.session_ms // 10)}",
            ]
            gw = GatewayProcess.start(
                base / f"n{n}-{i}",
                sets=sets,
                log_path=base / f"n{n}-{i}.log",
                extra_args=("--upstream", bootstrap),
            )
            self.nodes.append(gw)
        self.owners = wait_fleet(self.nodes, self.ids, args.shards, timeout=120)
        for i, gw in enumerate(self.nodes):
            self.pinned &= pin(gw.proc.pid, {cores[i % len(cores)]})

    def node_of(self, group: str, shards: int) -> GatewayProcess:
        s = partition_for(group, shards)
        for gw, nid in zip(self.nodes, self.ids, strict=True):
            if s in self.owners[nid]:
                return gw
        raise AssertionError(f"no owner for shard {s}")

    def stop(self) -> None:
        for gw in self.nodes:
            if gw.alive():
                gw.stop()


async def _setup(port: int, groups: list[str], per_group: int) -> list[Any]:
    """Join `per_group` KIP-848 members to each group at `port`; their steady heartbeats."""
    clients = await _clients(port, 8)
    ids = [
        (g, f"m-{gi:03d}-{i:05d}-{uuid.uuid4().hex[:8]}")
        for gi, g in enumerate(groups)
        for i in range(per_group)
    ]
    epochs = await _join_consumer_members(clients, ids)
    for _ in range(120):
        answers = await _call_all(clients, (_cgh(g, m, e) for (g, m), e in zip(ids, epochs, strict=True)))
        _check(answers, "CGH heartbeats")
        new = [a.member_epoch for a in answers]
        if new == epochs and all(a.assignment is None for a in answers):
            break
        epochs = new
        await asyncio.sleep(0.2)
    else:
        raise RuntimeError("members never settled")
    for c in clients:
        if c.transport is not None:
            c.transport.close()
    return [_cgh(g, m, e) for (g, m), e in zip(ids, epochs, strict=True)]


async def _load(
    targets: list[tuple[int, list[bytes]]], connections: int, depth: int, seconds: float
) -> tuple[list[float], int, float]:
    results = await asyncio.gather(
        *(_drive(port, frames, connections, depth, seconds) for port, frames in targets)
    )
    latencies = [x for r in results for x in r[0]]
    return latencies, sum(r[1] for r in results), max(r[2] for r in results)


def heartbeats(fleet: Fleet, groups: list[str], args: argparse.Namespace) -> dict[str, Any]:
    per_group = args.members // len(groups)
    by_node: dict[int, list[str]] = {}
    for g in groups:
        by_node.setdefault(fleet.node_of(g, args.shards).port, []).append(g)
    runner = asyncio.Runner(loop_factory=uvloop.new_event_loop if uvloop else None)
    with runner:
        targets = []
        for port, gs in by_node.items():
            steady = runner.run(_setup(port, gs, per_group))
            targets.append(
                (
                    port,
                    [encode_request(r, correlation_id=i, client_id=CLIENT_ID) for i, r in enumerate(steady)],
                )
            )
        for gw in fleet.nodes:  # threads started since (shard producers) follow the pin too
            pin(gw.proc.pid, {fleet.cores[fleet.nodes.index(gw) % len(fleet.cores)]})
        runner.run(_load(targets, args.connections, args.depth, 1.0))
        cpu0 = [cpu_seconds(gw.proc.pid) or 0.0 for gw in fleet.nodes]
        latencies, errors, elapsed = runner.run(_load(targets, args.connections, args.depth, args.seconds))
        cpu1 = [cpu_seconds(gw.proc.pid) or 0.0 for gw in fleet.nodes]
    if errors:
        raise RuntimeError(f"{errors} heartbeats answered with an error")
    cpu = sum(cpu1) - sum(cpu0)
    return {
        "scenario": f"{len(fleet.nodes)} node(s)",
        "nodes": len(fleet.nodes),
        "members": per_group * len(groups),
        "groups": len(groups),
        "groups_per_node": sorted(len(v) for v in by_node.values()),
        "heartbeats_per_s": round(len(latencies) / elapsed),
        "p50_ms": round(percentile(latencies, 0.5) * 1000, 3),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
        "gateway_cpu_share": round(cpu / elapsed, 2),
        "heartbeats_per_gateway_cpu_s": round(len(latencies) / cpu) if cpu else None,
        "pinned": fleet.pinned,
        "cores": len(fleet.cores),
    }


def _served(port: int, group: str) -> bool:
    """FindCoordinator at `port` names a live owner and OffsetFetch there answers NONE."""
    try:
        with WireClient(port, timeout=2.0) as c:
            fc = c.request(make_request(10, 3, key=group, key_type=0))
        if fc.error_code != 0:
            return False
        with WireClient(int(fc.port), timeout=2.0) as c:
            of = c.request(make_request(9, 7, group_id=group, topics=None, require_stable=False))
        return bool(of.error_code == 0)
    except (OSError, ConnectionError):
        return False


def failover(fleet: Fleet, groups: list[str], args: argparse.Namespace) -> dict[str, Any]:
    victim = fleet.nodes[-1]
    lost = [g for g in groups if fleet.node_of(g, args.shards) is victim]
    survivor = fleet.nodes[0]
    # Only the loads that follow the kill count (each survivor's log read from here on).
    marks = {id(gw): gw.log_path.stat().st_size for gw in fleet.nodes[:-1]}
    killed = time.monotonic()
    victim.kill()
    pending = set(lost)
    while pending and time.monotonic() - killed < 120:
        pending = {g for g in pending if not _served(survivor.port, g)}
        if pending:
            time.sleep(0.02)
    if pending:
        raise RuntimeError(f"{len(pending)} groups not served 120 s after the kill")
    seconds = time.monotonic() - killed
    loads = [e for gw in fleet.nodes[:-1] for e in gw.events("scaleout.shard_loaded", since=marks[id(gw)])]
    slowest = max(loads, key=lambda e: float(e["fence_and_read_seconds"]), default=None)
    return {
        "scenario": f"failover of 1 of {len(fleet.nodes)} nodes (SIGKILL)",
        "groups_moved": len(lost),
        "shards_loaded_after_kill": len(loads),
        "seconds_until_all_served": round(seconds, 2),
        "fleet_session_timeout_s": args.session_ms / 1000,
        "slowest_fence_and_read_s": None if slowest is None else slowest["fence_and_read_seconds"],
        "of_which_fence_s": None if slowest is None else slowest.get("fence_seconds"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_out", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--kafka", default="3.9", help="Kafka version spec (default 3.9)")
    parser.add_argument(
        "--brokers", type=int, default=1, help="upstream brokers (default 1: cores are scarce)"
    )
    parser.add_argument("--nodes", default="1,2,3", help="fleet sizes to measure")
    parser.add_argument("--shards", type=int, default=6)
    parser.add_argument("--members", type=int, default=3000)
    parser.add_argument("--groups", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=4, help="load connections per node")
    parser.add_argument("--depth", type=int, default=64, help="heartbeats in flight per connection")
    parser.add_argument("--session-ms", type=int, default=10000, help="fleet session timeout")
    parser.add_argument("--workdir", help="keep the cluster's and nodes' files and logs here")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.nodes.split(",")]
    groups = group_names(args.groups, args.shards)

    from harness.kafka_dist import KafkaCluster

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="groupshift-bench-scaleout-") as tmp:
        base = Path(args.workdir or tmp)
        cluster = KafkaCluster(
            args.kafka,
            brokers=args.brokers,
            configs={"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "500"},
            workdir=base / "kafka",
        ).start()
        try:
            create_topic(cluster.bootstrap, CGH_TOPIC, 100, replicas=1)
            for n in sizes:
                fleet = Fleet(base, cluster.bootstrap, n, args)
                try:
                    results.append(heartbeats(fleet, groups, args))
                    if n == max(sizes) and n > 1:
                        results.append(failover(fleet, groups, args))
                finally:
                    fleet.stop()
        finally:
            cluster.stop()
    if args.json:
        json.dump({"benchmark": "scale_out", "kafka": args.kafka, "results": results}, sys.stdout, indent=1)
        print()
    else:
        for r in results:
            fields = ", ".join(f"{k}={v}" for k, v in r.items() if k != "scenario")
            print(f"{r['scenario']:<36} {fields}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
