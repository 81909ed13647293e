"""Produce and fetch throughput with librdkafka (confluent-kafka), the data-plane load of the
benchmarks: `bench.gateway` measures groupshift's own log with it, `bench.upstream` a Kafka
cluster directly and through `groupshift serve --upstream`.

Produce: fixed-size records round-robin over the topic's partitions, acks=all, linger 5 ms and
1 MiB batches (a throughput-minded producer; ProduceRequest v3+ with v2 record batches).
Fetch: an assign-only consumer (no group, so no group protocol in the way) reading them back
from the earliest offset with large fetch sizes. Both benchmarks use the same load, so their
figures compare.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

PARTITIONS = 6


@dataclass(frozen=True)
class Throughput:
    """How many records of what size moved in how long."""

    records: int
    record_bytes: int
    seconds: float

    def rates(self) -> dict[str, Any]:
        """`records_per_s` and `mb_per_s`, rounded as the benchmarks report them."""
        return {
            "records_per_s": round(self.records / self.seconds),
            "mb_per_s": round(self.records * self.record_bytes / self.seconds / 1e6, 1),
        }


def produce(
    bootstrap: str, topic: str, records: int, size: int, client: dict[str, Any] | None = None
) -> Throughput:
    """Create `topic` (PARTITIONS partitions) and produce `records` records of `size` bytes to it;
    raises RuntimeError if any delivery failed, since a rate of failed sends means nothing."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic  # where it is defined (and typed)

    # `client`: librdkafka settings every client adds (security: bench.upstream --security)
    admin = AdminClient({"bootstrap.servers": bootstrap, **(client or {})})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer(
        {
            **(client or {}),
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = b"x" * size
    failed: list[Any] = []
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(
                    topic,
                    value=value,
                    partition=i % PARTITIONS,
                    on_delivery=lambda err, _m: None if err is None else failed.append(err),
                )
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    elapsed = time.perf_counter() - started
    if failed:
        raise RuntimeError(f"{len(failed)} deliveries failed, e.g. {failed[0]}")
    return Throughput(records, size, elapsed)


def fetch(
    bootstrap: str, topic: str, records: int, size: int, client: dict[str, Any] | None = None
) -> Throughput:
    """Read up to `records` records of `topic` back from the start (at most 120 s); the count
    is what arrived, so a short read shows instead of inflating the rate."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            **(client or {}),
            "bootstrap.servers": bootstrap,
            "group.id": "bench-assign-only",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 << 20,
            "max.partition.fetch.bytes": 4 << 20,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got = 0
    started = time.perf_counter()
    deadline = started + 120
    while got < records and time.perf_counter() < deadline:
        got += sum(1 for m in consumer.consume(num_messages=10_000, timeout=1) if not m.error())
    elapsed = time.perf_counter() - started
    consumer.close()
    return Throughput(got, size, elapsed)
