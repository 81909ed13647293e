"""Configuration: Kafka names, defaults and bounds (Kafka `GroupCoordinatorConfig`)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from engine.config import CoordinatorConfig, GroupConfig


def test_defaults_are_kafkas() -> None:
    c = CoordinatorConfig()
    assert (c.consumer_session_timeout_ms, c.consumer_heartbeat_interval_ms) == (45000, 5000)
    assert (c.consumer_min_session_timeout_ms, c.consumer_max_session_timeout_ms) == (45000, 60000)
    assert c.consumer_assignors == ("uniform", "range")
    assert c.consumer_migration_policy == "bidirectional"
    assert (c.min_session_timeout_ms, c.max_session_timeout_ms) == (6000, 1800000)
    assert c.initial_rebalance_delay_ms == 3000
    assert c.consumer_protocol_enabled


def test_kafka_names_are_accepted() -> None:
    c = CoordinatorConfig.from_kafka({"group.consumer.max.size": 10, "group.max.size": 3})
    assert (c.consumer_max_size, c.max_size) == (10, 3)


def test_session_timeout_outside_its_bounds_is_rejected_with_the_names() -> None:
    with pytest.raises(
        ValidationError, match=r"group.consumer.session.timeout.ms=1000 must be within \[45000, 60000\]"
    ):
        CoordinatorConfig.from_kafka({"group.consumer.session.timeout.ms": 1000})


def test_lowered_bounds_allow_sub_second_intervals_for_tests() -> None:
    c = CoordinatorConfig.from_kafka(
        {
            "group.consumer.session.timeout.ms": 600,
            "group.consumer.min.session.timeout.ms": 100,
            "group.consumer.heartbeat.interval.ms": 100,
            "group.consumer.min.heartbeat.interval.ms": 50,
        }
    )
    assert (c.consumer_session_timeout_ms, c.consumer_heartbeat_interval_ms) == (600, 100)


def test_heartbeat_interval_must_be_below_session_timeout() -> None:
    with pytest.raises(ValidationError, match="must be less than"):
        CoordinatorConfig.from_kafka(
            {
                "group.consumer.session.timeout.ms": 1000,
                "group.consumer.min.session.timeout.ms": 100,
                "group.consumer.heartbeat.interval.ms": 1000,
                "group.consumer.min.heartbeat.interval.ms": 100,
            }
        )


def test_unknown_names_and_bad_values_are_rejected() -> None:
    with pytest.raises(ValidationError):
        CoordinatorConfig.from_kafka({"group.consumer.no.such": 1})
    with pytest.raises(ValidationError):
        CoordinatorConfig.from_kafka({"group.consumer.migration.policy": "sideways"})
    with pytest.raises(ValidationError):
        CoordinatorConfig.from_kafka({"group.coordinator.rebalance.protocols": ["consumer"]})


def test_kafka_4_4s_default_rebalance_protocols_are_accepted() -> None:
    """Kafka 4.4's default list names `streams`: a server.properties copied from a 4.4 broker
    must start groupshift (it was refused as an unknown protocol)."""
    c = CoordinatorConfig.from_kafka(
        {"group.coordinator.rebalance.protocols": ["classic", "consumer", "streams"]}
    )
    assert c.rebalance_protocols == ("classic", "consumer", "streams")
    assert c.consumer_protocol_enabled
    with pytest.raises(ValidationError):
        CoordinatorConfig.from_kafka({"group.coordinator.rebalance.protocols": ["classic", "share"]})


def test_the_acceptable_recovery_lag_is_kafkas_long_with_its_default() -> None:
    """`group.streams.acceptable.recovery.lag` (answered by StreamsGroupHeartbeat v1): Kafka 4.4's
    default 10000, a long of at least 0."""
    assert CoordinatorConfig().streams_acceptable_recovery_lag == 10000
    big = CoordinatorConfig.from_kafka({"group.streams.acceptable.recovery.lag": str(2**40)})
    assert big.streams_acceptable_recovery_lag == 2**40
    with pytest.raises(ValidationError):
        CoordinatorConfig.from_kafka({"group.streams.acceptable.recovery.lag": "-1"})


def test_group_overrides_are_checked_against_the_broker_bounds() -> None:
    broker = CoordinatorConfig()
    GroupConfig.model_validate({"consumer.session.timeout.ms": 50000}).validate_against(broker)
    with pytest.raises(ValueError, match=r"session\.timeout\.ms must be greater than or equal to"):
        GroupConfig.model_validate({"consumer.session.timeout.ms": 1000}).validate_against(broker)


def test_migration_policy_is_case_insensitive_like_kafka() -> None:
    cfg = CoordinatorConfig.from_kafka({"group.consumer.migration.policy": "UPGRADE"})
    assert cfg.consumer_migration_policy == "upgrade"
    with pytest.raises(ValidationError):
        CoordinatorConfig.from_kafka({"group.consumer.migration.policy": "sideways"})
