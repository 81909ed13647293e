"""Metadata against a real gateway: lookups by topic id (what librdkafka's KIP-848 path sends),
stable non-zero ids, and auto-creation of topics on a Metadata request.
"""

from __future__ import annotations

import time
import uuid

import pytest

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from protocol.client import WireClient, make_request

UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC, INVALID_REQUEST, UNKNOWN_TOPIC_ID = 3, 17, 42, 100


@pytest.fixture(scope="module")
def gw(module_gateways: Gateways) -> GatewayProcess:
    return module_gateways.start("metadata", sets=["num.partitions=3"])


def create_topic(client: WireClient, name: str, partitions: int) -> uuid.UUID:
    resp = client.request(
        make_request(
            19,
            7,
            topics=[
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            timeout=10000,
            validate_only=False,
        )
    )
    (result,) = resp.topics
    assert (result.error_code, result.num_partitions) == (0, partitions)
    return result.topic_id


def metadata_by_ids(client: WireClient, version: int, *ids: uuid.UUID) -> list:
    resp = client.request(
        make_request(
            3,
            version,
            topics=[{"topic_id": i, "name": None} for i in ids],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
            include_cluster_authorized_operations=False,
        )
    )
    return list(resp.topics)


def test_metadata_by_topic_id_finds_the_topic_and_flags_unknown_ids(gw: GatewayProcess) -> None:
    with WireClient(gw.port) as c:
        topic_id = create_topic(c, "by-id", 6)
        assert topic_id is not None and topic_id.int != 0
        unknown = uuid.uuid4()
        for version in (12, 13):
            found, missing = metadata_by_ids(c, version, topic_id, unknown)
            assert (found.error_code, found.name, found.topic_id) == (0, "by-id", topic_id)
            assert [p.partition_index for p in found.partitions] == list(range(6))
            assert all(p.leader_id == 0 and tuple(p.isr_nodes) == (0,) for p in found.partitions)
            assert (missing.error_code, missing.name, missing.topic_id) == (
                UNKNOWN_TOPIC_ID,
                None,
                unknown,
            )
        # Topic ids in requests need v12+ (KafkaApis: INVALID_REQUEST before).
        (old,) = metadata_by_ids(c, 10, topic_id)
        assert old.error_code == INVALID_REQUEST


def test_topic_ids_are_stable_across_requests_and_listings(gw: GatewayProcess) -> None:
    with WireClient(gw.port) as c:
        topic_id = create_topic(c, "stable-id", 2)
        everything = c.request(
            make_request(
                3, 13, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
            )
        )
        listed = {t.name: t.topic_id for t in everything.topics}
        assert listed["stable-id"] == topic_id
        assert all(tid is not None and tid.int != 0 for tid in listed.values())
        assert everything.cluster_id and everything.controller_id == 0
        assert [(b.node_id, b.host, b.port) for b in everything.brokers] == [(0, "127.0.0.1", gw.port)]


def test_metadata_request_auto_creates_an_unknown_topic_with_num_partitions(
    gw: GatewayProcess,
) -> None:
    with WireClient(gw.port) as c:
        v1 = c.request(make_request(3, 1, topics=[{"name": "auto-v1"}]))
        (t,) = v1.topics
        assert (t.error_code, t.name, len(t.partitions)) == (0, "auto-v1", 3)
        # v4+ only creates when the request allows it.
        no = c.request(
            make_request(
                3,
                9,
                topics=[{"name": "auto-refused"}],
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )
        )
        assert [(t.name, t.error_code) for t in no.topics] == [("auto-refused", UNKNOWN_TOPIC_OR_PARTITION)]
        bad = c.request(make_request(3, 1, topics=[{"name": "no spaces allowed"}]))
        assert [t.error_code for t in bad.topics] == [INVALID_TOPIC]
        first = metadata_names(c, "auto-v13")
        again = metadata_names(c, "auto-v13")
        assert first == again and first[1] is not None and first[2] == 3


def metadata_names(c: WireClient, name: str) -> tuple[int, uuid.UUID | None, int]:
    resp = c.request(
        make_request(
            3,
            13,
            topics=[{"name": name, "topic_id": None}],
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )
    )
    (t,) = resp.topics
    return t.error_code, t.topic_id, len(t.partitions)


def test_kafka_python_producer_auto_creates_its_topic(gw: GatewayProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=gw.bootstrap, acks="all")
    meta = producer.send("auto-by-producer", key=b"k", value=b"v").get(timeout=10)
    producer.close()
    assert meta.offset == 0
    consumer = KafkaConsumer(
        bootstrap_servers=gw.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    assert consumer.partitions_for_topic("auto-by-producer") == {0, 1, 2}
    tp = TopicPartition("auto-by-producer", meta.partition)
    consumer.assign([tp])
    records: list = []
    deadline = time.monotonic() + 10
    while not records and time.monotonic() < deadline:
        records = consumer.poll(timeout_ms=500).get(tp, [])
    consumer.close()
    assert [(r.key, r.value) for r in records] == [(b"k", b"v")]


def test_auto_creation_can_be_disabled(gateways: Gateways) -> None:
    gw = gateways.start("no-auto", sets=["auto.create.topics.enable=false"])
    with WireClient(gw.port) as c:
        resp = c.request(make_request(3, 1, topics=[{"name": "never-created"}]))
        assert [t.error_code for t in resp.topics] == [UNKNOWN_TOPIC_OR_PARTITION]
        everything = c.request(make_request(3, 1, topics=None))
        assert list(everything.topics) == []
