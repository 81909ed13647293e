"""Upstream-mode benchmark: the same clients and load directly against a Kafka cluster and
through `groupshift serve --upstream` in front of it, in one run.

    python -m bench.upstream [--json] [--kafka 4|3.9|groupshift] [--records N] [--record-bytes B]
                             [--security plaintext|sasl_ssl]

Measures, direct and through the gateway:
  * produce throughput: librdkafka producing fixed-size records (acks=all, linger 5 ms);
  * fetch throughput: librdkafka reading them back from the beginning (assign, no group);
  * forwarded round trips at moderate load: ListOffsets (a forwarded request whose response
    passes through as bytes) and Metadata (whose response groupshift decodes and rewrites),
    `--rate` requests/s in total paced over `--connections` connections; p50/p99 latency, and
    the gateway process's CPU time per request (its own cost, whatever the machine's load).
and prints the ratios (goals from the issue: through-gateway throughput >= 85% of direct,
added p99 <= 1 ms at moderate load). The backend is a real Apache Kafka single node from
harness.kafka_dist (needs java; `--kafka groupshift` uses a second groupshift in embedded mode
instead). Heartbeat throughput is the engine's and the gateway's, as in embedded mode (see
`bench.gateway --only heartbeats`): group APIs are not forwarded.

`--security sasl_ssl` secures both legs (issue 29): the Kafka node's only listener is SASL_SSL
with StandardAuthorizer (harness.kafka_dist.security), groupshift's listener is SASL_SSL with the
same certificate (bench.secure_listeners.groupshift_sets), groupshift reaches the cluster over
SASL_SSL (`upstream.*` settings), and every client (librdkafka, the round-trip connections)
logs in with SASL PLAIN as `admin` over TLS on both paths. The gateway's CPU per MB produced and
fetched through it is printed too.
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.gateway import percentile, request
from bench.throughput import fetch, produce
from e2e.harness import GatewayProcess
from protocol.codec import encode_request


@dataclass(frozen=True)
class Secure:
    """How every client of `--security sasl_ssl` connects: TLS trusting the run's CA, then SASL
    PLAIN as `user` (librdkafka gets the same in `librdkafka`)."""

    context: ssl.SSLContext
    user: str
    password: str
    librdkafka: dict[str, Any]


class _Endpoint:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.port = int(bootstrap.split(",")[0].rsplit(":", 1)[1])


async def _paced(
    port: int, frame: bytes, connections: int, rate: float, seconds: float, secure: Secure | None = None
) -> list[float]:
    """`connections` connections, each sending one request every `connections / rate` seconds
    (one in flight at a time): a moderate, steady load, not a saturation test."""
    import asyncio
    import struct

    interval = connections / rate
    latencies: list[float] = []

    async def one() -> None:
        if secure is None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        else:
            from bench.secure_listeners import sasl_login

            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=secure.context, server_hostname="127.0.0.1"
            )
            await sasl_login(reader, writer, "PLAIN", secure.user, secure.password)
        loop = asyncio.get_running_loop()
        stop_at = loop.time() + seconds
        next_at = loop.time()
        while loop.time() < stop_at:
            started = time.perf_counter()
            writer.write(frame)
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            await reader.readexactly(size)
            latencies.append(time.perf_counter() - started)
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - loop.time()))
        writer.close()

    await asyncio.gather(*(one() for _ in range(connections)))
    return latencies


def alternating(names: list[str], round_index: int) -> list[str]:
    """The targets' order in round `round_index`: as given in even rounds, reversed in odd ones."""
    return names if round_index % 2 == 0 else names[::-1]


def round_trips(
    ports: dict[str, int],
    frame: bytes,
    connections: int,
    rate: float,
    seconds: float,
    rounds: int,
    secure: Secure | None = None,
) -> dict[str, list[float]]:
    """Latencies per target, measured in `rounds` interleaved windows of `seconds` each.

    Direct and gateway windows alternate (and swap order every round), so drift in the
    machine's load -- this is a shared 2-core box -- falls on both sides alike instead of on
    whichever ran second; the samples of all windows are pooled per target."""
    import asyncio

    try:
        import uvloop

        factory: Any = uvloop.new_event_loop
    except ImportError:  # pragma: no cover
        factory = None
    pooled: dict[str, list[float]] = {name: [] for name in ports}
    with asyncio.Runner(loop_factory=factory) as runner:
        for port in ports.values():
            runner.run(_paced(port, frame, connections, rate, 0.5, secure))  # warm-up
        for i in range(rounds):
            for name in alternating(list(ports), i):
                pooled[name].extend(
                    runner.run(_paced(ports[name], frame, connections, rate, seconds, secure))
                )
    return pooled


