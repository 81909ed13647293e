"""Per-group dynamic configs on the wire: DescribeConfigs (32, v1-v4) and IncrementalAlterConfigs
(44, v0-v1) for the GROUP resource (type 32, KIP-848 "Dynamic group configs").

Only `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms` exist (Kafka 4.0's
group configs for consumer groups), validated against the broker's min/max bounds; values are
kept across restarts. Other resource types (topics, brokers) are answered with no configs and no
error: the embedded data plane has no topic or broker configs to show. IncrementalAlterConfigs
on another resource type gets INVALID_REQUEST.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from engine.errors import Errors
from gateway.codec import response_type_of
from gateway.entity_builder import build
from gateway.registry import HandlerRegistry, RequestContext

if TYPE_CHECKING:
    from gateway.groups.service import GroupCoordinatorService

GROUP_RESOURCE = 32
GROUP_CONFIGS = ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms")
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations (APPEND/SUBTRACT apply to lists only)
DYNAMIC_GROUP_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 8, 4, 5  # DescribeConfigs sources
# The broker setting each group config falls back to (its source when the group has no override:
# STATIC_BROKER_CONFIG if the setting was given, else DEFAULT_CONFIG, as Kafka 4.3 answers).
BROKER_FIELD = {
    "consumer.session.timeout.ms": "consumer_session_timeout_ms",
    "consumer.heartbeat.interval.ms": "consumer_heartbeat_interval_ms",
}
INT_TYPE = 3


def register(registry: HandlerRegistry, service: GroupCoordinatorService) -> None:
    apis = ConfigApis(service)
    registry.register(32, 1, 4, apis.describe_configs)
    registry.register(44, 0, 1, apis.incremental_alter_configs)


class ConfigApis:
    def __init__(self, service: GroupCoordinatorService) -> None:
        self.service = service

    def describe_configs(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        rtype = response_type_of(req)
        results = []
        for res in req.resources:
            configs = []
            if res.resource_type == GROUP_RESOURCE:
                effective = self.service.effective_group_config(res.resource_name)
                overrides = self.service.group_configs.get(res.resource_name)
                set_names = (
                    set()
                    if overrides is None
                    else set(overrides.model_dump(by_alias=True, exclude_none=True))
                )
                keys = res.configuration_keys
                given = self.service.config.model_fields_set
                for name in GROUP_CONFIGS:
                    if keys is not None and name not in keys:
                        continue
                    configs.append(
                        {
                            "name": name,
                            "value": str(effective[name]),
                            "read_only": False,
                            "config_source": DYNAMIC_GROUP_CONFIG
                            if name in set_names
                            else STATIC_BROKER_CONFIG
                            if BROKER_FIELD[name] in given
                            else DEFAULT_CONFIG,
                            "is_sensitive": False,
                            "synonyms": [],
                            "config_type": INT_TYPE,
                            "documentation": None,
                        }
                    )
            results.append(
                {
                    "error_code": 0,
                    # Kafka answers a described GROUP with an empty message
                    "error_message": "" if res.resource_type == GROUP_RESOURCE else None,
                    "resource_type": res.resource_type,
                    "resource_name": res.resource_name,
                    "configs": configs,
                }
            )
        return build(rtype, {"throttle_time": 0, "results": results})

    def incremental_alter_configs(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        rtype = response_type_of(req)
        out = []
        for res in req.resources:
            code, message = Errors.NONE, None
            if res.resource_type != GROUP_RESOURCE:
                code, message = Errors.INVALID_REQUEST, "only GROUP configs can be altered here"
            else:
                values: dict[str, int | None] = {}
                for c in res.configs:
                    if c.name not in GROUP_CONFIGS:
                        code, message = Errors.INVALID_CONFIG, f"Unknown group config name: {c.name}"
                        break
                    if c.config_operation == DELETE:
                        values[c.name] = None
                    elif c.config_operation == SET:
                        try:
                            values[c.name] = int(c.value)
                        except (TypeError, ValueError):
                            code, message = (
                                Errors.INVALID_CONFIG,
                                f"Invalid value {c.value} for configuration {c.name}: "
                                "Not a number of type INT",
                            )
                            break
                    else:
                        code, message = (
                            Errors.INVALID_CONFIG,
                            f"{c.name} is not a list: only SET and DELETE apply",
                        )
                        break
                if code is Errors.NONE:
                    try:  # validate_only still validates, as Kafka does
                        self.service.set_group_config(res.resource_name, values, apply=not req.validate_only)
                    except (ValueError, ValidationError) as e:
                        code, message = Errors.INVALID_CONFIG, str(e).splitlines()[0]
            out.append(
                {
                    "error_code": int(code),
                    "error_message": message,
                    "resource_type": res.resource_type,
                    "resource_name": res.resource_name,
                }
            )
        return build(rtype, {"throttle_time": 0, "responses": out})
