"""One consumer of the migration benchmark, run as its own process by `bench.migration`.

    python -m bench.migration_worker SPEC_JSON

It builds one real consumer (kafka-python or confluent-kafka, per `kind`), prints `ready`, and
waits for `go` on stdin; then it subscribes and keeps polling until `close` arrives on stdin, when
it closes the consumer and exits. Every rebalance callback is printed to stdout as one JSON line
stamped with `time.monotonic()` (CLOCK_MONOTONIC, common to all processes on Linux), so the
parent rebuilds partition ownership on one clock:

    {"ev": "assign" | "revoke" | "lost", "t": ..., "parts": [...]}     from the client callbacks
    {"ev": "ready" | "subscribe" | "closing" | "closed" | "error", "t": ...}

A member stops owning its partitions at `closing` (it no longer processes them), whatever
callbacks its close() runs afterwards. After every poll the worker sleeps `process_ms` per record
received plus `poll_gap_ms`, a stand-in for the application's work: a poll loop that is busy does
not serve rebalance callbacks (and a classic member does not rejoin).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

KINDS = {
    "kp-eager": "kafka-python, classic, range (eager)",
    "kp-cooperative": "kafka-python, classic, cooperative-sticky",
    "ck-eager": "confluent-kafka, classic, range (eager)",
    "ck-cooperative": "confluent-kafka, classic, cooperative-sticky",
    "ck-consumer": "confluent-kafka, group.protocol=consumer",
}

_out_lock = threading.Lock()


def emit(ev: str, **fields: Any) -> None:
    line = json.dumps({"ev": ev, "t": time.monotonic(), **fields})
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Received:
    """The offsets this member was given, per partition, as [first, last] runs."""

    def __init__(self) -> None:
        self.count = 0
        self.runs: dict[int, list[list[int]]] = {}

    def add(self, partition: int, offset: int) -> None:
        self.count += 1
        runs = self.runs.setdefault(partition, [])
        if runs and runs[-1][1] + 1 == offset:
            runs[-1][1] = offset
        else:
            runs.append([offset, offset])

    def ranges(self) -> dict[str, list[list[int]]]:
        return {str(p): runs for p, runs in self.runs.items()}


def work(seconds: float) -> None:
    """The application's work between two polls (a sleep: it must not compete for the CPU)."""
    if seconds > 0:
        time.sleep(seconds)


class Control:
    """Reads `go` / `close` lines from the parent on a daemon thread."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.close = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "go":
                self.go.set()
            elif cmd == "close":
                self.close.set()
                self.go.set()
        self.close.set()  # parent gone: stop
        self.go.set()


def run_kafka_python(spec: dict[str, Any], ctl: Control) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    assignor = CooperativeStickyAssignor if spec["kind"] == "kp-cooperative" else RangePartitionAssignor

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]  # kafka-python is untyped
        def on_partitions_revoked(self, revoked: Any) -> None:
            emit("revoke", parts=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned: Any) -> None:
            emit("assign", parts=sorted(tp.partition for tp in assigned))

        def on_partitions_lost(self, lost: Any) -> None:
            emit("lost", parts=sorted(tp.partition for tp in lost))

    consumer = KafkaConsumer(
        bootstrap_servers=spec["bootstrap"],
        group_id=spec["group"],
        client_id=spec["name"],
        partition_assignment_strategy=[assignor],
        heartbeat_interval_ms=spec["heartbeat_ms"],
        session_timeout_ms=spec["session_ms"],
        max_poll_records=spec["max_poll_records"],
        auto_offset_reset="earliest",
        enable_auto_commit=True,
    )
    # kafka-python 3.0.12 joins on the first poll(). Subscribe now and wait until the coordinator's
    # metadata snapshot holds the topic: a leader that joins before that assigns nothing, then
    # rejoins on the metadata change; if that JoinGroup/SyncGroup outlasts one poll() timeout, the
    # client never applies its result (need_rejoin() turns False once the leader snapshot matches,
    # so the finished join task is never awaited; Java fixed the like in KAFKA-9815): the member
    # stops heartbeating and spins. The benchmark measures protocols, not that race.
    consumer.subscribe([spec["topic"]], listener=Listener())
    deadline = time.monotonic() + 30
    while not getattr(consumer._coordinator, "_metadata_snapshot", {}).get(spec["topic"]):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no metadata for {spec['topic']}")
        consumer.partitions_for_topic(spec["topic"])
        time.sleep(0.05)
    emit("ready")
    ctl.go.wait()
    if ctl.close.is_set():
        consumer.close()
        return
    emit("subscribe")  # the first poll() below sends JoinGroup
    per_record, gap = spec["process_ms"] / 1000.0, spec["poll_gap_ms"] / 1000.0
    got = Received()
    while not ctl.close.is_set():
        batch = consumer.poll(timeout_ms=100)
        for msgs in batch.values():
            for m in msgs:
                got.add(m.partition, m.offset)
        work(sum(len(msgs) for msgs in batch.values()) * per_record + gap)
    emit("closing", records=got.count, got=got.ranges())
    consumer.close()
    emit("closed")


def run_confluent(spec: dict[str, Any], ctl: Control) -> None:
    from confluent_kafka import Consumer

    conf: dict[str, Any] = {
        "bootstrap.servers": spec["bootstrap"],
        "group.id": spec["group"],
        "client.id": spec["name"],
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "enable.metrics.push": False,
    }
    if spec["kind"] == "ck-consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf["partition.assignment.strategy"] = (
            "cooperative-sticky" if spec["kind"] == "ck-cooperative" else "range"
        )
        conf["heartbeat.interval.ms"] = spec["heartbeat_ms"]
        conf["session.timeout.ms"] = spec["session_ms"]

    def on_assign(_c: Any, parts: Any) -> None:
        emit("assign", parts=sorted(tp.partition for tp in parts))

    def on_revoke(_c: Any, parts: Any) -> None:
        emit("revoke", parts=sorted(tp.partition for tp in parts))

    def on_lost(_c: Any, parts: Any) -> None:
        emit("lost", parts=sorted(tp.partition for tp in parts))

    if spec.get("client_debug"):
        conf["debug"] = "cgrp,protocol"
    consumer = Consumer(conf)
    emit("ready")
    ctl.go.wait()
    if ctl.close.is_set():
        consumer.close()
        return
    emit("subscribe")
    consumer.subscribe([spec["topic"]], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    per_record, gap = spec["process_ms"] / 1000.0, spec["poll_gap_ms"] / 1000.0
    got = Received()
    while not ctl.close.is_set():
        msgs = [
            m for m in consumer.consume(num_messages=spec["max_poll_records"], timeout=0.1) if not m.error()
        ]
        for m in msgs:
            partition, offset = m.partition(), m.offset()
            assert partition is not None and offset is not None  # consumed messages have both
            got.add(partition, offset)
        work(len(msgs) * per_record + gap)
    emit("closing", records=got.count, got=got.ranges())
    consumer.close()
    emit("closed")


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    if spec.get("client_debug"):  # client logs on stderr (the parent keeps them with --logs)
        import logging

        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(threadName)s %(name)s %(message)s")
    ctl = Control()
    try:
        if spec["kind"].startswith("kp-"):
            run_kafka_python(spec, ctl)
        else:
            run_confluent(spec, ctl)
    except Exception as e:  # reported to the parent, which fails the case
        emit("error", error=f"{type(e).__name__}: {e}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
