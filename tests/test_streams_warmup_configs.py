"""Kafka 4.4's remaining streams group settings (issue 31): the broker's
`group.streams.task.offset.interval.ms` / `min.task.offset.interval.ms`,
`num.warmup.replicas` / `max.warmup.replicas`, `assignor.offload.enable` and `assignors`, and
the group configs `streams.task.offset.interval.ms`, `streams.num.warmup.replicas`,
`streams.assignor.offload.enable` (internal in Kafka 4.4) and `streams.assignor.name`: their
defaults, start refusals, per-group refusals in Kafka's words (javap 4.4.0
`GroupCoordinatorConfig.verifyStreamsGroupConfigs`, `GroupConfig.validateValues`), how
DescribeConfigs shows them (`AbstractKafkaConfig.extractGroupConfigMap`: the assignor name's
default is the first registered assignor), and what the coordinator answers with them (the task
offset interval in every heartbeat; no warm-up task, as Kafka 4.4.0's `AssignmentRefiner.refine`
returns the assignment unchanged). e2e/test_streams_differential.py (`warmup-and-assignor-configs`)
compares the same against Kafka 4.4 over the wire."""

from __future__ import annotations

from typing import Any

import pytest

from engine.config import CoordinatorConfig, GroupConfig
from gateway.config import resolve_config
from gateway.groups.config_apis import GroupConfigs
from tests.test_streams_groups import Streams
from tests.test_streams_rack_tags import Service

STICKY_CLASS = "org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor"


def test_broker_defaults_are_kafkas() -> None:
    c = CoordinatorConfig()
    assert (c.streams_task_offset_interval_ms, c.streams_min_task_offset_interval_ms) == (60000, 15000)
    assert (c.streams_num_warmup_replicas, c.streams_max_warmup_replicas) == (2, 20)
    assert c.streams_assignor_offload_enable is True
    assert c.streams_assignors == ("sticky",)


def test_broker_settings_are_taken_from_a_server_properties() -> None:
    settings = {
        "group.streams.task.offset.interval.ms": "20000",
        "group.streams.min.task.offset.interval.ms": "20000",
        "group.streams.num.warmup.replicas": "0",
        "group.streams.max.warmup.replicas": "3",
        "group.streams.assignor.offload.enable": "false",
        "group.streams.assignors": STICKY_CLASS,
    }
    loaded = resolve_config(settings)
    assert loaded.ignored_kafka_keys == ()
    g = loaded.config.group
    assert (g.streams_task_offset_interval_ms, g.streams_min_task_offset_interval_ms) == (20000, 20000)
    assert (g.streams_num_warmup_replicas, g.streams_max_warmup_replicas) == (0, 3)
    assert g.streams_assignor_offload_enable is False
    assert g.streams_assignors == ("sticky",)  # Kafka's class name stands for its name


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"group.streams.task.offset.interval.ms": 14999},
            "group.streams.task.offset.interval.ms must be greater than or equal to "
            "group.streams.min.task.offset.interval.ms",
        ),
        (
            {"group.streams.num.warmup.replicas": 21},
            "group.streams.num.warmup.replicas must be less than or equal to "
            "group.streams.max.warmup.replicas",
        ),
        ({"group.streams.task.offset.interval.ms": 0}, "greater than or equal to 1"),
        ({"group.streams.num.warmup.replicas": -1}, "greater than or equal to 0"),
        (
            {"group.streams.assignors": "fancy"},
            "Invalid value fancy for configuration group.streams.assignors: Class cannot be found",
        ),
        (
            {"group.streams.assignors": "sticky,sticky"},
            "Configuration 'group.streams.assignors' values must not be duplicated.",
        ),
        (
            {"group.streams.assignors": f"sticky,{STICKY_CLASS}"},
            "Assignor name 'sticky' is already registered by another configured assignor.",
        ),
        (
            {"group.streams.assignors": ""},
            "Configuration 'group.streams.assignors' must not be empty. Valid values include: "
            "any non-empty value",
        ),
    ],
)
def test_broker_refusals(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as e:
        CoordinatorConfig.from_kafka(settings)
    assert message in str(e.value)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"streams.task.offset.interval.ms": 0},
            "Invalid value 0 for configuration streams.task.offset.interval.ms: Value must be at least 1",
        ),
        (
            {"streams.task.offset.interval.ms": 14999},
            "streams.task.offset.interval.ms must be greater than or equal to 15000",
        ),
        ({"streams.task.offset.interval.ms": 15000}, None),
        ({"streams.task.offset.interval.ms": 2**31 - 1}, None),  # no maximum
        (
            {"streams.num.warmup.replicas": -1},
            "Invalid value -1 for configuration streams.num.warmup.replicas: Value must be at least 0",
        ),
        ({"streams.num.warmup.replicas": 21}, "streams.num.warmup.replicas must be less than or equal to 20"),
        ({"streams.num.warmup.replicas": 0}, None),
        (
            {"streams.assignor.name": "mock"},
            "streams.assignor.name 'mock' is not a registered task assignor. "
            "Registered assignors are: [sticky].",
        ),
        ({"streams.assignor.name": "sticky"}, None),
        ({"streams.assignor.offload.enable": False}, None),
    ],
)
def test_group_refusals_in_kafkas_words(values: dict[str, Any], message: str | None) -> None:
    config = GroupConfig.model_validate(values)
    broker = CoordinatorConfig()
    if message is None:
        config.validate_against(broker)
        return
    with pytest.raises(ValueError) as e:
        config.validate_against(broker)
    assert str(e.value) == message


