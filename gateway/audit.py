"""Security audit events: `auth.failed` and `acl.denied`, counted and rate-limited in the log.

Not a Kafka behaviour as such: Kafka logs a failed authentication at INFO in
`SaslServerAuthenticator` and each authorizer decision in the `kafka.authorizer.logger` log4j
logger (DENIED at INFO), unthrottled. An operator facing a password-spraying client or a
misconfigured consumer wants both the count and a readable log, so each event is counted in a
metric on every occurrence (`groupshift_auth_failures_total`, `groupshift_acl_denials_total`) and
logged at warning level at most once per 10 s per (event, principal, client host), the next
line saying how many were suppressed (`gateway.log_rate`).

Every security layer (SSL principal mapping, SASL, the authorizer, member binding) reports here,
and nowhere else, so the event names and fields stay one vocabulary.
"""

from __future__ import annotations

import structlog

from gateway.log_rate import WARN_EVERY_S, RateLimiter
from gateway.metrics import MetricsRegistry
from gateway.registry import RequestContext

log = structlog.get_logger("gateway.audit")


class AuditLog:
    """The gateway's audit sink; one per server (`GatewayServer.audit`)."""

    def __init__(self, metrics: MetricsRegistry | None = None, *, every_s: float = WARN_EVERY_S) -> None:
        self._limiter = RateLimiter(every_s)
        self._auth_failures = (
            None
            if metrics is None
            else metrics.counter(
                "groupshift_auth_failures_total",
                "Failed authentications (TLS principal mapping, SASL), by listener and mechanism",
                ("listener", "mechanism"),
            )
        )
        self._acl_denials = (
            None
            if metrics is None
            else metrics.counter(
                "groupshift_acl_denials_total",
                "Requests or resources refused by the authorizer or by member binding, by API",
                ("api", "operation"),
            )
        )

    def auth_failed(self, ctx: RequestContext, *, mechanism: str, reason: str, principal: str = "") -> None:
        """A client failed to authenticate (`principal` is who it claimed to be, if known)."""
        if self._auth_failures is not None:
            self._auth_failures.labels(ctx.listener_name, mechanism).inc()
        dropped = self._limiter.allow(("auth.failed", principal, ctx.client_host))
        if dropped is None:
            return
        log.warning(
            "auth.failed",
            principal=principal,
            client=f"{ctx.peer[0]}:{ctx.peer[1]}",
            listener=ctx.listener_name,
            mechanism=mechanism,
            reason=reason,
            connection_id=ctx.connection_id,
            suppressed=dropped,
        )

    def acl_denied(
        self,
        ctx: RequestContext,
        *,
        api: str,
        resource_type: str,
        resource_name: str,
        operation: str,
        reason: str = "",
    ) -> None:
        """A principal was refused an operation on a resource (by an ACL, or by member binding:
        `reason` then says so)."""
        if self._acl_denials is not None:
            self._acl_denials.labels(api, operation).inc()
        dropped = self._limiter.allow(("acl.denied", ctx.principal, ctx.client_host))
        if dropped is None:
            return
        log.warning(
            "acl.denied",
            principal=ctx.principal,
            client=f"{ctx.peer[0]}:{ctx.peer[1]}",
            listener=ctx.listener_name,
            api=api,
            resource_type=resource_type,
            resource_name=resource_name,
            operation=operation,
            reason=reason,
            connection_id=ctx.connection_id,
            suppressed=dropped,
        )


NO_AUDIT = AuditLog()
"""A sink with no metrics, for code and tests that run without a server."""
