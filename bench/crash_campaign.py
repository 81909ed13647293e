"""Crash campaign: SIGKILL a real `groupshift serve` at random moments of a real-client workload.

`python -m bench.crash_campaign --kills 100 [--seed S] [--json]`. One gateway data directory
lives through every round; a round is:

1. start (or restart, on the same data directory) `groupshift serve`; the restart must succeed:
   every coordinator log opens and loads (a log that fails to open fails the campaign);
2. check every acknowledged commit so far: an OffsetFetch of every committed partition returns
   at least the highest offset a client saw acknowledged (`committed_offset >= acked`);
3. start the workload and SIGKILL the gateway after a random delay (uniform in
   `[--min-delay, --max-delay]` seconds), during joins, syncs, commits and conversions:
   * `simple`: raw OffsetCommit v8 (generation -1, no member: Kafka's "simple" commits, as
     admin tools and assign()-based consumers do), group `crash-simple`, pipelined one at a time
     as fast as acknowledged;
   * `classic`: a kafka-python consumer (classic JoinGroup/SyncGroup) in group `crash-mixed`,
     committing synchronously (`KafkaConsumer.commit`) on partitions 0, 2, 4;
   * `consumer`: a confluent-kafka consumer with `group.protocol=consumer` (KIP-848) in the
     same group, committing synchronously on partitions 1, 3, 5. Its join converts the classic
     group to a consumer group, and its session expiry after a kill converts it back: the
     conversions run (and are killed) too.
   A commit counts as acknowledged once the client library returned it without error; the
   acknowledgements read after the kill count too (the gateway answers only after the journal
   is durable, so whatever it sent before dying must survive).
   Offsets come from one increasing counter per partition and each partition has one
   committer, so "at least the highest acknowledged" is exact.

Figures: kills, acknowledged commits checked, lost (must be 0), restarts that failed (must be
0), restart time. CI runs 3 rounds (`e2e/test_crash_campaign.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import random
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e import harness
from e2e.harness import GatewayProcess
from protocol.client import WireClient, make_request

TOPIC = "crash"
PARTITIONS = 6
SIMPLE, MIXED = "crash-simple", "crash-mixed"
SETTINGS = (
    "group.initial.rebalance.delay.ms=0",
    "group.consumer.min.heartbeat.interval.ms=500",
    "group.consumer.heartbeat.interval.ms=500",
)


@dataclass
class Acks:
    """The highest acknowledged offset per (group, partition); offsets counters per partition."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acked: dict[tuple[str, int], int] = field(default_factory=dict)
    next_offset: dict[tuple[str, int], int] = field(default_factory=dict)
    count: int = 0
    by_client: dict[str, int] = field(default_factory=dict)

    def draw(self, group: str, partition: int) -> int:
        with self.lock:
            n = self.next_offset.get((group, partition), 0) + 1
            self.next_offset[(group, partition)] = n
            return n

    def ack(self, group: str, partition: int, offset: int, client: str) -> None:
        with self.lock:
            key = (group, partition)
            self.count += 1
            self.by_client[client] = self.by_client.get(client, 0) + 1
            if offset > self.acked.get(key, -1):
                self.acked[key] = offset


def _simple(port: int, acks: Acks, stop: threading.Event) -> None:
    rng = random.Random()
    with WireClient(port, timeout=5.0) as c:
        while not stop.is_set():
            p = rng.randrange(PARTITIONS)
            n = acks.draw(SIMPLE, p)
            req = make_request(
                8,
                8,
                group_id=SIMPLE,
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=[
                    {
                        "name": TOPIC,
                        "partitions": [
                            {
                                "partition_index": p,
                                "committed_offset": n,
                                "committed_leader_epoch": -1,
                                "committed_metadata": "",
                            }
                        ],
                    }
                ],
            )
            answer = c.request(req)
            if int(answer.topics[0].partitions[0].error_code) == 0:
                acks.ack(SIMPLE, p, n, "simple")


def _classic(
    bootstrap: str, group: str, acks: Acks, closers: list[Callable[[], None]], stop: threading.Event
) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        request_timeout_ms=3000,
        reconnect_backoff_max_ms=200,
    )
    closers.append(lambda: consumer.close(autocommit=False))
    consumer.subscribe([TOPIC])
    while not stop.is_set():
        consumer.poll(timeout_ms=50)
        p = random.choice((0, 2, 4))
        n = acks.draw(group, p)
        try:
            consumer.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(n, "", -1)})
        except Exception:
            time.sleep(0.05)
            continue
        acks.ack(group, p, n, "classic (kafka-python)")


def _consumer(
    bootstrap: str, group: str, acks: Acks, closers: list[Callable[[], None]], stop: threading.Event
) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "socket.timeout.ms": 3000,
            "reconnect.backoff.max.ms": 200,
            "log_level": 0,
        }
    )
    closers.append(consumer.close)
    consumer.subscribe([TOPIC])
    while not stop.is_set():
        consumer.poll(0.05)
        p = random.choice((1, 3, 5))
        n = acks.draw(group, p)
        try:
            result = consumer.commit(offsets=[TopicPartition(TOPIC, p, n)], asynchronous=False)
        except KafkaException:
            time.sleep(0.05)
            continue
        if result and all(tp.error is None for tp in result):
            acks.ack(group, p, n, "consumer (confluent-kafka, KIP-848)")


def committed(port: int, group: str) -> dict[int, int]:
    with WireClient(port, timeout=10.0) as c:
        answer = c.request(
            make_request(
                9, 5, group_id=group, topics=[{"name": TOPIC, "partition_indexes": list(range(PARTITIONS))}]
            )
        )
    assert int(answer.error_code) == 0, answer
    return {int(p.partition_index): int(p.committed_offset) for t in answer.topics for p in t.partitions}


