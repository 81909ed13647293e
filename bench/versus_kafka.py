"""groupshift against Apache Kafka 4.x on the same machine, in one run.

    python -m bench.versus_kafka [--json] [--members 10000] [--groups 10] [--seconds 5]
                                 [--load CONNxDEPTH ...] [--kinds KIND ...]
                                 [--skip-heartbeats] [--skip-migration]
                                 [--security plaintext,ssl,sasl_ssl [--workers 8] [--repeats 2]
                                  [--listener-load CONNxDEPTH]]

1. Steady heartbeats: `bench.heartbeats`' setup and load generator (ConsumerGroupHeartbeat,
   classic Heartbeat and StreamsGroupHeartbeat of `--members` members in `--groups` groups,
   every answer checked; `--kinds` picks some of the three) against
   a real Kafka 4.x node (`harness.kafka_dist`, the same group settings as bench.gateway's
   heartbeat runs) and against `groupshift serve` (`coordinator.fsync.policy=none`). Each server
   gets the same CPU budget: first one core (the server's every thread pinned to core 0 with
   `taskset -a`, the load generator on core 1), then both cores (server and load generator each
   allowed on both). The backends alternate run by run (kafka, groupshift, kafka, ...), so the
   machine's noise falls on both alike. Printed: requests/s, p50/p99 latency, the server's CPU
   use, and the ratio groupshift/Kafka of the rates.

   Kafka reads one request per connection at a time (it mutes a connection until the answer is
   sent), so pipelining buys it nothing; groupshift reads on. `--load 500x1` (many connections,
   no pipelining) puts the two on equal terms. A run that gets an error answer or stalls is
   recorded with its error instead of ending the benchmark.

   Streams groups (KIP-1071): each member is its own Kafka Streams process, the topology one
   stateless subtopology reading one source topic with a partition per member of a group, so
   each member runs one active task; Kafka gets `streams` in
   `group.coordinator.rebalance.protocols` (its 4.4 default, which the benchmark's explicit list
   would otherwise leave out) and its streams session settings (bench.kafka_reference).

   The classic setup parks one JoinGroup per member until the group's first generation starts;
   since Kafka would not read a second request on a connection with a parked JoinGroup, the
   joins use one connection per member on both servers.

2. Membership changes with Kafka's Java consumer (`VerifiableConsumer`, kafka-clients 4.x,
   `group.protocol=consumer`) on both backends, a producer writing throughout, the same fast
   group settings (e2e/migration.py): "add a member" (three members stable, a fourth joins:
   seconds until the group is stable, evenly split and caught up) and "rolling restart" (four
   members, each replaced in turn by a new one: seconds per step and in total). The backends run
   at the same time, each in a thread, so they share the machine's noise; these are wall-clock
   times of whole client round trips (JVM start included), indications rather than precise
   figures.

3. With `--security`: `bench.secure_listeners`, ConsumerGroupHeartbeat/s and new connections/s
   on each listener type named (PLAINTEXT always, then SSL, SASL_SSL), on both servers, with the
   same `--members`, `--groups` and `--seconds`.

The machine this runs on is shared: figures vary between runs; compare within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import heartbeats as hb
from bench import secure_listeners
from bench.kafka_reference import (
    KAFKA_EXTRA,
    KAFKA_HB_SETTINGS,
    KAFKA_SERVER_JVM_OPTS,
    coordinators_ready,
    pin_all_threads,
)

DEFAULT_LOADS = [(64, 4)]
BUDGETS = (("one core", "0", {1}), ("both cores", "0,1", {0, 1}))


def heartbeats(args: argparse.Namespace, progress: Any) -> list[dict[str, Any]]:
    from e2e.harness import GatewayProcess
    from harness.kafka_dist import KafkaCluster

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="groupshift-versus-kafka-") as tmp:
        cluster = KafkaCluster("4", configs={**KAFKA_HB_SETTINGS, **KAFKA_EXTRA}, workdir=Path(tmp) / "kafka")
        cluster.start()
        gw = None
        try:
            gw = GatewayProcess.start(Path(tmp) / "gs", sets=list(hb.SETTINGS))
            kafka_pid = cluster.pid(0)
            assert kafka_pid is not None
            servers = {
                "kafka": (cluster.port(0), kafka_pid, cluster.version),
                "groupshift": (gw.port, gw.proc.pid, "serve"),
            }
            group_ids = [f"bench-hb-{g}" for g in range(args.groups)]
            group_ids += [f"bench-classic-{g}" for g in range(args.groups)]
            group_ids += hb.streams_group_ids(args.groups)
            for port, _, _ in servers.values():
                coordinators_ready(port, group_ids)
            steady: dict[tuple[str, str], list[Any]] = {}
            for kind in args.kinds:
                for name, (port, _, _) in servers.items():
                    progress(f"setup {kind} on {name} ({args.members} members)")
                    started = time.perf_counter()
                    steady[(name, kind)] = hb.setup(
                        port, kind, args.groups, args.members, join_connections=args.members
                    )
                    progress(f"  {time.perf_counter() - started:.1f}s")
            for budget, server_cpus, load_cpus in BUDGETS:
                for _, pid, _ in servers.values():
                    pin_all_threads(pid, server_cpus)
                os.sched_setaffinity(0, load_cpus)
                for kind in args.kinds:
                    for connections, depth in args.load:
                        pair: dict[str, dict[str, Any]] = {}
                        for name, (port, pid, _) in servers.items():
                            try:
                                r = hb.run_load(
                                    port,
                                    kind,
                                    steady[(name, kind)],
                                    args.groups,
                                    connections,
                                    depth,
                                    args.seconds,
                                    gateway_pid=pid,
                                ).as_dict()
                            except (RuntimeError, TimeoutError, ConnectionError) as e:
                                # An error answer or a stall is a result too: recorded, not fatal.
                                r = {"requests_per_s": 0, "p50_ms": 0.0, "p99_ms": 0.0, "error": str(e)}
                                r |= {"gateway_cpu_share": None, "requests_per_gateway_cpu_s": None}
                            pair[name] = r
                            progress(
                                f"{budget:<10} {kind:<22} {connections}x{depth:<3} {name:<10} "
                                f"{r['requests_per_s']:>8}/s p50 {r['p50_ms']} ms p99 {r['p99_ms']} ms"
                            )
                        rate_k = max(pair["kafka"]["requests_per_s"], 1)
                        per_k = max(pair["kafka"]["requests_per_gateway_cpu_s"] or 1, 1)
                        per_g = pair["groupshift"]["requests_per_gateway_cpu_s"] or 0
                        failed = any("error" in x for x in pair.values())
                        rate_g = pair["groupshift"]["requests_per_s"]
                        results.append(
                            {
                                "budget": budget,
                                "kind": kind,
                                "members": args.members,
                                "groups": args.groups,
                                "load": f"{connections}x{depth}",
                                "kafka": pair["kafka"],
                                "groupshift": pair["groupshift"],
                                "ratio": None if failed else round(rate_g / rate_k, 2),
                                "ratio_per_cpu_s": None if failed else round(per_g / per_k, 2),
                            }
                        )
        finally:
            os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
            if gw is not None:
                gw.stop(timeout=60)
            cluster.stop()
    return results


def membership(progress: Any) -> list[dict[str, Any]]:
    """bench.migration's "add a member" and "rolling restart" with Java consumers on both."""
    from e2e.conftest import KAFKA_ONLY
    from e2e.harness import GatewayProcess
    from e2e.java import add_java
    from e2e.migration import FAST_GROUP_SETTINGS, Scenario
    from e2e.realclients import KafkaBackend, Outcome, run_scenario, timed_step
    from harness.kafka_dist import KafkaCluster
    from harness.kafka_dist.java_clients import java_clients

    out: list[dict[str, Any]] = []
    settings = dict(s.split("=", 1) for s in FAST_GROUP_SETTINGS)
    with tempfile.TemporaryDirectory(prefix="groupshift-versus-kafka-java-") as tmp:
        clients = java_clients("4", workdir=Path(tmp) / "clients")
        cluster = KafkaCluster("4", configs={**settings, **KAFKA_ONLY}, workdir=Path(tmp) / "kafka")
        cluster.start()
        gw: GatewayProcess | None = None
        try:
            gw = GatewayProcess.start(Path(tmp) / "gs", sets=FAST_GROUP_SETTINGS)
            backends: dict[str, Any] = {"kafka": KafkaBackend(cluster.bootstrap), "groupshift": gw}

            def add_member(sc: Scenario, o: Outcome) -> None:
                t = time.monotonic()
                for _ in range(3):
                    add_java(sc.cast, clients, "consumer")
                timed_step(sc, o, "consumer", "three members", t)
                t = time.monotonic()
                add_java(sc.cast, clients, "consumer")
                timed_step(sc, o, "consumer", "add a member", t)

            def rolling_restart(sc: Scenario, o: Outcome) -> None:
                t = time.monotonic()
                members = [add_java(sc.cast, clients, "consumer") for _ in range(4)]
                timed_step(sc, o, "consumer", "four members", t)
                first = time.monotonic()
                for i, old in enumerate(members):
                    t = time.monotonic()
                    old.stop()
                    add_java(sc.cast, clients, "consumer")
                    timed_step(sc, o, "consumer", f"restart {i + 1}/4", t)
                o.timings.append(("rolling restart (total)", time.monotonic() - first))

            for case, body in (("add a member", add_member), ("rolling restart", rolling_restart)):
                progress(f"{case}: both backends at once")
                outcomes: dict[str, Outcome] = {}
                stamp = f"vk-{case.split()[0]}-{int(time.time())}"

                def go(
                    name: str, body: Any = body, stamp: str = stamp, outcomes: dict[str, Outcome] = outcomes
                ) -> None:
                    outcomes[name] = run_scenario(name, backends[name], stamp, body)

                threads = [threading.Thread(target=go, args=(n,)) for n in backends]
                for th in threads:
                    th.start()
                for th in threads:
                    th.join(300)
                for name, o in outcomes.items():
                    if o.error is not None:
                        raise RuntimeError(f"{case} on {name}: {o.error!r}") from o.error
                steps = [s for s, _ in outcomes["kafka"].timings]
                for step in steps:
                    k = dict(outcomes["kafka"].timings)[step]
                    g = dict(outcomes["groupshift"].timings)[step]
                    out.append(
                        {
                            "case": case,
                            "step": step,
                            "kafka_s": round(k, 2),
                            "groupshift_s": round(g, 2),
                            "ratio": round(g / k, 2) if k else None,
                        }
                    )
                    progress(f"  {step:<26} kafka {k:6.2f}s  groupshift {g:6.2f}s")
        finally:
            if gw is not None:
                gw.stop(timeout=60)
            cluster.stop()
    return out


