"""Per-group dynamic configs (KIP-848 GROUP resource) and protocol gating, with real clients.

* IncrementalAlterConfigs of `consumer.heartbeat.interval.ms` on a GROUP resource is visible in
  DescribeConfigs (both admin clients) and a live librdkafka consumer-protocol member picks it up:
  its heartbeats (librdkafka's own debug log) slow from the broker default to the new interval,
  and a ConsumerGroupHeartbeat of the group answers the new interval. Values outside the
  broker's bounds are refused with INVALID_CONFIG and change nothing.
* With `group.coordinator.rebalance.protocols=classic`, ApiVersions leaves out
  ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), and a raw ConsumerGroupHeartbeat
  is answered UNSUPPORTED_VERSION; classic groups keep working.
"""

from __future__ import annotations

import itertools
import logging
import statistics
import threading
import time
from typing import Any

from e2e.conftest import Gateways
from e2e.groups import (
    FAST_GROUP_SETTINGS,
    ConfluentMember,
    KafkaPythonMember,
    Ledger,
    create_topic,
    wait_partitioned,
    wait_until,
)
from protocol.client import WireClient, make_request

GROUP = "cfg-group"
TOPIC = "cfg-orders"
HB_KEY, SESSION_KEY = "consumer.heartbeat.interval.ms", "consumer.session.timeout.ms"
STANDBY_KEY = "streams.num.standby.replicas"  # the streams group configs, listed for every group
STREAMS_DEFAULTS = {
    "streams.session.timeout.ms": ("45000", "DEFAULT_CONFIG"),
    "streams.heartbeat.interval.ms": ("5000", "DEFAULT_CONFIG"),
    STANDBY_KEY: ("0", "DEFAULT_CONFIG"),
    "streams.initial.rebalance.delay.ms": ("3000", "DEFAULT_CONFIG"),
    "streams.assignment.interval.ms": ("1000", "DEFAULT_CONFIG"),
    "streams.rack.aware.assignment.tags": ("", "DEFAULT_CONFIG"),
    # Kafka 4.4 describes the group's task assignor as the first of `group.streams.assignors`.
    "streams.assignor.name": ("sticky", "DEFAULT_CONFIG"),
}
INVALID_CONFIG, UNSUPPORTED_VERSION = 40, 35


class HeartbeatLog(logging.Handler):
    """Times of the ConsumerGroupHeartbeat requests librdkafka's `cgrp` debug log reports."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.times: list[float] = []
        self.times_lock = threading.Lock()  # (logging.Handler's own `lock` is taken around emit)

    def emit(self, record: logging.LogRecord) -> None:
        if "ConsumerGroupHeartbeat of member id" in record.getMessage():
            with self.times_lock:
                self.times.append(time.monotonic())

    def median_interval(self, since: float) -> float:
        with self.times_lock:
            ts = [t for t in self.times if t >= since]
        assert len(ts) >= 3, f"only {len(ts)} heartbeats since the mark"
        return statistics.median(b - a for a, b in itertools.pairwise(ts))


def describe(admin: Any, kp: Any) -> dict[str, tuple[str, str]]:
    """{name: (value, source)} of GROUP's configs from confluent, checked against kafka-python."""
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType

    [future] = admin.describe_configs([ConfigResource(ResourceType.GROUP, GROUP)]).values()
    got = {name: (e.value, ConfigSource(e.source).name) for name, e in future.result(15).items()}
    kp_got = kp.describe_configs([KpResource(ConfigResourceType.GROUP, GROUP)], config_filter="all")["group"][
        GROUP
    ]
    assert {n: (c["value"], c["config_source"]) for n, c in kp_got.items()} == {
        n: (v, "DYNAMIC_GROUP_CONFIG" if s == "GROUP_CONFIG" else s) for n, (v, s) in got.items()
    }
    return got


