"""Restart durability: after SIGKILL (no shutdown path runs) a gateway restarted on the same data
directory has the same topics, the same topic ids and every acknowledged record.
"""

from __future__ import annotations

import time
import uuid

from e2e.conftest import Gateways
from e2e.expected import COUNT, PARTITIONS, PER_PARTITION, assert_exactly_once, record
from e2e.harness import GatewayProcess
from protocol.client import WireClient, make_request


def topic_ids(gw: GatewayProcess) -> dict[str, tuple[uuid.UUID, int]]:
    with WireClient(gw.port) as c:
        resp = c.request(
            make_request(
                3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
            )
        )
    return {t.name: (t.topic_id, len(t.partitions)) for t in resp.topics}


def consume_all(gw: GatewayProcess, topic: str) -> list[tuple[int, int, bytes, bytes]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=gw.bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < COUNT and time.monotonic() < deadline:
        for tp, msgs in consumer.poll(timeout_ms=300).items():
            got += [(tp.partition, m.offset, m.key, m.value) for m in msgs]
    consumer.close()
    return got


def test_topics_ids_and_records_survive_sigkill(gateways: Gateways) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    gw = gateways.start("durable")
    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    admin.create_topics([NewTopic("kept", PARTITIONS, 1)])["kept"].result(10)
    admin.create_topics([NewTopic("kept-too", 2, 1)])["kept-too"].result(10)

    producer = Producer({"bootstrap.servers": gw.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(COUNT):
        p, k, v = record(i)
        producer.produce("kept", key=k, value=v, partition=p)
    assert producer.flush(20) == 0
    before = topic_ids(gw)

    gw.kill()
    restarted = gateways.restart(gw)

    assert topic_ids(restarted) == before
    assert before["kept"][1] == PARTITIONS and before["kept"][0].int != 0
    assert_exactly_once(consume_all(restarted, "kept"))

    # Offsets continue where the log ended.
    producer = Producer({"bootstrap.servers": restarted.bootstrap, "acks": "all"})
    offsets: list[int] = []
    producer.produce(
        "kept", value=b"after restart", partition=1, on_delivery=lambda err, msg: offsets.append(msg.offset())
    )
    assert producer.flush(10) == 0
    assert offsets == [PER_PARTITION]
    assert restarted.events("log.truncated_tail") == []  # acks=all: nothing torn was acknowledged
    assert restarted.events("log.truncated_corruption") == []
