"""The table of implemented Kafka APIs: api key -> (version range, handler).

It is the single source of truth for both dispatch and ApiVersions, so the gateway advertises
exactly what it implements (docs/architecture.md: "ApiVersions advertises exactly what is implemented").
Each API is one registration; the group layer adds FindCoordinator/JoinGroup/... the same way
the data plane adds Produce/Fetch, and may replace a registration (e.g. FindCoordinator) with
`replace=True`.

A handler is `fn(ctx, header, request) -> response`, where `request` is the decoded kio body of
the negotiated version and `response` an instance of that version's kio response class (or
already encoded body bytes). `fn` may be:
  * a plain function returning the response: no task is created (cheapest);
  * a function returning an `asyncio.Future` (e.g. a shard queue's completion): no task either;
  * an `async def`: run as a task, so it may wait (long-poll Fetch, fsync).
Return `NO_RESPONSE` when Kafka sends nothing back (Produce with acks=0); raise
`CloseConnection` where Kafka closes the connection instead of answering.

`enabled` (a zero-argument predicate) makes advertisement conditional on a feature switch,
as Kafka does for ConsumerGroupHeartbeat when the consumer protocol is off: a disabled API is
left out of ApiVersions, and its requests are still dispatched so the handler can answer the
way Kafka does for a disabled feature (UNSUPPORTED_VERSION). An API that must not exist at all
is simply not registered.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kio.schema.index import api_key_map, schema_name_map
from kio.static.constants import EntityType

from protocol import kafka_schemas
from protocol.client_assignment_wire import EXTENSION_VERSION
from protocol.connect_wire import EXTENSION_NAMES

# librdkafka sends GetTelemetrySubscriptions as soon as key 71 is advertised and the classic
# consumer fails when it goes unanswered: never advertise KIP-714 telemetry.
NEVER_ADVERTISED = frozenset({71, 72})

Handler = Callable[["RequestContext", Any, Any], Any]
SteadyHandler = Callable[["RequestContext", Any], Any]


class _NoResponse:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_RESPONSE"


NO_RESPONSE: Any = _NoResponse()
"""Returned by a handler when Kafka sends no response at all (Produce acks=0)."""


class CloseConnection(Exception):
    """Raised by a handler where Kafka closes the connection instead of answering."""

    def __init__(self, reason: str, **fields: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fields = fields


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the connection a request came from."""

    connection_id: int
    peer: tuple[str, int]
    listener: tuple[str, int]
    client_id: str = ""
    listener_name: str = "PLAINTEXT"
    """The name of the listener (`listeners`) the client connected to: Metadata answers with
    that listener's advertised address."""
    principal: str = "User:ANONYMOUS"
    """Who the client authenticated as (`User:<mapped certificate subject>` on a mutual-TLS
    listener), for authorization."""
    client_software_name: str | None = None
    client_software_version: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    """Per-connection state a layer wants to keep (keyed by the layer's own names)."""
    frame: bytes | None = None
    """The frame of the request being handled, during the handler's synchronous call only (the
    dispatcher clears it after): for a handler that reads what kio drops, such as groupshift's
    tagged field of ConsumerGroupHeartbeat (docs/client-side-assignors.md)."""

    @property
    def client_host(self) -> str:
        return self.peer[0]


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    """One implemented API: the versions served and the function serving them."""

    min_version: int
    max_version: int
    fn: Handler
    enabled: Callable[[], bool] | None = None
    name: str = ""
    is_coroutine: bool = False
    steady: SteadyHandler | None = None
    """A faster entry for the steady shape of this API's request, read by a hand-written reader
    (`protocol.heartbeat_wire`) instead of kio: `steady(ctx, request)`. Only the layer that
    registered `fn` knows it is the same service; re-registering (a wrapper with `replace=True`)
    drops it unless passed again, so a wrapped handler is never bypassed."""

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_advertised(self) -> bool:
        return self.enabled is None or self.enabled()


def request_schema_path(api_key: int, version: int) -> str | None:
    """kio's `module:Class` path of the request schema of (api key, version), None if kio has
    none, read from kio's index without importing the schema: the codec imports it at the first
    request of that version. Importing every version of every API at registration (kio builds
    over a thousand dataclasses) was more than a second of each server start."""
    if (api_key, version) in kafka_schemas.SCHEMAS:
        cls = kafka_schemas.SCHEMAS[api_key, version][0]
        return f"{cls.__module__}:{cls.__name__}"
    name = api_key_map.get(api_key)
    if name is None:
        return None
    return schema_name_map.get(name, {}).get(version, {}).get(EntityType.request)


