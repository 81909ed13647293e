"""`Membership`: the asyncio driver of `membership.core`, the public group membership client.

The generic-coordinator proposal (seed 003, Kafka's discarded KIP for a public `Coordinator`)
asks for what Connect's WorkerCoordinator and Schema Registry get from `AbstractCoordinator`:
join a classic group under any protocol type, let the leader compute everyone's assignment with
the application's own assignor, hear about assignments and revocations, keep the session alive.
This module runs the sans-IO state machine over `membership.connection` on an asyncio loop;
`MembershipThread` runs it on a thread and loop of its own, as Kafka's heartbeat thread keeps a
member alive while the application's loop is busy.

Callbacks (`on_assigned`, `on_revoked`) run on the driver's loop, in order, before the next
request: a revocation is always delivered before the JoinGroup that follows it (Kafka's
onJoinPrepare). They may be coroutines; while one runs no heartbeat is sent, so what takes
longer than the session timeout belongs in a task of the application's.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import random
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from membership.connection import BrokerConnection, ConnectionFailed, UnsupportedVersion
from membership.core import (
    FIND_COORDINATOR,
    JOIN_GROUP,
    Assigned,
    Assignment,
    Assignor,
    Fatal,
    MembershipCore,
    MembershipError,
    Request,
    Revoked,
    Settings,
    State,
)
from membership.event_log import EventLog, StdlibEventLog
from protocol.client_security import ClientSecurity, SaslAuthenticationFailed

OnAssigned = Callable[[Assignment], Awaitable[None] | None]
OnRevoked = Callable[[Assignment, str, bool], Awaitable[None] | None]
Protocols = Sequence[tuple[str, bytes]] | Callable[[], Sequence[tuple[str, bytes]]]


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


class Membership:
    """One member of a classic group with protocol type `protocol_type`.

    `protocols` are (name, metadata) in order of preference, or a callable giving them at each
    join (metadata that changes, such as what the member owns now). `assignor` runs on the member
    the coordinator makes leader. Timeouts and `group_instance_id` are Kafka's settings of the
    same names; `security` reaches a TLS or SASL listener (Kafka's client properties through
    `ClientSecurity.from_properties`)."""

    def __init__(
        self,
        bootstrap: str | Sequence[tuple[str, int]],
        group_id: str,
        protocol_type: str,
        protocols: Protocols,
        assignor: Assignor,
        *,
        on_assigned: OnAssigned | None = None,
        on_revoked: OnRevoked | None = None,
        session_timeout_ms: int = 45_000,
        rebalance_timeout_ms: int = 300_000,
        heartbeat_interval_ms: int = 3_000,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30_000,
        group_instance_id: str | None = None,
        security: ClientSecurity | None = None,
        client_id: str = "groupshift-membership",
        log: EventLog | None = None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.security = security or ClientSecurity()
        offered = protocols if callable(protocols) else (lambda fixed=tuple(protocols): fixed)
        self.core = MembershipCore(
            Settings(
                group_id,
                protocol_type,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                heartbeat_interval_ms=heartbeat_interval_ms,
                retry_backoff_ms=retry_backoff_ms,
                request_timeout_ms=request_timeout_ms,
                group_instance_id=group_instance_id,
                client_id=client_id,
            ),
            offered,
            assignor,
            log=log or StdlibEventLog(),
        )
        self.log = self.core.log
        self.on_assigned = on_assigned
        self.on_revoked = on_revoked
        self.error: MembershipError | None = None
        self._conn: BrokerConnection | None = None
        self._conn_for: tuple[int, str, int] | None = None
        self._busy = False
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    # -- what the application reads --------------------------------------------------------

    @property
    def assignment(self) -> Assignment | None:
        return self.core.assignment

    @property
    def member_id(self) -> str:
        return self.core.member_id

    @property
    def generation(self) -> int:
        return self.core.generation

    @property
    def state(self) -> State:
        return self.core.state

    @property
    def lease_deadline(self) -> float:
        """A `time.monotonic()` bound before which the coordinator cannot have removed this
        member (docs/membership.md, "The lease"); past it, assume the assignment is gone."""
        return self.core.lease_deadline

    # -- control ---------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        """Run the membership in a task of the running loop (`run` until `close`)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run(), name="membership")
        return self._task

    def request_rejoin(self, reason: str = "requested by the application") -> None:
        """Give up the current assignment and join again (metadata changed, say)."""
        self.core.request_rejoin(reason)
        if self._wake is not None:
            self._wake.set()

    async def close(self) -> None:
        """Leave the group (a dynamic member sends LeaveGroup, so the others need not wait for its
        session to expire; a static member stays until its session expires, as in Kafka) and
        stop. The revocation callback runs first."""
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
            with contextlib.suppress(ConnectionFailed, SaslAuthenticationFailed, OSError):
                conn = await self._connection_to(coordinator)
                await conn.request(leave.api_key, leave.body, min(leave.timeout, 5.0))
        self._drop_connection()

    async def run(self) -> None:
        """The membership loop; returns after `close`, raises MembershipError on a fatal error."""
        self._wake = asyncio.Event()
        try:
            while True:
                now = time.monotonic()
                request = self.core.next_request(now)
                if request is None:
                    await self._deliver()
                    if self.core.state in (State.FAILED, State.CLOSED):
                        break
                    self._wake.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), max(0.0, self.core.wakeup(now) - now))
                    continue
                await self._exchange(request)
                await self._deliver()
        finally:
            if self.core.state is not State.CLOSED:
                self._drop_connection()
        if self.error is not None:
            raise self.error

    async def _exchange(self, request: Request) -> None:
        self._busy = True
        try:
            if request.to_coordinator:
                assert self.core.coordinator is not None
                conn = await self._connection_to(self.core.coordinator)
                if request.api_key == JOIN_GROUP and self.core.is_static and conn.version_for(JOIN_GROUP) < 5:
                    # JoinGroup v5 (Kafka 2.3) carries group.instance.id; below it the member
                    # would silently join as a dynamic one.
                    raise UnsupportedVersion(
                        "the coordinator does not support static membership (JoinGroup v5)"
                    )
                response = await conn.request(request.api_key, request.body, request.timeout)
            else:
                response = await self._ask_bootstrap(request)
        except UnsupportedVersion as exc:
            self.core.fail(str(exc))
        except SaslAuthenticationFailed as exc:
            self.core.fail(f"authentication failed: {exc}", getattr(exc, "error_code", 0))
        except ConnectionFailed as exc:
            if request.to_coordinator:
                self._drop_connection()
            self.core.on_failure(request, time.monotonic(), str(exc))
        else:
            self.core.on_response(request, response, time.monotonic())
            if self.core.coordinator != self._conn_for:
                self._drop_connection()
        finally:
            self._busy = False

    async def _ask_bootstrap(self, request: Request) -> Any:
        assert request.api_key == FIND_COORDINATOR
        host, port = random.choice(self.bootstrap)
        conn = await BrokerConnection.open(
            host,
            port,
            security=self.security,
            client_id=self.core.settings.client_id,
            timeout=request.timeout,
        )
        try:
            return await conn.request(request.api_key, request.body, request.timeout)
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

    async def _deliver(self) -> None:
        for event in self.core.events():
            if isinstance(event, Assigned):
                self.log.info(
                    "membership.assigned",
                    group=self.core.settings.group_id,
                    generation=event.assignment.generation,
                    leader=event.assignment.is_leader,
                )
                await self._call(self.on_assigned, event.assignment)
            elif isinstance(event, Revoked):
                self.log.info(
                    "membership.revoked",
                    group=self.core.settings.group_id,
                    generation=event.assignment.generation,
                    reason=event.reason,
                    lost=event.lost,
                )
                await self._call(self.on_revoked, event.assignment, event.reason, event.lost)
            elif isinstance(event, Fatal):
                self.log.error(
                    "membership.fatal",
                    group=self.core.settings.group_id,
                    error=str(event.error),
                    code=event.error.code,
                )
                self.error = event.error

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
            self.log.error("membership.callback_failed", callback=repr(callback), exc_info=exc)


