"""Steady ConsumerGroupHeartbeat with `serve --workers 1` and `--workers 2` in the same run
(issue 30: the both-cores rate at least 1.7 times the one-worker rate; docs/workers.md).

For each worker count: start `groupshift serve --workers N` on fixed free ports, join
`--members` consumer-protocol members in `--groups` groups, each at its coordinator (the worker
that owns the group's shard: `shard mod N`), create their topic through worker 0, settle the
assignments, then drive steady heartbeats (bench.heartbeats' pipelined load generator) at every
worker at once for `--seconds`. Printed: the rate summed over the workers, p50/p99, the
workers' CPU seconds per wall second, this process's (the load generator's: near 1.0 means the
generator, not the server, set the rate) and the machine's load average before each run.

    python -m bench.workers [--members 10000] [--groups 10] [--seconds 5] [--load 64x4] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import heartbeats as hb
from gateway.groups.routing import partition_for
from protocol.codec import encode_request

REPO = Path(__file__).resolve().parent.parent
SHARDS = 8


def _free_ports(n: int) -> int:
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = int(s.getsockname()[1])
        try:
            for i in range(1, n):
                with socket.socket() as s2:
                    s2.bind(("127.0.0.1", base + i))
        except OSError:
            continue
        return base
    raise RuntimeError("no free consecutive ports")


def _start(workers: int, data_dir: Path, log_path: Path) -> tuple[subprocess.Popen[bytes], int, Any]:
    port = _free_ports(workers)
    log = open(log_path, "wb")  # noqa: SIM115 - closed by the caller
    args = [sys.executable, "-m", "groupshift", "serve", "--workers", str(workers)]
    args += ["--listen", f"127.0.0.1:{port}", "--data-dir", str(data_dir), "--log-format", "json"]
    for s in (*hb.SETTINGS, f"offsets.topic.num.partitions={SHARDS}"):
        args += ["--set", s]
    proc = subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    want = "workers.serving" if workers > 1 else "gateway.listening"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if any(
            json.loads(line).get("event") == want
            for line in log_path.read_bytes().splitlines()
            if line[:1] == b"{"
        ):
            return proc, port, log
        if proc.poll() is not None:
            raise RuntimeError(log_path.read_text()[-3000:])
        time.sleep(0.1)
    raise RuntimeError(f"serve --workers {workers} did not start")


def _server_pids(proc: subprocess.Popen[bytes], log_path: Path, workers: int) -> list[int]:
    if workers == 1:
        return [proc.pid]
    pids = []
    for line in log_path.read_bytes().splitlines():
        if line[:1] == b"{":
            e = json.loads(line)
            if e.get("event") == "workers.worker_started":
                pids.append(int(e["pid"]))
    return pids


async def _join(port: int, ids: list[tuple[str, str]]) -> tuple[list[Any], list[int]]:
    clients = await hb._clients(port, 8)
    return clients, await hb._join_consumer_members(clients, ids)


async def _settle(clients: list[Any], ids: list[tuple[str, str]], epochs: list[int]) -> list[Any]:
    """Heartbeat everyone until each member has its assignment and a round changes nothing."""
    epochs = await hb.settle_cgh_members(clients, ids, epochs, 240, "CGH heartbeats")
    for c in clients:
        if c.transport is not None:
            c.transport.close()
    return [hb._cgh(g, m, e) for (g, m), e in zip(ids, epochs, strict=True)]


async def _run(
    workers: int,
    port: int,
    pids: list[int],
    members: int,
    groups: int,
    conns: int,
    depth: int,
    seconds: float,
) -> dict[str, Any]:
    ids = hb._member_ids(groups, members)
    by_worker = [[(g, m) for g, m in ids if partition_for(g, SHARDS) % workers == w] for w in range(workers)]
    # Joins first everywhere (subscribed to a topic that does not exist yet), then the topic
    # (created through worker 0), then every member settles on its assignment.
    joined = [await _join(port + w, by_worker[w]) for w in range(workers)]
    await hb._create_topic(port, hb.CGH_TOPIC, members // groups)
    steady = [await _settle(c, by_worker[w], e) for w, (c, e) in enumerate(joined)]
    frames = [
        [encode_request(r, correlation_id=i, client_id=hb.CLIENT_ID) for i, r in enumerate(s)] for s in steady
    ]
    share = max(1, conns // workers)
    await asyncio.gather(
        *(hb._drive(port + w, frames[w], share, depth, 1.0) for w in range(workers) if frames[w])
    )
    cpu_before = [hb.cpu_seconds(p) or 0.0 for p in pids]
    load_before = time.process_time()
    runs = await asyncio.gather(
        *(hb._drive(port + w, frames[w], share, depth, seconds) for w in range(workers) if frames[w])
    )
    load_cpu = time.process_time() - load_before
    cpu = sum((hb.cpu_seconds(p) or 0.0) - b for p, b in zip(pids, cpu_before, strict=True))
    latencies = [lat for r in runs for lat in r[0]]
    errors = sum(r[1] for r in runs)
    elapsed = max(r[2] for r in runs)
    if errors:
        raise RuntimeError(f"{errors} heartbeats answered with an error")
    return {
        "workers": workers,
        "members": members,
        "groups_per_worker": [len({g for g, _ in b}) for b in by_worker],
        "load": f"{conns}x{depth}",
        "heartbeats_per_s": round(len(latencies) / elapsed),
        "p50_ms": round(hb.percentile(latencies, 0.5) * 1000, 2),
        "p99_ms": round(hb.percentile(latencies, 0.99) * 1000, 2),
        "server_cpu_share": round(cpu / elapsed, 2),
        "load_generator_cpu_share": round(load_cpu / elapsed, 2),
    }


def _loop_factory() -> Any:
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return None
    return uvloop.new_event_loop


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--members", type=int, default=10_000)
    p.add_argument("--groups", type=int, default=10)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--load", type=hb.load_shape, default=(64, 4), help="CONNxDEPTH over all workers")
    p.add_argument("--counts", default="1,2", help="worker counts to run, in order")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    conns, depth = args.load
    results = []
    for n in (int(x) for x in args.counts.split(",")):
        with tempfile.TemporaryDirectory() as d:
            load_avg = os.getloadavg()
            proc, port, log = _start(n, Path(d) / "data", Path(d) / "serve.log")
            try:
                pids = _server_pids(proc, Path(d) / "serve.log", n)
                runner = asyncio.Runner(loop_factory=_loop_factory())
                with runner:
                    r = runner.run(_run(n, port, pids, args.members, args.groups, conns, depth, args.seconds))
                r["load_average_before"] = [round(x, 2) for x in load_avg]
                results.append(r)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
                log.close()
    if len(results) >= 2:
        results.append({"ratio": round(results[-1]["heartbeats_per_s"] / results[0]["heartbeats_per_s"], 2)})
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for r in results:
        print(r)


if __name__ == "__main__":
    main()
