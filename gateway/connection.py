"""A Kafka client connection: size-prefixed requests in, responses out in request order.

Every Kafka request and response is a 4-byte big-endian size followed by that many bytes
(the framing itself, sans I/O, is `protocol.framing`; this is the asyncio machinery around it).
A client may pipeline requests; Kafka answers them strictly in the order they were sent on a
connection (clients match responses by position as well as by correlation id). Here requests
are handed off as soon as they are parsed and may complete out of order (a long-polling Fetch
next to a Metadata), so each request takes a `ResponseSlot` in a per-connection FIFO and
responses are written only from the head of that queue.

The parser is a buffered `asyncio.Protocol` (`data_received` slices complete frames out of one
bytearray), not `StreamReader.readexactly` per frame: on this machine that is 3x the
throughput. As in Kafka's `NetworkReceive`, a negative size or one above
`socket.request.max.bytes` is refused as soon as the 4 size bytes arrive, before any payload is
buffered, and only that connection is closed.

Back-pressure: reading pauses while the transport's write buffer is above its high-water mark
or too many requests are in flight on the connection, and resumes when both drain. The limit
holds inside one read too: a read after a stall returns up to 256 KiB (thousands of
heartbeats), and frames past the limit stay bytes in the buffer until answers drain (Kafka goes
further and reads nothing more from a connection until its one request is answered). Decoding
them all at once would hold every one's request and response objects together, and the
allocator keeps the high-water mark of such bursts (docs/robustness.md, soak).

Memory bounds (docs/robustness.md, Bounds). What a client's behaviour can make a connection hold
is bounded three ways, each a pause of reading (Kafka "mutes" a channel the same way):

* unsent answers: `response_buffer_bytes` (`socket.response.buffer.max.bytes`, groupshift's)
  bounds the bytes of answers completed but not yet taken by the client (the transport's write
  buffer plus answers queued behind an unfinished one) plus what handlers have read for answers
  still being built (`ResponseBudget.hold`). A Fetch asks `ResponseBudget.available` how much
  it may read; with nothing left it answers without records (as if no data were there), so a
  client that pipelines Fetches and never reads its answers cannot make the server read its
  partitions into memory again and again;
* partial frames, server-wide: before the bytes of an incomplete frame are buffered its
  announced size is reserved in the `RequestBytesPool` (`queued.max.request.bytes`); a
  connection whose frame does not fit is not read until other frames complete or their
  connections close (Kafka's `MemoryPool`: a frame's buffer is allocated whole when its size
  is known, or the channel is muted). A frame larger than the whole budget (but within
  `socket.request.max.bytes`) may still arrive when nothing else is reserved; frames of up to
  64 KiB take nothing from it (one read brings that much anyway), so small requests of other
  clients are never held up by large ones;
* requests in flight: `MAX_IN_FLIGHT`, above.

Writes are coalesced: responses completed while one `data_received` call dispatches its frames
(inline handlers: heartbeats, metadata, ...) are written once, together, when that call ends,
instead of one `transport.write` (one send syscall) each; responses completed later (futures)
are written as soon as they reach the head of the queue, with everything ready behind them.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

import structlog

from gateway.registry import RequestContext
from protocol.framing import SIZE as _SIZE
from protocol.framing import FrameSizeError, frame_end

log = structlog.get_logger("gateway")

# Requests parsed but not yet answered, per connection. Kafka reads nothing more from a
# connection until its one request is answered; pipelining clients (librdkafka, the Java
# client's max.in.flight.requests.per.connection, 5 by default) keep a few in flight. 32 keeps
# that headroom while bounding the objects a backlog holds (docs/robustness.md: the soak with
# 512 grew 19 MB/h after warm-up, with 32 about half of that).
MAX_IN_FLIGHT = 32

# Default of the per-connection bound of unsent answer bytes (`socket.response.buffer.max.bytes`).
# Kafka has no such setting: it reads one request per connection at a time and sends fetch data
# from the page cache, so a connection holds one answer. 8 MiB lets one Fetch answer carry 8 MiB
# (eight of Kafka's default `max.partition.fetch.bytes`, enough to keep a consumer busy) while 4
# connections that never read hold about 32 MiB, not 32 x 64 MiB (e2e/test_backpressure.py:
# +61 MB RSS with 8 MiB, +132 MB with 16 MiB).
DEFAULT_RESPONSE_BUFFER_BYTES = 8 * 1024 * 1024

_RESPONSE_BUDGET = "gateway.response_budget"
# Answers ready together are joined into one write (one send syscall) up to this size; larger
# ones are written one by one so that no joined copy of them exists next to the originals.
_COALESCE_MAX = 256 * 1024
# Frames up to this size take nothing from the request pool: one read (256 KiB) brings more than
# that anyway before a connection can be paused, and so heartbeats, metadata and commits of
# other clients go on while large frames wait for the pool (Kafka's non-strict pool lets any
# frame through while a byte is left; this keeps the bound without that overshoot).
_UNRESERVED_FRAME_BYTES = 64 * 1024


class RequestBytesPool:
    """The server-wide budget of bytes buffered for requests still arriving
    (`queued.max.request.bytes`; Kafka's `SimpleMemoryPool` in non-strict mode: a request may
    exceed what is left only when nothing else is held, so one frame of any allowed size can
    always make progress and the pool never deadlocks).

    A connection reserves a frame's announced size once its 4 size bytes are in; if that does
    not fit, it waits (is not read) in FIFO order until `release` frees enough."""

    __slots__ = ("_waiting", "capacity", "reserved")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.reserved = 0
        self._waiting: deque[KafkaConnection] = deque()

    @property
    def waiting(self) -> int:
        """Connections not read because their next frame does not fit."""
        return len(self._waiting)

    def try_reserve(self, size: int) -> bool:
        if self.reserved == 0 or self.reserved + size <= self.capacity:
            self.reserved += size
            return True
        return False

    def wait(self, conn: KafkaConnection) -> None:
        self._waiting.append(conn)

    def forget(self, conn: KafkaConnection) -> None:
        if conn in self._waiting:
            self._waiting.remove(conn)

    def release(self, size: int) -> None:
        self.reserved -= size
        waiting = self._waiting
        while waiting:
            conn = waiting[0]
            if not conn._retry_reserve():
                break
            waiting.popleft()


class ResponseBudget:
    """What one connection's answers may still add to the memory it holds (see module doc).

    Handlers find it with `response_budget_of(ctx)`; `available()` is how many answer bytes
    they may produce now, `hold(n)` counts bytes they read for an answer until that answer is
    queued for writing (then the connection counts it)."""

    __slots__ = ("_conn", "_on_drained", "held", "limit")

    def __init__(self, conn: KafkaConnection, limit: int) -> None:
        self._conn = conn
        self.limit = limit
        self.held = 0
        self._on_drained: list[Callable[[], None]] = []

    def exhausted(self) -> bool:
        """The transport holds `limit` bytes or more of answers its client has not read. Only
        the transport's buffer counts here: it is then above its high-water mark, so
        `when_drained` callbacks are sure to run (answers queued behind an unfinished one drain
        only when that one is answered, maybe by the very link that would wait)."""
        return self._conn.unsent_written_bytes >= self.limit

    def when_drained(self, callback: Callable[[], None]) -> None:
        """Call `callback` once the transport's write buffer has drained below its low-water
        mark (or the connection is gone): upstream links answering this client pause reading
        until then (`gateway.upstream.proxy`)."""
        self._on_drained.append(callback)

    def _drained(self) -> None:
        callbacks, self._on_drained = self._on_drained, []
        for callback in callbacks:
            callback()

    def used(self) -> int:
        return self._conn.unsent_response_bytes + self.held

    def available(self) -> int:
        return max(self.limit - self.used(), 0)

    def hold(self, size: int) -> None:
        """Count `size` bytes read for the answer of the running task until that task is done
        (its answer is queued by then: the dispatcher's done-callback runs first)."""
        if size <= 0:
            return
        self.held += size
        task = asyncio.current_task()
        if task is None:
            self.held -= size  # answered inline: the answer is queued before anything else runs
            return
        task.add_done_callback(lambda _t: self._release(size))

    def _release(self, size: int) -> None:
        self.held -= size


def response_budget_of(ctx: RequestContext) -> ResponseBudget | None:
    """The response budget of the connection `ctx` belongs to (None outside a connection)."""
    budget: ResponseBudget | None = ctx.attributes.get(_RESPONSE_BUDGET)
    return budget


class ResponseSlot:
    """The place of one request's response in its connection's write order."""

    __slots__ = ("_conn", "data", "done", "task")

    def __init__(self, conn: KafkaConnection) -> None:
        self._conn = conn
        self.data: bytes | None = None
        self.done = False
        self.task: asyncio.Future[Any] | None = None

    def complete(self, data: bytes | None) -> None:
        """Deliver the response frame (None: this request gets no response, e.g. acks=0)."""
        if self.done:
            return
        self.data = data
        self.done = True
        self.task = None
        if data is not None:
            self._conn._queued_response_bytes += len(data)
        self._conn._flush()

    def close_connection(self, reason: str, **fields: Any) -> None:
        self._conn.close(reason, **fields)


class CapturingSlot(ResponseSlot):
    """A slot whose answer goes to `on_answer` instead of its connection's write queue: the
    upstream proxy's forwarding path (gateway.upstream) completes the request it forwarded
    through one. Here beside ResponseSlot because in the compiled build (mypyc) an interpreted
    class cannot subclass a compiled one: defined in gateway.upstream, it failed at import."""

    __slots__ = ("_on_answer",)

    def __init__(self, conn: KafkaConnection, on_answer: Callable[[bytes | None], None]) -> None:
        super().__init__(conn)
        self._on_answer = on_answer

    def complete(self, data: bytes | None) -> None:
        if self.done:
            return
        self.done = True
        self.task = None
        self._on_answer(data)


FrameHandler = Callable[["KafkaConnection", bytes, ResponseSlot], None]


class KafkaConnection(asyncio.Protocol):
    """One client connection: frame parser, ordered response queue, back-pressure."""

    def __init__(
        self,
        *,
        connection_id: int,
        on_frame: FrameHandler,
        max_frame_bytes: int,
        on_lost: Callable[[KafkaConnection], None] | None = None,
        response_buffer_bytes: int = DEFAULT_RESPONSE_BUFFER_BYTES,
        request_pool: RequestBytesPool | None = None,
    ) -> None:
        self.connection_id = connection_id
        self._on_frame = on_frame
        self._max_frame = max_frame_bytes
        self._on_lost = on_lost
        self._buf = bytearray()
        self._slots: deque[ResponseSlot] = deque()
        self._transport: asyncio.Transport | None = None
        self._closing = False
        self._close_reason: str | None = None
        self._write_paused = False
        self._inflight_paused = False
        self._read_paused = False
        self._stopped = False
        self._close_after_flush = False
        self._reading = False  # inside data_received: flushes wait for its end
        self._flush_wanted = False
        self._drained: asyncio.Future[None] | None = None
        self.ctx = RequestContext(connection_id=connection_id, peer=("", 0), listener=("", 0))
        # Answers completed but still queued behind an unfinished one (not yet written).
        self._queued_response_bytes = 0
        self.response_budget = ResponseBudget(self, response_buffer_bytes)
        self.ctx.attributes[_RESPONSE_BUDGET] = self.response_budget
        self._pool = request_pool
        self._pool_reserved = 0  # the announced size of the partial frame at the buffer's head
        self._pool_paused = False  # waiting in the pool for the next frame's size to fit
        self._on_oversized: Callable[[int], None] | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        peer = transport.get_extra_info("peername") or ("", 0)
        sock = transport.get_extra_info("sockname") or ("", 0)
        self.ctx.peer = (str(peer[0]), int(peer[1]))
        self.ctx.listener = (str(sock[0]), int(sock[1]))
        log.debug("connection.opened", connection_id=self.connection_id, peer=self._peer_text())

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self._buf += data
        self._parse()
        if self._pool is not None and not self._closing:
            self._reserve_partial_frame()

    def _reserve_partial_frame(self) -> None:
        """Reserve the announced size of the incomplete frame at the head of the buffer in the
        server-wide pool, or stop reading until it fits (see `RequestBytesPool`)."""
        pool = self._pool
        buf = self._buf
        if pool is None or self._pool_reserved or self._pool_paused or len(buf) < 4:
            return
        size = _SIZE.unpack_from(buf, 0)[0]
        if size <= _UNRESERVED_FRAME_BYTES or size > self._max_frame or len(buf) >= 4 + size:
            return  # small, refused by `_parse`, or complete (waiting for the in-flight limit)
        if pool.try_reserve(size):
            self._pool_reserved = size
            return
        self._pool_paused = True
        pool.wait(self)
        log.info(
            "connection.muted",
            connection_id=self.connection_id,
            peer=self._peer_text(),
            reason="queued.max.request.bytes",
            frame_size=size,
        )
        self._update_reading()

    def _retry_reserve(self) -> bool:
        """The pool freed bytes: take the reservation this connection waits for, if it fits
        now (True: it no longer waits)."""
        pool = self._pool
        if pool is None or self._closing or not self._pool_paused:
            return True
        buf = self._buf
        size = _SIZE.unpack_from(buf, 0)[0] if len(buf) >= 4 else 0
        if not pool.try_reserve(size):
            return False
        self._pool_reserved = size
        self._pool_paused = False
        self._update_reading()
        return True

    def _release_pool(self) -> None:
        if self._pool is None:
            return
        if self._pool_paused:
            self._pool_paused = False
            self._pool.forget(self)
        if self._pool_reserved:
            size, self._pool_reserved = self._pool_reserved, 0
            self._pool.release(size)

    def _parse(self) -> None:
        """Dispatch the complete frames in the buffer, up to the in-flight limit: frames beyond
        it stay unparsed bytes in the buffer (one allocation, not a decoded request each) until
        answers drain, so a burst read after a stall (one read returns up to 256 KiB, thousands
        of heartbeats) never holds more than MAX_IN_FLIGHT requests' objects at once."""
        if self._closing or self._reading or self._stopped:
            return
        buf = self._buf
        pos = 0
        end_of_data = len(buf)
        max_frame = self._max_frame
        self._reading = True
        try:
            with memoryview(buf) as view:
                while end_of_data - pos >= 4:
                    try:
                        end = frame_end(buf, pos, max_frame)
                    except FrameSizeError as e:
                        self._reject_size(e.size)
                        return
                    if end < 0:
                        break
                    frame = bytes(view[pos + 4 : end])
                    pos = end
                    if self._pool_reserved:
                        self._release_pool()  # its frame is complete: bytes now a request
                    self._dispatch(frame)
                    if self._closing:
                        return
                    if self._inflight_paused:
                        break  # the rest waits in the buffer; `_flush` resumes parsing
        finally:
            self._reading = False
        if pos:
            del buf[:pos]
        if self._flush_wanted or not self._slots:
            self._flush()  # also tells `drain` and a half-closed client that nothing is left

    def eof_received(self) -> bool | None:
        # The client half-closed: answer what is in flight, then close (as Kafka does).
        if self._slots or self._complete_frame_buffered():
            self._close_after_flush = True
            return True
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        for slot in self._slots:
            if slot.task is not None:
                slot.task.cancel()
        self._slots.clear()
        self._queued_response_bytes = 0
        self._closing = True
        self._release_pool()
        self.response_budget._drained()  # paused upstream links go back to reading (and the pool)
        self._buf = bytearray()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        if self._close_reason is None:
            log.debug(
                "connection.closed",
                connection_id=self.connection_id,
                peer=self._peer_text(),
                reason="peer.closed" if exc is None else "io.error",
                error=None if exc is None else str(exc),
            )
        if self._on_lost is not None:
            self._on_lost(self)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()
        self.response_budget._drained()

    # -- internals ----------------------------------------------------------------------------

    def _complete_frame_buffered(self) -> bool:
        buf = self._buf
        return len(buf) >= 4 and len(buf) >= 4 + _SIZE.unpack_from(buf, 0)[0]

    def _peer_text(self) -> str:
        host, port = self.ctx.peer
        return f"{host}:{port}"

    def _reject_size(self, size: int) -> None:
        if self._on_oversized is not None:
            self._on_oversized(size)
        log.warning(
            "request.rejected",
            connection_id=self.connection_id,
            peer=self._peer_text(),
            reason="frame.negative_size" if size < 0 else "frame.oversized",
            size=size,
            max_size=self._max_frame,
        )
        self.close("frame.negative_size" if size < 0 else "frame.oversized", size=size)

    def _dispatch(self, frame: bytes) -> None:
        slot = ResponseSlot(self)
        self._slots.append(slot)
        self._on_frame(self, frame, slot)
        if len(self._slots) >= MAX_IN_FLIGHT and not self._inflight_paused:
            self._inflight_paused = True
            self._update_reading()

    def _flush(self) -> None:
        if self._reading:
            self._flush_wanted = True  # written together when the read ends
            return
        self._flush_wanted = False
        slots = self._slots
        transport = self._transport
        ready: list[bytes] = []
        while slots and slots[0].done:
            data = slots.popleft().data
            if data is not None:
                ready.append(data)
                self._queued_response_bytes -= len(data)
        if ready and transport is not None and not self._closing:
            if len(ready) == 1:
                transport.write(ready[0])
            elif sum(map(len, ready)) <= _COALESCE_MAX:
                transport.write(b"".join(ready))
            else:
                for data in ready:  # no joined copy of large answers (Fetch)
                    transport.write(data)
        resume_parse = False
        if self._inflight_paused and len(slots) < MAX_IN_FLIGHT // 2:
            self._inflight_paused = False
            self._update_reading()
            resume_parse = self._complete_frame_buffered() and not self._closing and not self._stopped
        if resume_parse:
            # Frames left unparsed at the limit: no read will bring them again.
            asyncio.get_running_loop().call_soon(self._parse)
        elif not slots and (self._stopped or not self._complete_frame_buffered()):
            if self._drained is not None and not self._drained.done():
                self._drained.set_result(None)
            if self._close_after_flush and transport is not None:
                transport.close()

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or self._closing:
            return
        want_paused = self._write_paused or self._inflight_paused or self._pool_paused
        if want_paused and not self._read_paused:
            self._read_paused = True
            transport.pause_reading()
        elif not want_paused and self._read_paused:
            self._read_paused = False
            transport.resume_reading()

    # -- control ------------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self._slots)

    @property
    def unsent_response_bytes(self) -> int:
        """Answer bytes this connection holds for its client: written but not yet sent (the
        transport's buffer) and completed but queued behind an unfinished answer."""
        return self.unsent_written_bytes + self._queued_response_bytes

    @property
    def unsent_written_bytes(self) -> int:
        """Answer bytes written to the transport that the client has not taken yet."""
        transport = self._transport
        if transport is None or self._closing:
            return 0
        return transport.get_write_buffer_size()

    @property
    def muted(self) -> bool:
        """Not read for back-pressure: its answers are not being read, too many requests in
        flight, or its next frame waits for the server-wide request budget."""
        return self._read_paused and not self._stopped and not self._closing

    @property
    def closing(self) -> bool:
        """Closed, or closing: nothing more will be written to this connection."""
        return self._closing

    def close(self, reason: str, **fields: Any) -> None:
        """Close this connection now (bad input, or Kafka's close-instead-of-answer cases)."""
        if self._closing:
            return
        if self._flush_wanted:  # answers completed earlier in this read still go out first
            self._reading = False
            self._flush()
        self._closing = True
        self._close_reason = reason
        log.info(
            "connection.closed",
            connection_id=self.connection_id,
            peer=self._peer_text(),
            client_id=self.ctx.client_id,
            reason=reason,
            **fields,
        )
        for slot in self._slots:
            if slot.task is not None:
                slot.task.cancel()
        if self._transport is not None:
            self._transport.close()

    def limit_frames(self, max_frame_bytes: int, on_oversized: Callable[[int], None] | None = None) -> None:
        """Bound the size of the next frames (a SASL listener bounds them to
        `sasl.server.max.receive.size` until the client has authenticated); `on_oversized` hears
        of a larger one before the connection closes."""
        self._max_frame = max_frame_bytes
        self._on_oversized = on_oversized

    def stop_reading(self) -> None:
        """Shutdown: take no new requests from this connection."""
        self._stopped = True  # frames already buffered are not parsed either
        if self._transport is not None and not self._closing and not self._read_paused:
            self._read_paused = True
            self._transport.pause_reading()

    async def drain(self) -> None:
        """Wait until every request read so far has been answered (or the connection is gone)."""
        if not self._slots or self._closing:
            return
        loop = asyncio.get_running_loop()
        if self._drained is None or self._drained.done():
            self._drained = loop.create_future()
        await self._drained
