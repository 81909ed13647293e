"""The asyncio driver of a sans-IO group member: the one network loop of groupshift's clients.

Kafka's group clients run the same loop whatever the protocol (`AbstractCoordinator` for classic
groups, the consumer's background thread and heartbeat request manager for KIP-848): find the
coordinator through any bootstrap broker, keep one connection to it, send what the member's
state machine asks for, hand back the answer or the failure, deliver the resulting events to the
application in order, and sleep until the machine's next deadline. `membership.client` (classic
groups, any protocol type) and `consumer_membership.client` (KIP-848 consumer groups with
client-side assignors) both run on `MemberDriver`; each says only how a request goes on the wire
(`_send`) and what its events mean to the application (`_deliver_event`); the client-side-assignor
members (`consumer_membership.client`, `connect_worker.client`) run on `ClientAssignmentDriver`,
which also sends the extension APIs. `MemberThread` runs a
driver on a thread and event loop of its own, as Kafka's heartbeat thread keeps a member alive
while the application's loop is busy.

The driver has one request in flight at a time (the state machines are built for that), so a
connection's answers come in order and a request cut off by `close` leaves a stream that is
dropped rather than read again.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from membership.connection import BrokerConnection, ConnectionFailed, UnsupportedVersion
from membership.core import MemberSettings, MembershipError
from membership.event_log import EventLog
from protocol import extension_wire as ew
from protocol.client_security import ClientSecurity, SaslAuthenticationFailed


def parse_bootstrap(bootstrap: str | Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """`host:port,host:port` (Kafka's bootstrap.servers) or a list of (host, port)."""
    if not isinstance(bootstrap, str):
        return [(h, int(p)) for h, p in bootstrap]
    out = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no bootstrap server")
    return out


class MemberCore(Protocol):
    """What the driver asks of a sans-IO member (`membership.core`, `consumer_membership.core`).

    A request has `api_key`, `timeout` (seconds) and `to_coordinator` (False: any bootstrap
    broker); the driver passes it back as it got it, so its type is the core's own."""

    @property
    def settings(self) -> MemberSettings: ...

    @property
    def log(self) -> EventLog: ...

    @property
    def coordinator(self) -> tuple[int, str, int] | None: ...

    @property
    def stopped(self) -> bool:
        """Failed or closed: nothing more will be sent."""

    @property
    def closed(self) -> bool: ...

    def next_request(self, now: float) -> Any: ...

    def wakeup(self, now: float) -> float: ...

    def on_response(self, request: Any, response: Any, now: float) -> None: ...

    def on_failure(self, request: Any, now: float, reason: str) -> None: ...

    def fail(self, message: str, code: int = 0) -> None: ...

    def close(self) -> Any: ...

    def events(self) -> Sequence[object]: ...


CoreT = TypeVar("CoreT", bound=MemberCore)
ErrorT = TypeVar("ErrorT", bound=MembershipError)


class MemberDriver(Generic[CoreT, ErrorT]):
    """Runs `core` over `membership.connection` on the running asyncio loop.

    Subclasses give `_send` (a request on a connection, answered with what the core's
    `on_response` reads) and `_deliver_event`; `EVENT_PREFIX` names their log events."""

    EVENT_PREFIX: ClassVar[str] = "membership"
    TASK_NAME: ClassVar[str] = "membership"
    # Exceptions of `_send` that count as a request without an answer (the core retries).
    REQUEST_FAILURES: ClassVar[tuple[type[Exception], ...]] = (ConnectionFailed,)

    def __init__(
        self,
        bootstrap: str | Sequence[tuple[str, int]],
        core: CoreT,
        security: ClientSecurity | None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.security = security or ClientSecurity()
        self.core = core
        self.log = core.log
        self.error: ErrorT | None = None
        self._conn: BrokerConnection | None = None
        self._conn_for: tuple[int, str, int] | None = None
        self._busy = False
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    # -- what a subclass says --------------------------------------------------------------

    async def _send(self, conn: BrokerConnection, request: Any, timeout: float) -> Any:
        raise NotImplementedError

    async def _deliver_event(self, event: Any) -> None:
        raise NotImplementedError

    # -- control ---------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        """Run the membership in a task of the running loop (`run` until `close`)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run(), name=self.TASK_NAME)
        return self._task

    async def close(self) -> None:
        """Stop the loop, let the core revoke what is held (its callbacks run) and send the
        leave request the core gives, if any, on a best-effort basis."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, MembershipError):
                await task
        if self._busy:  # a request was cut off mid-answer: the stream is unusable
            self._drop_connection()
        coordinator = self.core.coordinator
        leave = self.core.close()
        await self._deliver()
        if leave is not None and coordinator is not None:
            with contextlib.suppress(*self.REQUEST_FAILURES, SaslAuthenticationFailed, OSError):
                conn = await self._connection_to(coordinator)
                await self._send(conn, leave, min(leave.timeout, 5.0))
        self._drop_connection()

    async def run(self) -> None:
        """The membership loop; returns after `close`, raises the fatal error (a
        `MembershipError`) when the core gives one."""
        self._wake = asyncio.Event()
        try:
            while True:
                now = time.monotonic()
                request = self.core.next_request(now)
                if request is None:
                    await self._deliver()
                    if self.core.stopped:
                        break
                    self._wake.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), max(0.0, self.core.wakeup(now) - now))
                    continue
                await self._exchange(request)
                await self._deliver()
        finally:
            if not self.core.closed:
                self._drop_connection()
        if self.error is not None:
            raise self.error

    # -- the wire --------------------------------------------------------------------------

    async def _exchange(self, request: Any) -> None:
        self._busy = True
        try:
            if request.to_coordinator:
                assert self.core.coordinator is not None
                conn = await self._connection_to(self.core.coordinator)
                response = await self._send(conn, request, request.timeout)
            else:
                response = await self._ask_bootstrap(request)
        except UnsupportedVersion as exc:
            self.core.fail(str(exc))
        except SaslAuthenticationFailed as exc:
            self.core.fail(f"authentication failed: {exc}", getattr(exc, "error_code", 0))
        except self.REQUEST_FAILURES as exc:
            if request.to_coordinator:
                self._drop_connection()
            self.core.on_failure(request, time.monotonic(), str(exc))
        else:
            self.core.on_response(request, response, time.monotonic())
            if self.core.coordinator != self._conn_for:
                self._drop_connection()
        finally:
            self._busy = False

    async def _ask_bootstrap(self, request: Any) -> Any:
        """A request for any broker (FindCoordinator, Metadata) on a connection of its own to a
        bootstrap server picked at random, closed after the answer."""
        host, port = random.choice(self.bootstrap)
        conn = await BrokerConnection.open(
            host,
            port,
            security=self.security,
            client_id=self.core.settings.client_id,
            timeout=request.timeout,
        )
        try:
            return await self._send(conn, request, request.timeout)
        finally:
            conn.close()

    async def _connection_to(self, coordinator: tuple[int, str, int]) -> BrokerConnection:
        if self._conn is not None and not self._conn.closed and self._conn_for == coordinator:
            return self._conn
        self._drop_connection()
        _, host, port = coordinator
        self._conn = await BrokerConnection.open(
            host,
            port,
            security=self.security,
            client_id=self.core.settings.client_id,
            timeout=self.core.settings.request_timeout_ms / 1000,
        )
        self._conn_for = coordinator
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self._conn_for = None

    # -- events ----------------------------------------------------------------------------

    async def _deliver(self) -> None:
        for event in self.core.events():
            await self._deliver_event(event)

    def _fatal(self, error: ErrorT) -> None:
        """The core's fatal error: logged, kept in `error`, raised by `run`."""
        self.log.error(
            f"{self.EVENT_PREFIX}.fatal", group=self.core.settings.group_id, error=str(error), code=error.code
        )
        self.error = error

    async def _call(self, callback: Callable[..., Any] | None, *args: Any) -> None:
        """A callback that raises is logged; the membership goes on (Kafka's clients rethrow
        from poll; here no caller waits for the driver's loop)."""
        if callback is None:
            return
        try:
            result = callback(*args)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            self.log.error(f"{self.EVENT_PREFIX}.callback_failed", callback=repr(callback), exc_info=exc)


class ComputedEvent(Protocol):
    """A client-side-assignor member's report of a computation it served."""

    @property
    def group_epoch(self) -> int: ...

    @property
    def error(self) -> int: ...

    @property
    def installed(self) -> bool: ...

    @property
    def message(self) -> str: ...


class AssigningCore(MemberCore, Protocol):
    @property
    def member_id(self) -> str: ...

    @property
    def epoch(self) -> int: ...


AssigningCoreT = TypeVar("AssigningCoreT", bound=AssigningCore)


class ClientAssignmentDriver(MemberDriver[AssigningCoreT, ErrorT]):
    """The driver of a member that computes its group's target (`consumer_membership`,
    `connect_worker`; `membership.client_assignment` has their shared steps): it sends
    groupshift's extension APIs, and logs and hands on each computation it served."""

    EXTENSION_VERSION: ClassVar[int] = 0  # the one version of each extension API
    on_computed: Callable[..., Any] | None = None

    @property
    def member_id(self) -> str:
        return self.core.member_id

    @property
    def epoch(self) -> int:
        return self.core.epoch

    async def _exchange_extension(
        self, conn: BrokerConnection, api_key: int, body: bytes, timeout: float
    ) -> tuple[bytes, int]:
        """One extension request (`body` encoded): the response frame and where its body starts."""
        version = self.EXTENSION_VERSION
        conn.negotiate(api_key, version, version)  # the coordinator has the flag off: no retry helps
        cid = conn.client_id
        frame = await conn.exchange(
            lambda c: ew.request_frame(api_key, version, c, cid, body), timeout, api_key
        )
        return frame, ew.response_body_offset(frame)

    async def _deliver_computed(self, event: ComputedEvent) -> None:
        self.log.info(
            f"{self.EVENT_PREFIX}.computed",
            group=self.core.settings.group_id,
            group_epoch=event.group_epoch,
            error=event.error,
            installed=event.installed,
        )
        await self._call(self.on_computed, event)


DriverT = TypeVar("DriverT", bound=MemberDriver[Any, Any])


class MemberThread(Generic[DriverT]):
    """A driver on a thread and event loop of its own: the application's loop may be busy (or
    blocked) without the member missing heartbeats. Callbacks run on that thread; hand results
    to the application's loop with `call_soon_threadsafe`."""

    def __init__(self, membership: DriverT, *, name: str) -> None:
        self.membership = membership
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._done = threading.Event()

    async def _body(self) -> None:
        """What the thread's loop runs (a supervisor may run the membership again)."""
        await self.membership.run()

    def start(self) -> None:
        started = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            task = loop.create_task(self._body())
            self.membership._task = task
            started.set()
            try:
                try:
                    loop.run_until_complete(task)
                except (asyncio.CancelledError, MembershipError):
                    pass  # closed, or failed (logged, and kept in `membership.error`)
                except Exception:
                    self.membership.log.error(f"{self.membership.EVENT_PREFIX}.thread_failed", exc_info=True)
                # after close(): let close() (scheduled on this loop) finish its leave request
                pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
                if pending:
                    loop.run_until_complete(asyncio.wait(pending, timeout=5.0))
            finally:
                loop.close()
                self._done.set()

        self._thread = threading.Thread(target=main, name=self.name, daemon=True)
        self._thread.start()
        started.wait(5)

    def call(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the membership's loop (`request_rejoin`, say)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(fn)

    def close(self, timeout: float = 5.0) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        def begin() -> None:
            loop.create_task(self.membership.close())

        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(begin)
        if self._thread is not None:
            self._thread.join(timeout)
