"""Per-group dynamic configs (KIP-848 "Dynamic group configs"): the GROUP resource (type 32) of
DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

`consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms` (Kafka 4.0's group configs
for consumer groups), `streams.session.timeout.ms`, `streams.heartbeat.interval.ms` and
`streams.assignment.interval.ms` (KIP-1071, within the broker's `group.streams.min/max.*`
bounds), `streams.num.standby.replicas` (at most the broker's
`group.streams.max.standby.replicas`) and `streams.initial.rebalance.delay.ms` exist,
validated against the broker's bounds, Kafka 4.4's LIST `streams.rack.aware.assignment.tags`
(kept as given, no duplicate keys; APPEND and SUBTRACT refused as Kafka 4.4 refuses them for
every group config), its STRING `streams.assignor.name` (one of the broker's
`group.streams.assignors`) and its internal `streams.acceptable.recovery.lag`,
`streams.task.offset.interval.ms` (at least the broker's minimum), `streams.num.warmup.replicas`
(at most the broker's maximum) and `streams.assignor.offload.enable` (a BOOLEAN), described
once set or given in the broker's settings, as Kafka 4.4 describes them; values are kept across
restarts. The APIs themselves
belong to the data plane (`gateway.dataplane.apis.configs`), which routes GROUP resources here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import ValidationError

from engine.errors import Errors
from gateway.groups.apis import GroupService
from gateway.registry import ConfigEntry, HandlerRegistry

GROUP_RESOURCE = 32
STATIC_BROKER_CONFIG = 4
# Kafka 4.4's internal group configs (`ConfigDef.defineInternal`): taken when set, and described
# (asked by name or not) only once the group sets them or the broker's own setting is given
# explicitly (`AbstractKafkaConfig.extractGroupConfigMap` copies an internal default only from
# the broker's originals; measured against Kafka 4.4, e2e/test_streams_differential.py).
INTERNAL_GROUP_CONFIGS = frozenset(
    {
        "streams.num.warmup.replicas",
        "streams.acceptable.recovery.lag",
        "streams.assignor.offload.enable",
        "streams.task.offset.interval.ms",
    }
)
# Every group config groupshift takes, in the order Kafka 4.4 describes them whatever order they
# are asked in (its HashMap of group configs, measured against Kafka 4.4 with every one present).
# `streams.assignor.name` is Kafka 4.4's STRING naming one of the broker's
# `group.streams.assignors` (described as the first of them while unset).
KNOWN_GROUP_CONFIGS = (
    "streams.num.warmup.replicas",
    "streams.acceptable.recovery.lag",
    "streams.assignor.offload.enable",
    "streams.task.offset.interval.ms",
    "consumer.session.timeout.ms",
    "streams.assignor.name",
    "streams.rack.aware.assignment.tags",
    "streams.initial.rebalance.delay.ms",
    "streams.assignment.interval.ms",
    "streams.heartbeat.interval.ms",
    "consumer.heartbeat.interval.ms",
    "streams.session.timeout.ms",
    "streams.num.standby.replicas",
)
LONG_GROUP_CONFIGS = frozenset({"streams.acceptable.recovery.lag"})
# Kafka 4.4's LIST group config: its value is kept as the string given.
LIST_GROUP_CONFIGS = frozenset({"streams.rack.aware.assignment.tags"})
STRING_GROUP_CONFIGS = frozenset({"streams.assignor.name"})
BOOLEAN_GROUP_CONFIGS = frozenset({"streams.assignor.offload.enable"})
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs operations
DYNAMIC_GROUP_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 8, 4, 5  # DescribeConfigs sources
BOOLEAN_TYPE, STRING_TYPE, INT_TYPE, LONG_TYPE, LIST_TYPE = 1, 2, 3, 5, 7
# Java's `String.trim` (Kafka's `ConfigDef.parseType` trims STRING and BOOLEAN values).
JAVA_TRIMMED = "".join(map(chr, range(0x21)))
# The broker setting each group config falls back to (its CoordinatorConfig field): a fallback to
# a setting given explicitly is reported as STATIC_BROKER_CONFIG, as Kafka does.
BROKER_FIELD = {
    "consumer.session.timeout.ms": "consumer_session_timeout_ms",
    "consumer.heartbeat.interval.ms": "consumer_heartbeat_interval_ms",
    "streams.session.timeout.ms": "streams_session_timeout_ms",
    "streams.heartbeat.interval.ms": "streams_heartbeat_interval_ms",
    "streams.num.standby.replicas": "streams_num_standby_replicas",
    "streams.initial.rebalance.delay.ms": "streams_initial_rebalance_delay_ms",
    "streams.assignment.interval.ms": "streams_assignment_interval_ms",
    "streams.acceptable.recovery.lag": "streams_acceptable_recovery_lag",
    "streams.rack.aware.assignment.tags": "streams_rack_aware_assignment_tags",
    "streams.assignor.offload.enable": "streams_assignor_offload_enable",
    "streams.task.offset.interval.ms": "streams_task_offset_interval_ms",
    "streams.num.warmup.replicas": "streams_num_warmup_replicas",
    "streams.assignor.name": "streams_assignors",
}


def register(registry: HandlerRegistry, service: GroupService) -> None:
    """Serve GROUP resources through the config APIs the data plane registers."""
    registry.config_resources[GROUP_RESOURCE] = GroupConfigs(service)


class GroupConfigs:
    """GROUP resources (`gateway.registry.ConfigResources`)."""

    def __init__(self, service: GroupService) -> None:
        self.service = service

    def describe(
        self, name: str, keys: Sequence[str] | None, include_documentation: bool
    ) -> tuple[int, str | None, list[ConfigEntry]]:
        if not name:
            return int(Errors.INVALID_REQUEST), "Group name must not be empty", []
        effective = self.service.effective_group_config(name)
        overrides = self.service.group_configs.get(name)
        set_names = (
            set() if overrides is None else set(overrides.model_dump(by_alias=True, exclude_none=True))
        )
        given = self.service.config.model_fields_set
        configs = []
        for config in KNOWN_GROUP_CONFIGS:
            if keys and config not in keys:
                continue
            if (
                config in INTERNAL_GROUP_CONFIGS
                and config not in set_names
                and BROKER_FIELD[config] not in given
            ):
                continue
            configs.append(
                {
                    "name": config,
                    "value": str(effective[config]),
                    "read_only": False,
                    "config_source": DYNAMIC_GROUP_CONFIG
                    if config in set_names
                    else STATIC_BROKER_CONFIG
                    if BROKER_FIELD[config] in given
                    else DEFAULT_CONFIG,
                    "is_sensitive": False,
                    "synonyms": [],
                    "config_type": LIST_TYPE
                    if config in LIST_GROUP_CONFIGS
                    else STRING_TYPE
                    if config in STRING_GROUP_CONFIGS
                    else BOOLEAN_TYPE
                    if config in BOOLEAN_GROUP_CONFIGS
                    else LONG_TYPE
                    if config in LONG_GROUP_CONFIGS
                    else INT_TYPE,
                    "documentation": None,
                }
            )
        return 0, "", configs

    def _set(
        self, name: str, values: dict[str, int | str | None], validate_only: bool
    ) -> tuple[int, str | None]:
        try:  # validate_only still validates, as Kafka does
            self.service.set_group_config(name, values, apply=not validate_only)
        except (ValueError, ValidationError) as e:
            return int(Errors.INVALID_CONFIG), str(e).splitlines()[0]
        return 0, None

    def _parse(self, config: str, value: str | None) -> int | str | bool | tuple[int, str]:
        if config not in KNOWN_GROUP_CONFIGS:
            return int(Errors.INVALID_CONFIG), f"Unknown group config name: {config}"
        if config in LIST_GROUP_CONFIGS and value is not None:
            return value
        if config in STRING_GROUP_CONFIGS and value is not None:
            return value.strip(JAVA_TRIMMED)
        if config in BOOLEAN_GROUP_CONFIGS:
            word = (value or "").strip(JAVA_TRIMMED).lower()
            if word in ("true", "false"):
                return word == "true"
            return (
                int(Errors.INVALID_CONFIG),
                f"Invalid value {value} for configuration {config}: "
                "Expected value to be either true or false",
            )
        kind = "LONG" if config in LONG_GROUP_CONFIGS else "INT"
        try:
            return int(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return (
                int(Errors.INVALID_CONFIG),
                f"Invalid value {value} for configuration {config}: Not a number of type {kind}",
            )

    def alter(
        self, name: str, configs: Mapping[str, str | None], validate_only: bool
    ) -> tuple[int, str | None]:
        """Legacy AlterConfigs: the given configs replace every override of the group."""
        values: dict[str, int | str | None] = dict.fromkeys(KNOWN_GROUP_CONFIGS)
        for config, value in configs.items():
            parsed = self._parse(config, value)
            if isinstance(parsed, tuple):
                return parsed
            values[config] = parsed
        return self._set(name, values, validate_only)

    def incremental_alter(
        self, name: str, ops: Sequence[tuple[str, int, str | None]], validate_only: bool
    ) -> tuple[int, str | None]:
        values: dict[str, int | str | None] = {}
        for config, op, value in ops:
            if config not in KNOWN_GROUP_CONFIGS:
                return int(Errors.INVALID_CONFIG), f"Unknown group config name: {config}"
            if op == DELETE:
                values[config] = None
            elif op == SET:
                parsed = self._parse(config, value)
                if isinstance(parsed, tuple):
                    return parsed
                values[config] = parsed
            else:
                # Kafka 4.4's controller knows no GROUP config as a LIST (its config schema has
                # no GROUP resources), the LIST tags included.
                verb = "APPEND" if op == APPEND else "SUBTRACT" if op == SUBTRACT else str(op)
                return (
                    int(Errors.INVALID_CONFIG),
                    f"Can't {verb} to key {config} because its type is not LIST.",
                )
        return self._set(name, values, validate_only)
