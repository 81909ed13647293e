"""The gateway's request path for steady heartbeats, in process: CPU per request.

python -m bench.heartbeat_path [--kind cgh|heartbeat] [--groups 10] [--members 100] [--seconds 4]
[--batch 8] [--json]

One `KafkaConnection` (over an in-memory transport), the `Dispatcher` and the group layer of a
real `GatewayServer` (`coordinator.fsync.policy=none`): members join over the wire, then their
steady heartbeats (ConsumerGroupHeartbeat v1 with the fields Kafka's clients leave null once
reconciled, or classic Heartbeat v4) are fed `--batch` frames per `data_received`, as a
pipelining client's read brings them, for `--seconds`. What is measured is what
`bench.gateway --only heartbeats` measures minus the sockets and the event loop: framing,
dispatch, decoding, the group layer, the engine, encoding and the coalesced write, in process
CPU time, without a load generator competing for the machine. On a shared machine that makes it
the figure to compare two builds or two commits with (docs/benchmarks.md); `bench.gateway`
remains the end-to-end one.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import logging
import struct
import sys
import tempfile
import time
from typing import Any

import structlog
from kio.index import load_request_schema, load_response_schema

from gateway.config import build_config
from gateway.connection import KafkaConnection
from gateway.dispatch import Dispatcher
from gateway.groups.service import install_group_layer
from gateway.metrics import MetricsRegistry
from gateway.server import GatewayServer
from protocol.codec import decode_response, encode_request
from protocol.entity_builder import build

# Response header v1 (correlation id, no tags) then throttle time: the error code's offset in a
# ConsumerGroupHeartbeat v1 or Heartbeat v4 response frame.
_ERROR_AT = 4 + 4 + 1 + 4


class _Transport:
    """Keeps the last write (a batch's answers) and counts writes."""

    def __init__(self) -> None:
        self.last = b""
        self.writes = 0

    def write(self, data: bytes) -> None:
        self.last = data
        self.writes += 1

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 9092)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Client:
    """Sends one frame and waits for its answer (the joins, which may wait on the log)."""

    def __init__(self, conn: KafkaConnection, transport: _Transport) -> None:
        self.conn = conn
        self.transport = transport

    async def ask(self, request: Any, response_type: Any) -> Any:
        before = self.transport.writes
        self.conn.data_received(encode_request(request, correlation_id=1, client_id="bench"))
        for _ in range(10_000):
            if self.transport.writes > before:
                return decode_response(response_type, self.transport.last[4:])[1]
            await asyncio.sleep(0.001)
        raise RuntimeError("no answer")


def _cgh(group: str, member: str, epoch: int, joining: bool) -> Any:
    return build(
        load_request_schema(68, 1),
        {
            "group_id": group,
            "member_id": member,
            "member_epoch": epoch,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": datetime.timedelta(milliseconds=30_000 if joining else -1),
            "subscribed_topic_names": ["bench-no-such-topic"] if joining else None,
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": [] if joining else None,
        },
    )


async def _steady_cgh(client: _Client, groups: int, members: int) -> list[bytes]:
    rtype = load_response_schema(68, 1)
    epochs: dict[tuple[int, int], int] = {}
    for g in range(groups):
        for m in range(members):
            r = await client.ask(_cgh(f"group-{g}", f"member-{g}-{m}", 0, True), rtype)
            epochs[g, m] = r.member_epoch
    frames = []
    for (g, m), epoch in epochs.items():
        for _ in range(3):  # until reconciled to the group's last epoch
            r = await client.ask(_cgh(f"group-{g}", f"member-{g}-{m}", epoch, False), rtype)
            if r.error_code:
                raise RuntimeError(f"heartbeat answered {r.error_code}")
            epoch = r.member_epoch
        frames.append(encode_request(_cgh(f"group-{g}", f"member-{g}-{m}", epoch, False), correlation_id=2))
    return frames


