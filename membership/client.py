"""`Membership`: the asyncio driver of `membership.core`, the public group membership client.

The generic-coordinator proposal (seed 003, Kafka's discarded KIP for a public `Coordinator`)
asks for what Connect's WorkerCoordinator and Schema Registry get from `AbstractCoordinator`:
join a classic group under any protocol type, let the leader compute everyone's assignment with
the application's own assignor, hear about assignments and revocations, keep the session alive.
This module runs the sans-IO state machine on the asyncio driver all of groupshift's member
clients share (`membership.driver`, over `membership.connection`); `MembershipThread` runs it on
a thread and loop of its own, as Kafka's heartbeat thread keeps a member alive while the
application's loop is busy.

Callbacks (`on_assigned`, `on_revoked`) run on the driver's loop, in order, before the next
request: a revocation is always delivered before the JoinGroup that follows it (Kafka's
onJoinPrepare). They may be coroutines; while one runs no heartbeat is sent, so what takes
longer than the session timeout belongs in a task of the application's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from membership.connection import BrokerConnection, UnsupportedVersion
from membership.core import (
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
from membership.driver import MemberDriver, MemberThread, parse_bootstrap
from membership.event_log import EventLog, StdlibEventLog
from protocol.client_security import ClientSecurity

__all__ = ["Membership", "MembershipThread", "parse_bootstrap"]

OnAssigned = Callable[[Assignment], Awaitable[None] | None]
OnRevoked = Callable[[Assignment, str, bool], Awaitable[None] | None]
Protocols = Sequence[tuple[str, bytes]] | Callable[[], Sequence[tuple[str, bytes]]]


class Membership(MemberDriver[MembershipCore, MembershipError]):
    """One member of a classic group with protocol type `protocol_type`.

    `protocols` are (name, metadata) in order of preference, or a callable giving them at each
    join (metadata that changes, such as what the member owns now). `assignor` runs on the member
    the coordinator makes leader. Timeouts and `group_instance_id` are Kafka's settings of the
    same names; `security` reaches a TLS or SASL listener (Kafka's client properties through
    `ClientSecurity.from_properties`)."""

    EVENT_PREFIX = "membership"
    TASK_NAME = "membership"

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
        offered = protocols if callable(protocols) else (lambda fixed=tuple(protocols): fixed)
        core = MembershipCore(
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
        super().__init__(bootstrap, core, security)
        self.on_assigned = on_assigned
        self.on_revoked = on_revoked

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

    # -- control (start, run and close are the driver's) -----------------------------------

    def request_rejoin(self, reason: str = "requested by the application") -> None:
        """Give up the current assignment and join again (metadata changed, say)."""
        self.core.request_rejoin(reason)
        if self._wake is not None:
            self._wake.set()

    async def close(self) -> None:
        """Leave the group (a dynamic member sends LeaveGroup, so the others need not wait for its
        session to expire; a static member stays until its session expires, as in Kafka) and
        stop. The revocation callback runs first."""
        await super().close()

    async def _send(self, conn: BrokerConnection, request: Request, timeout: float) -> Any:
        if request.api_key == JOIN_GROUP and self.core.is_static and conn.version_for(JOIN_GROUP) < 5:
            # JoinGroup v5 (Kafka 2.3) carries group.instance.id; below it the member would
            # silently join as a dynamic one.
            raise UnsupportedVersion("the coordinator does not support static membership (JoinGroup v5)")
        return await conn.request(request.api_key, request.body, timeout)

    async def _deliver_event(self, event: Any) -> None:
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
            self._fatal(event.error)


class MembershipThread(MemberThread[Membership]):
    """A `Membership` on a thread and event loop of its own: the application's loop may be busy
    (or blocked) without the member missing heartbeats. Callbacks run on that thread; hand
    results to the application's loop with `call_soon_threadsafe`."""

    def __init__(
        self, membership: Membership, *, name: str = "membership", restart_after: float | None = None
    ) -> None:
        """`restart_after`: seconds after which a membership that failed (a fatal error, or an
        unexpected exception) starts over as a new member; None: it stays failed."""
        super().__init__(membership, name=name)
        self.restart_after = restart_after

    async def _body(self) -> None:
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
