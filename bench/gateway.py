"""Gateway benchmark: request round trips, data-plane throughput and steady group heartbeats
over real TCP.

    python -m bench.gateway [--json] [--seconds S] [--connections N] [--only heartbeats]
    python -m bench.gateway --only heartbeats --members 10000 --groups 10 --profile DIR

Starts `groupshift serve` as a subprocess (its own core on a multi-core machine) and measures:
  * request round trips (ApiVersions, Metadata, FindCoordinator): N connections, one request in
    flight each,
    pre-encoded frames sent by a uvloop client; requests/s and p50/p99 latency;
  * produce throughput: librdkafka (confluent-kafka) producing fixed-size records, acks=all;
  * fetch throughput: librdkafka consuming them back from the beginning.

  * steady heartbeats (`bench.heartbeats`): ConsumerGroupHeartbeat and classic Heartbeat of
    `--members` members in `--groups` groups, driven from `--hb-connections` connections with
    `--hb-depth` pipelined requests each, against a second gateway with
    `coordinator.fsync.policy=none`; the gateway is pinned to core 0 and this process to core 1
    when the machine has two cores. Goal (issue 5): >= 35,000 heartbeats/s, p99 < 10 ms.
    `--profile DIR` samples the gateway with py-spy during each timed run (if py-spy is
    installed) and prints its top functions by own time; without py-spy it falls back to the
    gateway's cProfile hook (`GROUPSHIFT_PROFILE`, see gateway/server.py).

Scenarios are entries of `SCENARIOS`; a round-trip scenario is just a function returning the
request to send.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pstats
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.heartbeats import load_shape
from bench.throughput import fetch, produce
from e2e.harness import GatewayProcess
from protocol.codec import encode_request
from protocol.entity_builder import build

try:
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None  # type: ignore[assignment]

from kio.index import load_request_schema

TOPIC = "bench"


def request(api_key: int, version: int, **values: Any) -> Any:
    return build(load_request_schema(api_key, version), values)


def api_versions_request() -> Any:
    return request(18, 3, client_software_name="bench", client_software_version="1")


def metadata_request() -> Any:
    return request(
        3,
        12,
        topics=[{"name": TOPIC, "topic_id": None}],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def find_coordinator_request() -> Any:
    """A small group-path request: the closest stand-in for a heartbeat until groups exist."""
    return request(10, 3, key="bench-group", key_type=0)


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
            "127.0.0.1",
            port,
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


def run_round_trip(gw: GatewayProcess, rt: RoundTrip, connections: int, seconds: float) -> dict[str, Any]:
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


def run_produce(gw: GatewayProcess, records: int, size: int) -> dict[str, Any]:
    done = produce(gw.bootstrap, TOPIC, records, size)
    return {
        "scenario": "produce (librdkafka, acks=all)",
        "records": records,
        "record_bytes": size,
        **done.rates(),
    }


def run_fetch(gw: GatewayProcess, records: int, size: int) -> dict[str, Any]:
    done = fetch(gw.bootstrap, TOPIC, records, size)
    return {"scenario": "fetch (librdkafka)", "records": done.records, "record_bytes": size, **done.rates()}


# -- steady heartbeats -------------------------------------------------------------------------

HEARTBEAT_GOAL = 35_000
HEARTBEAT_P99_GOAL_MS = 10.0


def _pin(pid: int, cpu: int) -> bool:
    """Pin `pid` (0: this process) to one cpu, when the machine has it."""
    if not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2:
        return False
    os.sched_setaffinity(pid, {cpu})
    return True


def _collapsed_stacks(profile: Path) -> Iterator[tuple[str, int]]:
    """(stack, samples) of each line of a py-spy raw (collapsed) profile: "f1;f2;f3 count"."""
    for line in profile.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack:
            yield stack, int(count)


def _top_costs(profile: Path, limit: int = 15) -> list[dict[str, Any]]:
    """Top functions by own time from a py-spy raw (collapsed) profile or a cProfile dump."""
    if profile.suffix == ".prof":
        stats = pstats.Stats(str(profile))
        total = sum(v[2] for v in stats.stats.values()) or 1.0  # type: ignore[attr-defined]
        rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)  # type: ignore[attr-defined]
        return [
            {"function": f"{Path(f).name}:{line} {name}", "self_pct": round(100 * v[2] / total, 1)}
            for (f, line, name), v in rows[:limit]
        ]
    own: dict[str, int] = {}
    total = 0
    for stack, n in _collapsed_stacks(profile):
        total += n
        leaf = re.sub(r":\d+\)$", ")", stack.split(";")[-1])  # per function, not per line
        own[leaf] = own.get(leaf, 0) + n
    ranked = sorted(own.items(), key=lambda kv: kv[1], reverse=True)[:limit]
    return [{"function": f, "self_pct": round(100 * n / max(total, 1), 1)} for f, n in ranked]


def _inclusive_costs(profile: Path, needles: tuple[str, ...]) -> dict[str, float]:
    """Share of samples whose stack passes through each needle (py-spy raw profiles only)."""
    if profile.suffix == ".prof":
        return {}
    hits = dict.fromkeys(needles, 0)
    total = 0
    for stack, n in _collapsed_stacks(profile):
        total += n
        for needle in needles:
            if needle in stack:
                hits[needle] += n
    return {k: round(100 * v / max(total, 1), 1) for k, v in hits.items()}


PROFILE_STAGES = (
    "data_received (gateway/connection.py",
    "on_frame (gateway/dispatch.py",
    "decode (protocol/codec.py",
    "GroupApis.consumer_group_heartbeat (",
    "GroupApis.heartbeat (",
    "ShardRuntime.run (",
    "build (protocol/entity_builder.py",
    "encode_response (protocol/codec.py",
    "_flush (gateway/connection.py",
)


def run_heartbeats(args: argparse.Namespace) -> list[dict[str, Any]]:
    from bench import heartbeats as hb

    results: list[dict[str, Any]] = []
    profile_dir = Path(args.profile) if args.profile else None
    py_spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    with tempfile.TemporaryDirectory(prefix="groupshift-bench-hb-") as tmp:
        env_profile = None
        if profile_dir is not None and py_spy is None:
            profile_dir.mkdir(parents=True, exist_ok=True)
            env_profile = profile_dir / "gateway-cprofile.prof"
            os.environ["GROUPSHIFT_PROFILE"] = str(env_profile)
        try:
            gw = GatewayProcess.start(Path(tmp) / "data", sets=list(hb.SETTINGS))
        finally:
            os.environ.pop("GROUPSHIFT_PROFILE", None)
        pinned = _pin(gw.proc.pid, 0) and _pin(0, 1)
        try:
            for kind in ("ConsumerGroupHeartbeat", "Heartbeat"):
                started = time.perf_counter()
                steady = hb.setup(gw.port, kind, args.groups, args.members)
                setup_s = time.perf_counter() - started
                for connections, depth in args.hb_load:
                    spy = None
                    if profile_dir is not None and py_spy is not None:
                        profile_dir.mkdir(parents=True, exist_ok=True)
                        out = profile_dir / f"{kind}-{connections}x{depth}.txt"
                        spy = subprocess.Popen(
                            [
                                py_spy,
                                "record",
                                "-p",
                                str(gw.proc.pid),
                                "-r",
                                "200",
                                "-f",
                                "raw",
                                "-o",
                                str(out),
                                "-d",
                                str(int(args.hb_seconds + 2)),
                                "--nonblocking",
                            ],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                        )
                        time.sleep(0.5)
                    r = hb.run_load(
                        gw.port,
                        kind,
                        steady,
                        args.groups,
                        connections,
                        depth,
                        args.hb_seconds,
                        gateway_pid=gw.proc.pid,
                    ).as_dict()
                    r["setup_s"] = round(setup_s, 1)
                    r["gateway_pinned_to_one_core"] = pinned
                    r["goal_met"] = (
                        r["requests_per_s"] >= HEARTBEAT_GOAL and r["p99_ms"] < HEARTBEAT_P99_GOAL_MS
                    )
                    if spy is not None:
                        spy.wait(60)
                        if out.exists():
                            r["profile"] = str(out)
                            r["profile_top_self"] = _top_costs(out)
                            r["profile_stages_pct"] = _inclusive_costs(out, PROFILE_STAGES)
                    results.append(r)
        finally:
            gw.stop(timeout=60)
        if env_profile is not None and env_profile.exists():
            results.append(
                {
                    "scenario": "gateway cProfile (whole process life)",
                    "profile": str(env_profile),
                    "profile_top_self": _top_costs(env_profile),
                }
            )
    return results


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
    parser.add_argument("--only", choices=["dataplane", "heartbeats"], help="run only one part")
    parser.add_argument("--members", type=int, default=10_000, help="heartbeating members")
    parser.add_argument("--groups", type=int, default=10, help="groups they are spread over")
    parser.add_argument("--hb-seconds", type=float, default=5.0, help="per heartbeat run")
    parser.add_argument(
        "--hb-load",
        type=load_shape,
        nargs="+",
        default=[(64, 1), (64, 2), (64, 4), (128, 8)],
        metavar="CONNxDEPTH",
        help="heartbeat load shapes: connections x pipelined requests each",
    )
    parser.add_argument("--profile", metavar="DIR", help="profile the gateway during heartbeats")
    args = parser.parse_args(argv)

    results = []
    if args.only != "heartbeats":
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
    if args.only != "dataplane":
        results += run_heartbeats(args)
    if args.json:
        json.dump({"benchmark": "gateway", "results": results}, sys.stdout, indent=1)
        print()
    else:
        for r in results:
            fields = ", ".join(
                f"{k}={v}"
                for k, v in r.items()
                if k not in ("scenario", "profile_top_self", "profile_stages_pct")
            )
            print(f"{r['scenario']:<34} {fields}")
            for row in r.get("profile_top_self", []):
                print(f"    {row['self_pct']:5.1f}%  {row['function']}")
            for stage, pct in r.get("profile_stages_pct", {}).items():
                print(f"    incl {pct:5.1f}%  {stage}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
