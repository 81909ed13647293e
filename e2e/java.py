"""Kafka's own Java consumer as a member of an e2e migration scenario.

`JavaMember` runs Kafka's `VerifiableConsumer` (the tool Apache Kafka's system tests drive; see
harness/kafka_dist/java_clients.py) with `--verbose`, and turns its JSON-lines events into the
`Timeline` the checkers of e2e/migration.py judge:

* `record_data` (topic, partition, offset, value) -> a `Read` at the event's timestamp;
* `partitions_assigned` / `partitions_revoked` (printed from the `ConsumerRebalanceListener`
  callbacks) -> `Callback`s (the tool prints and returns at once, so entered == returned);
* `offsets_committed` with `success: true` -> a `Commit` (the tool commits synchronously after
  every poll: `commitSync` with the offsets it just read, so nothing read is uncommitted when
  the next poll runs a revocation);
* the `closing` mark is the later of `shutdown_requested` and the last record the tool printed
  (its shutdown hook wakes the poll loop up, which may still be printing a batch).

Timestamps are the tool's `System.currentTimeMillis()` (the wall clock the Python members use
too, at millisecond resolution).

VerifiableConsumer subscribes with `subscribe(List.of(topic))` only: it has no pattern
subscription, so regex subscriptions are covered by confluent-kafka members elsewhere.
"""

from __future__ import annotations

import time
from typing import Any

from e2e.migration import (
    CLASSIC_HEARTBEAT_MS,
    CLASSIC_SESSION_MS,
    REBALANCE_TIMEOUT_MS,
    Callback,
    Cast,
    Commit,
    Mark,
    Member,
    Read,
    Timeline,
)
from harness.kafka_dist.java_clients import JavaClients, VerifiableProcess


class JavaMember(Member):
    """One VerifiableConsumer process: `protocol` "classic" (with `assignor`, a classic
    `partition.assignment.strategy` class) or "consumer" (KIP-848, with `remote_assignor`:
    "uniform" | "range" | None for the server's default)."""

    def __init__(
        self,
        name: str,
        timeline: Timeline,
        bootstrap: str,
        group: str,
        clients: JavaClients,
        protocol: str = "consumer",
        remote_assignor: str | None = None,
        assignor: str = "org.apache.kafka.clients.consumer.RangeAssignor",
        instance_id: str | None = None,
    ) -> None:
        super().__init__(name, timeline, bootstrap, group, instance_id)
        self.clients = clients
        self.protocol = protocol
        self.remote_assignor = remote_assignor
        self.assignor = assignor
        self.kind = f"java-{protocol}" + (f"-{remote_assignor}" if remote_assignor else "")
        self.proc: VerifiableProcess | None = None
        self.startup_complete = False
        self.last_read = 0.0

    def _properties(self) -> dict[str, str]:
        props = {
            "client.id": self.name,
            "max.poll.interval.ms": str(REBALANCE_TIMEOUT_MS),
            "fetch.max.wait.ms": "100",
            "reconnect.backoff.max.ms": "500",
        }
        if self.protocol == "classic":
            props["session.timeout.ms"] = str(CLASSIC_SESSION_MS)
            props["heartbeat.interval.ms"] = str(CLASSIC_HEARTBEAT_MS)
            props["partition.assignment.strategy"] = self.assignor
        return props

    def _handle(self, event: dict[str, Any]) -> None:
        name = event.get("name")
        t = float(event.get("timestamp", time.time() * 1000)) / 1000.0
        if name == "startup_complete":
            self.startup_complete = True
            self.timeline.add(Mark(t, self.name, "started", self.kind))
        elif name == "record_data":
            if event.get("topic") == self.topic:
                value = event.get("value")
                read = Read(t, self.name, int(event["partition"]), int(event["offset"]), None)
                if value is not None:
                    read = Read(read.t, read.member, read.partition, read.offset, str(value).encode())
                self.timeline.add(read)
                self.last_read = max(self.last_read, t)
        elif name in ("partitions_assigned", "partitions_revoked"):
            parts = frozenset(
                int(p["partition"]) for p in event.get("partitions", []) if p.get("topic") == self.topic
            )
            kind = "assigned" if name == "partitions_assigned" else "revoked"
            with self._lock:
                if kind == "assigned":
                    self._owned.update(parts)
                else:
                    self._owned.difference_update(parts)
            self.timeline.add(Callback(t, t, self.name, kind, parts))
        elif name == "offsets_committed":
            if event.get("success"):
                offsets = {
                    int(o["partition"]): int(o["offset"])
                    for o in event.get("offsets", [])
                    if o.get("topic") == self.topic
                }
                if offsets:
                    self.timeline.add(Commit(t, self.name, offsets))
            else:
                self.client_errors.append(("COMMIT_FAILED", False, str(event.get("error"))))

    def run(self) -> None:
        self.proc = self.clients.verifiable_consumer(
            self.bootstrap,
            self.topic,
            self.group,
            group_protocol=self.protocol,
            group_remote_assignor=self.remote_assignor,
            group_instance_id=self.instance_id,
            properties=self._properties(),
            extra_args=("--verbose",),
        )
        proc = self.proc
        requested = 0.0
        try:
            while not self._stop.is_set():
                try:
                    event = proc.next_event(0.2)
                except TimeoutError:
                    continue
                if event is None:
                    raise RuntimeError(f"VerifiableConsumer exited early:\n{proc.stderr_tail()}")
                self._handle(event)
                if self.startup_complete:
                    self.running.set()
            requested = time.time()
            proc.stop()
            while (event := proc.next_event(5)) is not None:
                if event.get("name") == "shutdown_requested":
                    requested = float(event["timestamp"]) / 1000.0
                self._handle(event)
        finally:
            if proc.process.poll() is None:
                proc.kill()
            with self._lock:
                self._owned.clear()
            self.timeline.add(Mark(max(requested or time.time(), self.last_read), self.name, "closing"))
            self.timeline.mark(self.name, "closed")

    def errors_text(self) -> str:
        return self.proc.stderr_tail() if self.proc is not None else ""


def add_java(
    cast: Cast,
    clients: JavaClients,
    protocol: str = "consumer",
    remote_assignor: str | None = None,
    *,
    instance_id: str | None = None,
    assignor: str = "org.apache.kafka.clients.consumer.RangeAssignor",
) -> JavaMember:
    """Start a Java member in `cast` (named java-cons-N / java-classic-N) and wait for it to
    start; `cast.gw` is anything with a `.bootstrap`."""
    prefix = "java-cons" if protocol == "consumer" else "java-classic"
    cast._n += 1
    member = JavaMember(
        f"{prefix}-{cast._n}",
        cast.timeline,
        cast.gw.bootstrap,
        cast.group,
        clients,
        protocol,
        remote_assignor,
        assignor,
        instance_id,
    )
    cast.add(member)
    return member
