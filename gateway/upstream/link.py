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
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections import OrderedDict
from collections.abc import Callable

import structlog

from protocol.framing import SIZE as _SIZE
from protocol.framing import FrameReader, FrameSizeError

log = structlog.get_logger("upstream")

_CID = struct.Struct(">i")
MAX_RESPONSE_BYTES = 1 << 30


class UpstreamUnavailable(ConnectionError):
    """The broker cannot be reached, dropped the connection or did not answer in time."""


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
    ) -> None:
        self.node_id = node_id
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
        if self._transport is None:
            self._queued.append(data)
        else:
            self._transport.write(data)

    async def request(self, frame: bytes) -> bytes:
        fut = self.send(frame)
        assert fut is not None
        return await fut

    # -- connection ----------------------------------------------------------------------------

    async def _connect(self) -> None:
        try:
            await asyncio.wait_for(
                self._loop.create_connection(lambda: self, self.host, self.port),
                self._connect_timeout,
            )
        except (OSError, TimeoutError) as e:
            self._fail(f"connect to {self.host}:{self.port} failed: {e or type(e).__name__}")

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        if self._closed:
            transport.close()
            return
        if self._queued:
            self._transport.write(b"".join(self._queued))  # type: ignore[union-attr]
            self._queued.clear()

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

    def _fail(self, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        self._error = reason
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
        for _, waiter in pending:
            error = UpstreamUnavailable(f"broker {self.node_id} ({self.host}:{self.port}): {reason}")
            if isinstance(waiter, asyncio.Future):
                if not waiter.done():
                    waiter.set_exception(error)
            else:
                waiter(error)
        self._queued.clear()
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        if self._transport is not None:
            self._transport.close()

    def close(self) -> None:
        self._fail("closed by groupshift")
        if self._connect_task is not None and not self._connect_task.done():
            self._connect_task.cancel()
