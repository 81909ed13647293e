"""One TCP connection to an upstream broker: pipelined requests, correlation ids remapped.

Kafka answers the requests of one connection in order, one at a time (the broker mutes a
connection while a request of it is being processed), so a long-polling Fetch holds back
everything queued behind it on the same connection. Client traffic therefore never shares a
link with another client: each client connection leases its own link per broker (see
`proxy`), and groupshift's own requests (metadata refresh, offset import and mirroring) use
links of their own. Links are pooled: a link whose client went away with nothing in flight is
kept idle and leased to the next client of that broker.

A link rewrites the correlation id of every request frame to its own counter (so frames of
different origins never collide on a reused link) and matches responses by it; the caller
restores the client's id. Frames are passed as bytes and never decoded here. A link that
cannot connect within the setup timeout, loses its connection, or sees no answer within the
request timeout fails every request in flight with `UpstreamUnavailable` and closes, as a
Kafka client treats a dead broker.

Security (gateway/upstream/security.py): over SSL / SASL_SSL the connection is TLS (the
broker's name checked as Kafka's clients check it); over SASL_* the link authenticates before
it writes any frame given to it (SaslHandshake v1, then SaslAuthenticate until the mechanism is
done; frames given meanwhile wait in order). A broker that grants a session lifetime (KIP-368,
`connections.max.reauth.ms`, or an OAUTHBEARER token's expiry) is answered as Kafka's clients
answer it: at a random point between 85% and 95% of the lifetime (never within a second of the
previous exchange, which Kafka refuses) the link stops writing new frames, waits for the answers
in flight, runs the exchange again on the same connection (with the current token), then writes
what waited. A failed exchange or re-authentication closes the
link like a lost connection (its client connections are closed and reconnect).
"""

from __future__ import annotations

import asyncio
import random
import ssl
import struct
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog
from kio.index import load_request_schema, load_response_schema

from protocol.client_security import (
    API_SASL_AUTHENTICATE,
    API_SASL_HANDSHAKE,
    SASL_AUTHENTICATE_VERSION,
    SASL_HANDSHAKE_VERSION,
    SaslAuthenticationFailed,
    handshake_refusal,
)
from protocol.codec import decode_response, encode_request
from protocol.entity_builder import build
from protocol.framing import SIZE as _SIZE
from protocol.framing import FrameReader, FrameSizeError
from protocol.oauth_client import OAuthTokenError

if TYPE_CHECKING:
    from gateway.upstream.security import UpstreamSecurity

log = structlog.get_logger("upstream")

_CID = struct.Struct(">i")
MAX_RESPONSE_BYTES = 1 << 30


# KIP-368: a client re-authenticates at a random point of this part of the session lifetime,
# and a broker refuses (ILLEGAL_SASL_STATE) a re-authentication begun less than one second
# after the previous one (KafkaChannel's MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS).
REAUTH_WINDOW = (0.85, 0.95)
MIN_REAUTH_INTERVAL_S = 1.05


class UpstreamUnavailable(ConnectionError):
    """The broker cannot be reached, dropped the connection or did not answer in time."""


class UpstreamAuthenticationFailed(UpstreamUnavailable):
    """The broker refused the TLS handshake or the SASL exchange; the message names the setting."""


#: Called with the response frame, or with the `UpstreamUnavailable` that ended the request.
Callback = Callable[[bytes | UpstreamUnavailable], None]