def api_name(api_key: int, version: int) -> str:
    """Kafka's API name (`ApiVersions`, `ConsumerGroupHeartbeat`) from kio's class name."""
    path = request_schema_path(api_key, version)
    if path is None:
        return EXTENSION_NAMES.get(api_key, f"Api{api_key}")
    if path.startswith(kafka_schemas.__name__ + ":"):
        return kafka_schemas.NAMES.get(api_key) or api_name(api_key, 0)
    return path.rpartition(":")[2].removesuffix("Request")


ConfigEntry = dict[str, Any]
"""One DescribeConfigs entry: name, value, read_only, config_source, is_sensitive, synonyms
(list of {name, value, source}), config_type, documentation."""


class ConfigResources(Protocol):
    """The configs of one resource type (TOPIC, BROKER, GROUP, ...), for the config APIs.

    DescribeConfigs, AlterConfigs and IncrementalAlterConfigs carry resources of several types
    in one request; the data plane's handlers (`gateway.dataplane.apis.configs`) answer each
    resource through the `ConfigResources` registered for its type in
    `HandlerRegistry.config_resources`, so a layer adds a resource type without taking over the
    APIs. Results are (error code, error message, ...) with Kafka's codes and wording.
    """

    def describe(
        self, name: str, keys: Sequence[str] | None, include_documentation: bool
    ) -> tuple[int, str | None, list[ConfigEntry]]: ...

    def alter(
        self, name: str, configs: Mapping[str, str | None], validate_only: bool
    ) -> tuple[int, str | None]:
        """Legacy AlterConfigs: `configs` replace every dynamic config of the resource."""
        ...

    def incremental_alter(
        self, name: str, ops: Sequence[tuple[str, int, str | None]], validate_only: bool
    ) -> tuple[int, str | None]:
        """(config name, operation SET=0/DELETE=1/APPEND=2/SUBTRACT=3, value) in request order."""
        ...


class HandlerRegistry:
    """api key -> HandlerSpec, validated against what the codec (kio) can decode."""

    def __init__(self) -> None:
        self._specs: dict[int, HandlerSpec] = {}
        self.config_resources: dict[int, ConfigResources] = {}
        """Config resource type (Kafka's `ConfigResource.Type` id) -> its configs."""
        self.generation = 0
        """Bumped by every (un)registration, so callers may cache lookups between changes."""

    def register(
        self,
        api_key: int,
        min_version: int,
        max_version: int,
        fn: Handler,
        *,
        enabled: Callable[[], bool] | None = None,
        replace: bool = False,
        steady: SteadyHandler | None = None,
    ) -> HandlerSpec:
        """Serve `api_key` versions [min_version, max_version] with `fn` (and its steady
        requests with `steady`, see `HandlerSpec.steady`)."""
        if api_key in NEVER_ADVERTISED:
            raise ValueError(
                f"api key {api_key} (KIP-714 telemetry) must not be advertised: librdkafka "
                "starts pushing telemetry as soon as it is"
            )
        if not 0 <= min_version <= max_version:
            raise ValueError(f"api key {api_key}: bad version range {min_version}..{max_version}")
        for v in range(min_version, max_version + 1):
            if request_schema_path(api_key, v) is None and not (
                api_key in EXTENSION_NAMES and v == EXTENSION_VERSION
            ):
                raise ValueError(f"api key {api_key} v{v} has no request schema in kio: cannot decode it")
        if api_key in self._specs and not replace:
            raise ValueError(
                f"api key {api_key} ({self._specs[api_key].name}) is already registered; "
                "pass replace=True to take it over"
            )
        spec = HandlerSpec(
            min_version=min_version,
            max_version=max_version,
            fn=fn,
            enabled=enabled,
            name=api_name(api_key, max_version),
            is_coroutine=inspect.iscoroutinefunction(fn),
            steady=steady,
        )
        self._specs[api_key] = spec
        self.generation += 1
        return spec

    def __setitem__(self, api_key: int, spec: HandlerSpec) -> None:
        self.register(
            api_key,
            spec.min_version,
            spec.max_version,
            spec.fn,
            enabled=spec.enabled,
            replace=True,
        )

    def unregister(self, api_key: int) -> None:
        self._specs.pop(api_key, None)
        self.generation += 1

    def get(self, api_key: int) -> HandlerSpec | None:
        return self._specs.get(api_key)

    def __getitem__(self, api_key: int) -> HandlerSpec:
        return self._specs[api_key]

    def __contains__(self, api_key: object) -> bool:
        return api_key in self._specs

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._specs))

    def __len__(self) -> int:
        return len(self._specs)

    def advertised(self) -> list[tuple[int, int, int]]:
        """(api key, min, max) of every enabled API, sorted by key, for ApiVersions."""
        return [
            (k, s.min_version, s.max_version) for k, s in sorted(self._specs.items()) if s.is_advertised()
        ]