async def _steady_classic(client: _Client, groups: int) -> list[bytes]:
    frames = []
    for g in range(groups):
        join = {
            "group_id": f"group-{g}",
            "session_timeout": datetime.timedelta(milliseconds=30_000),
            "rebalance_timeout": datetime.timedelta(milliseconds=30_000),
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        }
        j = await client.ask(build(load_request_schema(11, 3), join), load_response_schema(11, 3))
        sync = {
            "group_id": f"group-{g}",
            "generation_id": j.generation_id,
            "member_id": j.member_id,
            "assignments": [{"member_id": j.member_id, "assignment": b""}],
        }
        await client.ask(build(load_request_schema(14, 3), sync), load_response_schema(14, 3))
        beat = {
            "group_id": f"group-{g}",
            "generation_id": j.generation_id,
            "member_id": j.member_id,
            "group_instance_id": None,
        }
        frames.append(
            encode_request(build(load_request_schema(12, 4), beat), correlation_id=3, client_id="bench")
        )
    return frames


async def measure(kind: str, groups: int, members: int, seconds: float, batch: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="groupshift-bench-path-") as d:
        cfg = build_config(
            {
                "log.dirs": d,
                "coordinator.fsync.policy": "none",
                "group.initial.rebalance.delay.ms": "0",
                "group.consumer.heartbeat.interval.ms": "5000",
            }
        )
        server = GatewayServer(cfg, extensions=[install_group_layer])
        try:
            loop = asyncio.get_running_loop()
            for hook in server.on_start:
                hook(loop)
            dispatcher = Dispatcher(
                server.registry, MetricsRegistry(), unsupported_api_versions=lambda c: b""
            )
            conn = KafkaConnection(connection_id=1, on_frame=dispatcher.on_frame, max_frame_bytes=1 << 20)
            transport = _Transport()
            conn.connection_made(transport)  # type: ignore[arg-type]
            client = _Client(conn, transport)
            if kind == "cgh":
                frames = await _steady_cgh(client, groups, members)
            else:
                frames = await _steady_classic(client, groups)
            n = len(frames)
            batches = [b"".join(frames[(i + k) % n] for k in range(batch)) for i in range(0, n, batch)]
            done = 0
            cpu_started = time.process_time()
            started = time.perf_counter()
            while time.perf_counter() - started < seconds:
                for data in batches:
                    conn.data_received(data)
                done += len(batches) * batch
            cpu = time.process_time() - cpu_started
            (error,) = struct.unpack_from(">h", transport.last, _ERROR_AT)
            if error:
                raise RuntimeError(f"steady heartbeat answered {error}")
            return {
                "kind": "ConsumerGroupHeartbeat" if kind == "cgh" else "Heartbeat",
                "groups": groups,
                "members": len(frames),
                "batch": batch,
                "requests": done,
                "cpu_s": round(cpu, 3),
                "requests_per_cpu_s": round(done / cpu),
                "us_per_request": round(cpu * 1e6 / done, 2),
            }
        finally:
            for stop in server.on_stop:
                stop()
            await server.plane.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kind", choices=["cgh", "heartbeat", "both"], default="both")
    parser.add_argument("--groups", type=int, default=10)
    parser.add_argument("--members", type=int, default=100, help="per group (ConsumerGroupHeartbeat)")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--batch", type=int, default=8, help="frames per read")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    # the joins log (member.joined, ...) to stdout; a steady heartbeat logs nothing
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    kinds = ["cgh", "heartbeat"] if args.kind == "both" else [args.kind]
    results = [asyncio.run(measure(k, args.groups, args.members, args.seconds, args.batch)) for k in kinds]
    if args.json:
        print(json.dumps({"benchmark": "heartbeat_path", "results": results}))
    else:
        for r in results:
            print(
                f"{r['kind']}: {r['requests_per_cpu_s']:,} requests per CPU-second ({r['us_per_request']} µs)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
