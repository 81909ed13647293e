"""Topic and broker configs and DeleteRecords through real admin clients, and raw bad input.

* confluent-kafka's AdminClient: topic created with configs, DescribeConfigs (values, sources,
  synonyms), IncrementalAlterConfigs (SET/DELETE/APPEND/SUBTRACT, validate_only), legacy
  AlterConfigs (replaces every override), broker configs (dynamic ones alterable, read-only
  ones refused), DeleteRecords (a consumer from the beginning starts at the new log start,
  ListOffsets EARLIEST moves), `max.message.bytes` refusing a larger batch; everything
  survives a restart.
* kafka-python's KafkaAdminClient and aiokafka's admin client: describe, alter and
  DeleteRecords on the same server.
* raw requests: Kafka's error codes and messages for bad names, values and offsets.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from gateway.dataplane.configs import TOPIC_DEFS
from protocol.client import WireClient, make_request

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION, MESSAGE_TOO_LARGE = 1, 3, 10
INVALID_TOPIC_EXCEPTION, INVALID_CONFIG, INVALID_REQUEST = 17, 40, 42
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture(scope="module")
def gw(module_gateways: Gateways) -> Iterator[GatewayProcess]:
    yield module_gateways.start("configs")
    _ADMINS.clear()


_ADMINS: dict[str, Any] = {}


def admin(gw: GatewayProcess) -> Any:
    """One AdminClient per server, kept alive (a dropped client cancels its futures)."""
    from confluent_kafka.admin import AdminClient

    if gw.bootstrap not in _ADMINS:
        _ADMINS[gw.bootstrap] = AdminClient({"bootstrap.servers": gw.bootstrap})
    return _ADMINS[gw.bootstrap]


def new_topic(gw: GatewayProcess, partitions: int = 1, **configs: str) -> str:
    from confluent_kafka.admin import NewTopic

    name = f"cfg-{uuid.uuid4().hex[:8]}"
    config = {k.replace("_", "."): v for k, v in configs.items()}
    [future] = admin(gw).create_topics([NewTopic(name, partitions, 1, config=config)]).values()
    future.result(15)
    return name


def describe_topic(gw: GatewayProcess, topic: str) -> dict[str, Any]:
    from confluent_kafka.admin import ConfigResource, ResourceType

    [future] = admin(gw).describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return future.result(15)  # type: ignore[no-any-return]


def incremental(gw: GatewayProcess, rtype: Any, name: str, *ops: tuple[str, str, str | None]) -> int:
    """IncrementalAlterConfigs through confluent; the error code (0 when accepted)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType[op]) for k, op, v in ops]
    [future] = (
        admin(gw)
        .incremental_alter_configs([ConfigResource(rtype, name, incremental_configs=entries)])
        .values()
    )
    try:
        future.result(15)
    except KafkaException as e:
        return int(e.args[0].code())
    return 0


def produce(gw: GatewayProcess, topic: str, count: int, size: int = 10) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": gw.bootstrap, "linger.ms": 0})
    for i in range(count):
        p.produce(topic, value=b"%d" % i + b"x" * (size - 1), partition=0)
        p.flush(10)
    assert p.flush(10) == 0