def print_table(doc: dict[str, Any]) -> None:
    print(f"groupshift vs Apache Kafka {doc['kafka_version']} on {doc['cpus']} cores ({doc['date']})")
    before, after = (
        " ".join(f"{x:.2f}" for x in doc[k]) for k in ("load_average_before", "load_average_after")
    )
    print(f"load average before {before}, after {after}")
    if doc["heartbeats"]:
        print("\nsteady heartbeats: requests/s, p50/p99 ms, server CPU share, requests per server CPU-second")
        print(f"{'budget':<11}{'kind':<23}{'load':<7}{'kafka':>34}{'groupshift':>34}{'ratio':>6}{'/CPU':>6}")
        for r in doc["heartbeats"]:
            cells = []
            for side in ("kafka", "groupshift"):
                x = r[side]
                cpu, per = x["gateway_cpu_share"], x["requests_per_gateway_cpu_s"]
                lat = f"{x['p50_ms']:>6.1f}/{x['p99_ms']:<6.1f}"
                cells.append(f"{x['requests_per_s']:>7} {lat} {cpu!s:>5} {per!s:>7}")
            print(
                f"{r['budget']:<11}{r['kind']:<23}{r['load']:<7}{cells[0]:>34}{cells[1]:>34}"
                f"{r['ratio']!s:>6}{r['ratio_per_cpu_s']!s:>6}"
            )
    if doc["membership"]:
        print("\nmembership changes, Java consumers (group.protocol=consumer): seconds to stable + caught up")
        print(f"{'case':<17}{'step':<26}{'kafka':>8}{'groupshift':>12}{'ratio':>7}")
        for r in doc["membership"]:
            print(f"{r['case']:<17}{r['step']:<26}{r['kafka_s']:>8}{r['groupshift_s']:>12}{r['ratio']:>7}")
    if doc.get("listeners"):
        secure_listeners.print_table(doc["listeners"])
    print("\nshared, noisy machine: compare within this run only")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.versus_kafka", description=__doc__)
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--members", type=int, default=10_000)
    p.add_argument("--groups", type=int, default=10)
    p.add_argument("--seconds", type=float, default=5.0, help="per heartbeat run")
    p.add_argument("--load", type=hb.load_shape, nargs="+", default=DEFAULT_LOADS, metavar="CONNxDEPTH")
    p.add_argument(
        "--kinds",
        nargs="+",
        choices=hb.KINDS,
        default=list(hb.KINDS),
        metavar="KIND",
        help=f"the heartbeat kinds to measure (default all: {', '.join(hb.KINDS)})",
    )
    p.add_argument("--skip-heartbeats", action="store_true")
    p.add_argument("--skip-migration", action="store_true")
    secure_listeners.add_arguments(p, security_default=None)
    args = p.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so that the servers started here are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ.setdefault("GROUPSHIFT_KAFKA_JVM_OPTS", KAFKA_SERVER_JVM_OPTS)

    def progress(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    from harness.kafka_dist import resolve

    doc: dict[str, Any] = {
        "benchmark": "versus_kafka",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "kafka_version": resolve("4").version,
        "kafka_jvm_opts": os.environ["GROUPSHIFT_KAFKA_JVM_OPTS"],
        "command": "python -m bench.versus_kafka " + " ".join(argv if argv is not None else sys.argv[1:]),
        "load_average_before": os.getloadavg(),
        "heartbeats": [] if args.skip_heartbeats else heartbeats(args, progress),
        "membership": [] if args.skip_migration else membership(progress),
        "load_average_after": os.getloadavg(),
    }
    if args.security:
        doc["load_average"] = os.getloadavg()
        doc["listeners"] = secure_listeners.measure(
            argparse.Namespace(**{**vars(args), "load": args.listener_load}), progress
        )
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        print()
    else:
        print_table(doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
