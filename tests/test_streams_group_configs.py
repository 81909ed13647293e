"""A streams group's own `streams.session.timeout.ms` and `streams.heartbeat.interval.ms`
(KIP-1071 group configs, Kafka 4.4 `GroupConfig`): validated against the broker's
`group.streams.min/max.*` bounds in Kafka 4.4's words, answered in the heartbeat, and the session
timer the coordinator arms. e2e/test_streams_differential.py compares the same against Kafka 4.4
over the wire."""

from __future__ import annotations

import pytest

from engine.config import CoordinatorConfig, GroupConfig
from gateway.groups.config_apis import GroupConfigs
from tests.test_streams_groups import Streams


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"streams.heartbeat.interval.ms": 999},
            "streams.heartbeat.interval.ms must be in the range 1000 to 15000 inclusive.",
        ),
        (
            {"streams.heartbeat.interval.ms": 15001},
            "streams.heartbeat.interval.ms must be in the range 1000 to 15000 inclusive.",
        ),
        (
            {"streams.session.timeout.ms": 5999},
            "streams.session.timeout.ms must be in the range 6000 to 60000 inclusive.",
        ),
        (
            {"streams.session.timeout.ms": 60001},
            "streams.session.timeout.ms must be in the range 6000 to 60000 inclusive.",
        ),
        # The interval is checked before the session, as Kafka does.
        (
            {"streams.heartbeat.interval.ms": 20000, "streams.session.timeout.ms": 1},
            "streams.heartbeat.interval.ms must be in the range 1000 to 15000 inclusive.",
        ),
        (
            {"streams.heartbeat.interval.ms": 8000, "streams.session.timeout.ms": 8000},
            "streams.session.timeout.ms must be greater than streams.heartbeat.interval.ms",
        ),
        # Against the broker's own interval (5000) when the group sets only its session.
        ({"streams.session.timeout.ms": 6000}, None),
        # Kafka 4.4's internal `streams.acceptable.recovery.lag`: at least 0, a long, no bound.
        (
            {"streams.acceptable.recovery.lag": -1},
            "Invalid value -1 for configuration streams.acceptable.recovery.lag: Value must be at least 0",
        ),
        ({"streams.acceptable.recovery.lag": 2**40}, None),
    ],
)
def test_bounds_and_kafkas_words(values: dict[str, int], message: str | None) -> None:
    broker = CoordinatorConfig.from_kafka(
        {
            "group.streams.min.session.timeout.ms": 6000,
            "group.streams.session.timeout.ms": 6000,
            "group.streams.min.heartbeat.interval.ms": 1000,
        }
    )
    config = GroupConfig.model_validate(values)
    if message is None:
        config.validate_against(broker)
        return
    with pytest.raises(ValueError) as e:
        config.validate_against(broker)
    assert str(e.value) == message


def test_the_groups_interval_is_answered_and_its_session_fences() -> None:
    h = Streams()
    assert h.join("m1").heartbeat_interval_ms == 5000
    h.join("m2")
    h.converge("m1", "m2")
    h.shard.set_group_config(
        "app",
        GroupConfig.model_validate(
            {"streams.heartbeat.interval.ms": 6000, "streams.session.timeout.ms": 50000}
        ),
    )
    assert h.beat("m1").heartbeat_interval_ms == 6000
    h.beat("m2")
    assert h.shard.effective_group_config("app")["streams.session.timeout.ms"] == 50000
    # m2 goes silent: alive at 45 s (the broker's session), fenced by 50 s (the group's).
    silent_since = h.now
    while h.now < silent_since + 45000:
        h.now += 5000
        h.shard.expire(h.now)
        h.beat("m1")
    assert set(h.group.members) == {"m1", "m2"}
    h.now = silent_since + 50001
    h.shard.expire(h.now)
    assert set(h.group.members) == {"m1"}
    # Deleted, the broker's values are back.
    h.shard.set_group_config("app", None)
    assert h.beat("m1").heartbeat_interval_ms == 5000


def test_the_broker_values_are_not_held_to_the_bounds() -> None:
    """A declared deviation (docs/deviations.md): Kafka refuses to start with these."""
    broker = CoordinatorConfig.from_kafka(
        {"group.streams.session.timeout.ms": 6000, "group.streams.heartbeat.interval.ms": 1000}
    )
    assert (broker.streams_session_timeout_ms, broker.streams_min_session_timeout_ms) == (6000, 45000)
    assert (broker.streams_heartbeat_interval_ms, broker.streams_min_heartbeat_interval_ms) == (1000, 5000)


@pytest.mark.parametrize("broker_given", [False, True])
def test_the_internal_recovery_lag_config_is_described_once_set(broker_given: bool) -> None:
    """Kafka 4.4 defines `streams.acceptable.recovery.lag` as an internal group config: a
    DescribeConfigs, of every config or of it by name, leaves it out until the group sets it,
    unless the broker's `group.streams.acceptable.recovery.lag` is given explicitly (then it is
    described as the broker's, a LONG; measured against Kafka 4.4: an internal config the broker
    leaves at its default is not described even by name); a value that is no number is refused
    in LONG's words."""

    class Service:
        config = CoordinatorConfig.from_kafka(
            {"group.streams.acceptable.recovery.lag": 10000} if broker_given else {}
        )
        group_configs: dict[str, GroupConfig] = {}

        def effective_group_config(self, group_id: str) -> dict[str, int | str]:
            gc = self.group_configs.get(group_id)
            lag = gc.streams_acceptable_recovery_lag if gc else None
            return {
                "consumer.session.timeout.ms": 45000,
                "consumer.heartbeat.interval.ms": 5000,
                "streams.heartbeat.interval.ms": 5000,
                "streams.session.timeout.ms": 45000,
                "streams.num.standby.replicas": 0,
                "streams.initial.rebalance.delay.ms": 3000,
                "streams.assignment.interval.ms": 1000,
                "streams.acceptable.recovery.lag": 10000 if lag is None else lag,
                "streams.rack.aware.assignment.tags": "",
                "streams.assignor.offload.enable": "true",
                "streams.task.offset.interval.ms": 60000,
                "streams.num.warmup.replicas": 2,
                "streams.assignor.name": "sticky",
            }

        def set_group_config(
            self, group_id: str, values: dict[str, int | str | None], *, apply: bool = True
        ) -> None:
            cfg = GroupConfig.model_validate({k: v for k, v in values.items() if v is not None})
            cfg.validate_against(self.config)
            if apply:
                self.group_configs[group_id] = cfg

    configs = GroupConfigs(Service())  # type: ignore[arg-type]
    name = "streams.acceptable.recovery.lag"
    _, _, every = configs.describe("app", None, False)
    _, _, named = configs.describe("app", [name], False)
    if broker_given:
        assert [(c["value"], c["config_source"], c["config_type"]) for c in named] == [("10000", 4, 5)]
        assert name in [c["name"] for c in every]
    else:
        assert named == []
        assert name not in [c["name"] for c in every]
    assert configs.incremental_alter("app", [(name, 0, "many")], False) == (
        40,
        f"Invalid value many for configuration {name}: Not a number of type LONG",
    )
    assert configs.incremental_alter("app", [(name, 0, "777")], False) == (0, None)
    _, _, every = configs.describe("app", None, False)
    (dynamic,) = [c for c in every if c["name"] == name]
    assert (dynamic["value"], dynamic["config_source"]) == ("777", 8)
