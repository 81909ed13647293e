"""Differential: topic/broker configs and DeleteRecords, a real Kafka 4.x node vs groupshift.

The same scripted requests go to both servers (same topic names, groupshift started with Kafka's
node id); answers are compared field by field after removing what differs by nature (topic ids,
throttle times). Broker configs are compared for the dynamic configs the script alters and a few
defaults, since static settings differ between the two nodes by construction.

Needs the `kafka4` fixture of `tests.plugins.kafka` (Java and Maven); without it the test
skips with the reason, and `e2e/test_topic_configs.py` checks the same behaviour on groupshift
alone with real admin clients.
"""

from __future__ import annotations

import dataclasses
import enum
import time
import uuid
from typing import Any

import pytest

from e2e.conftest import Gateways
from protocol.client import WireClient, make_request

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
BROKER_KEYS = [
    "log.cleaner.threads",
    "log.retention.ms",
    "message.max.bytes",
    "log.segment.bytes",
    "min.insync.replicas",
    "compression.type",
]


def plain(x: Any) -> Any:
    """A kio entity as plain data, without topic ids and throttle times."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {
            f.name: plain(getattr(x, f.name))
            for f in dataclasses.fields(x)
            if f.name not in ("topic_id", "throttle_time")
        }
    if isinstance(x, (list, tuple)):
        return [plain(i) for i in x]
    if isinstance(x, enum.Enum):
        return x.value
    return x


def node_id(port: int) -> int:
    with WireClient(port) as c:
        md = c.request(
            make_request(
                3, 12, topics=[], allow_auto_topic_creation=False, include_topic_authorized_operations=False
            )
        )
        return int(md.brokers[0].node_id)


def produce(port: int, topic: str, count: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 0})
    for i in range(count):
        p.produce(topic, value=b"v%d" % i, partition=0)
        p.flush(10)
    assert p.flush(10) == 0


def run_script(port: int, suffix: str, node: int, settle_s: float) -> dict[str, Any]:
    """Every scripted request's answer, by tag.

    Kafka applies an altered config when its metadata log reaches the broker, a moment after
    answering: `settle_s` gives it that moment before describing (groupshift needs none).
    """
    out: dict[str, Any] = {}

    def settle() -> None:
        time.sleep(settle_s)

    t = lambda name: f"{name}-{suffix}"  # noqa: E731
    with WireClient(port, timeout=20) as c:

        def call(tag: str, key: int, version: int, **kw: Any) -> None:
            out[tag] = plain(c.request(make_request(key, version, **kw)))

        def create(
            tag: str, name: str, version: int = 7, validate_only: bool = False, **configs: str | None
        ) -> None:
            call(
                tag,
                19,
                version,
                topics=[
                    {
                        "name": t(name),
                        "num_partitions": 1,
                        "replication_factor": -1,
                        "assignments": [],
                        "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()],
                    }
                ],
                timeout=30000,
                validate_only=validate_only,
            )

        def describe(
            tag: str, rtype: int, name: str, keys: list[str] | None = None, version: int = 4
        ) -> None:
            call(
                tag,
                32,
                version,
                resources=[{"resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
                include_synonyms=True,
                include_documentation=True,
            )

        def iac(
            tag: str, rtype: int, name: str, *ops: tuple[str, int, str | None], validate_only: bool = False
        ) -> None:
            call(
                tag,
                44,
                1,
                resources=[
                    {
                        "resource_type": rtype,
                        "resource_name": name,
                        "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
                    }
                ],
                validate_only=validate_only,
            )

        def alter(tag: str, rtype: int, name: str, **configs: str) -> None:
            call(
                tag,
                33,
                2,
                resources=[
                    {
                        "resource_type": rtype,
                        "resource_name": name,
                        "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()],
                    }
                ],
                validate_only=False,
            )

        create("create_plain", "plain")
        create("create_cfg", "cfg", cleanup_policy="compact", max_message_bytes="2000", retention_ms="1000")
        create("create_v5", "v5", version=5, retention_bytes="100")
        create("create_validate_only", "vo", validate_only=True, segment_ms="5000")
        create("create_validate_only_bad", "vo2", validate_only=True, segment_ms="-5")
        create(
            "create_raw_values",
            "raw",
            retention_ms=" 100 ",
            preallocate="TRUE",
            cleanup_policy="compact, delete",
        )
        for i, (k, v) in enumerate(
            [
                ("no.such.config", "1"),
                ("log.retention.ms", "5"),
                ("max.message.bytes", "abc"),
                ("min.insync.replicas", "0"),
                ("cleanup.policy", "bogus"),
                ("retention.ms", None),
                ("compression.type", "brotli"),
                ("preallocate", "maybe"),
                ("segment.bytes", "1000"),
                ("compression.gzip.level", "0"),
                ("compression.zstd.level", "23"),
                ("min.cleanable.dirty.ratio", "2"),
                ("leader.replication.throttled.replicas", "x"),
                ("remote.storage.enable", "true"),
                ("retention.bytes", "99999999999999999999"),
            ]
        ):
            create(f"create_bad_{i}", f"bad{i}", **{k: v})
        settle()
        describe("describe_plain", TOPIC, t("plain"))
        describe("describe_cfg", TOPIC, t("cfg"))
        describe("describe_cfg_v1", TOPIC, t("cfg"), version=1)
        describe("describe_raw_values", TOPIC, t("raw"))
        describe("describe_keys", TOPIC, t("cfg"), ["retention.ms", "no.such", "cleanup.policy"])
        for i, bad_name in enumerate([".", "a b", "x" * 250]):
            describe(f"describe_bad_name_{i}", TOPIC, bad_name)
            iac(f"iac_bad_name_{i}", TOPIC, bad_name, ("retention.ms", SET, "1"))
        iac("iac_default_topic", TOPIC, "", ("retention.ms", SET, "1"))
        alter("alter_default_topic", TOPIC, "", retention_ms="1")
        describe("describe_unknown_topic", TOPIC, t("missing"))
        describe("describe_empty_name", TOPIC, "")
        describe("describe_broker", BROKER, str(node), BROKER_KEYS)
        describe("describe_broker_other", BROKER, str(node + 7))
        describe("describe_broker_nan", BROKER, "x")
        describe("describe_bad_type", 99, "1")

        iac(
            "iac_set",
            TOPIC,
            t("plain"),
            ("retention.ms", SET, "12345"),
            ("cleanup.policy", SET, "compact,delete"),
        )
        iac(
            "iac_append",
            TOPIC,
            t("plain"),
            ("cleanup.policy", APPEND, "delete"),
            ("follower.replication.throttled.replicas", APPEND, "0:1"),
        )
        iac("iac_subtract", TOPIC, t("plain"), ("cleanup.policy", SUBTRACT, "compact"))
        settle()
        describe("describe_after_iac", TOPIC, t("plain"))
        iac("iac_delete", TOPIC, t("plain"), ("retention.ms", DELETE, None))
        iac("iac_unknown", TOPIC, t("plain"), ("no.such", SET, "1"))
        iac("iac_bad_value", TOPIC, t("plain"), ("retention.ms", SET, "x"))
        iac("iac_append_non_list", TOPIC, t("plain"), ("retention.ms", APPEND, "1"))
        iac("iac_duplicate", TOPIC, t("plain"), ("retention.ms", SET, "1"), ("retention.ms", SET, "2"))
        iac("iac_unknown_topic", TOPIC, t("missing"), ("retention.ms", SET, "1"))
        iac("iac_validate_only", TOPIC, t("plain"), ("retention.ms", SET, "777"), validate_only=True)
        iac("iac_null_set", TOPIC, t("plain"), ("retention.ms", SET, None))
        settle()
        describe("describe_after_iac2", TOPIC, t("plain"))

        iac(
            "iac_broker",
            BROKER,
            str(node),
            ("log.cleaner.threads", SET, "2"),
            ("message.max.bytes", SET, "2000000"),
        )
        iac("iac_broker_default", BROKER, "", ("log.retention.ms", SET, "3600000"))
        iac("iac_broker_read_only", BROKER, str(node), ("log.dirs", SET, "/x"))
        iac("iac_broker_other", BROKER, str(node + 7), ("log.cleaner.threads", SET, "2"))
        iac("iac_broker_bad_value", BROKER, str(node), ("log.cleaner.threads", SET, "x"))
        iac("iac_broker_append", BROKER, str(node), ("log.cleanup.policy", APPEND, "compact"))
        # (at most double the cleaner threads: Kafka checks that, groupshift does not)
        threads = ("log.cleaner.threads", SET, "3")
        iac("iac_broker_validate_only", BROKER, str(node), threads, validate_only=True)
        iac("iac_broker_append_non_list", BROKER, str(node), ("log.cleaner.threads", APPEND, "3"))
        iac("iac_broker_subtract_non_list", BROKER, str(node), ("log.cleaner.threads", SUBTRACT, "3"))
        iac("iac_broker_custom", BROKER, str(node), (f"custom.{suffix}", SET, "1"))
        iac("iac_broker_default_custom", BROKER, "", (f"custom.default.{suffix}", SET, "2"))
        settle()
        describe("describe_broker_after", BROKER, str(node), BROKER_KEYS)
        # (one name per request: where Kafka lists names it does not define is not reproduced)
        describe("describe_broker_custom", BROKER, str(node), [f"custom.{suffix}"])
        describe("describe_broker_custom_default", BROKER, str(node), [f"custom.default.{suffix}"])
        after_broker = ["retention.ms", "max.message.bytes", "cleanup.policy"]
        describe("describe_topic_after_broker", TOPIC, t("plain"), after_broker)
        describe("describe_broker_cleanup_policy", BROKER, str(node), ["log.cleanup.policy"])

        alter("alter_topic", TOPIC, t("cfg"), segment_ms="100000")
        settle()
        describe("describe_after_alter", TOPIC, t("cfg"))
        alter("alter_unknown", TOPIC, t("cfg"), no_such="1")
        alter("alter_bad_value", TOPIC, t("cfg"), segment_ms="x")
        alter("alter_unknown_topic", TOPIC, t("missing"), segment_ms="1000")
        alter("alter_broker_read_only", BROKER, str(node), log_dirs="/x")

        # Leave the shared node's broker configs as they were.
        alter("alter_broker", BROKER, str(node), log_cleaner_threads="3")  # replaces them all
        settle()
        describe("describe_broker_after_alter", BROKER, str(node), [*BROKER_KEYS, "log.cleanup.policy"])
        describe("describe_broker_custom_after_alter", BROKER, str(node), [f"custom.{suffix}"])
        alter("cleanup_broker", BROKER, str(node))
        iac(
            "cleanup_broker_default",
            BROKER,
            "",
            ("log.retention.ms", DELETE, None),
            (f"custom.default.{suffix}", DELETE, None),
        )

        create("create_records", "records")
        settle()
        produce(port, t("records"), 10)

        def delete_records(tag: str, offset: int, partition: int = 0, name: str = "records") -> None:
            call(
                tag,
                21,
                2,
                topics=[{"name": t(name), "partitions": [{"partition_index": partition, "offset": offset}]}],
                timeout=30000,
            )

        settle()  # (and the cleanup above, before the next run on the shared node)
        delete_records("delete_records_3", 3)
        delete_records("delete_records_below", 2)
        delete_records("delete_records_beyond", 99)
        delete_records("delete_records_negative", -5)
        delete_records("delete_records_no_partition", 0, partition=7)
        delete_records("delete_records_no_topic", 0, name="missing")
        call(
            "list_offsets_earliest",
            2,
            7,
            replica_id=-1,
            isolation_level=0,
            topics=[
                {
                    "name": t("records"),
                    "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}],
                }
            ],
        )
        delete_records("delete_records_high_watermark", -1)
    return out


def test_configs_and_delete_records_answer_as_kafka(
    request: pytest.FixtureRequest, gateways: Gateways
) -> None:
    try:
        kafka4 = request.getfixturevalue("kafka4")
    except pytest.FixtureLookupError:
        pytest.skip("no kafka4 fixture: tests.plugins.kafka (reference Kafka) is not registered in this tree")
    kafka_port = int(kafka4.bootstrap.rpartition(":")[2])
    node = node_id(kafka_port)
    gw = gateways.start("differential-configs", sets=(f"node.id={node}",))
    suffix = uuid.uuid4().hex[:8]
    expected = run_script(kafka_port, suffix, node, settle_s=1.0)
    got = run_script(gw.port, suffix, node, settle_s=0.0)
    differences = [tag for tag in expected if expected[tag] != got.get(tag)]
    for tag in differences:
        print(f"{tag}:\n  kafka:      {expected[tag]}\n  groupshift: {got.get(tag)}")
    assert differences == []
