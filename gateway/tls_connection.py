"""A client connection on an SSL listener (Kafka `SslTransportLayer` with `SslPrincipalMapper`):
the client's principal is taken from its verified certificate once the handshake has succeeded,
and a certificate no `ssl.principal.mapping.rules` rule maps fails the authentication (the
connection is closed, nothing answered), as in Kafka. The TLS settings and the mapping rules
themselves are gateway.tls.

Compiled with gateway.connection in the compiled build (setup.py): in a mypyc build an interpreted
class cannot subclass a compiled one, and as a subclass in gateway.server (interpreted) every TLS
connection failed there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from gateway.audit import NO_AUDIT, AuditLog
from gateway.connection import DEFAULT_RESPONSE_BUFFER_BYTES, FrameHandler, KafkaConnection, RequestBytesPool
from gateway.tls import NoMatchingRule, PrincipalMapper, peer_principal

log = structlog.get_logger("gateway")

# Kafka's default rule (`DEFAULT`: the whole subject), for a connection given no mapper.
DEFAULT_MAPPER = PrincipalMapper()


class TlsKafkaConnection(KafkaConnection):
    """A connection on an SSL listener: asyncio calls `connection_made` once the handshake has
    succeeded, and the client's principal is taken from its certificate then."""

    def __init__(
        self,
        *,
        connection_id: int,
        on_frame: FrameHandler,
        max_frame_bytes: int,
        on_lost: Callable[[KafkaConnection], None] | None = None,
        response_buffer_bytes: int = DEFAULT_RESPONSE_BUFFER_BYTES,
        request_pool: RequestBytesPool | None = None,
        mapper: PrincipalMapper = DEFAULT_MAPPER,
        audit: AuditLog = NO_AUDIT,
    ) -> None:
        super().__init__(
            connection_id=connection_id,
            on_frame=on_frame,
            max_frame_bytes=max_frame_bytes,
            on_lost=on_lost,
            response_buffer_bytes=response_buffer_bytes,
            request_pool=request_pool,
        )
        self.mapper = mapper
        self.audit = audit

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        try:
            self.ctx.principal = peer_principal(transport.get_extra_info("ssl_object"), self.mapper)
        except NoMatchingRule as e:
            # Kafka fails the authentication: the connection is closed, nothing answered.
            log.warning("gateway.tls_principal_unmapped", connection_id=self.connection_id, error=str(e))
            self.audit.auth_failed(self.ctx, mechanism="SSL", reason=str(e))
            transport.close()

    def eof_received(self) -> bool | None:
        """TLS has no half-close: the transport closes after the peer's close_notify whatever
        this returns (asyncio logs a warning for True), so nothing is kept open."""
        super().eof_received()
        return None