def latency_summary(latencies: list[float], seconds: float) -> dict[str, Any]:
    return {
        "requests_per_s": round(len(latencies) / seconds),
        "samples": len(latencies),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 3),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; 10 ms resolution)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def list_offsets_frame(topic: str) -> bytes:
    req = request(
        2,
        7,
        replica_id=-1,
        isolation_level=0,
        topics=[
            {
                "name": topic,
                "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}],
            }
        ],
    )
    return encode_request(req, correlation_id=1, client_id="bench")


def metadata_frame(topic: str) -> bytes:
    req = request(
        3,
        12,
        topics=[{"name": topic, "topic_id": None}],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return encode_request(req, correlation_id=1, client_id="bench")


def run(
    backend_bootstrap: str, gw: GatewayProcess, args: argparse.Namespace, secure: Secure | None = None
) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    client = secure.librdkafka if secure is not None else None
    gateway_cpu = 0.0  # the gateway's CPU seconds during its produce and fetch runs
    gateway_bytes = 0
    targets = {"direct": _Endpoint(backend_bootstrap), "gateway": _Endpoint(gw.bootstrap)}
    # Throughput: alternate the targets over rounds (order swapped every round) and keep the
    # median rate per target, so a JVM warming up or a neighbour's burst does not decide the
    # ratio. The first round's direct topic also serves the round trips below.
    rates: dict[str, dict[str, list[dict[str, Any]]]] = {n: {"produce": [], "fetch": []} for n in targets}
    for i in range(args.rounds):
        for name in alternating(list(targets), i):
            ep = targets[name]
            topic = f"bench-{name}" if i == 0 else f"bench-{name}-{i}"
            cpu_before = cpu_seconds(gw.proc.pid)
            produced = produce(ep.bootstrap, topic, args.records, args.record_bytes, client)
            rates[name]["produce"].append(produced.rates())
            fetched = fetch(ep.bootstrap, topic, args.records, args.record_bytes, client)
            rates[name]["fetch"].append({"records": fetched.records, **fetched.rates()})
            if name == "gateway":
                gateway_cpu += cpu_seconds(gw.proc.pid) - cpu_before
                gateway_bytes += (args.records + fetched.records) * args.record_bytes
    for name in targets:
        for kind in ("produce", "fetch"):
            runs = sorted(rates[name][kind], key=lambda r: float(r["records_per_s"]))
            median = runs[len(runs) // 2]
            results.append(
                {
                    "scenario": f"{kind} {name}",
                    **median,
                    "rounds": len(runs),
                    "min_records_per_s": runs[0]["records_per_s"],
                    "max_records_per_s": runs[-1]["records_per_s"],
                }
            )
    ports = {name: ep.port for name, ep in targets.items()}
    for label, make in (("ListOffsets", list_offsets_frame), ("Metadata", metadata_frame)):
        cpu_before = cpu_seconds(gw.proc.pid)
        pooled = round_trips(
            ports, make("bench-direct"), args.connections, args.rate, args.seconds, args.rounds, secure
        )
        cpu_used = cpu_seconds(gw.proc.pid) - cpu_before
        measured = args.seconds * args.rounds
        for name, latencies in pooled.items():
            extra = {}
            if name == "gateway":
                # The gateway's own CPU per request (warm-ups included): what it adds to a round
                # trip on an idle core, independent of the machine's load.
                done = len(latencies) + args.rate * 0.5
                extra["gateway_cpu_us_per_request"] = round(cpu_used / done * 1e6, 1)
            results.append(
                {
                    "scenario": f"{label} round trip {name}",
                    "connections": args.connections,
                    "rate": args.rate,
                    "rounds": args.rounds,
                    **latency_summary(latencies, measured),
                    **extra,
                }
            )
    by = {r["scenario"]: r for r in results}
    ratios = {
        "scenario": "ratios (gateway / direct)",
        "produce_throughput": round(
            by["produce gateway"]["records_per_s"] / by["produce direct"]["records_per_s"], 3
        ),
        "fetch_throughput": round(
            by["fetch gateway"]["records_per_s"] / by["fetch direct"]["records_per_s"], 3
        ),
        "list_offsets_added_p99_ms": round(
            by["ListOffsets round trip gateway"]["p99_ms"] - by["ListOffsets round trip direct"]["p99_ms"], 3
        ),
        "metadata_added_p99_ms": round(
            by["Metadata round trip gateway"]["p99_ms"] - by["Metadata round trip direct"]["p99_ms"], 3
        ),
        # The gateway's CPU per MB of record payload produced and fetched through it (both legs'
        # TLS and the frames' handling; the machine's load does not inflate CPU time much).
        "gateway_cpu_ms_per_mb": round(gateway_cpu * 1000 / max(gateway_bytes / 1e6, 1e-9), 2),
    }
    results.append(ratios)
    return results


def _secured(security: Any) -> tuple[list[str], Secure]:
    """groupshift's `--set`s (a SASL_SSL listener, SASL_SSL to the cluster as `admin`) and how
    the clients connect, from the cluster's harness.kafka_dist.security.KafkaSecurity."""
    from bench.secure_listeners import groupshift_sets
    from harness.kafka_dist.security import PLAIN_LOGIN, password_of

    password = password_of("admin")
    sets = [
        *groupshift_sets("sasl_ssl", security),
        "upstream.security.protocol=SASL_SSL",
        f"upstream.ssl.truststore.location={security.ca.pem}",
        "upstream.ssl.truststore.type=PEM",
        "upstream.sasl.mechanism=PLAIN",
        f'upstream.sasl.jaas.config={PLAIN_LOGIN} required username="admin" password="{password}";',
    ]
    librdkafka = {
        "security.protocol": "sasl_ssl",
        "ssl.ca.location": str(security.ca.pem),
        "sasl.mechanism": "PLAIN",
        "sasl.username": "admin",
        "sasl.password": password,
    }
    context = ssl.create_default_context(cafile=str(security.ca.pem))
    return sets, Secure(context, "admin", password, librdkafka)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.upstream", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--kafka", default="4", help="Kafka version spec, or `groupshift` (default 4)")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument(
        "--seconds", type=float, default=3.0, help="per round-trip window (each target, each round)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="interleaved direct/gateway round-trip windows")
    parser.add_argument("--connections", type=int, default=8, help="round-trip connections")
    parser.add_argument(
        "--rate", type=float, default=1000.0, help="round-trip requests/s in total (moderate load)"
    )
    parser.add_argument(
        "--security",
        choices=("plaintext", "sasl_ssl"),
        default="plaintext",
        help="sasl_ssl: SASL_SSL on both legs (clients to groupshift and groupshift to Kafka) and direct",
    )
    args = parser.parse_args(argv)
    if args.security != "plaintext" and args.kafka == "groupshift":
        parser.error("--security sasl_ssl needs a Kafka backend (--kafka 4 or 3.9)")

    with tempfile.TemporaryDirectory(prefix="groupshift-bench-upstream-") as tmp:
        base = Path(tmp)
        cluster: Any = None
        upstream: GatewayProcess | None = None
        if args.kafka == "groupshift":
            upstream = GatewayProcess.start(base / "upstream", sets=["coordinator.fsync.policy=none"])
            bootstrap = upstream.bootstrap
            label = "groupshift (embedded)"
        else:
            from harness.kafka_dist import KafkaCluster

            security = None if args.security == "plaintext" else args.security
            cluster = KafkaCluster(
                args.kafka, brokers=1, workdir=base / "kafka", security=security, sasl_mechanism="PLAIN"
            ).start()
            bootstrap = cluster.bootstrap
            label = f"Apache Kafka {cluster.version}" + (
                f" ({args.security} on both legs)" if security else ""
            )
        sets: list[str] = []
        secure = None
        if cluster is not None and cluster.security is not None:
            sets, secure = _secured(cluster.security)
        gw = GatewayProcess.start(base / "gw", sets=sets, extra_args=("--upstream", bootstrap))
        if secure is not None:  # the SASL_SSL listener's port, beside `--listen`'s
            gw.port = int(gw.events("gateway.listening")[-1]["ports"]["SASL_SSL"])
        try:
            results = run(bootstrap, gw, args, secure)
        finally:
            gw.stop()
            if upstream is not None:
                upstream.stop()
            if cluster is not None:
                cluster.stop()
    if args.json:
        json.dump({"benchmark": "upstream", "backend": label, "results": results}, sys.stdout, indent=1)
        print()
    else:
        print(f"backend: {label}")
        for r in results:
            fields = ", ".join(f"{k}={v}" for k, v in r.items() if k != "scenario")
            print(f"{r['scenario']:<32} {fields}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
