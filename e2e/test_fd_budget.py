"""File descriptors as a budget, checked on a real `groupshift serve` under `ulimit -n 512`.

A topic of 10,000 partitions once ran the server out of descriptors (two per partition), was
left half-created, and the server could not start again. Now partition logs beyond
`log.open.files.max` (default: a quarter of `ulimit -n`) are closed and reopened on use, and a
creation beyond `max.partitions` is refused with POLICY_VIOLATION and a message. Either way the
server restarts and serves produce and fetch with real clients (confluent-kafka, kafka-python).

The same creation is also the event-loop test's 10,000-partition attack (e2e/canary.py): a
canary KIP-848 member heartbeats throughout and must not stall. Creating 10,000 partitions takes
about two minutes on this machine, so the suite does it once.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.canary import assert_bound, create_topics, measure
from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from protocol.client import WireClient, make_request

FD_LIMIT = 512
WIDE = 10_000
POLICY_VIOLATION = 44
SLOW_START = 600.0  # 10,000 logs recovered at start: about a minute on a loaded 2-core machine
PROBE_PARTITIONS = (0, 4_999, 9_999)


def fd_count(gw: GatewayProcess) -> int:
    return len(os.listdir(f"/proc/{gw.proc.pid}/fd"))


class FdWatch:
    """The highest descriptor count of a process, sampled every 20 ms while in a `with`."""

    def __init__(self, gw: GatewayProcess) -> None:
        self.gw = gw
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, fd_count(self.gw))
            except OSError:
                return
            time.sleep(0.02)

    def __enter__(self) -> FdWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def start(gateways: Gateways, name: str, *sets: str) -> GatewayProcess:
    gw = GatewayProcess.start(gateways.base / name, sets=sets, fd_limit=FD_LIMIT, start_timeout=SLOW_START)
    gateways.started.append(gw)
    return gw


def create(gw: GatewayProcess, name: str, partitions: int) -> tuple[int, str]:
    with WireClient(gw.port, timeout=SLOW_START) as c:
        resp = c.request(
            make_request(
                19,
                5,
                topics=[
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                timeout=int(SLOW_START * 1000),
                validate_only=False,
            )
        )
    (r,) = resp.topics
    return r.error_code, r.error_message or ""


def produce(gw: GatewayProcess, topic: str, partitions: tuple[int, ...], tag: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": gw.bootstrap, "acks": "all", "linger.ms": 5})
    for p in partitions:
        producer.produce(topic, value=f"{tag}-{p}".encode(), partition=p)
    assert producer.flush(60) == 0


def consume(gw: GatewayProcess, topic: str, partitions: tuple[int, ...], want: int) -> dict[int, list[bytes]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=gw.bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        request_timeout_ms=120_000,
    )
    consumer.assign([TopicPartition(topic, p) for p in partitions])
    got: dict[int, list[bytes]] = {p: [] for p in partitions}
    deadline = time.monotonic() + 60
    while sum(len(v) for v in got.values()) < want and time.monotonic() < deadline:
        for tp, msgs in consumer.poll(timeout_ms=300).items():
            got[tp.partition] += [m.value for m in msgs]
    consumer.close()
    return got


def partition_dirs(data_dir: Path, topic: str) -> Iterator[str]:
    return (e.name for e in data_dir.iterdir() if e.name.startswith(f"{topic}-"))


@pytest.mark.timeout(1800)
def test_a_topic_of_10000_partitions_is_served_within_the_budget_and_the_server_restarts(
    gateways: Gateways,
) -> None:
    gw = start(gateways, "wide")
    with WireClient(gw.port) as c:
        (t,) = create_topics(c, ["canary-topic"], partitions=3).topics
        assert t.error_code == 0, t
    idle = fd_count(gw)
    t0 = time.monotonic()
    with FdWatch(gw) as watch:
        resp, p99, worst, _ = measure(
            gw, lambda c: create_topics(c, ["wide"], partitions=WIDE, timeout_s=SLOW_START)
        )
    (t,) = resp.topics
    assert (t.error_code, t.error_message or "") == (0, "")
    assert_bound(p99, worst)  # no other group stalled while the partitions were made
    created_s = time.monotonic() - t0
    create_peak = watch.peak
    budget = FD_LIMIT // 4  # log.open.files.max's default: a quarter of ulimit -n
    assert create_peak <= idle + budget + 8, (idle, create_peak)
    produce(gw, "wide", PROBE_PARTITIONS, "before")

    gw.kill()  # a crash, not a clean stop: every acknowledged record must be there
    t0 = time.monotonic()
    again = gateways.restart(gw)
    restart_s = time.monotonic() - t0
    after_start = fd_count(again)
    assert after_start <= idle + budget + 8, (idle, after_start)
    produce(again, "wide", PROBE_PARTITIONS, "after")
    got = consume(again, "wide", PROBE_PARTITIONS, 2 * len(PROBE_PARTITIONS))
    assert got == {p: [f"before-{p}".encode(), f"after-{p}".encode()] for p in PROBE_PARTITIONS}
    assert fd_count(again) < FD_LIMIT // 2
    print(
        f"fd budget: idle {idle} fds, peak while creating {WIDE} partitions {create_peak}, "
        f"creation {created_s:.1f}s, restart {restart_s:.1f}s with {after_start} fds"
    )


def test_a_topic_beyond_max_partitions_is_refused_with_a_message_and_the_server_restarts(
    gateways: Gateways,
) -> None:
    gw = start(gateways, "capped", "max.partitions=5000")
    assert create(gw, "small", 3) == (0, "")
    code, message = create(gw, "wide", WIDE)
    assert code == POLICY_VIOLATION
    assert message == (
        f"Adding {WIDE} partitions would make {WIDE + 3} partitions on this node, "
        "more than max.partitions=5000 (3 exist)."
    )
    assert list(partition_dirs(gw.data_dir, "wide")) == []  # nothing half-created

    gw.stop()
    again = gateways.restart(gw)
    produce(again, "small", (0, 1, 2), "kept")
    got = consume(again, "small", (0, 1, 2), 3)
    assert got == {p: [f"kept-{p}".encode()] for p in (0, 1, 2)}
