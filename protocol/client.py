"""A blocking Kafka wire client: one socket, size-prefixed frames, one request at a time.

A Kafka client sends a request frame (`RequestHeader` + body, KIP-482 header v1/v2 by
version) and reads back the response frame with the same correlation id; a broker answers the
requests of one connection in order (`protocol.framing` is the framing). This is the one
blocking implementation of that exchange: the admin client of `groupshift groups`
(`tools.groups.wire`), the Kafka-distribution probes (`harness.kafka_dist.wire`), the
configuration generator (`scripts.gen_kafka_configs`), benchmarks and the e2e tests that need
exact bytes on a raw socket all build on it. Requests are kio entities (`make_request`) or raw
bytes (`send_raw`, for what kio would not write: bad input, versions kio lacks).
"""

from __future__ import annotations

import socket
import ssl
from types import EllipsisType
from typing import Any

from protocol.codec import decode_response, encode_request, response_type_of
from protocol.entity_builder import build
from protocol.framing import frame_size
from protocol.kafka_schemas import request_schema

__all__ = ["ConnectionClosed", "CorrelationMismatch", "WireClient", "make_request"]

MAX_RESPONSE_BYTES = 1 << 30
"""Responses larger than this are refused (the size prefix alone is read): a peer that is not a
Kafka broker cannot make the client allocate more."""


class ConnectionClosed(ConnectionError):
    """The peer closed the connection (or reset it) instead of answering."""


class CorrelationMismatch(ConnectionError):
    """A response arrived with another correlation id than the request's."""


def make_request(api_key: int, version: int, **values: Any) -> Any:
    """A kio request of that version from plain values (nested dicts/lists allowed); the
    versions kio lacks come from `protocol.kafka_schemas`."""
    return build(request_schema(api_key, version), values)


class WireClient:
    """One blocking connection. Socket errors other than a close or reset (a timeout, a refused
    connection) propagate as the `OSError` they are."""

    def __init__(
        self,
        port: int,
        host: str = "127.0.0.1",
        timeout: float = 5.0,
        *,
        client_id: str | None = "groupshift-wire",
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        raw = socket.create_connection((host, port), timeout=timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            # An SSL or SASL_SSL listener: the TLS handshake happens here, before any frame.
            try:
                raw = ssl_context.wrap_socket(raw, server_hostname=host)
            except BaseException:
                raw.close()
                raise
        self.sock: socket.socket = raw
        self.client_id = client_id
        self._correlation = 0

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        """Write bytes as they are (a whole size-prefixed frame, or deliberately not one)."""
        self.sock.sendall(data)

    def send(
        self, request: Any, *, correlation_id: int | None = None, client_id: str | EllipsisType | None = ...
    ) -> int:
        """Write one kio request; its correlation id (the next of this connection by default).
        `client_id` is the connection's unless given (None: a null client id)."""
        if correlation_id is None:
            self._correlation += 1
            correlation_id = self._correlation
        if client_id is Ellipsis:
            client_id = self.client_id
        self.send_raw(encode_request(request, correlation_id=correlation_id, client_id=client_id))
        return correlation_id

    def _recv_exact(self, n: int) -> bytes | None:
        chunks = []
        while n:
            try:
                chunk = self.sock.recv(n)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def read_frame(self) -> bytes | None:
        """The next response frame without its size prefix; None if the server closed."""
        head = self._recv_exact(4)
        if head is None:
            return None
        return self._recv_exact(frame_size(head, MAX_RESPONSE_BYTES))

    def request(self, request: Any, **kw: Any) -> Any:
        """Send `request` and decode its response body (checking the correlation id)."""
        correlation_id = self.send(request, **kw)
        frame = self.read_frame()
        if frame is None:
            raise ConnectionClosed("server closed the connection instead of answering")
        got, body = decode_response(response_type_of(request), frame)
        if got != correlation_id:
            raise CorrelationMismatch(f"correlation id {got}, expected {correlation_id}")
        return body

    def closed_by_server(self) -> bool:
        """True if the server closes the connection (within the socket timeout)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
