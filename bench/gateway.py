"""Gateway benchmark: request round trips and data-plane throughput over real TCP.

    python -m bench.gateway [--json] [--seconds S] [--connections N]

Starts `groupshift serve` as a subprocess (its own core on a multi-core machine) and measures:
  * request round trips (ApiVersions, Metadata, FindCoordinator): N connections, one request in
    flight each,
    pre-encoded frames sent by a uvloop client; requests/s and p50/p99 latency;
  * produce throughput: librdkafka (confluent-kafka) producing fixed-size records, acks=all;
  * fetch throughput: librdkafka consuming them back from the beginning.

Scenarios are entries of `SCENARIOS`; a round-trip scenario is just a function returning the
request to send, so adding classic Heartbeat or ConsumerGroupHeartbeat once the group layer
registers them is one `RoundTrip(...)` line (see `heartbeat_request`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.harness import GatewayProcess
from gateway.codec import encode_request
from gateway.entity_builder import build

try:
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None  # type: ignore[assignment]

from kio.index import load_request_schema

TOPIC = "bench"
PARTITIONS = 6


def request(api_key: int, version: int, **values: Any) -> Any:
    return build(load_request_schema(api_key, version), values)


def api_versions_request() -> Any:
    return request(18, 3, client_software_name="bench", client_software_version="1")


def metadata_request() -> Any:
    return request(3, 12, topics=[{"name": TOPIC, "topic_id": None}],
                   allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def find_coordinator_request() -> Any:
    """A small group-path request: the closest stand-in for a heartbeat until groups exist."""
    return request(10, 3, key="bench-group", key_type=0)


def heartbeat_request() -> Any:
    """Classic Heartbeat v4: add `RoundTrip("Heartbeat", heartbeat_request)` once registered."""
    return request(12, 4, group_id="bench", generation_id=1, member_id="m",
                   group_instance_id=None)


# -- round trips -----------------------------------------------------------------------------


class _RoundTripConnection(asyncio.Protocol):
    """Sends one frame, waits for its answer, records the latency, sends again."""

    def __init__(self, frame: bytes, latencies: list[float], running: Callable[[], bool]) -> None:
        self.frame = frame
        self.latencies = latencies
        self.running = running
        self.buf = bytearray()
        self.sent_at = 0.0
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._send()

    def _send(self) -> None:
        assert self.transport is not None
        self.sent_at = time.perf_counter()
        self.transport.write(self.frame)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= 4:
            (size,) = struct.unpack_from(">i", self.buf)
            if len(self.buf) < 4 + size:
                return
            del self.buf[: 4 + size]
            self.latencies.append(time.perf_counter() - self.sent_at)
            if self.running():
                self._send()
            elif not self.done.done():
                self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"server closed the connection: {exc}"))


@dataclass
class RoundTrip:
    name: str
    make_request: Callable[[], Any]


async def _round_trips(port: int, frame: bytes, connections: int, seconds: float) -> list[float]:
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    stop_at = loop.time() + seconds
    protocols = []
    for _ in range(connections):
        _, proto = await loop.create_connection(
            lambda: _RoundTripConnection(frame, latencies, lambda: loop.time() < stop_at),
            "127.0.0.1", port,
        )
        protocols.append(proto)
    await asyncio.gather(*(p.done for p in protocols))
    for p in protocols:
        if p.transport is not None:
            p.transport.close()
    return latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_round_trip(gw: GatewayProcess, rt: RoundTrip, connections: int, seconds: float) -> dict:
    frame = encode_request(rt.make_request(), correlation_id=1, client_id="bench")
    runner = asyncio.Runner(loop_factory=uvloop.new_event_loop if uvloop else None)
    with runner:
        runner.run(_round_trips(gw.port, frame, connections, 0.3))  # warm-up
        latencies = runner.run(_round_trips(gw.port, frame, connections, seconds))
    return {
        "scenario": f"{rt.name} round trip",
        "connections": connections,
        "requests_per_s": round(len(latencies) / seconds),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 3),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
    }


# -- data plane throughput -------------------------------------------------------------------


def run_produce(gw: GatewayProcess, records: int, size: int) -> dict:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(10)
    producer = Producer({
        "bootstrap.servers": gw.bootstrap, "acks": "all", "linger.ms": 5,
        "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000,
    })
    value = b"x" * size
    failed: list[Any] = []
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value=value, partition=i % PARTITIONS,
                                 on_delivery=lambda err, _m: err and failed.append(err))
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    elapsed = time.perf_counter() - started
    if failed:
        raise RuntimeError(f"{len(failed)} deliveries failed, e.g. {failed[0]}")
    return {
        "scenario": "produce (librdkafka, acks=all)",
        "records": records,
        "record_bytes": size,
        "records_per_s": round(records / elapsed),
        "mb_per_s": round(records * size / elapsed / 1e6, 1),
    }


def run_fetch(gw: GatewayProcess, records: int, size: int) -> dict:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": gw.bootstrap, "group.id": "bench-assign-only",
        "enable.auto.commit": False, "fetch.max.bytes": 50 << 20,
        "max.partition.fetch.bytes": 4 << 20,
    })
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got = 0
    started = time.perf_counter()
    deadline = started + 120
    while got < records and time.perf_counter() < deadline:
        got += sum(1 for m in consumer.consume(num_messages=10_000, timeout=1) if not m.error())
    elapsed = time.perf_counter() - started
    consumer.close()
    return {
        "scenario": "fetch (librdkafka)",
        "records": got,
        "record_bytes": size,
        "records_per_s": round(got / elapsed),
        "mb_per_s": round(got * size / elapsed / 1e6, 1),
    }


SCENARIOS = [
    RoundTrip("ApiVersions", api_versions_request),
    RoundTrip("Metadata", metadata_request),
    RoundTrip("FindCoordinator", find_coordinator_request),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gateway", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--seconds", type=float, default=3.0, help="per round-trip scenario")
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-bytes", type=int, default=100)
    args = parser.parse_args(argv)

    results = []
    with tempfile.TemporaryDirectory(prefix="groupshift-bench-") as tmp:
        gw = GatewayProcess.start(Path(tmp) / "data", sets=["num.partitions=6"])
        try:
            results.append(run_produce(gw, args.records, args.record_bytes))
            results.append(run_fetch(gw, args.records, args.record_bytes))
            for rt in SCENARIOS:
                results.append(run_round_trip(gw, rt, 1, args.seconds))
                results.append(run_round_trip(gw, rt, args.connections, args.seconds))
        finally:
            gw.stop()
    if args.json:
        json.dump({"benchmark": "gateway", "results": results}, sys.stdout, indent=1)
        print()
    else:
        for r in results:
            fields = ", ".join(f"{k}={v}" for k, v in r.items() if k != "scenario")
            print(f"{r['scenario']:<34} {fields}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
