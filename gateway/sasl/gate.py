"""The SASL authenticator on a connection: frames in, Kafka's answers and closes out.

`SaslGate` is the frame handler of each connection on a SASL_PLAINTEXT or SASL_SSL listener, in
front of the server's normal one (the dispatcher, or upstream mode's router). It decodes only
what authentication needs (SaslHandshake, SaslAuthenticate, ApiVersions' version, the API key of
anything else), asks the connection's `SaslAuthenticator` what to do, and does it: hand the
frame on, answer, set `ctx.principal`, report `auth.failed` to the audit log, or close.

Bounds while a connection is not authenticated (docs/robustness.md): each frame is at most
`sasl.server.max.receive.size` bytes (Kafka's bound on a SASL token, applied by the authenticator
to every frame it reads: a larger size closes the connection as soon as its 4 size bytes
arrive), and the whole exchange, from the connection's start or a re-authentication's
SaslHandshake, must complete within `sasl.server.authentication.timeout.ms` (groupshift's; Kafka
leaves a stalled exchange to `connections.max.idle.ms`, 10 minutes). A failed login is answered
and closed after `connections.failed.authentication.delay.ms`, as Kafka delays it, so a password
guesser cannot retry at full speed; the connection reads nothing more meanwhile.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from gateway.audit import AuditLog
from gateway.connection import FrameHandler, KafkaConnection, ResponseSlot
from gateway.error_response import error_response
from gateway.sasl.authenticator import (
    Answer,
    ApiVersionsRequest,
    AuthenticateAnswer,
    AuthenticateRequest,
    Event,
    HandshakeAnswer,
    HandshakeRequest,
    OtherRequest,
    RawAnswer,
    RawToken,
    SaslAuthenticator,
    SaslListenerSetup,
    SaslState,
    Verdict,
)
from protocol.codec import ApiSchema, DecodeFailure, api_schema, decode, encode_response, peek
from protocol.entity_builder import build

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
API_VERSIONS_KEY = 18
GATE_ATTRIBUTE = "gateway.sasl.gate"
_SIZE = struct.Struct(">i")


@dataclass(frozen=True)
class SaslBounds:
    max_receive_bytes: int
    """`sasl.server.max.receive.size`: the largest frame before authentication."""
    timeout_ms: int
    """`sasl.server.authentication.timeout.ms`: the longest exchange."""
    failed_delay_ms: int
    """`connections.failed.authentication.delay.ms`: the delay of a failed login's answer."""
    max_frame_bytes: int
    """`socket.request.max.bytes`: the frame bound once authenticated."""
    api_versions_max: int
    """The highest ApiVersions version served (a higher one is answered v0 and may be retried)."""


