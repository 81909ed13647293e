"""DescribeConfigs (32, v1-v4), AlterConfigs (33, v0-v2), IncrementalAlterConfigs (44, v0-v1).

One request may name resources of several types; each is answered by the `ConfigResources`
registered for its type in `HandlerRegistry.config_resources` (this module registers TOPIC and
BROKER; the group layer adds GROUP). Kafka behaviour reproduced (`ConfigHelper`,
`ConfigAdminManager`, `ControllerConfigurationValidator`, `ConfigurationControlManager`):

  * DescribeConfigs lists every config of a topic or of this broker in Kafka's order, with
    value, source, synonyms (when asked), read-only flag, sensitivity, type and documentation
    (v3+, when asked); `configuration_keys` null or empty means all, names Kafka does not know
    are left out silently; a topic that does not exist -> UNKNOWN_TOPIC_OR_PARTITION; broker
    resource "" is the cluster-wide dynamic defaults, another broker id -> INVALID_REQUEST;
  * topic changes are validated as Kafka's controller does: unknown name or bad value ->
    INVALID_CONFIG with Kafka's message, a null SET value or a config named twice ->
    INVALID_REQUEST, APPEND/SUBTRACT on a non-list config -> INVALID_CONFIG; AlterConfigs
    replaces every override of the resource, IncrementalAlterConfigs edits them;
  * broker changes (per broker, or "" for the cluster default): only Kafka's dynamic broker
    configs may change ("Cannot update these configs dynamically" -> INVALID_REQUEST), bad
    values -> INVALID_REQUEST, names Kafka does not know are stored as they are;
  * `validate_only` checks without changing anything; every change is durable on return.

What has effect in groupshift: `max.message.bytes` (and the broker's `message.max.bytes` it
falls back to) bounds produced batches; the others are stored and described only (no
retention, compaction or tiered storage runs on the embedded data plane).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from gateway.dataplane.configs import (
    BROKER_DEFS,
    LIST,
    TOPIC_DEFS,
    ConfigStore,
    ConfigValueError,
    broker_value_error,
    check_topic_config,
)
from gateway.dataplane.plane import DataPlane
from gateway.dataplane.topics import topic_name_error
from gateway.registry import ConfigEntry, ConfigResources, HandlerRegistry, RequestContext
from protocol.codec import response_type_of
from protocol.entity_builder import build

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
# Errors.INVALID_REQUEST's own message, which Kafka sends for a resource type it cannot parse.
MALFORMED = (
    "This most likely occurs because of a request being malformed by the client library or the "
    "message was sent to an incompatible broker. See the broker logs for more details."
)
_NOT_SERVED = {BROKER_LOGGER: "BROKER_LOGGER", CLIENT_METRICS: "CLIENT_METRICS", GROUP: "GROUP"}

Result = tuple[int, str | None]
OK: Result = (0, None)


def _fail(code: ErrorCode, message: str) -> Result:
    return int(code), message


def _null_value(configs: Mapping[str, str | None]) -> Result | None:
    """AlterConfigs (the whole-resource replace) cannot delete a config: Kafka refuses a null
    value with INVALID_REQUEST, in these words, for topics and brokers alike."""
    for key, value in configs.items():
        if value is None:
            return _fail(ErrorCode.invalid_request, f"Null value not supported for : {key}")
    return None


def _apply_ops(
    current: Mapping[str, str],
    ops: Sequence[tuple[str, int, str | None]],
    list_type: Mapping[str, bool],
    default_of: Mapping[str, str | None],
    broker: bool = False,
) -> dict[str, str | None] | Result:
    """Kafka's incremental edit of a resource's dynamic configs (None value = deleted).

    APPEND/SUBTRACT on a config that is not a list is refused in the topic controller's words,
    or in `ConfigAdminManager`'s for broker resources (`broker`).
    """
    counts = Counter(name for name, _, _ in ops)
    if any(n > 1 for n in counts.values()):
        return _fail(ErrorCode.invalid_request, "Error due to duplicate config keys")
    out: dict[str, str | None] = dict(current)
    for name, op, value in ops:
        if op == SET:
            if value is None:
                return _fail(ErrorCode.invalid_request, f"Null value not supported for : {name}")
            out[name] = value
        elif op == DELETE:
            out[name] = None
        elif op in (APPEND, SUBTRACT):
            if not list_type.get(name, False):
                if broker:
                    return _fail(
                        ErrorCode.invalid_config,
                        f"Config value {_OP_NAMES[op].lower()} is not allowed for config key: {name}",
                    )
                return _fail(
                    ErrorCode.invalid_config,
                    f"Can't {_OP_NAMES[op]} to key {name} because its type is not LIST.",
                )
            old = out.get(name)
            if old is None:
                old = default_of.get(name)
            parts = [p for p in (old or "").split(",") if p]
            for item in (value or "").split(","):
                if op == APPEND and item not in parts:
                    parts.append(item)
                elif op == SUBTRACT and item in parts:
                    parts.remove(item)
            out[name] = ",".join(parts)
        else:
            return -1, None  # Kafka: an operation it cannot parse fails the resource
    return out


class TopicConfigs:
    """TOPIC resources: the dynamic configs of the data plane's topics."""

    def __init__(self, plane: DataPlane) -> None:
        self.plane = plane
        self.store: ConfigStore = plane.configs

    def _missing(self, name: str) -> Result | None:
        if not name:
            return _fail(ErrorCode.invalid_request, "Default topic resources are not allowed.")
        if (err := topic_name_error(name)) is not None:
            return _fail(ErrorCode.invalid_topic_exception, err)
        if self.plane.topic(name) is None:
            return _fail(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        return None

    def describe(
        self, name: str, keys: Sequence[str] | None, include_documentation: bool
    ) -> tuple[int, str | None, list[ConfigEntry]]:
        if (err := topic_name_error(name)) is not None:
            return int(ErrorCode.invalid_topic_exception), err, []
        if self.plane.topic(name) is None:
            return int(ErrorCode.unknown_topic_or_partition), "", []
        wanted = set(keys) if keys else None
        entries = [self.store.topic_entry(name, c) for c in TOPIC_DEFS if wanted is None or c in wanted]
        if not include_documentation:
            for e in entries:
                e["documentation"] = None
        return 0, "", entries

    def _commit(self, name: str, configs: Mapping[str, str | None], validate_only: bool) -> Result:
        kept = {k: v for k, v in configs.items() if v is not None}
        try:
            for key, value in kept.items():
                check_topic_config(key, value)
        except ConfigValueError as e:
            return _fail(ErrorCode.invalid_config, e.message)
        if not validate_only:
            self.store.set_topic(name, kept)
        return OK

    def alter(self, name: str, configs: Mapping[str, str | None], validate_only: bool) -> Result:
        if (missing := self._missing(name)) is not None:
            return missing
        if (null := _null_value(configs)) is not None:
            return null
        return self._commit(name, configs, validate_only)

    def incremental_alter(
        self, name: str, ops: Sequence[tuple[str, int, str | None]], validate_only: bool
    ) -> Result:
        if (missing := self._missing(name)) is not None:
            return missing
        edited = _apply_ops(
            self.store.topics.get(name, {}),
            ops,
            {k: d.type == LIST for k, d in TOPIC_DEFS.items()},
            {k: d.default for k, d in TOPIC_DEFS.items()},
        )
        if isinstance(edited, tuple):
            return edited
        return self._commit(name, edited, validate_only)


class BrokerConfigs:
    """BROKER resources: this node's configs ("<node id>") and the cluster defaults ("")."""

    def __init__(self, store: ConfigStore) -> None:
        self.store = store

    def _target(self, name: str, describing: bool) -> bool | Result:
        """True for this broker, False for the cluster default, else the error."""
        if not name:
            return False
        try:
            node = int(name)
        except ValueError:
            return _fail(ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}")
        if node != self.store.node_id:
            either = " or empty string" if describing else ""
            return _fail(
                ErrorCode.invalid_request,
                f"Unexpected broker id, expected {self.store.node_id}{either}, but received {name}",
            )
        return True

    def describe(
        self, name: str, keys: Sequence[str] | None, include_documentation: bool
    ) -> tuple[int, str | None, list[ConfigEntry]]:
        target = self._target(name, describing=True)
        if isinstance(target, tuple):
            return target[0], target[1], []
        wanted = set(keys) if keys else None
        entries = [
            self.store.broker_entry(c, target)
            for c in self.store.broker_names(target)
            if wanted is None or c in wanted
        ]
        if not include_documentation:
            for e in entries:
                e["documentation"] = None
        return 0, "", entries

    def _commit(self, per_broker: bool, configs: Mapping[str, str | None], validate_only: bool) -> Result:
        current = self.store.broker if per_broker else self.store.broker_default
        changed = sorted(k for k, v in configs.items() if current.get(k) != v)
        fixed = [k for k in changed if k in BROKER_DEFS and not BROKER_DEFS[k].dynamic]
        if fixed:
            return _fail(
                ErrorCode.invalid_request, f"Cannot update these configs dynamically: [{', '.join(fixed)}]"
            )
        for key in changed:
            if configs[key] is not None and (err := broker_value_error(key, configs[key])) is not None:
                return int(err[0]), err[1]
        proposed = {k: v for k, v in configs.items() if v is not None}
        dynamic = (
            {**self.store.broker_default, **proposed} if per_broker else {**proposed, **self.store.broker}
        )
        for check in self.store.broker_checks:  # e.g. a new keystore must load (gateway.server)
            if (problem := check(dynamic)) is not None:
                return _fail(ErrorCode.invalid_request, problem)
        if not validate_only:
            self.store.set_broker(per_broker, proposed)
        return OK

    def alter(self, name: str, configs: Mapping[str, str | None], validate_only: bool) -> Result:
        target = self._target(name, describing=False)
        if isinstance(target, tuple):
            return target
        if (null := _null_value(configs)) is not None:
            return null
        current = self.store.broker if target else self.store.broker_default
        return self._commit(target, {**{k: None for k in current}, **configs}, validate_only)

    def incremental_alter(
        self, name: str, ops: Sequence[tuple[str, int, str | None]], validate_only: bool
    ) -> Result:
        target = self._target(name, describing=False)
        if isinstance(target, tuple):
            return target
        current = self.store.broker if target else self.store.broker_default
        edited = _apply_ops(
            current,
            ops,
            {k: d.type == LIST for k, d in BROKER_DEFS.items()},
            {k: self.store.broker_value(k) for k, _, _ in ops},
            broker=True,
        )
        if isinstance(edited, tuple):
            return edited
        return self._commit(target, edited, validate_only)


class ConfigApis:
    """The three config APIs, routing each resource to the `ConfigResources` of its type."""

    def __init__(self, registry: HandlerRegistry) -> None:
        self.registry = registry

    def register(self) -> None:
        self.registry.register(DESCRIBE_CONFIGS, 1, 4, self.describe_configs)
        self.registry.register(ALTER_CONFIGS, 0, 2, self.alter_configs)
        self.registry.register(INCREMENTAL_ALTER_CONFIGS, 0, 1, self.incremental_alter_configs)

    def _resources(self, rtype: int) -> ConfigResources | Result:
        handler = self.registry.config_resources.get(rtype)
        if handler is not None:
            return handler
        if rtype in _NOT_SERVED:
            return _fail(ErrorCode.invalid_request, f"groupshift does not serve {_NOT_SERVED[rtype]} configs")
        return _fail(ErrorCode.invalid_request, MALFORMED)

    def describe_configs(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        results = []
        for res in req.resources:
            handler = self._resources(res.resource_type)
            entries: list[ConfigEntry] = []
            if isinstance(handler, tuple):
                code, message = handler
            else:
                code, message, entries = handler.describe(
                    res.resource_name,
                    res.configuration_keys,
                    bool(getattr(req, "include_documentation", False)),
                )
                if not req.include_synonyms:
                    entries = [{**e, "synonyms": []} for e in entries]
            results.append(
                {
                    "error_code": code,
                    "error_message": message,
                    "resource_type": res.resource_type,
                    "resource_name": res.resource_name,
                    "configs": entries,
                }
            )
        return build(response_type_of(req), {"throttle_time": 0, "results": results})

    def _duplicates(self, resources: Any) -> Counter[tuple[int, str]]:
        return Counter((r.resource_type, r.resource_name) for r in resources)

    def alter_configs(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        seen = self._duplicates(req.resources)
        out = []
        for res in req.resources:
            handler = self._resources(res.resource_type)
            if isinstance(handler, tuple):
                code, message = handler
            elif seen[(res.resource_type, res.resource_name)] > 1:
                code, message = _fail(ErrorCode.invalid_request, "Duplicate resource in the request")
            elif len({c.name for c in res.configs}) != len(res.configs):
                code, message = _fail(ErrorCode.invalid_request, "Error due to duplicate config keys")
            else:
                configs = {c.name: c.value for c in res.configs}
                code, message = handler.alter(res.resource_name, configs, req.validate_only)
            out.append(
                {
                    "error_code": code,
                    "error_message": message,
                    "resource_type": res.resource_type,
                    "resource_name": res.resource_name,
                }
            )
        return build(response_type_of(req), {"throttle_time": 0, "responses": out})

    def incremental_alter_configs(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        seen = self._duplicates(req.resources)
        out = []
        for res in req.resources:
            handler = self._resources(res.resource_type)
            if isinstance(handler, tuple):
                code, message = handler
            elif seen[(res.resource_type, res.resource_name)] > 1:
                code, message = _fail(ErrorCode.invalid_request, "Duplicate resource in the request")
            else:
                ops = [(c.name, c.config_operation, c.value) for c in res.configs]
                code, message = handler.incremental_alter(res.resource_name, ops, req.validate_only)
            out.append(
                {
                    "error_code": code,
                    "error_message": message,
                    "resource_type": res.resource_type,
                    "resource_name": res.resource_name,
                }
            )
        return build(response_type_of(req), {"throttle_time": 0, "responses": out})


def register_config_apis(registry: HandlerRegistry, plane: DataPlane) -> None:
    registry.config_resources[TOPIC] = TopicConfigs(plane)
    registry.config_resources[BROKER] = BrokerConfigs(plane.configs)
    ConfigApis(registry).register()
