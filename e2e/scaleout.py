"""Scale-out e2e support (docs/scale-out.md): a fleet of groupshift nodes in front of one Kafka
cluster, the fleet's state read from the nodes' logs, and a TCP forwarder that cuts a node off
the cluster.

A node is `groupshift serve --upstream BOOTSTRAP --set upstream.coordinator.storage=kafka` with
its own `node.id` (1001, 1002, ...: upstream broker ids are 0..n-1). Its fleet settings are
fast (3 s session, 300 ms heartbeats) so that a failover takes seconds.

`Forwarder` relays 127.0.0.1:`listen` -> 127.0.0.1:`target` for each broker of a cluster
started with `proxied_listener=True` (whose `PROXIED` listeners advertise the forwarders'
ports): a node bootstrapped from `cluster.proxied_bootstrap` reaches the cluster only through
them, and `cut()` closes them and every relayed connection, a network partition between that
node and the cluster while its clients still reach it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from e2e.harness import GatewayProcess
from e2e.migration import FAST_GROUP_SETTINGS, server_time, wait_until
from e2e.upstream import FAST_UPSTREAM_SETTINGS
from gateway.groups.routing import partition_for

SESSION_MS = 3000
HEARTBEAT_MS = 300


def fleet_settings(
    node_id: int, shards: int, *, topic: str, fleet: str, extra: Sequence[str] = ()
) -> list[str]:
    return [
        *FAST_GROUP_SETTINGS,
        *FAST_UPSTREAM_SETTINGS,
        f"node.id={node_id}",
        "upstream.coordinator.storage=kafka",
        f"upstream.coordinator.topic={topic}",
        f"upstream.coordinator.fleet.group.id={fleet}",
        f"offsets.topic.num.partitions={shards}",
        f"upstream.coordinator.fleet.session.timeout.ms={SESSION_MS}",
        f"upstream.coordinator.fleet.heartbeat.interval.ms={HEARTBEAT_MS}",
        "upstream.request.timeout.ms=5000",
        *extra,
    ]


def start_node(
    base: Path,
    name: str,
    bootstrap: str,
    node_id: int,
    shards: int,
    *,
    topic: str,
    fleet: str,
    port: int = 0,
    settings: Sequence[str] = (),
) -> GatewayProcess:
    """`settings`: more settings after the fleet's own."""
    extra: tuple[str, ...] = ("--upstream", bootstrap)
    if port:
        extra += ("--listen", f"127.0.0.1:{port}")
    return GatewayProcess.start(
        base / name,
        sets=fleet_settings(node_id, shards, topic=topic, fleet=fleet, extra=settings),
        log_path=base / f"{name}-gateway.log",
        extra_args=extra,
    )


def latest_view(gw: GatewayProcess, since: float = 0.0) -> dict[str, Any] | None:
    views = [e for e in gw.events("scaleout.fleet_view") if server_time(e) >= since]
    return views[-1] if views else None


def loaded_after(gw: GatewayProcess, since: float) -> set[int]:
    """Shards this node loaded (and did not drop since) after `since`."""
    out: set[int] = set()
    for e in gw.events():
        if server_time(e) < since:
            continue
        if e.get("event") == "scaleout.shard_loaded":
            out.add(int(e["shard"]))
        elif e.get("event") == "scaleout.shard_dropped":
            out.discard(int(e["shard"]))
    return out


def fleet_settled(
    nodes: Sequence[GatewayProcess], node_ids: Sequence[int], shards: int
) -> dict[int, set[int]] | None:
    """node id -> shards, once every node has the same view naming exactly `node_ids` and has
    loaded all of its shards; None before."""
    views = [latest_view(gw) for gw in nodes]
    if any(v is None for v in views):
        return None
    gens = {int(v["generation"]) for v in views if v is not None}
    if len(gens) != 1 or any(sorted(v["nodes"]) != sorted(node_ids) for v in views if v is not None):
        return None
    out: dict[int, set[int]] = {}
    for gw, nid, v in zip(nodes, node_ids, views, strict=True):
        assert v is not None
        mine = set(v["mine"])
        if not mine <= loaded_after(gw, 0.0):
            return None
        out[nid] = mine
    if sorted(s for m in out.values() for s in m) != list(range(shards)):
        return None
    return out


def wait_fleet(
    nodes: Sequence[GatewayProcess], node_ids: Sequence[int], shards: int, timeout: float = 60.0
) -> dict[int, set[int]]:
    result: dict[int, set[int]] = wait_until(
        lambda: fleet_settled(nodes, node_ids, shards),
        timeout,
        lambda: "the fleet to settle: " + "; ".join(f"{gw.log_path.name}: {latest_view(gw)}" for gw in nodes),
        interval=0.2,
    )
    return result


def group_on(shards_of_node: Iterable[int], prefix: str, shards: int) -> str:
    """A group id whose shard is one of `shards_of_node`."""
    wanted = set(shards_of_node)
    for i in range(10_000):
        g = f"{prefix}-{i}"
        if partition_for(g, shards) in wanted:
            return g
    raise AssertionError(f"no group id for shards {wanted}")


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
        return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
    finally:
        c.close()


def create_topic(bootstrap: str, topic: str, partitions: int, replicas: int = 3) -> None:
    """Create a topic on the cluster and wait until its metadata shows every partition."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replicas)])[topic].result(30)

    def ready() -> bool:
        t = admin.list_topics(topic, timeout=10).topics.get(topic)
        return t is not None and t.error is None and len(t.partitions) == partitions

    wait_until(ready, 30, f"topic {topic} to have {partitions} partitions", interval=0.2)


# -- the network cut ---------------------------------------------------------------------------


class Forwarder:
    """TCP relays 127.0.0.1:listen -> 127.0.0.1:target on a thread of their own; `cut()` stops
    them and drops every relayed connection."""

    def __init__(self, pairs: Iterable[tuple[int, int]]) -> None:
        self.pairs = list(pairs)
        self.loop = asyncio.new_event_loop()
        self._servers: list[asyncio.AbstractServer] = []
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="forwarder")
        self._thread.start()
        self._call(self._open())

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    async def _open(self) -> None:
        for listen, target in self.pairs:
            self._servers.append(
                await asyncio.start_server(
                    lambda r, w, t=target: self._relay(r, w, t), "127.0.0.1", listen, reuse_address=True
                )
            )

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: int) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        self._writers.difference_update((writer, up_writer))

    async def _cut(self) -> None:
        for s in self._servers:
            s.close()
        self._servers.clear()
        for w in list(self._writers):
            w.transport.abort()
        self._writers.clear()

    def cut(self) -> None:
        self._call(self._cut())

    def heal(self) -> None:
        self._call(self._open())

    async def _close(self) -> None:
        await self._cut()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def close(self) -> None:
        self._call(self._close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


def wait_seconds_until(pred: Any, timeout: float) -> float:
    """Seconds until `pred()` holds (polling every 50 ms); raises after `timeout`."""
    start = time.monotonic()
    wait_until(pred, timeout, "condition", interval=0.05)
    return time.monotonic() - start