class SaslGate:
    """One connection's authenticator and its I/O (see the module doc)."""

    def __init__(
        self,
        setup: SaslListenerSetup,
        bounds: SaslBounds,
        inner: FrameHandler,
        audit: AuditLog,
        on_authenticated: Callable[[str, bool], None] | None = None,
    ) -> None:
        """`on_authenticated(mechanism, reauthentication)` counts each completed login."""
        self.auth = SaslAuthenticator(setup)
        self._on_authenticated = on_authenticated
        self.bounds = bounds
        self._inner = inner
        self._audit = audit
        self._conn: KafkaConnection | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()

    def attach(self, conn: KafkaConnection) -> None:
        """Bound the new connection's frames and start the exchange's clock."""
        self._conn = conn
        conn.ctx.attributes[GATE_ATTRIBUTE] = self
        self._unauthenticated()

    def _unauthenticated(self) -> None:
        conn = self._conn
        if conn is None:
            return
        conn.limit_frames(min(self.bounds.max_receive_bytes, self.bounds.max_frame_bytes), self._oversized)
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_later(self.bounds.timeout_ms / 1000, self._timed_out)

    def _authenticated(self) -> None:
        conn = self._conn
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if conn is not None:
            conn.limit_frames(self.bounds.max_frame_bytes, None)

    def connection_lost(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _oversized(self, size: int) -> None:
        conn = self._conn
        if conn is None:
            return
        self._audit.auth_failed(
            conn.ctx,
            mechanism=self.auth.mechanism_name or "none",
            reason=f"Failing SASL authentication due to invalid receive size ({size} bytes)",
        )
        self.auth.state = SaslState.FAILED

    def _timed_out(self) -> None:
        self._timer = None
        conn = self._conn
        if conn is None or conn.closing or self.auth.authenticated:
            return
        self._carry_out(conn, self.auth.timed_out(), None, None)

    # -- frames -------------------------------------------------------------------------------

    def on_frame(self, conn: KafkaConnection, frame: bytes, slot: ResponseSlot) -> None:
        auth = self.auth
        if auth.state is SaslState.AUTHENTICATED:
            expires = auth.session_expires_ms
            live = expires is None or time.monotonic() * 1000 < expires
            if live and frame[:2] != b"\x00\x11":  # anything but SaslHandshake (api key 17)
                self._inner(conn, frame, slot)
                return
        now_ms = time.monotonic() * 1000
        if auth.raw_tokens and auth.state is SaslState.AUTHENTICATING:
            verdict = auth.receive(RawToken(frame), now_ms)
            raw = verdict.answer
            answer = _SIZE.pack(len(raw.token)) + raw.token if isinstance(raw, RawAnswer) else None
            self._carry_out(conn, verdict, slot, answer)
            return
        try:
            api_key, version, correlation_id = peek(frame)
        except DecodeFailure:
            self._carry_out(conn, auth.receive(OtherRequest(-1), now_ms), slot, None)
            return
        event: Event
        schema: ApiSchema | None = None
        request: Any = None
        if api_key == API_VERSIONS_KEY:
            event = ApiVersionsRequest(served_version=version <= self.bounds.api_versions_max)
        elif api_key in (SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY) and not auth.authenticated:
            schema = api_schema(api_key, version)
            try:
                if schema is None:
                    raise DecodeFailure(f"api key {api_key} v{version} is not served")
                _, request = decode(schema, frame)
            except DecodeFailure:
                self._carry_out(conn, auth.receive(OtherRequest(api_key), now_ms), slot, None)
                return
            if api_key == SASL_HANDSHAKE_KEY:
                event = HandshakeRequest(request.mechanism, version)
            else:
                event = AuthenticateRequest(bytes(request.auth_bytes), version)
        elif api_key == SASL_HANDSHAKE_KEY:
            schema = api_schema(api_key, version)
            if schema is None:
                self._inner(conn, frame, slot)  # the dispatcher closes it as any unserved version
                return
            try:
                _, request = decode(schema, frame)
            except DecodeFailure:
                self._inner(conn, frame, slot)
                return
            event = HandshakeRequest(request.mechanism, version)
        else:
            event = OtherRequest(api_key)
        was_authenticated = auth.authenticated
        verdict = auth.receive(event, now_ms)
        if verdict.forward:
            self._inner(conn, frame, slot)
            return
        if was_authenticated and auth.state is SaslState.AUTHENTICATING:
            self._unauthenticated()  # a re-authentication began: bounded as the first one
        answer = None
        if verdict.answer is not None:
            answer = self._encode(verdict.answer, frame, api_key, version, correlation_id, schema, request)
        self._carry_out(conn, verdict, slot, answer)

    def _encode(
        self,
        answer: Answer,
        frame: bytes,
        api_key: int,
        version: int,
        correlation_id: int,
        schema: ApiSchema | None,
        request: Any,
    ) -> bytes | None:
        if isinstance(answer, RawAnswer):
            return _SIZE.pack(len(answer.token)) + answer.token
        if schema is None:
            schema = api_schema(api_key, version)
            if schema is None:
                return None
        body: Any
        if isinstance(answer, HandshakeAnswer):
            body = build(
                schema.response_type, {"error_code": answer.error_code, "mechanisms": list(answer.mechanisms)}
            )
        elif isinstance(answer, AuthenticateAnswer):
            body = build(
                schema.response_type,
                {
                    "error_code": answer.error_code,
                    "error_message": answer.error_message,
                    "auth_bytes": answer.auth_bytes,
                    "session_lifetime": answer.session_lifetime_ms,
                },
            )
        else:  # IllegalStateAnswer: the request's own error response
            try:
                if request is None:
                    _, request = decode(schema, frame)
                body = error_response(api_key, schema.response_type, request, ErrorCode.illegal_sasl_state)
            except Exception:  # a request we cannot answer in its own shape: closed unanswered
                return None
        return encode_response(schema, correlation_id, body)

    def _carry_out(
        self, conn: KafkaConnection, verdict: Verdict, slot: ResponseSlot | None, answer: bytes | None
    ) -> None:
        if verdict.failure is not None:
            f = verdict.failure
            self._audit.auth_failed(conn.ctx, mechanism=f.mechanism, reason=f.reason, principal=f.principal)
        if verdict.principal is not None:
            conn.ctx.principal = verdict.principal
            self._authenticated()
            if self._on_authenticated is not None:
                self._on_authenticated(self.auth.mechanism_name, verdict.reauthentication)
        reason = verdict.close
        if reason is None:
            if slot is not None:
                slot.complete(answer)
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if verdict.delayed and self.bounds.failed_delay_ms > 0:
            conn.stop_reading()
            self._loop.call_later(self.bounds.failed_delay_ms / 1000, self._close, conn, slot, answer, reason)
        else:
            self._close(conn, slot, answer, reason)

    @staticmethod
    def _close(conn: KafkaConnection, slot: ResponseSlot | None, answer: bytes | None, reason: str) -> None:
        if conn.closing:
            return
        if slot is not None and answer is not None:
            slot.complete(answer)
        conn.close(reason)
