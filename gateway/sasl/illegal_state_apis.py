"""SaslHandshake (key 17, v0-1) and SaslAuthenticate (key 36, v0-2) outside an authentication.

Kafka advertises both on every listener; its authenticator consumes them while a connection
authenticates, and `KafkaApis` answers any that reach it (on a PLAINTEXT or SSL listener, or on
a SASL connection already authenticated that is not re-authenticating) with ILLEGAL_SASL_STATE:
SaslAuthenticate with the message "SaslAuthenticate request received after successful
authentication". The same happens here: `gateway.sasl.gate` consumes them during authentication,
these handlers answer the rest.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from gateway.registry import HandlerRegistry, RequestContext
from protocol.codec import response_type_of
from protocol.entity_builder import build

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"


def handshake(ctx: RequestContext, header: Any, request: Any) -> Any:
    return build(response_type_of(request), {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []})


def authenticate(ctx: RequestContext, header: Any, request: Any) -> Any:
    return build(
        response_type_of(request),
        {
            "error_code": ErrorCode.illegal_sasl_state,
            "error_message": AFTER_AUTHENTICATION,
            "auth_bytes": b"",
            "session_lifetime": 0,
        },
    )


def register_sasl_apis(registry: HandlerRegistry) -> None:
    registry.register(SASL_HANDSHAKE_KEY, 0, 1, handshake)
    registry.register(SASL_AUTHENTICATE_KEY, 0, 2, authenticate)
