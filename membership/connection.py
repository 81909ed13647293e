"""One asyncio connection to a broker for the membership driver: TLS, SASL, ApiVersions.

A Kafka client opens a connection, authenticates (SaslHandshake v1 + SaslAuthenticate, the
mechanism's tokens from `protocol.client_security.SaslClient`), asks ApiVersions once and then
sends each request at the highest version both sides speak (Kafka's NetworkClient does the same
negotiation). The membership driver has at most one request in flight, so requests are strictly
sequential here; a broker answers one connection's requests in order anyway.

A broker that ends the SASL session (KIP-368 `connections.max.reauth.ms`) closes the connection;
the driver counts that as a failed request and connects again, which authenticates anew.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kio.index import load_request_schema, load_response_schema

from protocol.client_security import (
    API_SASL_AUTHENTICATE,
    API_SASL_HANDSHAKE,
    SASL_AUTHENTICATE_VERSION,
    SASL_HANDSHAKE_VERSION,
    ClientSecurity,
    SaslAuthenticationFailed,
    handshake_refusal,
)
from protocol.codec import decode_response, encode_request
from protocol.entity_builder import build
from protocol.framing import frame_size

API_VERSIONS = 18
API_VERSIONS_VERSION = 3

MAX_RESPONSE_BYTES = 64 << 20
"""A larger response is refused before it is read: a JoinGroup answer with every member's
metadata is the largest a membership client gets (Kafka's default `socket.request.max.bytes` is
100 MiB for requests; member metadata of a few KiB times `group.max.size` stays far below)."""

# What this client speaks: api key -> (lowest, highest) version. JoinGroup v2+ (Kafka 4 dropped
# v0-v1, KIP-896), v4+ MEMBER_ID_REQUIRED, v5+ static members, v8 reason, v9 skip_assignment.
SUPPORTED: dict[int, tuple[int, int]] = {
    10: (0, 4),  # FindCoordinator (v4: batched keys, KIP-699)
    11: (2, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
}


class ConnectionFailed(ConnectionError):
    """The broker could not be reached, closed the connection, refused the credentials or
    speaks none of the versions this client needs for a request."""


class UnsupportedVersion(ConnectionFailed):
    """The broker speaks no version of an API this client needs: no retry helps."""


class BrokerConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self._reader = reader
        self._writer = writer
        self.client_id = client_id
        self._correlation = 0
        self.versions: dict[int, tuple[int, int]] = {}

    @classmethod
    async def open(
        cls, host: str, port: int, *, security: ClientSecurity, client_id: str, timeout: float
    ) -> BrokerConnection:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    host,
                    port,
                    ssl=security.ssl_context,
                    server_hostname=host if security.ssl_context is not None else None,
                ),
                timeout,
            )
        except (OSError, TimeoutError) as exc:
            raise ConnectionFailed(f"{host}:{port}: {exc!r}") from None
        conn = cls(reader, writer, client_id)
        try:
            if security.uses_sasl:
                await conn._authenticate(security, timeout)
            answer = await conn._call(
                API_VERSIONS,
                API_VERSIONS_VERSION,
                {
                    "client_software_name": "groupshift-membership",
                    "client_software_version": "1",
                },
                timeout,
            )
            if int(answer.error_code) != 0:
                raise ConnectionFailed(f"{host}:{port}: ApiVersions error {int(answer.error_code)}")
            conn.versions = {
                int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys
            }
        except BaseException:
            conn.close()
            raise
        return conn

    async def _authenticate(self, security: ClientSecurity, timeout: float) -> None:
        # The token source may block (an OAUTHBEARER refresh): off the event loop.
        sasl = await asyncio.get_running_loop().run_in_executor(None, security.sasl_client)
        hs = await self._call(
            API_SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, {"mechanism": sasl.mechanism}, timeout
        )
        if int(hs.error_code) != 0:
            raise SaslAuthenticationFailed(
                handshake_refusal(sasl.mechanism, hs.mechanisms), int(hs.error_code)
            )
        out: bytes | None = sasl.first()
        while out is not None:
            answer = await self._call(
                API_SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION, {"auth_bytes": out}, timeout
            )
            if int(answer.error_code) != 0:
                raise SaslAuthenticationFailed(
                    answer.error_message or f"SASL error code {int(answer.error_code)}",
                    int(answer.error_code),
                )
            out = sasl.step(bytes(answer.auth_bytes))

    def version_for(self, api_key: int) -> int:
        lo, hi = SUPPORTED[api_key]
        return self.negotiate(api_key, lo, hi)

    def negotiate(self, api_key: int, lo: int, hi: int) -> int:
        """The highest version in lo..hi the broker speaks (a client above this one, such as the
        consumer-group membership client, brings its own range)."""
        theirs = self.versions.get(api_key)
        if theirs is None or theirs[1] < lo or theirs[0] > hi:
            raise UnsupportedVersion(f"the broker speaks no version of API {api_key} in {lo}..{hi}")
        return min(hi, theirs[1])

    async def request(self, api_key: int, body: dict[str, Any], timeout: float) -> Any:
        return await self._call(api_key, self.version_for(api_key), body, timeout)

    async def request_at(self, api_key: int, version: int, body: dict[str, Any], timeout: float) -> Any:
        """A request at a version the caller chose with `negotiate`."""
        return await self._call(api_key, version, body, timeout)

    async def _call(self, api_key: int, version: int, body: dict[str, Any], timeout: float) -> Any:
        request = build(load_request_schema(api_key, version), body)
        frame = await self.exchange(
            lambda correlation: encode_request(request, correlation_id=correlation, client_id=self.client_id),
            timeout,
            api_key,
        )
        try:
            _, response = decode_response(load_response_schema(api_key, version), frame)
        except Exception as exc:  # not a Kafka answer: drop the connection, as on a bad frame
            self.close()
            raise ConnectionFailed(f"API {api_key}: undecodable response: {exc!r}") from None
        return response

    async def exchange(self, encode: Callable[[int], bytes], timeout: float, api_key: int) -> bytes:
        """Sends the request `encode(correlation id)` gives (size prefix included) and returns
        its response frame (no size prefix; correlation id first, checked). For requests kio
        has no schema for (groupshift's extension APIs, tagged fields kio refuses)."""
        self._correlation += 1
        correlation = self._correlation
        try:
            self._writer.write(encode(correlation))
            await self._writer.drain()
            async with asyncio.timeout(timeout):
                head = await self._reader.readexactly(4)
                frame = await self._reader.readexactly(frame_size(head, MAX_RESPONSE_BYTES))
        except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError) as exc:
            self.close()
            raise ConnectionFailed(f"API {api_key}: {exc!r}") from None
        got = int.from_bytes(frame[:4], "big", signed=True) if len(frame) >= 4 else None
        if got != correlation:
            self.close()
            raise ConnectionFailed(f"correlation id {got}, expected {correlation}")
        return frame

    @property
    def closed(self) -> bool:
        return self._writer.is_closing()

    def close(self) -> None:
        self._writer.close()
