"""ApiVersions (key 18, v0-v4): the list of APIs this gateway serves.

Kafka behaviour reproduced (`KafkaApis.handleApiVersionsRequest`, `ApiVersionsRequest`):
  * the list is exactly the registry's enabled entries, so nothing unimplemented is offered
    (librdkafka, aiokafka and kafka-python pick versions from it);
  * the response always uses header v0, even for flexible v3+ (kio's schema encodes this);
  * a version above our maximum is answered with a v0 body: UNSUPPORTED_VERSION (35) and the
    ApiVersions entry (Kafka >= 2.4, KIP-511), so the client retries with a version it sees;
  * v3+ carries the client's software name and version (KIP-511); they must match Kafka's
    pattern `[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?`, else INVALID_REQUEST. Valid values
    are kept on the connection context for logs.
"""

from __future__ import annotations

import re
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from gateway.registry import HandlerRegistry, RequestContext
from protocol.codec import api_schema, encode_response, response_type_of
from protocol.entity_builder import build

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


class ApiVersionsApi:
    """Answers ApiVersions from the live registry (so conditional APIs come and go)."""

    def __init__(self, registry: HandlerRegistry) -> None:
        self.registry = registry
        # Feature flags (KIP-584) a layer may advertise, as (name, min, max) tuples.
        self.supported_features: list[tuple[str, int, int]] = []

    def register(self) -> None:
        self.registry.register(API_KEY, MIN_VERSION, MAX_VERSION, self.handle)

    def _api_keys(self) -> list[dict[str, int]]:
        return [
            {"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in self.registry.advertised()
        ]

    def handle(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        response_type = response_type_of(request)
        name = getattr(request, "client_software_name", None)
        version = getattr(request, "client_software_version", None)
        if name is not None and not (
            _SOFTWARE.fullmatch(name) and version is not None and _SOFTWARE.fullmatch(version)
        ):
            return build(
                response_type,
                {"error_code": ErrorCode.invalid_request, "api_keys": [], "throttle_time": 0},
            )
        if name is not None:
            ctx.client_software_name = name
            ctx.client_software_version = version
        return build(
            response_type,
            {
                "error_code": ErrorCode.none,
                "api_keys": self._api_keys(),
                "throttle_time": 0,
                "supported_features": [
                    {"name": n, "min_version": lo, "max_version": hi} for n, lo, hi in self.supported_features
                ],
            },
        )

    def unsupported_version_response(self, correlation_id: int) -> bytes:
        """The v0 UNSUPPORTED_VERSION answer to an ApiVersions request above our maximum."""
        schema = api_schema(API_KEY, 0)
        assert schema is not None
        body = build(
            load_response_schema(API_KEY, 0),
            {
                "error_code": ErrorCode.unsupported_version,
                "api_keys": [{"api_key": API_KEY, "min_version": MIN_VERSION, "max_version": MAX_VERSION}],
            },
        )
        return encode_response(schema, correlation_id, body)