def consume_all(gw: GatewayProcess, topic: str, expect: int) -> list[int]:
    """Offsets a fresh consumer reads from the beginning of partition 0."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": gw.bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, -2)])  # OFFSET_BEGINNING
        offsets: list[int] = []
        for _ in range(100):
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                offsets.append(m.offset())
            if len(offsets) >= expect:
                break
        return offsets
    finally:
        c.close()


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_confluent_topic_configs_described_and_altered(gw: GatewayProcess) -> None:
    from confluent_kafka.admin import ConfigResource, ResourceType

    topic = new_topic(gw, cleanup_policy="compact", retention_ms="3600000")
    got = describe_topic(gw, topic)
    assert len(got) == len(TOPIC_DEFS)  # every topic config Kafka lists
    assert (got["cleanup.policy"].value, got["cleanup.policy"].source) == ("compact", DYNAMIC_TOPIC_CONFIG)
    assert not got["cleanup.policy"].is_default
    assert [(s.name, s.value, s.source) for s in got["cleanup.policy"].synonyms.values()] == [
        ("cleanup.policy", "compact", DYNAMIC_TOPIC_CONFIG),
        ("log.cleanup.policy", "delete", DEFAULT_CONFIG),
    ]
    assert (got["segment.ms"].value, got["segment.ms"].source) == ("604800000", DEFAULT_CONFIG)
    assert got["segment.ms"].is_default and not got["segment.ms"].is_read_only
    assert got["max.message.bytes"].value == "1048588"

    assert (
        incremental(
            gw,
            ResourceType.TOPIC,
            topic,
            ("cleanup.policy", "APPEND", "delete"),
            ("retention.ms", "DELETE", None),
            ("segment.ms", "SET", "100000"),
        )
        == 0
    )
    got = describe_topic(gw, topic)
    assert got["cleanup.policy"].value == "compact,delete"
    assert (got["retention.ms"].value, got["retention.ms"].source) == ("604800000", DEFAULT_CONFIG)
    assert (got["segment.ms"].value, got["segment.ms"].source) == ("100000", DYNAMIC_TOPIC_CONFIG)
    assert incremental(gw, ResourceType.TOPIC, topic, ("cleanup.policy", "SUBTRACT", "compact")) == 0
    assert describe_topic(gw, topic)["cleanup.policy"].value == "delete"

    # Refusals change nothing.
    assert incremental(gw, ResourceType.TOPIC, topic, ("no.such.config", "SET", "1")) == INVALID_CONFIG
    assert incremental(gw, ResourceType.TOPIC, topic, ("segment.ms", "SET", "soon")) == INVALID_CONFIG
    assert incremental(gw, ResourceType.TOPIC, topic, ("segment.ms", "APPEND", "1")) == INVALID_CONFIG
    assert incremental(gw, ResourceType.TOPIC, "no-such-topic", ("segment.ms", "SET", "1")) == (
        UNKNOWN_TOPIC_OR_PARTITION
    )
    assert describe_topic(gw, topic)["segment.ms"].value == "100000"

    # Legacy AlterConfigs replaces every override (confluent marks the call deprecated).
    [future] = (
        admin(gw)
        .alter_configs([ConfigResource(ResourceType.TOPIC, topic, set_config={"flush.ms": "5000"})])
        .values()
    )
    future.result(15)
    got = describe_topic(gw, topic)
    overrides = {n: e.value for n, e in got.items() if e.source == DYNAMIC_TOPIC_CONFIG}
    assert overrides == {"flush.ms": "5000"}


def test_confluent_broker_configs(gw: GatewayProcess) -> None:
    from confluent_kafka.admin import ConfigResource, ResourceType

    def broker(name: str = "0") -> dict[str, Any]:
        [future] = admin(gw).describe_configs([ConfigResource(ResourceType.BROKER, name)]).values()
        return future.result(15)  # type: ignore[no-any-return]

    got = broker()
    assert (got["node.id"].value, got["node.id"].source, got["node.id"].is_read_only) == (
        "0",
        STATIC_BROKER_CONFIG,
        True,
    )
    assert (got["log.cleaner.threads"].value, got["log.cleaner.threads"].is_read_only) == ("1", False)
    assert got["ssl.key.password"].is_sensitive and got["ssl.key.password"].value is None
    assert got["min.insync.replicas"].source == DYNAMIC_DEFAULT_BROKER_CONFIG
    assert got["listeners"].value == f"PLAINTEXT://{gw.bootstrap}"  # the bound port, not 0

    assert incremental(gw, ResourceType.BROKER, "0", ("log.cleaner.threads", "SET", "2")) == 0
    with WireClient(gw.port) as c:  # (confluent refuses an empty resource name: the cluster default)
        assert iac_raw(c, BROKER_RESOURCE, "", ("log.retention.ms", SET, "7200000")) == (0, None)
    assert incremental(gw, ResourceType.BROKER, "0", ("log.dirs", "SET", "/elsewhere")) == INVALID_REQUEST
    assert incremental(gw, ResourceType.BROKER, "0", ("log.cleaner.threads", "SET", "two")) == INVALID_REQUEST
    with WireClient(gw.port) as c:  # (librdkafka sends a broker resource to that broker only)
        assert iac_raw(c, BROKER_RESOURCE, "7", ("log.cleaner.threads", SET, "3")) == (
            INVALID_REQUEST,
            "Unexpected broker id, expected 0, but received 7",
        )
    got = broker()
    assert (got["log.cleaner.threads"].value, got["log.cleaner.threads"].source) == (
        "2",
        DYNAMIC_BROKER_CONFIG,
    )
    assert [(s.name, s.value, s.source) for s in got["log.retention.ms"].synonyms.values()] == [
        ("log.retention.ms", "7200000", DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", "168", DEFAULT_CONFIG),
    ]
    with WireClient(gw.port) as c:
        res = describe_raw(c, BROKER_RESOURCE, "")
        assert [(e.name, e.config_source) for e in res.configs] == [
            ("log.retention.ms", DYNAMIC_DEFAULT_BROKER_CONFIG),  # Kafka's hash-map order
            ("min.insync.replicas", DYNAMIC_DEFAULT_BROKER_CONFIG),
        ]
    # A topic without its own retention.ms follows the cluster default.
    topic = new_topic(gw)
    assert (
        describe_topic(gw, topic)["retention.ms"].value,
        describe_topic(gw, topic)["retention.ms"].source,
    ) == (
        "7200000",
        DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    with WireClient(gw.port) as c:
        assert iac_raw(c, BROKER_RESOURCE, "", ("log.retention.ms", DELETE, None)) == (0, None)
    assert describe_topic(gw, topic)["retention.ms"].value == "604800000"


def test_confluent_delete_records(gw: GatewayProcess) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    topic = new_topic(gw)
    produce(gw, topic, 10)
    [future] = admin(gw).delete_records([TopicPartition(topic, 0, 4)]).values()
    assert future.result(15).low_watermark == 4
    [future] = admin(gw).list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()}).values()
    assert future.result(15).offset == 4
    assert consume_all(gw, topic, 6) == [4, 5, 6, 7, 8, 9]
    [future] = admin(gw).delete_records([TopicPartition(topic, 0, 11)]).values()
    with pytest.raises(Exception, match="OFFSET_OUT_OF_RANGE"):
        future.result(15)


def test_max_message_bytes_refuses_larger_batches(gw: GatewayProcess) -> None:
    from confluent_kafka import KafkaError, Producer

    topic = new_topic(gw, max_message_bytes="2000")
    errors: list[Any] = []
    p = Producer({"bootstrap.servers": gw.bootstrap, "linger.ms": 0, "message.max.bytes": 100000})
    p.produce(topic, value=b"x" * 5000, partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(15) == 0
    p.produce(topic, value=b"y" * 100, partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(15) == 0
    assert errors[0] is not None and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert errors[1] is None


def test_configs_and_log_start_survive_restart(gateways: Gateways) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import ResourceType

    gw = gateways.start("cfg-restart")
    topic = new_topic(gw, segment_ms="123456")
    produce(gw, topic, 5)
    [future] = admin(gw).delete_records([TopicPartition(topic, 0, 3)]).values()
    future.result(15)
    assert incremental(gw, ResourceType.BROKER, "0", ("log.cleaner.threads", "SET", "4")) == 0
    gw.kill()  # SIGKILL: what was acknowledged must be on disk
    gw = gateways.restart(gw)
    assert describe_topic(gw, topic)["segment.ms"].value == "123456"
    assert consume_all(gw, topic, 2) == [3, 4]
    from confluent_kafka.admin import ConfigResource

    [future] = admin(gw).describe_configs([ConfigResource(ResourceType.BROKER, "0")]).values()
    assert future.result(15)["log.cleaner.threads"].value == "4"


def test_kafka_python_admin(gw: GatewayProcess) -> None:
    from kafka import TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    topic = f"kp-{uuid.uuid4().hex[:8]}"
    kp = KafkaAdminClient(bootstrap_servers=gw.bootstrap)
    try:
        kp.create_topics({topic: {"num_partitions": 1, "configs": {"retention.bytes": "1000000"}}})
        got = kp.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
        topic_cfg = got["topic"][topic]
        assert topic_cfg["retention.bytes"]["value"] == "1000000"
        assert topic_cfg["retention.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert topic_cfg["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
        # Legacy AlterConfigs (kafka-python re-sends the other overrides itself, since the
        # request replaces them all), then IncrementalAlterConfigs DELETE via reset_configs.
        kp.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"segment.ms": "200000"})],
            incremental=False,
        )
        kp.reset_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.bytes": None})])
        got = kp.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])  # modified only
        assert {n: c["value"] for n, c in got["topic"][topic].items()} == {"segment.ms": "200000"}
        broker = kp.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all")
        assert broker["broker"]["0"]["num.partitions"]["value"] == "1"
        produce(gw, topic, 4)
        result = kp.delete_records({TopicPartition(topic, 0): 2})
        assert [r["low_watermark"] for r in result.values()] == [2]
    finally:
        kp.close()


def test_aiokafka_admin(gw: GatewayProcess) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.structs import TopicPartition

    topic = f"aio-{uuid.uuid4().hex[:8]}"

    async def run() -> tuple[dict[str, tuple[str, int]], int]:
        client = AIOKafkaAdminClient(bootstrap_servers=gw.bootstrap)
        await client.start()
        try:
            await client.create_topics([NewTopic(topic, 1, 1, topic_configs={"flush.messages": "100"})])
            await client.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"flush.messages": "200"})]
            )
            [resp] = await client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
            entries = {e[0]: (e[1], e[3]) for r in resp.resources for e in r[4]}  # v1: source
            await asyncio.get_running_loop().run_in_executor(None, produce, gw, topic, 3)
            deleted = await client.delete_records({TopicPartition(topic, 0): RecordsToDelete(2)})
            return entries, deleted[TopicPartition(topic, 0)]
        finally:
            await client.close()

    entries, low = asyncio.run(run())
    assert entries["flush.messages"] == ("200", DYNAMIC_TOPIC_CONFIG)
    assert len(entries) == len(TOPIC_DEFS)
    assert low == 2


# -- raw requests -----------------------------------------------------------------------------


def create_with(c: WireClient, name: str, **configs: str | None) -> tuple[int, str | None]:
    resp = c.request(
        make_request(
            19,
            7,
            topics=[
                {
                    "name": name,
                    "num_partitions": 1,
                    "replication_factor": -1,
                    "assignments": [],
                    "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()],
                }
            ],
            timeout=10000,
            validate_only=False,
        )
    )
    return resp.topics[0].error_code.value, resp.topics[0].error_message


def describe_raw(c: WireClient, rtype: int, name: str, keys: list[str] | None = None) -> Any:
    resp = c.request(
        make_request(
            32,
            4,
            resources=[{"resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
            include_synonyms=True,
            include_documentation=True,
        )
    )
    return resp.results[0]


def iac_raw(
    c: WireClient, rtype: int, name: str, *ops: tuple[str, int, str | None]
) -> tuple[int, str | None]:
    resp = c.request(
        make_request(
            44,
            1,
            resources=[
                {
                    "resource_type": rtype,
                    "resource_name": name,
                    "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops],
                }
            ],
            validate_only=False,
        )
    )
    r = resp.responses[0]
    return r.error_code.value, r.error_message


def test_wire_bad_input(gw: GatewayProcess) -> None:
    with WireClient(gw.port) as c:
        assert create_with(c, "raw-a", no_such_config="1") == (
            INVALID_CONFIG,
            "Unknown topic config name: no.such.config",
        )
        assert create_with(c, "raw-b", max_message_bytes="abc") == (
            INVALID_CONFIG,
            "Invalid value abc for configuration max.message.bytes: Not a number of type INT",
        )
        assert create_with(c, "raw-c", cleanup_policy="bogus") == (
            INVALID_CONFIG,
            "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, delete",
        )
        assert create_with(c, "raw-d", retention_ms=None) == (
            INVALID_CONFIG,
            "Null value not supported for topic configs: retention.ms",
        )
        assert create_with(c, "raw-e", min_cleanable_dirty_ratio="2") == (
            INVALID_CONFIG,
            "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1",
        )
        assert create_with(c, "raw-ok", retention_ms=" 100 ", preallocate="TRUE")[0] == 0

        res = describe_raw(c, TOPIC_RESOURCE, "raw-ok", ["retention.ms", "no.such", "preallocate"])
        assert [(e.name, e.value, e.config_source) for e in res.configs] == [  # Kafka's order
            ("retention.ms", "100", DYNAMIC_TOPIC_CONFIG),
            ("preallocate", "true", DYNAMIC_TOPIC_CONFIG),
        ]
        assert res.configs[1].documentation.startswith("True if we should preallocate")
        assert describe_raw(c, TOPIC_RESOURCE, "missing").error_code.value == UNKNOWN_TOPIC_OR_PARTITION
        res = describe_raw(c, TOPIC_RESOURCE, "a b")
        assert (res.error_code.value, res.error_message) == (
            INVALID_TOPIC_EXCEPTION,
            "Topic name is invalid: 'a b' contains one or more characters other than ASCII alphanumerics, "
            "'.', '_' and '-'",
        )
        assert iac_raw(c, TOPIC_RESOURCE, "", ("retention.ms", SET, "1")) == (
            INVALID_REQUEST,
            "Default topic resources are not allowed.",
        )
        res = describe_raw(c, BROKER_RESOURCE, "9")
        assert (res.error_code.value, res.error_message) == (
            INVALID_REQUEST,
            "Unexpected broker id, expected 0 or empty string, but received 9",
        )
        assert describe_raw(c, 99, "x").error_code.value == INVALID_REQUEST
        res = describe_raw(c, 8, "0")  # BROKER_LOGGER
        assert (res.error_code.value, res.error_message) == (
            INVALID_REQUEST,
            "groupshift does not serve BROKER_LOGGER configs",
        )
        twice = {"resource_type": TOPIC_RESOURCE, "resource_name": "raw-ok", "configs": []}
        resp = c.request(make_request(33, 2, resources=[twice, twice], validate_only=False))
        assert [(r.error_code.value, r.error_message) for r in resp.responses] == [
            (INVALID_REQUEST, "Duplicate resource in the request")
        ] * 2

        assert iac_raw(c, TOPIC_RESOURCE, "raw-ok", ("segment.ms", SET, "1"), ("segment.ms", SET, "2")) == (
            INVALID_REQUEST,
            "Error due to duplicate config keys",
        )
        assert iac_raw(c, TOPIC_RESOURCE, "raw-ok", ("retention.ms", APPEND, "1")) == (
            INVALID_CONFIG,
            "Can't APPEND to key retention.ms because its type is not LIST.",
        )
        assert iac_raw(c, TOPIC_RESOURCE, "raw-ok", ("retention.ms", SET, None)) == (
            INVALID_REQUEST,
            "Null value not supported for : retention.ms",
        )
        assert iac_raw(c, BROKER_RESOURCE, "0", ("log.dirs", SET, "/x")) == (
            INVALID_REQUEST,
            "Cannot update these configs dynamically: [log.dirs]",
        )

        def delete(offset: int, partition: int = 0, topic: str = "raw-ok") -> tuple[int, int]:
            resp = c.request(
                make_request(
                    21,
                    2,
                    topics=[
                        {"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}
                    ],
                    timeout=10000,
                )
            )
            p = resp.topics[0].partitions[0]
            return p.error_code.value, p.low_watermark

        assert delete(1) == (OFFSET_OUT_OF_RANGE, -1)  # the log is empty: high watermark 0
        assert delete(-5) == (OFFSET_OUT_OF_RANGE, -1)
        assert delete(-1) == (0, 0)
        assert delete(0, partition=3) == (UNKNOWN_TOPIC_OR_PARTITION, -1)
        assert delete(0, topic="missing") == (UNKNOWN_TOPIC_OR_PARTITION, -1)


def test_api_versions_advertise_the_config_apis_as_kafka_4_does(gw: GatewayProcess) -> None:
    with WireClient(gw.port) as c:
        resp = c.request(make_request(18, 3, client_software_name="e2e", client_software_version="1"))
    served = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    # Kafka 4.3.1 and 4.4.0 advertise exactly these ranges (DescribeConfigs v0 went in Kafka 4.0).
    assert {k: served.get(k) for k in (21, 32, 33, 44)} == {21: (0, 2), 32: (1, 4), 33: (0, 2), 44: (0, 1)}
