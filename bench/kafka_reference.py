"""The reference Kafka 4.x node of the benchmarks that put groupshift beside Apache Kafka in one
run (`bench.versus_kafka`, `bench.secure_listeners`): its group settings (bench.heartbeats'
SETTINGS in Kafka's names), its JVM flags (those of Kafka's own start scripts), pinning a server's
threads to a core, and waiting until its group coordinators answer."""

from __future__ import annotations

import asyncio
import subprocess
import time

from bench import heartbeats as hb

# bench.heartbeats.SETTINGS in Kafka's names (groupshift takes the same names), minus what Kafka
# does not have; KAFKA_EXTRA: what a single Kafka node needs, and assignments computed in the
# heartbeat (`group.consumer.assignment.interval.ms=0`) as groupshift does.
KAFKA_HB_SETTINGS = {
    k: v for k, v in (s.split("=", 1) for s in hb.SETTINGS) if not k.startswith("coordinator.")
}
KAFKA_EXTRA = {
    # Kafka 4.4's default list; `streams` serves bench.heartbeats' StreamsGroupHeartbeat kind.
    "group.coordinator.rebalance.protocols": "classic,consumer,streams",
    "group.consumer.assignment.interval.ms": "0",
    # Streams groups: sessions as long as the consumer groups' (Kafka checks the session timeout
    # against this maximum at start-up), the first assignment at once and every later one in the
    # heartbeat, as groupshift computes them.
    "group.streams.max.session.timeout.ms": "3600000",
    "group.streams.initial.rebalance.delay.ms": "0",
    "group.streams.assignment.interval.ms": "0",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
}
# The JVM flags Kafka's own start scripts use (kafka-server-start.sh, kafka-run-class.sh), not
# harness.kafka_dist's fast-start defaults (C1 only, serial GC), so that Kafka runs as deployed.
KAFKA_SERVER_JVM_OPTS = (
    "-Xmx1G -Xms1G -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 "
    "-XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true"
)


def pin_all_threads(pid: int, cpus: str) -> None:
    """Every thread of `pid` (a JVM has dozens) onto `cpus`; new threads inherit it."""
    subprocess.run(["taskset", "-a", "-cp", cpus, str(pid)], check=True, capture_output=True)


async def _coordinators_ready(
    port: int, group_ids: list[str], connect: hb.Connector = hb.connect_plain, timeout: float = 60.0
) -> None:
    """FindCoordinator for every group (a fresh Kafka creates `__consumer_offsets` then) and
    DescribeGroups until no group's coordinator is loading or missing."""
    [c] = await hb._clients(port, 1, connect)
    deadline = time.monotonic() + timeout
    try:
        while True:
            found = await c.call(hb.request(10, 4, key_type=0, coordinator_keys=group_ids))
            described = await c.call(hb.request(15, 5, groups=group_ids, include_authorized_operations=False))
            codes = [x.error_code for x in found.coordinators] + [g.error_code for g in described.groups]
            if all(code == 0 for code in codes):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"coordinators not ready after {timeout}s: {codes}")
            await asyncio.sleep(0.5)
    finally:
        assert c.transport is not None
        c.transport.close()


def coordinators_ready(port: int, group_ids: list[str], connect: hb.Connector = hb.connect_plain) -> None:
    asyncio.run(_coordinators_ready(port, group_ids, connect))
