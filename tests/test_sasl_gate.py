"""The SASL gate on a KafkaConnection with an in-memory transport: frames in, Kafka's answers
and closes out (SaslHandshake v0 raw tokens, v1 SaslAuthenticate, the failed-login delay, the
frame bound before authentication, the exchange's time bound, an expired session)."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as HandshakeV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from gateway.audit import AuditLog
from gateway.connection import KafkaConnection, ResponseSlot
from gateway.metrics import MetricsRegistry
from gateway.sasl.authenticator import SaslListenerSetup
from gateway.sasl.gate import SaslBounds, SaslGate
from gateway.sasl.plain import PlainServer
from protocol.codec import decode_response, encode_request
from protocol.entity_builder import build

_SIZE = struct.Struct(">i")


class Transport:
    def __init__(self) -> None:
        self.written = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 9) if name in ("peername", "sockname") else default

    def frames(self) -> list[bytes]:
        out, pos, buf = [], 0, bytes(self.written)
        while pos + 4 <= len(buf):
            (size,) = _SIZE.unpack_from(buf, pos)
            out.append(buf[pos + 4 : pos + 4 + size])
            pos += 4 + size
        return out


def gated(
    *, timeout_ms: int = 10_000, reauth_ms: int = 0
) -> tuple[KafkaConnection, Transport, list[bytes], MetricsRegistry]:
    passed: list[bytes] = []

    def inner(conn: KafkaConnection, frame: bytes, slot: ResponseSlot) -> None:
        passed.append(frame)
        slot.complete(_SIZE.pack(2) + b"ok")

    metrics = MetricsRegistry()
    setup = SaslListenerSetup(
        ("PLAIN",), {"PLAIN": lambda: PlainServer({"alice": "pw"})}, {"PLAIN": reauth_ms}
    )
    bounds = SaslBounds(
        max_receive_bytes=1024,
        timeout_ms=timeout_ms,
        failed_delay_ms=50,
        max_frame_bytes=1 << 20,
        api_versions_max=4,
    )
    gate = SaslGate(setup, bounds, inner, AuditLog(metrics))
    conn = KafkaConnection(connection_id=1, on_frame=gate.on_frame, max_frame_bytes=1 << 20)
    transport = Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    gate.attach(conn)
    return conn, transport, passed, metrics


def metadata() -> bytes:
    body = build(
        MetadataRequest,
        {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
    )
    return encode_request(body, correlation_id=9)


async def test_handshake_v0_takes_raw_tokens_then_requests_pass() -> None:
    conn, transport, passed, _ = gated()
    conn.data_received(encode_request(HandshakeV0(mechanism="PLAIN"), correlation_id=1))
    conn.data_received(_SIZE.pack(9) + b"\x00alice\x00pw")
    frames = transport.frames()
    assert decode_response(SaslHandshakeResponse, frames[0])[1].error_code == ErrorCode.none
    assert frames[1] == b""  # PLAIN's empty challenge, as a raw size-prefixed token
    assert conn.ctx.principal == "User:alice"
    conn.data_received(metadata())
    assert len(passed) == 1 and not transport.closed


async def test_failed_login_is_answered_after_the_delay_then_closed() -> None:
    conn, transport, _, metrics = gated()
    conn.data_received(encode_request(SaslHandshakeRequest(mechanism="PLAIN"), correlation_id=1))
    conn.data_received(
        encode_request(SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00no"), correlation_id=2)
    )
    assert len(transport.frames()) == 1 and not transport.closed  # held for the delay
    await asyncio.sleep(0.1)
    answer = decode_response(SaslAuthenticateResponse, transport.frames()[1])[1]
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert answer.error_message == "Authentication failed: Invalid username or password"
    assert transport.closed
    assert 'groupshift_auth_failures_total{listener="PLAINTEXT",mechanism="PLAIN"} 1' in metrics.render()


async def test_a_frame_above_the_sasl_bound_closes_before_its_bytes_arrive() -> None:
    conn, transport, passed, _ = gated()
    conn.data_received(_SIZE.pack(1025))
    assert transport.closed and passed == []


async def test_the_bound_is_lifted_once_authenticated() -> None:
    conn, transport, passed, _ = gated()
    conn.data_received(encode_request(SaslHandshakeRequest(mechanism="PLAIN"), correlation_id=1))
    conn.data_received(
        encode_request(SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00pw"), correlation_id=2)
    )
    big = metadata()
    padded = _SIZE.pack(len(big) - 4 + 2000) + big[4:] + b"\x00" * 2000
    conn.data_received(padded)
    assert not transport.closed and len(passed) == 1


async def test_an_exchange_that_stalls_is_closed_by_the_time_bound() -> None:
    conn, transport, _, _ = gated(timeout_ms=50)
    conn.data_received(encode_request(SaslHandshakeRequest(mechanism="PLAIN"), correlation_id=1))
    await asyncio.sleep(0.15)
    assert transport.closed


async def test_a_request_after_the_session_expired_closes_the_connection() -> None:
    conn, transport, passed, _ = gated(reauth_ms=50)
    conn.data_received(encode_request(SaslHandshakeRequest(mechanism="PLAIN"), correlation_id=1))
    conn.data_received(
        encode_request(SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00pw"), correlation_id=2)
    )
    answer = decode_response(SaslAuthenticateResponse, transport.frames()[1])[1]
    assert answer.session_lifetime.total_seconds() * 1000 == 50
    conn.data_received(metadata())
    assert len(passed) == 1
    await asyncio.sleep(0.1)
    conn.data_received(metadata())
    assert transport.closed and len(passed) == 1
