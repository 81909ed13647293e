"""A minimal blocking Kafka wire client for tests that need exact bytes on a raw socket."""

from __future__ import annotations

import socket
import struct
from typing import Any

from kio.index import load_request_schema

from protocol.codec import decode_response, encode_request, response_type_of
from protocol.entity_builder import build


def make_request(api_key: int, version: int, **values: Any) -> Any:
    """A kio request of that version from plain values (nested dicts/lists allowed)."""
    return build(load_request_schema(api_key, version), values)


class WireClient:
    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation = 0

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(
        self, request: Any, *, correlation_id: int | None = None, client_id: str | None = "e2e-wire"
    ) -> int:
        if correlation_id is None:
            self._correlation += 1
            correlation_id = self._correlation
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
        (size,) = struct.unpack(">i", head)
        return self._recv_exact(size)

    def request(self, request: Any, **kw: Any) -> Any:
        """Send `request` and decode its response body (asserting the correlation id)."""
        correlation_id = self.send(request, **kw)
        frame = self.read_frame()
        if frame is None:
            raise ConnectionError("server closed the connection instead of answering")
        got, body = decode_response(response_type_of(request), frame)
        assert got == correlation_id, f"correlation id {got}, expected {correlation_id}"
        return body

    def closed_by_server(self) -> bool:
        """True if the server closes the connection (within the socket timeout)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
