"""The data plane's config rules (`gateway.dataplane.configs`) and DeleteRecords' log start.

Expected values were measured on Apache Kafka 4.3.1 and 4.4.0 (DescribeConfigs / CreateTopics answers).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.dataplane.configs import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER,
    DYNAMIC_DEFAULT_BROKER,
    LIST,
    LONG,
    STATIC_BROKER,
    TOPIC_CONFIG,
    TOPIC_DEFS,
    ConfigStore,
    ConfigValueError,
    check_topic_config,
    hash_map_order,
    java_double,
    parse_value,
)
from gateway.dataplane.plane import DataPlane, TopicError


@pytest.mark.parametrize(
    ("x", "shown"),
    [
        (0.5, "0.5"),
        (2.0, "2.0"),
        (1e-5, "1.0E-5"),
        (1e7, "1.0E7"),
        (123456.0, "123456.0"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (0.0, "0.0"),
    ],
)
def test_doubles_print_as_java_does(x: float, shown: str) -> None:
    assert java_double(x) == shown


def test_values_parse_as_kafka_config_def_does() -> None:
    assert parse_value("retention.ms", LONG, " 100 ") == 100
    assert parse_value("retention.ms", LONG, "+5") == 5
    assert parse_value("cleanup.policy", LIST, "compact, delete") == ["compact", "delete"]
    assert parse_value("cleanup.policy", LIST, "") == []
    for bad in ("1_000", "1e3", "", "99999999999999999999"):
        with pytest.raises(ConfigValueError, match="Not a number of type LONG"):
            parse_value("retention.ms", LONG, bad)


def test_unknown_names_and_null_values_are_refused() -> None:
    with pytest.raises(ConfigValueError, match=r"^Unknown topic config name: no\.such$"):
        check_topic_config("no.such", "1")
    with pytest.raises(ConfigValueError) as e:
        check_topic_config("retention.ms", None)
    assert e.value.message == "Null value not supported for topic configs: retention.ms"


THROTTLED_FORMAT = (
    "leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the "
    "following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
)


@pytest.mark.parametrize(
    ("name", "value", "shown", "problem"),
    [
        ("max.message.bytes", "abc", "abc", "Not a number of type INT"),
        ("min.insync.replicas", "0", "0", "Value must be at least 1"),
        ("segment.bytes", "1000", "1000", "Value must be at least 1048576"),
        ("compression.gzip.level", "0", "0", "Value must be between 1 and 9 or equal to -1"),
        ("compression.lz4.level", "18", "18", "Value must be no more than 17"),
        (
            "compression.type",
            "ZSTD",
            "ZSTD",
            "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        ("preallocate", "maybe", "maybe", "Expected value to be either true or false"),
        ("min.cleanable.dirty.ratio", "2", "2.0", "Value must be no more than 1"),
        ("cleanup.policy", "compact,bogus", "bogus", "String must be one of: compact, delete"),
        ("leader.replication.throttled.replicas", "x", "[x]", THROTTLED_FORMAT),
    ],
)
def test_bad_values_carry_kafkas_message(name: str, value: str, shown: str, problem: str) -> None:
    with pytest.raises(ConfigValueError) as e:
        check_topic_config(name, value)
    assert e.value.message == f"Invalid value {shown} for configuration {name}: {problem}"


def test_every_kafka_topic_config_is_listed_with_a_default() -> None:
    assert len(TOPIC_DEFS) == 37  # Kafka 4.4.0
    assert TOPIC_DEFS["max.message.bytes"].default == "1048588"
    assert all(d.documentation for d in TOPIC_DEFS.values())


def test_hash_map_order_reproduces_kafkas_listing_order() -> None:
    from gateway.dataplane.configs import BROKER_DEFS

    # kafka_configs.json keeps the order Kafka 4.3.1 listed them in.
    assert hash_map_order(list(BROKER_DEFS)) == list(BROKER_DEFS)
    assert hash_map_order(list(TOPIC_DEFS)) == list(TOPIC_DEFS)


def test_hash_map_order_is_kafkas() -> None:
    # Kafka 4.3.1 lists its dynamic broker defaults in this order.
    assert hash_map_order(["min.insync.replicas", "log.retention.ms"]) == [
        "log.retention.ms",
        "min.insync.replicas",
    ]


def test_topic_values_follow_broker_synonyms(tmp_path: Path) -> None:
    store = ConfigStore(tmp_path, 1, {"log.retention.hours": "2"})
    store.topics["t"] = {}
    entry = store.topic_entry("t", "retention.ms")
    assert entry["value"] == "7200000"  # hours -> ms, as KafkaConfig derives it
    assert entry["config_source"] == DEFAULT_CONFIG  # the synonyms list starts at log.retention.ms
    assert entry["synonyms"] == []
    store.set_broker(False, {"log.retention.ms": "1000"})
    entry = store.topic_entry("t", "retention.ms")
    assert (entry["value"], entry["config_source"]) == ("1000", DYNAMIC_DEFAULT_BROKER)
    assert [(s["name"], s["source"]) for s in entry["synonyms"]] == [
        ("log.retention.ms", DYNAMIC_DEFAULT_BROKER),
        ("log.retention.hours", STATIC_BROKER),
        ("log.retention.hours", DEFAULT_CONFIG),
    ]
    store.set_broker(True, {"message.max.bytes": "2000"})
    store.set_topic("t", {"cleanup.policy": "compact, delete"})
    assert store.max_message_bytes("t") == 2000
    entry = store.topic_entry("t", "cleanup.policy")
    assert (entry["value"], entry["config_source"]) == ("compact,delete", TOPIC_CONFIG)
    broker = store.broker_entry("message.max.bytes", per_broker=True)
    assert (broker["value"], broker["config_source"], broker["read_only"]) == ("2000", DYNAMIC_BROKER, False)
    assert store.broker_entry("log.dirs", per_broker=True)["read_only"]

    reopened = ConfigStore(tmp_path, 1)
    assert reopened.topics == {"t": {"cleanup.policy": "compact, delete"}}
    assert reopened.broker == {"message.max.bytes": "2000"}
    assert reopened.broker_default == {"log.retention.ms": "1000"}


def test_custom_broker_configs_are_kept_and_described_as_kafka_does(tmp_path: Path) -> None:
    store = ConfigStore(tmp_path, 1)
    store.set_broker(True, {"custom.x": "1"})
    assert "custom.x" in store.broker_names(per_broker=True)
    entry = store.broker_entry("custom.x", per_broker=True)
    # Kafka 4.3.1: no type known, so treated as sensitive and read-only.
    assert (entry["value"], entry["config_source"], entry["read_only"], entry["is_sensitive"]) == (
        None,
        DYNAMIC_BROKER,
        True,
        True,
    )
    assert entry["synonyms"] == [{"name": "custom.x", "value": None, "source": DYNAMIC_BROKER}]


def test_a_new_node_has_kafkas_cluster_default_min_insync_replicas(tmp_path: Path) -> None:
    store = ConfigStore(tmp_path, 0)
    entry = store.broker_entry("min.insync.replicas", per_broker=True)
    assert (entry["value"], entry["config_source"]) == ("1", DYNAMIC_DEFAULT_BROKER)


def test_topic_configs_live_and_die_with_the_topic(tmp_path: Path) -> None:
    async def run() -> None:
        plane = DataPlane(tmp_path)
        plane.create_topic("t", 1, {"segment.ms": "100000"})
        with pytest.raises(TopicError, match="Unknown topic config name: nope"):
            plane.create_topic("u", 1, {"nope": "1"})
        assert plane.topic("u") is None
        assert plane.configs.topics == {"t": {"segment.ms": "100000"}}
        await plane.delete_topic("t")
        plane.create_topic("t", 1)
        assert plane.configs.topics == {}
        await plane.close()

    asyncio.run(run())


def test_log_start_offset_survives_reopen(tmp_path: Path) -> None:
    from tests.record_batches import make_batch

    async def run() -> None:
        plane = DataPlane(tmp_path)
        plane.create_topic("t", 1)
        p = plane.partition("t", 0)
        assert p is not None
        for i in range(5):
            p.append(make_batch([b"v%d" % i]))
        await p.make_durable()
        assert p.delete_records_before(3) == 3
        assert p.delete_records_before(1) == 3  # below the start: nothing changes
        await plane.close()
        plane = DataPlane(tmp_path)
        p = plane.partition("t", 0)
        assert p is not None
        assert (p.log_start_offset, p.high_watermark) == (3, 5)
        await plane.close()

    asyncio.run(run())