def test_the_group_bounds_follow_the_brokers() -> None:
    broker = CoordinatorConfig.from_kafka(
        {
            "group.streams.min.task.offset.interval.ms": 1000,
            "group.streams.num.warmup.replicas": 1,
            "group.streams.max.warmup.replicas": 1,
        }
    )
    GroupConfig.model_validate({"streams.task.offset.interval.ms": 1000}).validate_against(broker)
    with pytest.raises(ValueError, match=r"less than or equal to 1$"):
        GroupConfig.model_validate({"streams.num.warmup.replicas": 2}).validate_against(broker)


def entry(configs: GroupConfigs, name: str) -> tuple[Any, ...]:
    _, _, (e,) = configs.describe("app", [name], False)
    return e["value"], e["config_source"], e["config_type"]


def test_described_as_kafka_describes_them() -> None:
    """`streams.assignor.name` is listed for every group, as the first registered assignor while
    unset (STRING); the three internal ones are left out, even asked by name, until the group
    sets them or the broker's setting is given explicitly (INT, INT, BOOLEAN), as measured on
    Kafka 4.4; named, they come in Kafka's order whatever order they are asked in."""
    configs = GroupConfigs(Service())  # type: ignore[arg-type]
    _, _, every = configs.describe("app", None, False)
    names = [c["name"] for c in every]
    assert "streams.assignor.name" in names
    internal = (
        "streams.task.offset.interval.ms",
        "streams.num.warmup.replicas",
        "streams.assignor.offload.enable",
    )
    assert not set(internal) & set(names)
    assert entry(configs, "streams.assignor.name") == ("sticky", 5, 2)
    _, _, named = configs.describe("app", [*internal, "streams.assignor.name"], False)
    assert [c["name"] for c in named] == ["streams.assignor.name"]
    broker = GroupConfigs(
        Service(  # type: ignore[arg-type]
            group_streams_task_offset_interval_ms=60000,
            group_streams_num_warmup_replicas=2,
            group_streams_assignor_offload_enable=True,
        )
    )
    assert entry(broker, "streams.task.offset.interval.ms") == ("60000", 4, 3)
    assert entry(broker, "streams.num.warmup.replicas") == ("2", 4, 3)
    assert entry(broker, "streams.assignor.offload.enable") == ("true", 4, 1)
    _, _, named = broker.describe("app", ["streams.assignor.name", *internal], False)
    assert [c["name"] for c in named] == [
        "streams.num.warmup.replicas",
        "streams.assignor.offload.enable",
        "streams.task.offset.interval.ms",
        "streams.assignor.name",
    ]
    ops = [
        ("streams.task.offset.interval.ms", 0, "20000"),
        ("streams.num.warmup.replicas", 0, "0"),
        ("streams.assignor.offload.enable", 0, " FALSE "),
        ("streams.assignor.name", 0, " sticky "),
    ]
    assert configs.incremental_alter("app", ops, False) == (0, None)
    _, _, every = configs.describe("app", None, False)
    described = {c["name"]: (c["value"], c["config_source"]) for c in every}
    assert {n: described[n] for n in (*internal, "streams.assignor.name")} == {
        "streams.task.offset.interval.ms": ("20000", 8),
        "streams.num.warmup.replicas": ("0", 8),
        "streams.assignor.offload.enable": ("false", 8),
        "streams.assignor.name": ("sticky", 8),
    }


