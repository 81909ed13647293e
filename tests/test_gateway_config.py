"""Server configuration: Kafka names from a properties file, flags and --set, with errors that
name the offending key."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import ConfigError, build_config, load_config, parse_properties


def test_defaults_match_the_documented_ones() -> None:
    c = build_config({})
    assert c.listen_address == ("127.0.0.1", 9092)
    assert str(c.data_dir) == "groupshift-data"
    assert (c.num_partitions, c.auto_create_topics_enable, c.node_id) == (1, True, 0)
    assert c.socket_request_max_bytes == 104857600 and c.metrics_address is None
    assert c.group.consumer_heartbeat_interval_ms == 5000


def test_file_then_flags_then_set_with_later_sources_winning(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "# a comment\n! another\n\nnum.partitions = 4\nlisteners=PLAINTEXT://127.0.0.1:9999\n"
        "log.dirs=/from/file\ngroup.consumer.assignors=range, uniform\n"
    )
    c = load_config(
        config_file=path,
        overrides={"log.dirs": "/from/flag"},
        sets=["num.partitions=6", "metrics.listen=127.0.0.1:0"],
    )
    assert c.num_partitions == 6
    assert str(c.data_dir) == "/from/flag"
    assert c.listen_address == ("127.0.0.1", 9999)
    assert c.metrics_address == ("127.0.0.1", 0)
    assert c.group.consumer_assignors == ("range", "uniform")


def test_group_settings_reach_the_coordinator_config() -> None:
    c = build_config(
        {
            "group.consumer.heartbeat.interval.ms": "1000",
            "group.consumer.min.heartbeat.interval.ms": "500",
            "group.consumer.session.timeout.ms": "45000",
            "group.coordinator.rebalance.protocols": "classic",
        }
    )
    assert c.group.consumer_heartbeat_interval_ms == 1000
    assert not c.group.consumer_protocol_enabled


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"num.partition": "3"}, "unknown configuration key(s): num.partition"),
        ({"num.partitions": "three"}, "num.partitions: Input should be a valid integer"),
        ({"num.partitions": "0"}, "num.partitions: Input should be greater than or equal to 1"),
        ({"auto.create.topics.enable": "maybe"}, "auto.create.topics.enable: Input should be"),
        ({"listeners": "nohost"}, "listeners: expected HOST:PORT"),
        ({"listeners": "SSL://127.0.0.1:9093"}, "listeners: only PLAINTEXT"),
        ({"metrics.listen": "127.0.0.1:70000"}, "metrics.listen: port must be within"),
        (
            {"group.consumer.heartbeat.interval.ms": "x"},
            "group.consumer.heartbeat.interval.ms: Input should be a valid integer",
        ),
        (
            {"group.consumer.heartbeat.interval.ms": "60000"},
            "group.consumer.heartbeat.interval.ms=60000 must be within",
        ),
        ({"group.coordinator.rebalance.protocols": "consumer"}, "must include 'classic'"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_config(settings)
    assert message in str(err.value)


def test_malformed_properties_and_set_items_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"server.properties:2: expected NAME=VALUE"):
        parse_properties("a=1\njust words\n", source="server.properties")
    with pytest.raises(ConfigError, match="--set expects NAME=VALUE"):
        load_config(sets=["num.partitions"])
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(config_file=tmp_path / "missing.properties")