class MembershipThread:
    """A `Membership` on a thread and event loop of its own: the application's loop may be busy
    (or blocked) without the member missing heartbeats. Callbacks run on that thread; hand
    results to the application's loop with `call_soon_threadsafe`."""

    def __init__(
        self, membership: Membership, *, name: str = "membership", restart_after: float | None = None
    ) -> None:
        """`restart_after`: seconds after which a membership that failed (a fatal error, or an
        unexpected exception) starts over as a new member; None: it stays failed."""
        self.membership = membership
        self.name = name
        self.restart_after = restart_after
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._done = threading.Event()

    def start(self) -> None:
        started = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            task = loop.create_task(self._supervise())
            self.membership._task = task
            started.set()
            try:
                try:
                    loop.run_until_complete(task)
                except (asyncio.CancelledError, MembershipError):
                    pass  # closed, or failed (logged, and kept in `membership.error`)
                except Exception:
                    self.membership.log.error("membership.thread_failed", exc_info=True)
                # after close(): let close() (scheduled on this loop) finish its LeaveGroup
                pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
                if pending:
                    loop.run_until_complete(asyncio.wait(pending, timeout=5.0))
            finally:
                loop.close()
                self._done.set()

        self._thread = threading.Thread(target=main, name=self.name, daemon=True)
        self._thread.start()
        started.wait(5)

    async def _supervise(self) -> None:
        while True:
            try:
                await self.membership.run()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.restart_after is None:
                    raise
                self.membership.log.error("membership.restarting", after=self.restart_after, error=repr(exc))
                await asyncio.sleep(self.restart_after)
                self.membership.error = None
                self.membership.core.restart(f"restart after {exc!r}")

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