def test_the_brokers_values_are_described_as_static() -> None:
    configs = GroupConfigs(Service(group_streams_task_offset_interval_ms=30000))  # type: ignore[arg-type]
    assert entry(configs, "streams.task.offset.interval.ms") == ("30000", 4, 3)
    assert entry(configs, "streams.assignor.name") == ("sticky", 5, 2)
    configs = GroupConfigs(Service(group_streams_assignors=STICKY_CLASS))  # type: ignore[arg-type]
    assert entry(configs, "streams.assignor.name") == ("sticky", 4, 2)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "streams.assignor.offload.enable",
            "yes",
            "Invalid value yes for configuration streams.assignor.offload.enable: "
            "Expected value to be either true or false",
        ),
        (
            "streams.num.warmup.replicas",
            "two",
            "Invalid value two for configuration streams.num.warmup.replicas: Not a number of type INT",
        ),
        (
            "streams.assignor.name",
            "range",
            "streams.assignor.name 'range' is not a registered task assignor. "
            "Registered assignors are: [sticky].",
        ),
        (
            "streams.task.offset.interval.ms",
            "1000",
            "streams.task.offset.interval.ms must be greater than or equal to 15000",
        ),
    ],
)
def test_incremental_alter_refusals(name: str, value: str, message: str) -> None:
    configs = GroupConfigs(Service())  # type: ignore[arg-type]
    assert configs.incremental_alter("app", [(name, 0, value)], False) == (40, message)
    assert "app" not in configs.service.group_configs  # nothing taken


def test_the_heartbeat_interval_for_task_offsets_is_the_groups() -> None:
    """What StreamsGroupHeartbeat's TaskOffsetIntervalMs carries (gateway/groups/streams_apis.py
    reads it from the effective configs): the group's value, else the broker's."""
    service = Service(group_streams_task_offset_interval_ms=45000)
    assert service.effective_group_config("app")["streams.task.offset.interval.ms"] == 45000
    configs = GroupConfigs(service)  # type: ignore[arg-type]
    assert configs.incremental_alter("app", [("streams.task.offset.interval.ms", 0, "16000")], False) == (
        0,
        None,
    )
    assert service.effective_group_config("app")["streams.task.offset.interval.ms"] == 16000
    assert service.effective_group_config("other")["streams.task.offset.interval.ms"] == 45000


def test_no_warmup_task_is_assigned_whatever_the_count() -> None:
    """Kafka 4.4.0 reads `streams.num.warmup.replicas` only in `AssignmentRefiner.refine`, which
    returns the target unchanged: a member that restarts with state for a task another member runs
    gets no warm-up of it, with the count at the maximum as at 0."""
    h = Streams(group_streams_num_warmup_replicas=20, group_streams_max_warmup_replicas=20)
    h.join("m1")
    h.converge("m1")
    r = h.join("m2")
    h.converge("m1", "m2")
    assert h.shard.state.streams_num_warmup_replicas("app") == 20
    assert not any(h.group.warmup_targets.values())
    for mid in ("m1", "m2"):
        assert not h.group.members[mid].warmup
    assert not r.warmup_tasks
