"""Each real client creates a 6-partition topic, produces 3,000 records and reads them back
exactly once with manual assignment (no group), seeks to the beginning and the end, and lists
the earliest/latest offsets -- all against one real gateway process.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from e2e.conftest import Gateways
from e2e.expected import COUNT, PARTITIONS, PER_PARTITION, assert_exactly_once, record
from e2e.harness import GatewayProcess

DEADLINE = 30.0


@pytest.fixture(scope="module")
def gw(module_gateways: Gateways) -> GatewayProcess:
    return module_gateways.start("roundtrip", sets=["metrics.listen=127.0.0.1:0"])


def requests_seen(gw: GatewayProcess, api: str) -> set[str]:
    """Versions of `api` the gateway has answered (from its Prometheus endpoint)."""
    prefix = f'groupshift_requests_total{{api="{api}",version="'
    return {
        line[len(prefix) :].split('"', 1)[0] for line in gw.metrics().splitlines() if line.startswith(prefix)
    }


def test_kafka_python_round_trip(gw: GatewayProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = "kafka-python-roundtrip"
    admin = KafkaAdminClient(bootstrap_servers=gw.bootstrap, request_timeout_ms=10000)
    result = admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    assert [t["error_code"] for t in result["topics"]] == [0]

    producer = KafkaProducer(bootstrap_servers=gw.bootstrap, acks="all", linger_ms=5)
    for i in range(COUNT):
        p, k, v = record(i)
        producer.send(topic, key=k, value=v, partition=p)
    producer.flush(timeout=DEADLINE)
    producer.close()

    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer = KafkaConsumer(
        bootstrap_servers=gw.bootstrap,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        auto_offset_reset="earliest",
    )
    consumer.assign(tps)
    assert consumer.beginning_offsets(tps) == dict.fromkeys(tps, 0)
    assert consumer.end_offsets(tps) == dict.fromkeys(tps, PER_PARTITION)
    consumer.seek_to_beginning()
    got = []
    deadline = time.monotonic() + DEADLINE
    while len(got) < COUNT and time.monotonic() < deadline:
        for tp, msgs in consumer.poll(timeout_ms=500).items():
            got += [(tp.partition, m.offset, m.key, m.value) for m in msgs]
    assert_exactly_once(got)

    consumer.seek_to_end()
    assert consumer.poll(timeout_ms=300) == {}
    assert [consumer.position(tp) for tp in tps] == [PER_PARTITION] * PARTITIONS
    consumer.seek_to_beginning(tps[2])
    first = []
    while not first and time.monotonic() < deadline:
        first = consumer.poll(timeout_ms=500).get(tps[2], [])
    assert (first[0].offset, first[0].key) == (0, record(2)[1])
    consumer.close()
    assert "4" in requests_seen(gw, "InitProducerId")  # idempotent producer by default


def test_aiokafka_round_trip(gw: GatewayProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = "aiokafka-roundtrip"

    async def scenario() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=gw.bootstrap)
        await admin.start()
        try:
            created = await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        finally:
            await admin.close()
        assert [e[1] for e in created.topic_errors] == [0]

        producer = AIOKafkaProducer(bootstrap_servers=gw.bootstrap, acks="all", linger_ms=5)
        await producer.start()
        try:
            sends = []
            for i in range(COUNT):
                p, k, v = record(i)
                sends.append(await producer.send(topic, key=k, value=v, partition=p))
            await asyncio.gather(*sends)
        finally:
            await producer.stop()

        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        # auto_offset_reset must agree with the seek below: with the default "latest", the
        # reset aiokafka starts on assign() can finish after seek_to_beginning() and win.
        consumer = AIOKafkaConsumer(
            bootstrap_servers=gw.bootstrap,
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            consumer.assign(tps)
            assert await consumer.beginning_offsets(tps) == dict.fromkeys(tps, 0)
            assert await consumer.end_offsets(tps) == dict.fromkeys(tps, PER_PARTITION)
            await consumer.seek_to_beginning()
            got = []
            deadline = time.monotonic() + DEADLINE
            while len(got) < COUNT and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for tp, msgs in batches.items():
                    got += [(tp.partition, m.offset, m.key, m.value) for m in msgs]
            assert_exactly_once(got)

            await consumer.seek_to_end()
            assert await consumer.getmany(timeout_ms=300) == {}
            assert [await consumer.position(tp) for tp in tps] == [PER_PARTITION] * PARTITIONS
            await consumer.seek_to_beginning(tps[3])
            first: list = []
            while not first and time.monotonic() < deadline:
                first = (await consumer.getmany(tps[3], timeout_ms=500)).get(tps[3], [])
            assert (first[0].offset, first[0].key) == (0, record(3)[1])
        finally:
            await consumer.stop()

    asyncio.run(scenario())


def test_confluent_kafka_round_trip(gw: GatewayProcess) -> None:
    from confluent_kafka import (
        OFFSET_BEGINNING,
        OFFSET_END,
        Consumer,
        KafkaException,
        Producer,
        TopicPartition,
    )
    from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

    topic = "confluent-kafka-roundtrip"
    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(timeout=DEADLINE)

    failures: list[object] = []
    producer = Producer({"bootstrap.servers": gw.bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(COUNT):
        p, k, v = record(i)
        producer.produce(
            topic,
            key=k,
            value=v,
            partition=p,
            on_delivery=lambda err, _msg: err and failures.append(err),
        )
        producer.poll(0)
    assert producer.flush(DEADLINE) == 0
    assert failures == []

    # librdkafka requires a group.id even for a consumer that only assign()s.
    consumer = Consumer(
        {
            "bootstrap.servers": gw.bootstrap,
            "group.id": "unused-assign-only",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got = []
        deadline = time.monotonic() + DEADLINE
        while len(got) < COUNT and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=1000, timeout=0.5):
                if m.error():
                    raise KafkaException(m.error())
                got.append((m.partition(), m.offset(), m.key(), m.value()))
        assert_exactly_once(got)

        for p in range(PARTITIONS):
            assert consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) == (
                0,
                PER_PARTITION,
            )
        consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(PARTITIONS)])
        assert consumer.consume(num_messages=10, timeout=0.3) == []
        consumer.assign([TopicPartition(topic, 4, OFFSET_BEGINNING)])
        first = []
        while not first and time.monotonic() < deadline:
            first = consumer.consume(num_messages=1, timeout=0.5)
        assert (first[0].offset(), first[0].key()) == (0, record(4)[1])
    finally:
        consumer.close()

    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    earliest = admin.list_offsets({tp: OffsetSpec.earliest() for tp in tps})
    latest = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps})
    assert {tp.partition: f.result(10).offset for tp, f in earliest.items()} == dict.fromkeys(
        range(PARTITIONS), 0
    )
    assert {tp.partition: f.result(10).offset for tp, f in latest.items()} == dict.fromkeys(
        range(PARTITIONS), PER_PARTITION
    )
    # librdkafka fetches by topic id (Fetch v16) because Metadata returned non-zero ids.
    assert "16" in requests_seen(gw, "Fetch")
