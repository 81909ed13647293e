"""Per-group dynamic configs on the wire: DescribeConfigs (32, v1-v4) and IncrementalAlterConfigs
(44, v0-v1) for the GROUP resource (type 32, KIP-848 "Dynamic group configs").

Only `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms` exist (Kafka 4.0's
group configs for consumer groups), validated against the broker's min/max bounds; values are
kept across restarts. The BROKER resource (type 4, any name) shows the broker-level group settings
that decide conversions (`BROKER_GROUP_CONFIGS`: the migration policy, `group.max.size`,
`group.consumer.max.size`, ...), as a Kafka broker lists them among its configs, so
`groupshift groups migration` reads the same keys from groupshift and from Kafka. Topics are
answered with no configs and no error: the embedded data plane has no topic configs to show.
IncrementalAlterConfigs on another resource type gets INVALID_REQUEST.
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
BROKER_RESOURCE = 4
BROKER_GROUP_CONFIGS = (
    "group.consumer.migration.policy",
    "group.consumer.max.size",
    "group.max.size",
    "group.consumer.assignors",
    "group.consumer.heartbeat.interval.ms",
    "group.consumer.session.timeout.ms",
    "group.coordinator.rebalance.protocols",
)
STATIC_BROKER_CONFIG = 4
STRING_TYPE = 2
GROUP_CONFIGS = ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms")
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations (APPEND/SUBTRACT apply to lists only)
DYNAMIC_GROUP_CONFIG, DEFAULT_CONFIG = 8, 5  # DescribeConfigs config sources
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
                for name in GROUP_CONFIGS:
                    if keys is not None and name not in keys:
                        continue
                    configs.append(
                        {
                            "name": name,
                            "value": str(effective[name]),
                            "read_only": False,
                            "config_source": DYNAMIC_GROUP_CONFIG if name in set_names else DEFAULT_CONFIG,
                            "is_sensitive": False,
                            "synonyms": [],
                            "config_type": INT_TYPE,
                            "documentation": None,
                        }
                    )
            elif res.resource_type == BROKER_RESOURCE:
                settings = self.service.config.model_dump(by_alias=True)
                for name in BROKER_GROUP_CONFIGS:
                    if res.configuration_keys is not None and name not in res.configuration_keys:
                        continue
                    value = settings[name]
                    configs.append(
                        {
                            "name": name,
                            "value": ",".join(value) if isinstance(value, list | tuple) else str(value),
                            "read_only": True,
                            "config_source": STATIC_BROKER_CONFIG,
                            "is_sensitive": False,
                            "synonyms": [],
                            "config_type": STRING_TYPE,
                            "documentation": None,
                        }
                    )
            results.append(
                {
                    "error_code": 0,
                    "error_message": None,
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
                                f"{c.name} must be an integer, got {c.value!r}",
                            )
                            break
                    else:
                        code, message = (
                            Errors.INVALID_CONFIG,
                            f"{c.name} is not a list: only SET and DELETE apply",
                        )
                        break
                if code is Errors.NONE and not req.validate_only:
                    try:
                        self.service.set_group_config(res.resource_name, values)
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
