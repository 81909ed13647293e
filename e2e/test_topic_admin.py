"""Topic administration through librdkafka's AdminClient and raw requests: creation errors as
Kafka reports them, partition increases (seen by producers), and deletion.
"""

from __future__ import annotations

import pytest

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from protocol.client import WireClient, make_request

TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR = 36, 37, 38
INVALID_TOPIC, UNKNOWN_TOPIC_OR_PARTITION = 17, 3


@pytest.fixture(scope="module")
def gw(module_gateways: Gateways) -> GatewayProcess:
    return module_gateways.start("admin")


def create(c: WireClient, name: str, partitions: int, replication: int = 1) -> tuple[int, str]:
    resp = c.request(
        make_request(
            19,
            5,
            topics=[
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": replication,
                    "assignments": [],
                    "configs": [],
                }
            ],
            timeout=10000,
            validate_only=False,
        )
    )
    (r,) = resp.topics
    return r.error_code, r.error_message or ""


def test_create_topics_reports_kafka_errors(gw: GatewayProcess) -> None:
    with WireClient(gw.port) as c:
        assert create(c, "once", 2)[0] == 0
        assert create(c, "once", 2)[0] == TOPIC_ALREADY_EXISTS
        assert create(c, "zero-partitions", 0)[0] == INVALID_PARTITIONS
        code, message = create(c, "replicated", 1, replication=3)
        assert code == INVALID_REPLICATION_FACTOR and "only 1 broker" in message
        assert create(c, "x" * 250, 1)[0] == INVALID_TOPIC
        assert create(c, "..", 1)[0] == INVALID_TOPIC
        assert create(c, "bad/name", 1)[0] == INVALID_TOPIC
        assert create(c, "a_b", 1)[0] == 0
        code, message = create(c, "a.b", 1)
        assert code == INVALID_TOPIC and "collides" in message
        assert create(c, "x" * 249, 1)[0] == 0


def test_confluent_admin_adds_partitions_and_deletes_topics(gw: GatewayProcess) -> None:
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    cluster = admin.describe_cluster(request_timeout=10).result(10)  # DescribeCluster
    assert cluster.cluster_id and [(n.id, n.port) for n in cluster.nodes] == [(0, gw.port)]
    assert cluster.controller is not None and cluster.controller.id == 0
    admin.create_topics([NewTopic("grows", 2, 1)])["grows"].result(10)
    admin.create_partitions([NewPartitions("grows", 5)])["grows"].result(10)
    assert len(admin.list_topics("grows", timeout=10).topics["grows"].partitions) == 5

    with pytest.raises(KafkaException) as shrink:
        admin.create_partitions([NewPartitions("grows", 3)])["grows"].result(10)
    assert shrink.value.args[0].code() == INVALID_PARTITIONS

    delivered: list = []
    producer = Producer({"bootstrap.servers": gw.bootstrap})
    producer.produce(
        "grows",
        value=b"to the new partition",
        partition=4,
        on_delivery=lambda err, msg: delivered.append((err, msg.partition())),
    )
    assert producer.flush(10) == 0
    assert delivered == [(None, 4)]
    del producer  # librdkafka clients have no close(); drop it before the gateway stops

    admin.delete_topics(["grows"])["grows"].result(10)
    assert "grows" not in admin.list_topics(timeout=10).topics
    with pytest.raises(KafkaException) as gone:
        admin.delete_topics(["grows"])["grows"].result(10)
    assert gone.value.args[0].code() == UNKNOWN_TOPIC_OR_PARTITION
    # A topic of the same name starts again empty, with a new id.
    admin.create_topics([NewTopic("grows", 1, 1)])["grows"].result(10)
    with WireClient(gw.port) as c:
        resp = c.request(
            make_request(
                2,
                5,
                replica_id=-1,
                isolation_level=0,
                topics=[
                    {
                        "name": "grows",
                        "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}],
                    }
                ],
            )
        )
        assert resp.topics[0].partitions[0].offset == 0
    # The pytest.raises results hold this frame through their tracebacks, so the admin client
    # would outlive the gateway (and log refused connections at exit) without this.
    del admin
