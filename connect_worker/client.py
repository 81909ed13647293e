"""`ConnectWorker`: the asyncio driver of `connect_worker.core`.

Runs the Connect worker state machine on the asyncio driver every groupshift client shares
(`membership.driver`: one connection to the coordinator over `membership.connection`, TLS and
SASL, ApiVersions), the three extension APIs encoded with `protocol.connect_wire`.
`ConnectWorkerThread` runs it on a thread and loop of its own.

Callbacks (`on_revoked(connectors, tasks)`, `on_assigned(connectors, tasks)`, `on_computed`,
`on_joined`) run on the driver's loop, in order, before the next request: a revocation is
delivered (the application stops the connectors and tasks) before the heartbeat that tells the
coordinator they are released, and before anything new is assigned.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from connect_worker.assignor import ConnectAssignor, TaskId, Work
from connect_worker.core import (
    CONNECT_HEARTBEAT,
    CONNECT_PREPARE,
    FIND_COORDINATOR,
    Assigned,
    Computed,
    ConnectWorkerCore,
    ConnectWorkerError,
    Fatal,
    Joined,
    Request,
    Revoked,
    Settings,
    State,
)
from membership.connection import BrokerConnection, ConnectionFailed
from membership.driver import ClientAssignmentDriver, MemberThread
from membership.event_log import EventLog, StdlibEventLog
from protocol import connect_wire as cw
from protocol.client_security import ClientSecurity

FIND_COORDINATOR_VERSIONS = (0, 4)

OnWork = Callable[[frozenset[str], frozenset[TaskId]], Awaitable[None] | None]
OnComputed = Callable[[Computed], Awaitable[None] | None]
OnJoined = Callable[[Joined], Awaitable[None] | None]


class ConnectWorker(ClientAssignmentDriver[ConnectWorkerCore, ConnectWorkerError]):
    """One worker of connect group `group_id`, reachable at `url`, offering `assignors` (in
    priority order). Connectors and tasks are not run here: the callbacks say what to start and
    stop (this is the membership and assignment half of a Connect worker)."""

    EVENT_PREFIX = "connect_worker"
    TASK_NAME = "connect-worker"
    # An extension answer the wire layer cannot read counts as no answer, as a bad frame does.
    REQUEST_FAILURES = (ConnectionFailed, cw.MalformedExtension)

    def __init__(
        self,
        bootstrap: str | Sequence[tuple[str, int]],
        group_id: str,
        url: str,
        assignors: Sequence[ConnectAssignor],
        *,
        config_offset: int = 0,
        on_assigned: OnWork | None = None,
        on_revoked: OnWork | None = None,
        on_lost: OnWork | None = None,
        on_computed: OnComputed | None = None,
        on_joined: OnJoined | None = None,
        rebalance_timeout_ms: int = 60_000,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30_000,
        security: ClientSecurity | None = None,
        client_id: str = "groupshift-connect-worker",
        log: EventLog | None = None,
    ) -> None:
        core = ConnectWorkerCore(
            Settings(
                group_id,
                url,
                rebalance_timeout_ms=rebalance_timeout_ms,
                retry_backoff_ms=retry_backoff_ms,
                request_timeout_ms=request_timeout_ms,
                client_id=client_id,
            ),
            tuple(assignors),
            config_offset=config_offset,
            log=log or StdlibEventLog(),
        )
        super().__init__(bootstrap, core, security)
        self.on_assigned = on_assigned
        self.on_revoked = on_revoked
        self.on_lost = on_lost
        self.on_computed = on_computed
        self.on_joined = on_joined

    @property
    def owned(self) -> Work:
        return self.core.owned

    @property
    def state(self) -> State:
        return self.core.state

    def set_config_offset(self, offset: int) -> None:
        """The worker read the config topic up to `offset` (see the core); wakes the loop."""
        self.core.set_config_offset(offset)
        if self._wake is not None:
            self._wake.set()

    async def _send(self, conn: BrokerConnection, request: Request, timeout: float) -> Any:
        key = request.api_key
        if key == FIND_COORDINATOR:
            version = conn.negotiate(key, *FIND_COORDINATOR_VERSIONS)
            return await conn.request_at(key, version, request.body, timeout)
        if key == CONNECT_HEARTBEAT:
            body = cw.write_heartbeat_request(request.body)
        elif key == CONNECT_PREPARE:
            body = cw.write_prepare_request(request.body)
        else:
            body = cw.write_install_request(request.body)
        frame, offset = await self._exchange_extension(conn, key, body, timeout)
        if key == CONNECT_HEARTBEAT:
            return cw.read_heartbeat_response(frame, offset)
        if key == CONNECT_PREPARE:
            return cw.read_prepare_response(frame, offset)
        return cw.read_install_response(frame, offset)

    async def _deliver_event(self, event: Any) -> None:
        if isinstance(event, Joined):
            await self._call(self.on_joined, event)
        elif isinstance(event, Assigned):
            await self._call(self.on_assigned, event.added.connectors, event.added.tasks)
        elif isinstance(event, Revoked):
            callback = self.on_lost if event.lost and self.on_lost is not None else self.on_revoked
            await self._call(callback, event.revoked.connectors, event.revoked.tasks)
        elif isinstance(event, Computed):
            await self._deliver_computed(event)
        elif isinstance(event, Fatal):
            self._fatal(event.error)


class ConnectWorkerThread(MemberThread[ConnectWorker]):
    """A `ConnectWorker` on a thread and event loop of its own; callbacks run on it."""

    def __init__(self, worker: ConnectWorker, *, name: str = "connect-worker") -> None:
        super().__init__(worker, name=name)
