"""The delegation-token APIs (KIP-48: CreateDelegationToken 38, RenewDelegationToken 39,
ExpireDelegationToken 40, DescribeDelegationToken 41), refused as a Kafka broker refuses them
when delegation tokens are not enabled (no `delegation.token.secret.key`).

groupshift issues no delegation tokens, in embedded mode and in upstream mode's `gateway`
identity alike (the cluster's tokens authenticate clients to the cluster, and groupshift's
listeners do not accept them). The APIs are therefore not advertised in ApiVersions (issue 29,
point 5), and a client that sends one anyway gets Kafka's answer rather than a closed
connection: `KafkaApis.allowTokenRequests` first (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on a
PLAINTEXT listener, or on SSL without a client certificate), then DELEGATION_TOKEN_AUTH_DISABLED
(tokens off). The timestamps are those of whoever answers in Kafka: the broker's refusals
(`prepareResponse`, `DelegationTokenManager.ErrorTimestamp`) carry -1, the controller's
DELEGATION_TOKEN_AUTH_DISABLED (`DelegationTokenControlManager`) leaves them 0; the owner and
requester principals of CreateDelegationToken are filled in by both.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from gateway.registry import HandlerRegistry, RequestContext
from protocol.codec import response_type_of
from protocol.entity_builder import build

CREATE, RENEW, EXPIRE, DESCRIBE = 38, 39, 40, 41
# Kafka's `DelegationTokenManager.ErrorTimestamp` (the broker's refusals), and the controller's
# untouched field (tokens disabled).
ERROR_TIMESTAMP = datetime.datetime.fromtimestamp(-0.001, tz=datetime.UTC)
UNSET_TIMESTAMP = datetime.datetime.fromtimestamp(0, tz=datetime.UTC)
ANONYMOUS = "User:ANONYMOUS"


def _split_principal(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return (kind, name) if name else ("User", kind)


class DelegationTokenRefusals:
    """Handlers answering the four APIs as Kafka does with delegation tokens disabled."""

    def __init__(self, protocol_of: Callable[[str], str]) -> None:
        """`protocol_of`: a listener name's security protocol (PLAINTEXT, SSL, SASL_SSL, ...)."""
        self.protocol_of = protocol_of

    def _error(self, ctx: RequestContext) -> ErrorCode:
        protocol = self.protocol_of(ctx.listener_name)
        if protocol == "PLAINTEXT" or (protocol == "SSL" and ctx.principal == ANONYMOUS):
            return ErrorCode.delegation_token_request_not_allowed
        return ErrorCode.delegation_token_auth_disabled

    @staticmethod
    def _timestamp(error: ErrorCode) -> datetime.datetime:
        return UNSET_TIMESTAMP if error == ErrorCode.delegation_token_auth_disabled else ERROR_TIMESTAMP

    def create(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        error = self._error(ctx)
        requester = _split_principal(ctx.principal)
        owner = (
            (request.owner_principal_type or "User", request.owner_principal_name)
            if getattr(request, "owner_principal_name", None)
            else requester
        )
        if error == ErrorCode.delegation_token_auth_disabled and any(
            r.principal_type != "User" for r in request.renewers
        ):
            error = ErrorCode.invalid_principal_type
        return build(
            response_type_of(request),
            {
                "error_code": error,
                "principal_type": owner[0],
                "principal_name": owner[1],
                "token_requester_principal_type": requester[0],
                "token_requester_principal_name": requester[1],
                "issue_timestamp": self._timestamp(error),
                "expiry_timestamp": self._timestamp(error),
                "max_timestamp": self._timestamp(error),
                "token_id": "",
                "hmac": b"",
                "throttle_time": 0,
            },
        )

    def renew_or_expire(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        error = self._error(ctx)
        return build(
            response_type_of(request),
            {"error_code": error, "expiry_timestamp": self._timestamp(error), "throttle_time": 0},
        )

    def describe(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        return build(
            response_type_of(request), {"error_code": self._error(ctx), "tokens": [], "throttle_time": 0}
        )

    def register(self, registry: HandlerRegistry) -> None:
        """Registered but never advertised (`enabled` is false)."""
        for key, fn, hi in (
            (CREATE, self.create, 3),
            (RENEW, self.renew_or_expire, 2),
            (EXPIRE, self.renew_or_expire, 2),
            (DESCRIBE, self.describe, 3),
        ):
            registry.register(key, 1, hi, fn, enabled=lambda: False)


DELEGATION_TOKEN_APIS = frozenset({CREATE, RENEW, EXPIRE, DESCRIBE})