class UpstreamLink(asyncio.Protocol):
    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        *,
        connect_timeout: float,
        request_timeout: float,
        security: UpstreamSecurity | None = None,
    ) -> None:
        self.node_id = node_id
        self._security = security
        # Frames given to `forward` are written only once the link is authenticated (at once
        # in PLAINTEXT / SSL); during a re-authentication they wait again.
        self._authenticated = False
        self._reauth_due = False
        self._reauthenticating = False
        self._queued_waiters = 0  # entries of `_pending` whose frames wait in `_queued`
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._auth_task: asyncio.Task[None] | None = None  # a KIP-368 re-authentication
        self.session_lifetime_ms = 0  # the last one the broker granted (0: none)
        self.reauthentications = 0
        self.host = host
        self.port = port
        self._connect_timeout = connect_timeout
        self._request_timeout = request_timeout
        self._transport: asyncio.Transport | None = None
        # A waiter is a future (groupshift's own requests) or a callback (forwarded requests:
        # called from `data_received` directly, without a future's extra event-loop hop).
        self._pending: OrderedDict[int, tuple[float, asyncio.Future[bytes] | Callback]] = OrderedDict()
        self._queued: list[bytes] = []  # written once connected
        # Responses: at least the correlation id, at most MAX_RESPONSE_BYTES.
        self._reader = FrameReader(MAX_RESPONSE_BYTES, min_size=4)
        self._next_cid = 0
        self._closed = False
        self._error: str | None = None
        self._connect_task: asyncio.Task[None] | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        self._read_paused = False  # the client this link answers does not read its answers
        self._connect_task = self._loop.create_task(self._connect())

    # -- state ---------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def __repr__(self) -> str:
        return f"UpstreamLink(node={self.node_id}, {self.host}:{self.port})"

    # -- back-pressure ---------------------------------------------------------------------------

    @property
    def read_paused(self) -> bool:
        return self._read_paused

    def pause_reading(self) -> None:
        """Read no more responses: the client they go to has not taken the ones it got (the
        proxy's answer budget, docs/robustness.md, Bounds). The broker keeps the rest; requests
        in flight meanwhile are not timed out (their answers wait on our side)."""
        if self._read_paused or self._closed:
            return
        self._read_paused = True
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_reading(self) -> None:
        if not self._read_paused:
            return
        self._read_paused = False
        if self._closed:
            return
        # The time spent paused was ours, not the broker's: restart the request timeouts.
        floor = time.monotonic() + self._request_timeout
        for cid, (deadline, waiter) in list(self._pending.items()):
            if deadline < floor:
                self._pending[cid] = (floor, waiter)
        if self._transport is not None:
            self._transport.resume_reading()

    # -- requests ------------------------------------------------------------------------------

    def send(self, frame: bytes, *, expect_response: bool = True) -> asyncio.Future[bytes] | None:
        """Write a request frame (no size prefix); the future of its response frame (no size
        prefix, correlation id as sent here), or None when Kafka sends no response (acks=0)."""
        fut = self._loop.create_future() if expect_response else None
        self.forward(frame, fut)
        return fut

    def forward(self, frame: bytes, waiter: asyncio.Future[bytes] | Callback | None) -> None:
        """Write a request frame; `waiter` gets its response (None: Kafka sends none, acks=0).

        A callback is called synchronously when the response frame is read (or the link fails),
        so the forwarded response can be written to the client in the same event-loop step."""
        if self._closed:
            raise UpstreamUnavailable(f"link to broker {self.node_id} is closed: {self._error}")
        cid = self._next_cid
        self._next_cid = (cid + 1) & 0x7FFFFFFF
        data = b"".join((_SIZE.pack(len(frame)), frame[:4], _CID.pack(cid), frame[8:]))
        if waiter is not None:
            self._pending[cid] = (time.monotonic() + self._request_timeout, waiter)
            if self._sweeper is None:
                self._sweeper = self._loop.call_later(min(1.0, self._request_timeout), self._sweep)
        if self._transport is None or not self._authenticated:
            self._queued.append(data)
            if waiter is not None:
                self._queued_waiters += 1
        else:
            self._transport.write(data)

    async def request(self, frame: bytes) -> bytes:
        fut = self.send(frame)
        assert fut is not None
        return await fut

    # -- connection ----------------------------------------------------------------------------

    async def _connect(self) -> None:
        security = self._security
        context = security.ssl_context if security is not None else None
        try:
            await asyncio.wait_for(
                self._loop.create_connection(
                    lambda: self,
                    self.host,
                    self.port,
                    ssl=context,
                    server_hostname=self.host if context is not None else None,
                ),
                self._connect_timeout,
            )
        except (ssl.SSLError, ssl.CertificateError) as e:
            self._fail(self._auth_text(e), authentication=True)
            return
        except (OSError, TimeoutError) as e:
            self._fail(f"connect to {self.host}:{self.port} failed: {e or type(e).__name__}")
            return
        if security is None or not security.uses_sasl:
            self._ready()
            return
        await self._authenticate()

    def _auth_text(self, exc: BaseException) -> str:
        if self._security is None:
            return str(exc)
        return self._security.failure_text(exc, f"{self.host}:{self.port}")

    async def _authenticate(self) -> None:
        """The SASL exchange (first or KIP-368 again); then the waiting frames are written."""
        security = self._security
        assert security is not None
        started = time.monotonic()
        try:
            sasl = await security.sasl_client()
            mechanism = security.mechanism
            answer = await self._internal(
                API_SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, {"mechanism": mechanism}
            )
            if answer.error_code != 0:
                raise SaslAuthenticationFailed(
                    handshake_refusal(mechanism, list(answer.mechanisms)), int(answer.error_code)
                )
            out: bytes | None = sasl.first()
            lifetime = 0
            while out is not None:
                answer = await self._internal(
                    API_SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION, {"auth_bytes": out}
                )
                if answer.error_code != 0:
                    raise SaslAuthenticationFailed(
                        answer.error_message or f"SASL error code {answer.error_code}", int(answer.error_code)
                    )
                lifetime = int(answer.session_lifetime.total_seconds() * 1000)
                out = sasl.step(bytes(answer.auth_bytes))
        except (SaslAuthenticationFailed, OAuthTokenError) as e:
            self._fail(self._auth_text(e), authentication=True)
            return
        except UpstreamUnavailable:
            return  # the link failed meanwhile and said why
        except Exception as e:  # an answer that is not Kafka's shape: this link is done
            self._fail(f"the SASL exchange with {self.host}:{self.port} failed: {e!r}", authentication=True)
            return
        if self._reauthenticating:
            self._reauthenticating = False
            log.info("upstream.reauthenticated", node_id=self.node_id, session_lifetime_ms=lifetime)
        self.session_lifetime_ms = lifetime
        if lifetime > 0 and not self._closed:
            delay = lifetime / 1000 * random.uniform(*REAUTH_WINDOW)
            # A lifetime shorter than that (a token about to expire) ends with the broker
            # closing the connection instead: the link fails and its clients reconnect.
            delay = max(delay, MIN_REAUTH_INTERVAL_S - (time.monotonic() - started))
            self._reauth_timer = self._loop.call_later(delay, self._reauth_when_idle)
        self._ready()

    async def _internal(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """A request of the link's own, written ahead of the frames that wait."""
        if self._closed or self._transport is None:
            raise UpstreamUnavailable(f"link to broker {self.node_id} is closed: {self._error}")
        request = build(load_request_schema(api_key, version), body)
        frame = encode_request(request, correlation_id=0, client_id="groupshift")[4:]
        cid = self._next_cid
        self._next_cid = (cid + 1) & 0x7FFFFFFF
        fut: asyncio.Future[bytes] = self._loop.create_future()
        self._pending[cid] = (time.monotonic() + self._request_timeout, fut)
        if self._sweeper is None:
            self._sweeper = self._loop.call_later(min(1.0, self._request_timeout), self._sweep)
        self._transport.write(b"".join((_SIZE.pack(len(frame)), frame[:4], _CID.pack(cid), frame[8:])))
        return decode_response(load_response_schema(api_key, version), await fut)[1]

    def _ready(self) -> None:
        if self._closed or self._transport is None:
            return
        self._authenticated = True
        self._queued_waiters = 0
        if self._queued:
            self._transport.write(b"".join(self._queued))
            self._queued.clear()

    def _reauth_when_idle(self) -> None:
        """KIP-368: stop writing, and re-authenticate once nothing is in flight."""
        self._reauth_timer = None
        if self._closed:
            return
        self._authenticated = False
        self._reauth_due = True
        self._maybe_reauth()

    def _maybe_reauth(self) -> None:
        if self._reauth_due and len(self._pending) == self._queued_waiters and not self._closed:
            self._reauth_due = False
            self._reauthenticating = True
            self.reauthentications += 1
            self._auth_task = self._loop.create_task(self._authenticate())

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        if self._closed:
            transport.close()

    def data_received(self, data: bytes) -> None:
        reader = self._reader
        reader.feed(data)
        while True:
            try:
                frame = reader.next_frame()
            except FrameSizeError as e:
                self._fail(f"bad response size {e.size}")
                return
            if frame is None:
                break
            cid = _CID.unpack_from(frame, 0)[0]
            entry = self._pending.pop(cid, None)
            if entry is None:
                self._fail(f"response with unknown correlation id {cid}")
                return
            waiter = entry[1]
            if isinstance(waiter, asyncio.Future):
                if not waiter.done():
                    waiter.set_result(frame)
            else:
                waiter(frame)
        if self._reauth_due:
            self._maybe_reauth()

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail("connection closed by the broker" if exc is None else f"connection lost: {exc}")

    def _sweep(self) -> None:
        self._sweeper = None
        if self._closed or not self._pending:
            return
        deadline, _ = next(iter(self._pending.values()))
        if time.monotonic() > deadline and not self._read_paused:
            self._fail(f"no response within {self._request_timeout:.1f}s")
            return
        self._sweeper = self._loop.call_later(min(1.0, self._request_timeout), self._sweep)

    def _fail(self, reason: str, *, authentication: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        self._error = reason
        if authentication:
            log.error("upstream.authentication_failed", node_id=self.node_id, error=reason)
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
            self._reauth_timer = None
        if self._pending:
            log.info(
                "upstream.link_failed",
                node_id=self.node_id,
                broker=f"{self.host}:{self.port}",
                reason=reason,
                in_flight=len(self._pending),
            )
        pending = list(self._pending.values())
        self._pending.clear()
        kind = UpstreamAuthenticationFailed if authentication else UpstreamUnavailable
        for _, waiter in pending:
            error = kind(f"broker {self.node_id} ({self.host}:{self.port}): {reason}")
            if isinstance(waiter, asyncio.Future):
                if not waiter.done():
                    waiter.set_exception(error)
            else:
                waiter(error)
        self._queued.clear()
        self._queued_waiters = 0
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        if self._transport is not None:
            self._transport.close()

    def close(self) -> None:
        self._fail("closed by groupshift")
        if self._connect_task is not None and not self._connect_task.done():
            self._connect_task.cancel()
