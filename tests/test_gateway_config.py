"""Server configuration: Kafka names from a properties file, flags and --set, with errors that
name the offending key."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import (
    ConfigError,
    build_config,
    check_data_dir,
    load_config,
    load_settings,
    parse_properties,
    resolve_config,
)
from gateway.kafka_broker_keys import KAFKA_VERSIONS


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
        ({"num.partition": "3"}, "unknown configuration key 'num.partition'"),
        ({"num.partition": "3"}, "(did you mean 'num.partitions'?)"),
        ({"group.consumer.assignors": "uniform,sticky"}, "unknown assignor 'sticky' (known: uniform, range)"),
        (
            {"num.partitions": "2147483648"},
            "num.partitions: Input should be less than or equal to 2147483647",
        ),
        ({"log.dirs": ""}, "the data directory must not be empty"),
        (
            {"listeners": "127.0.0.1:9092", "metrics.listen": "127.0.0.1:9092"},
            "metrics.listen=127.0.0.1:9092 uses the port of listeners=127.0.0.1:9092",
        ),
        ({"num.partitions": "three"}, "num.partitions: Input should be a valid integer"),
        ({"num.partitions": "0"}, "num.partitions: Input should be greater than or equal to 1"),
        ({"auto.create.topics.enable": "maybe"}, "auto.create.topics.enable: expected true or false"),
        ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable: expected true or false"),
        ({"listeners": "nohost"}, "listeners: expected HOST:PORT"),
        (
            {"listeners": "SSL://127.0.0.1:9093"},
            "listeners: listener SSL uses SSL and needs ssl.keystore.location",
        ),
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


def test_a_kafka_server_properties_is_taken_as_is_and_its_unused_keys_reported(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@localhost:9093\n"
        "listeners=PLAINTEXT://127.0.0.1:9092\nnum.network.threads=3\nlog.dirs=/tmp/kraft-logs\n"
        "num.partitions=3\noffsets.topic.replication.factor=1\nzookeeper.connect=localhost:2181\n"
        "listener.name.internal.ssl.keystore.location=/k\nsuper.users=User:admin\n"
        "group.consumer.assignors=org.apache.kafka.coordinator.group.assignor.RangeAssignor\n"
    )
    loaded = load_settings(config_file=path)
    assert loaded.config.num_partitions == 3 and loaded.config.node_id == 1
    assert loaded.config.group.consumer_assignors == ("range",)
    assert loaded.ignored_kafka_keys == (
        "controller.quorum.voters",
        "listener.name.internal.ssl.keystore.location",
        "num.network.threads",
        "offsets.topic.replication.factor",
        "process.roles",
        "zookeeper.connect",
    )


def test_the_first_listener_of_a_kafka_listeners_value_is_the_main_one() -> None:
    def listen(**settings: str) -> tuple[str, int]:
        return build_config(settings).listen_address

    kafka = {  # Kafka's shipped KRaft server.properties
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
    }
    assert listen(**kafka) == ("0.0.0.0", 9092)  # an empty host: every interface, as in Kafka
    assert resolve_config(kafka).ignored_kafka_keys == ()  # both other keys were used
    named = {"listeners": "INTERNAL://127.0.0.1:9094", "listener.security.protocol.map": "INTERNAL:PLAINTEXT"}
    assert listen(**named) == ("127.0.0.1", 9094)
    # Several listeners are served now (gateway.listeners); a name used twice is refused as Kafka does.
    with pytest.raises(ConfigError, match="each listener must have a different name"):
        listen(listeners="PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2")
    with pytest.raises(ConfigError, match="listener EXTERNAL has no protocol"):
        listen(listeners="EXTERNAL://127.0.0.1:1")


def test_errors_name_the_file_and_line_or_the_flag(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("# groupshift\nnum.partitions=2\n\nnum.partitons=3\ngroup.max.size=0\n")
    with pytest.raises(ConfigError) as err:
        load_settings(config_file=path)
    assert str(err.value) == (
        f"{path}:4: unknown configuration key 'num.partitons': neither groupshift nor a Kafka broker "
        f"(Kafka {', '.join(KAFKA_VERSIONS)}) knows it (did you mean 'num.partitions'?)"
    )
    path.write_text("num.partitions=2\ngroup.consumer.assignors=uniform,bogus\n")
    with pytest.raises(ConfigError, match=rf"^{path}:2: group.consumer.assignors: unknown assignor 'bogus'"):
        load_settings(config_file=path)
    with pytest.raises(ConfigError, match=r"^--set num.partitions: num.partitions: Input should be"):
        load_settings(config_file=path, sets=["num.partitions=x", "group.consumer.assignors=range"])
    with pytest.raises(ConfigError, match=r"^--listen: listeners: expected HOST:PORT"):
        load_settings(overrides={"listeners": "nohost"}, override_origins={"listeners": "--listen"})
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        load_settings(config_file=path)


def test_the_data_directory_rules(tmp_path: Path) -> None:
    def check(path: Path, **settings: str) -> None:
        check_data_dir(build_config({"log.dirs": str(path), **settings}))

    check(tmp_path / "new")  # does not exist yet: created at start
    (tmp_path / "empty").mkdir()
    check(tmp_path / "empty")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a directory"):
        check(tmp_path / "file")
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("x")
    foreign = r"is not empty and is not a groupshift data directory \(it holds notes.txt\)"
    with pytest.raises(ConfigError, match=foreign):
        check(home)
    check_data_dir(build_config({"log.dirs": str(home)}), allow_foreign=True)
    kafka = tmp_path / "kafka-logs"  # a Kafka log dir has a meta.properties too
    kafka.mkdir()
    (kafka / "meta.properties").write_text("version=1\ncluster.id=x\nnode.id=1\n")
    (kafka / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    with pytest.raises(ConfigError, match="not a groupshift data directory"):
        check(kafka)
    ours = tmp_path / "ours"
    (ours / "coordinator").mkdir(parents=True)
    (ours / "meta.properties").write_text("version=1\ncluster.id=x\nnode.id=0\n")
    for i in range(3):
        (ours / "coordinator" / f"__consumer_offsets-{i}").mkdir()
    check(ours, **{"offsets.topic.num.partitions": "3"})
    with pytest.raises(ConfigError, match=r"offsets.topic.num.partitions=50 but data directory .* holds 3"):
        check(ours)
