"""From a request frame to a response frame: decode, route to the registered handler, encode.

What happens to bad input follows Kafka's `SocketServer.processCompletedReceives` and
`RequestContext.parseRequest`: a request whose API key is unknown or not enabled, whose version
is outside the served range (ApiVersions excepted), or whose header or body fails to parse,
makes Kafka close that connection without a response; so does this dispatcher, after logging a
`request.rejected` event. ApiVersions is special-cased as in Kafka (`ApiKeys.isVersionEnabled`):
any version is accepted, and one above the maximum is answered with a v0 body carrying
UNSUPPORTED_VERSION (see `api_versions`).

A handler that raises unexpectedly (a bug) is answered as Kafka's `KafkaApis.handle` answers
it: with the request's error response (`error_response`, Kafka `AbstractRequest.getErrorResponse`)
carrying UNKNOWN_SERVER_ERROR (COORDINATOR_NOT_AVAILABLE for the group coordinator's APIs, which
clients retry: `failure_error`), logged once as `request.failed` with the API, version and
correlation id (never the request's payload); the connection, the requests behind it and the
group live on. Only `CloseConnection` (and failures it stands for, such as a coordinator log
that failed) closes the connection.

Per-request overhead matters (classic and KIP-848 heartbeats reach tens of thousands per
second): the handler, codec and pre-bound metric children of each served (key, version) are
looked up once and kept until the registry changes, and plain-function handlers run inline
without a task. A steady ConsumerGroupHeartbeat or Heartbeat is read by `protocol.heartbeat_wire`
instead of kio and served by the handler's steady entry (`HandlerSpec.steady`), when the layer
that registered the handler gave one; any other shape goes through kio as before, and the
answers are the same bytes (tests/test_heartbeat_wire.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import structlog

from gateway.connection import KafkaConnection, ResponseSlot
from gateway.error_response import error_response, failure_error
from gateway.metrics import CounterChild, MetricsRegistry, SummaryChild
from gateway.registry import NO_RESPONSE, CloseConnection, HandlerRegistry, HandlerSpec
from protocol import heartbeat_wire
from protocol.codec import ApiSchema, DecodeFailure, api_schema, decode, encode_response, peek

log = structlog.get_logger("gateway")

API_VERSIONS_KEY = 18

UnsupportedApiVersions = Callable[[int], bytes]


class _ApiMetrics:
    __slots__ = ("latency", "requests")

    def __init__(self, requests: CounterChild, latency: SummaryChild) -> None:
        self.requests = requests
        self.latency = latency


# The hand-written readers of steady requests (`protocol.heartbeat_wire`), for an API whose
# handler registered a steady entry (`HandlerSpec.steady`).
_STEADY_READERS: dict[int, Callable[[bytes], Any]] = {
    heartbeat_wire.CONSUMER_GROUP_HEARTBEAT_KEY: heartbeat_wire.read_consumer_group_heartbeat,
    heartbeat_wire.HEARTBEAT_KEY: heartbeat_wire.read_heartbeat,
}


class _Route:
    """Everything needed to serve one (api key, version) the registry serves."""

    __slots__ = ("metrics", "read_steady", "schema", "spec")

    def __init__(
        self,
        spec: HandlerSpec,
        schema: ApiSchema,
        metrics: _ApiMetrics,
        read_steady: Callable[[bytes], Any] | None,
    ) -> None:
        self.spec = spec
        self.schema = schema
        self.metrics = metrics
        self.read_steady = read_steady


class Dispatcher:
    """Routes frames of every connection through the handler registry."""

    def __init__(
        self,
        registry: HandlerRegistry,
        metrics: MetricsRegistry,
        *,
        unsupported_api_versions: UnsupportedApiVersions,
    ) -> None:
        self.registry = registry
        self._unsupported_api_versions = unsupported_api_versions
        self._requests = metrics.counter(
            "groupshift_requests_total", "Requests answered, by API and version", ("api", "version")
        )
        self._latency = metrics.summary(
            "groupshift_request_latency_seconds",
            "Time from a request being parsed to its response being ready, by API",
            ("api",),
        )
        self._rejected = metrics.counter(
            "groupshift_requests_rejected_total",
            "Requests that closed their connection instead of being answered, by reason",
            ("reason",),
        )
        self._failures = metrics.counter(
            "groupshift_requests_failed_total",
            "Requests whose handler failed unexpectedly and were answered with an error, by API",
            ("api",),
        )
        self._by_api: dict[tuple[str, int], _ApiMetrics] = {}
        self._routes: dict[tuple[int, int], _Route] = {}
        self._routes_generation = registry.generation

    def _api_metrics(self, name: str, version: int) -> _ApiMetrics:
        m = self._by_api.get((name, version))
        if m is None:
            m = self._by_api[(name, version)] = _ApiMetrics(
                self._requests.labels(name, str(version)), self._latency.labels(name)
            )
        return m

    def _reject(self, conn: KafkaConnection, reason: str, **fields: Any) -> None:
        self._rejected.labels(reason).inc()
        log.warning(
            "request.rejected",
            connection_id=conn.connection_id,
            peer=f"{conn.ctx.peer[0]}:{conn.ctx.peer[1]}",
            client_id=conn.ctx.client_id,
            reason=reason,
            **fields,
        )
        conn.close(reason)

    def _route(self, api_key: int, version: int) -> _Route | None:
        """The cached route of a served (key, version); None for anything else."""
        if self._routes_generation != self.registry.generation:
            self._routes.clear()
            self._routes_generation = self.registry.generation
        route = self._routes.get((api_key, version))
        if route is None:
            spec = self.registry.get(api_key)
            if spec is None or not spec.supports(version):
                return None
            schema = api_schema(api_key, version)
            assert schema is not None  # the registry only accepts versions kio can decode
            read_steady = _STEADY_READERS.get(api_key) if spec.steady is not None else None
            route = self._routes[(api_key, version)] = _Route(
                spec, schema, self._api_metrics(spec.name, version), read_steady
            )
        return route

    def on_frame(self, conn: KafkaConnection, frame: bytes, slot: ResponseSlot) -> None:
        """Handle one request frame; the response (if any) lands in `slot`."""
        started = time.perf_counter()
        try:
            api_key, version, correlation_id = peek(frame)
        except DecodeFailure as bad_header:
            self._reject(conn, "request.header_invalid", error=str(bad_header))
            return
        route = self._route(api_key, version)
        if route is None:
            spec_or_none = self.registry.get(api_key)
            if spec_or_none is None:
                self._reject(conn, "api.unknown", api_key=api_key, api_version=version)
                return
            if api_key == API_VERSIONS_KEY and version > spec_or_none.max_version:
                slot.complete(self._unsupported_api_versions(correlation_id))
                self._api_metrics(spec_or_none.name, 0).requests.inc()  # answered as v0
                return
            self._reject(
                conn,
                "api.version_unsupported",
                api_key=api_key,
                api_version=version,
                min_version=spec_or_none.min_version,
                max_version=spec_or_none.max_version,
            )
            return
        spec, schema = route.spec, route.schema
        # A steady heartbeat is read by hand (no kio entity, no length guard); anything else,
        # or a steady reader's None, takes kio's decode, which answers or rejects as always.
        steady_fn = spec.steady
        steady = route.read_steady(frame) if route.read_steady is not None else None
        header: Any = None
        if steady is not None:
            request = steady
            client_id = steady.client_id
        else:
            try:
                header, request = decode(schema, frame)
            except DecodeFailure as malformed:
                self._reject(
                    conn,
                    "request.malformed",
                    api_key=api_key,
                    api_version=version,
                    correlation_id=correlation_id,
                    error=str(malformed),
                )
                return
            client_id = header.client_id
        ctx = conn.ctx
        if client_id:
            ctx.client_id = client_id
        ctx.frame = frame
        try:
            if steady is not None and steady_fn is not None:
                result = steady_fn(ctx, steady)
            else:
                result = spec.fn(ctx, header, request)
        except CloseConnection as close:
            self._reject(conn, close.reason, api=spec.name, **close.fields)
            return
        except Exception as failure:
            # Each `except` names its own variable: compiled (mypyc), one name would take the
            # first clause's type, and a failing handler would raise instead of answering.
            self._failed(conn, slot, spec, schema, correlation_id, started, request, failure)
            return
        finally:
            ctx.frame = None
        if type(result) is bytes:  # an encoded body, answered now: the common case
            self._deliver(conn, slot, spec, schema, correlation_id, started, request, result, route.metrics)
            return
        if spec.is_coroutine:
            result = asyncio.ensure_future(result)
        if asyncio.isfuture(result):
            slot.task = result  # cancelled if the connection closes first
            result.add_done_callback(
                lambda f: self._complete(conn, slot, spec, schema, correlation_id, started, request, f)
            )
        else:
            self._deliver(conn, slot, spec, schema, correlation_id, started, request, result, route.metrics)

    def _complete(
        self,
        conn: KafkaConnection,
        slot: ResponseSlot,
        spec: HandlerSpec,
        schema: ApiSchema,
        correlation_id: int,
        started: float,
        request: Any,
        fut: asyncio.Future[Any],
    ) -> None:
        if fut.cancelled():
            return  # the connection went away (or shutdown); nothing to answer
        exc = fut.exception()
        if isinstance(exc, CloseConnection):
            self._reject(conn, exc.reason, api=spec.name, **exc.fields)
            return
        if exc is not None:
            self._failed(conn, slot, spec, schema, correlation_id, started, request, exc)
            return
        self._deliver(conn, slot, spec, schema, correlation_id, started, request, fut.result())

    def _deliver(
        self,
        conn: KafkaConnection,
        slot: ResponseSlot,
        spec: HandlerSpec,
        schema: ApiSchema,
        correlation_id: int,
        started: float,
        request: Any,
        response: Any,
        metrics: _ApiMetrics | None = None,
    ) -> None:
        if response is NO_RESPONSE:
            data = None
        elif response is None:
            error = TypeError("handler returned None (use NO_RESPONSE)")
            self._failed(conn, slot, spec, schema, correlation_id, started, request, error)
            return
        else:
            try:
                data = encode_response(schema, correlation_id, response)
            except Exception as e:
                self._failed(conn, slot, spec, schema, correlation_id, started, request, e)
                return
        m = metrics or self._api_metrics(spec.name, schema.version)
        m.requests.inc()
        m.latency.observe(time.perf_counter() - started)
        slot.complete(data)

    def _failed(
        self,
        conn: KafkaConnection,
        slot: ResponseSlot,
        spec: HandlerSpec,
        schema: ApiSchema,
        correlation_id: int,
        started: float,
        request: Any,
        exc: BaseException,
    ) -> None:
        """A handler bug: log it once, answer the request's error response, keep the connection."""
        self._failures.labels(spec.name).inc()
        log.error(
            "request.failed",
            connection_id=conn.connection_id,
            client_id=conn.ctx.client_id,
            api=spec.name,
            api_key=schema.api_key,
            api_version=schema.version,
            correlation_id=correlation_id,
            error=f"{type(exc).__name__}: {exc}"[:500],
            exc_info=exc,
        )
        try:
            error = failure_error(schema.api_key)
            response = error_response(schema.api_key, schema.response_type, request, error)
            data = encode_response(schema, correlation_id, response)
        except Exception as e:  # pragma: no cover - tests/test_error_response.py covers every API
            self._rejected.labels("handler.failed").inc()
            log.error("request.error_response_failed", api=spec.name, error=f"{type(e).__name__}: {e}")
            conn.close("handler.failed", api=spec.name)
            return
        m = self._api_metrics(spec.name, schema.version)
        m.requests.inc()
        m.latency.observe(time.perf_counter() - started)
        slot.complete(data)