def alter(admin: Any, **values: str) -> int:
    """IncrementalAlterConfigs SET through confluent; the error code (0 when accepted)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entries = [
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
        for k, v in values.items()
    ]
    [future] = admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=entries)]
    ).values()
    try:
        future.result(15)
    except KafkaException as e:
        return e.args[0].code()
    return 0


def test_group_heartbeat_interval_config(gateways: Gateways) -> None:
    from confluent_kafka.admin import AdminClient
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    gw = gateways.start("cfg", sets=FAST_GROUP_SETTINGS)  # heartbeat 250 ms, bounds 100..15000
    create_topic(gw, TOPIC)
    hb_log = HeartbeatLog()
    logger = logging.getLogger("e2e.cfg.librdkafka")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(hb_log)
    member = ConfluentMember(
        "cfg-1",
        Ledger(TOPIC),
        gw.bootstrap,
        GROUP,
        **{"group.protocol": "consumer", "debug": "cgrp", "logger": logger},
    )
    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    kp = KafkaAdminClient(bootstrap_servers=gw.bootstrap, request_timeout_ms=10000)
    member.start()
    try:
        wait_partitioned([member], "the member to be assigned", per_member=None)
        assert describe(admin, kp) == {
            HB_KEY: ("250", "STATIC_BROKER_CONFIG"),
            SESSION_KEY: ("10000", "STATIC_BROKER_CONFIG"),
            **STREAMS_DEFAULTS,
        }
        mark = time.monotonic()
        time.sleep(1.5)
        before = hb_log.median_interval(mark)
        assert 0.15 < before < 0.5, before

        assert alter(admin, consumer_heartbeat_interval_ms="1000") == 0
        assert describe(admin, kp)[HB_KEY] == ("1000", "GROUP_CONFIG")
        time.sleep(1.2)  # the next heartbeat answer carries the new interval
        mark = time.monotonic()
        time.sleep(4.5)
        after = hb_log.median_interval(mark)
        assert 0.8 < after < 1.4, after

        # a heartbeat of the group answers the new interval (a member with no topics, which
        # takes nothing from the librdkafka member, then leaves)
        with WireClient(gw.port) as c:
            joined = c.request(
                make_request(
                    68,
                    1,
                    group_id=GROUP,
                    member_id="cfg-probe-0000000000001",
                    member_epoch=0,
                    instance_id=None,
                    rack_id=None,
                    rebalance_timeout=30000,
                    subscribed_topic_names=[],
                    subscribed_topic_regex=None,
                    server_assignor=None,
                    topic_partitions=[],
                )
            )
            assert (joined.error_code, joined.heartbeat_interval.total_seconds()) == (0, 1.0), joined
            left = c.request(
                make_request(
                    68,
                    1,
                    group_id=GROUP,
                    member_id="cfg-probe-0000000000001",
                    member_epoch=-1,
                    instance_id=None,
                    rack_id=None,
                    rebalance_timeout=-1,
                    subscribed_topic_names=None,
                    subscribed_topic_regex=None,
                    server_assignor=None,
                    topic_partitions=None,
                )
            )
            assert (left.error_code, left.member_epoch) == (0, -1), left

        # outside the broker bounds (100..15000, session 2000..60000, interval < session)
        for bad in (
            {"consumer_heartbeat_interval_ms": "50"},
            {"consumer_heartbeat_interval_ms": "20000"},
            {"consumer_heartbeat_interval_ms": "12000"},  # not below the session (10000)
            {"consumer_session_timeout_ms": "1000"},
            {"consumer_session_timeout_ms": "90000"},
            {"consumer_heartbeat_interval_ms": "soon"},
        ):
            assert alter(admin, **bad) == INVALID_CONFIG, bad
        refused = kp.alter_configs(
            [KpResource(ConfigResourceType.GROUP, GROUP, configs={HB_KEY: "99"})], incremental=True
        )
        assert "InvalidConfigurationError" in repr(refused), refused
        assert describe(admin, kp) == {
            HB_KEY: ("1000", "GROUP_CONFIG"),
            SESSION_KEY: ("10000", "STATIC_BROKER_CONFIG"),
            **STREAMS_DEFAULTS,
        }
        # both changed at once through kafka-python: accepted together
        kp.alter_configs(
            [KpResource(ConfigResourceType.GROUP, GROUP, configs={SESSION_KEY: "20000", HB_KEY: "600"})],
            incremental=True,
        )
        assert describe(admin, kp) == {
            HB_KEY: ("600", "GROUP_CONFIG"),
            SESSION_KEY: ("20000", "GROUP_CONFIG"),
            **STREAMS_DEFAULTS,
        }
        assert not member.errors and member.assignment
    finally:
        kp.close()
        member.stop()


def test_consumer_protocol_disabled_is_not_advertised(gateways: Gateways) -> None:
    gw = gateways.start(
        "classic-only", sets=[*FAST_GROUP_SETTINGS, "group.coordinator.rebalance.protocols=classic"]
    )
    with WireClient(gw.port) as c:
        versions = c.request(make_request(18, 3, client_software_name="e2e", client_software_version="1"))
        advertised = {k.api_key for k in versions.api_keys}
        assert {11, 12, 13, 14, 15, 16, 42} <= advertised
        assert not advertised & {68, 69}
        answer = c.request(
            make_request(
                68,
                1,
                group_id="classic-only",
                member_id="probe-00000000000000001",
                member_epoch=0,
                instance_id=None,
                rack_id=None,
                rebalance_timeout=30000,
                subscribed_topic_names=["classic-only"],
                subscribed_topic_regex=None,
                server_assignor=None,
                topic_partitions=[],
            )
        )
        assert answer.error_code == UNSUPPORTED_VERSION, answer
        described = c.request(
            make_request(69, 0, group_ids=["classic-only"], include_authorized_operations=False)
        )
        assert [g.error_code for g in described.groups] == [UNSUPPORTED_VERSION]
    assert gw.alive()
    assert [e for e in gw.events() if e.get("event", "").startswith("member.")] == []

    # classic groups are unaffected
    create_topic(gw, "classic-only")
    ledger = Ledger("classic-only")
    members = [KafkaPythonMember(f"k{i}", ledger, gw.bootstrap, "classic-only").start() for i in range(3)]
    try:
        wait_partitioned(members, "the classic group")
    finally:
        for m in members:
            m.stop()
    wait_until(lambda: gw.events("member.left"), 5, "the members to leave")