def check(port: int, acks: Acks) -> list[str]:
    """Every acknowledged commit visible: the lost ones, described."""
    lost = []
    with acks.lock:
        acked = dict(acks.acked)
    for group in sorted({g for g, _ in acked}):
        have = committed(port, group)
        for (g, p), n in sorted(acked.items()):
            if g == group and have.get(p, -1) < n:
                lost.append(f"{group}/{TOPIC}-{p}: acknowledged {n}, OffsetFetch {have.get(p, -1)}")
    return lost


def create_topic(port: int) -> None:
    with WireClient(port, timeout=10.0) as c:
        answer = c.request(
            make_request(
                19,
                5,
                topics=[
                    {
                        "name": TOPIC,
                        "num_partitions": PARTITIONS,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                timeout=10000,
                validate_only=False,
            )
        )
    assert int(answer.topics[0].error_code) in (0, 36), answer  # 36: TOPIC_ALREADY_EXISTS


@dataclass
class Round:
    kill_after_s: float
    acked_total: int
    restart_s: float
    lost: list[str]


def _close_all(closers: list[Callable[[], None]], threads: list[threading.Thread]) -> None:
    for close in closers:
        t = threading.Thread(target=_quiet(close), daemon=True)  # may block on a dead gateway
        t.start()
        t.join(3.0)
    for t in threads:
        t.join(5.0)


def _quiet(fn: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        with contextlib.suppress(Exception):  # closing clients of a killed gateway
            fn()

    return run


def _guard(
    fn: Callable[..., None], stop: threading.Event, killed: threading.Event, errors: list[str], *args: Any
) -> Callable[[], None]:
    """Run a worker; it may fail once the gateway is killed, but a failure before is a bug."""

    def run() -> None:
        try:
            fn(*args, stop)
        except Exception as e:
            if not killed.is_set():
                errors.append(f"{fn.__name__}: {e!r}")

    return run


def campaign(
    kills: int,
    *,
    seed: int = 1,
    min_delay: float = 0.2,
    max_delay: float = 8.0,
    data_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    start_timeout: float = 180.0,
) -> dict[str, Any]:
    # On a loaded machine a start (imports, 50 shard logs) can take longer than the harness's
    # default; a gateway that exits or never listens within `start_timeout` fails the campaign.
    harness.START_TIMEOUT = max(harness.START_TIMEOUT, start_timeout)
    rng = random.Random(seed)
    acks = Acks()
    rounds: list[Round] = []
    failed_restarts: list[str] = []
    worker_errors: list[str] = []
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="crash-campaign-") as tmp:
        base = data_dir or Path(tmp)
        gw = GatewayProcess.start(base / "data", sets=SETTINGS)
        started = time.monotonic()
        try:
            create_topic(gw.port)
            for i in range(kills):
                stop, killed = threading.Event(), threading.Event()
                closers: list[Callable[[], None]] = []
                mixed = f"{MIXED}-{i}"  # a new group per round: no dead members to wait for
                threads = [
                    threading.Thread(
                        target=_guard(_simple, stop, killed, worker_errors, gw.port, acks), daemon=True
                    ),
                    threading.Thread(
                        target=_guard(
                            _classic, stop, killed, worker_errors, gw.bootstrap, mixed, acks, closers
                        ),
                        daemon=True,
                    ),
                    threading.Thread(
                        target=_guard(
                            _consumer, stop, killed, worker_errors, gw.bootstrap, mixed, acks, closers
                        ),
                        daemon=True,
                    ),
                ]
                for t in threads:
                    t.start()
                delay = rng.uniform(min_delay, max_delay)
                time.sleep(delay)
                killed.set()
                gw.kill()
                stop.set()
                _close_all(closers, threads)
                t0 = time.monotonic()
                try:
                    gw = gw.restart()
                except RuntimeError as e:
                    failed_restarts.append(f"round {i}: {e}")
                    break
                restart_s = time.monotonic() - t0
                lost = check(gw.port, acks)
                rounds.append(Round(round(delay, 2), acks.count, round(restart_s, 2), lost))
                if progress:
                    progress(
                        f"kill {i + 1}/{kills} after {delay:.2f}s: {acks.count} acks so far, "
                        f"restart {restart_s:.2f}s, lost {len(lost)}"
                    )
                if lost:
                    break
        finally:
            if gw.alive():
                gw.stop()
        elapsed = time.monotonic() - started
    lost_all = [x for r in rounds for x in r.lost]
    restarts = [r.restart_s for r in rounds]
    return {
        "scenario": "crash campaign",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seed": seed,
        "kills": len(rounds) + len(failed_restarts),
        "acknowledged_commits": acks.count,
        "acknowledged_by_client": dict(acks.by_client),
        "partitions_checked": len(acks.acked),
        "lost": len(lost_all),
        "lost_detail": lost_all[:10],
        "failed_restarts": failed_restarts,
        "worker_errors_before_kill": worker_errors[:10],
        "restart_s_max": max(restarts, default=0.0),
        "restart_s_mean": round(sum(restarts) / len(restarts), 2) if restarts else 0.0,
        "seconds": round(elapsed, 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.crash_campaign", description=__doc__.splitlines()[0])
    p.add_argument("--kills", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--min-delay", type=float, default=0.2)
    p.add_argument("--max-delay", type=float, default=8.0)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    result = campaign(
        a.kills,
        seed=a.seed,
        min_delay=a.min_delay,
        max_delay=a.max_delay,
        progress=None if a.json else print,
    )
    if a.json:
        print(json.dumps(result))
    else:
        print(json.dumps(result, indent=2))
    return 0 if result["lost"] == 0 and not result["failed_restarts"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
