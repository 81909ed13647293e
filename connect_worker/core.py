"""The sans-IO state machine of one Kafka Connect worker in a connect group on the new protocol.

The Connect draft's worker side (docs/connect-groups.md): find the coordinator, join with
ConnectGroupHeartbeat (epoch 0, the worker's REST URL, its config offset, its Connect assignors),
heartbeat every interval the coordinator gives, reconcile towards the connectors and tasks each
response carries — revoke before assign: what the new assignment drops is revoked (and the
application told, `Revoked`) before anything new is started (`Assigned`), and the next heartbeat,
sent at once, reports what the worker now runs — rejoin at epoch 0 with nothing after being
fenced, and leave with epoch -1 on close. When a response carries `ComputeAssignment`, the worker
reads the group with ConnectGroupPrepareAssignment, runs the Connect assignor the coordinator
chose and installs the result with ConnectGroupInstallAssignment; an assignor that raises installs
an error, so the group keeps its current target.

As `consumer_membership.core` (whose layering this follows), nothing here touches a socket, clock
or loop: the driver (`connect_worker.client`, on `membership.driver`) asks `next_request(now)`,
hands back the answer (`on_response`) or the failure (`on_failure`), sleeps until `wakeup(now)`
and drains `events()`. One request is in flight at a time.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from connect_worker.assignor import (
    ASSIGNOR_FAILED,
    ConnectAssignor,
    ConnectAssignorError,
    ConnectGroupState,
    HeldWork,
    Work,
    WorkerInfo,
)
from membership.client_assignment import ClientAssignmentSteps, Computation, check_assignors, wire_assignors
from membership.core import FIND_COORDINATOR as FIND_COORDINATOR
from membership.core import NONE, MembershipError, find_coordinator_body
from membership.event_log import EventLog, StdlibEventLog
from protocol import connect_wire as cw

CONNECT_HEARTBEAT = cw.CONNECT_HEARTBEAT_KEY
CONNECT_PREPARE = cw.CONNECT_PREPARE_KEY
CONNECT_INSTALL = cw.CONNECT_INSTALL_KEY
LEAVE_GROUP_EPOCH = -1


class ConnectWorkerError(MembershipError):
    """A fatal error: the worker stops (`code`: Kafka's error code, 0 for a local failure)."""


def to_wire(work: Work) -> cw.WireWork:
    return cw.WireWork(
        tuple(sorted(work.connectors)), tuple(cw.WireTask(c, t) for c, t in sorted(work.tasks))
    )


def from_wire(work: cw.WireWork) -> Work:
    return Work(frozenset(work.connectors), frozenset((t.connector, t.task) for t in work.tasks))


@dataclass(frozen=True)
class Joined:
    member_id: str
    epoch: int


@dataclass(frozen=True)
class Assigned:
    """Connectors and tasks to start (`added`), and everything the worker now runs (`owned`)."""

    added: Work
    owned: Work
    epoch: int


@dataclass(frozen=True)
class Revoked:
    """Connectors and tasks to stop. `lost`: fenced or closed rather than asked to hand over."""

    revoked: Work
    lost: bool


@dataclass(frozen=True)
class Computed:
    """This worker computed the group's target for `group_epoch` (`error`: the assignor's code)."""

    group_epoch: int
    error: int
    installed: bool
    message: str = ""


@dataclass(frozen=True)
class Fatal:
    error: ConnectWorkerError


Event = Joined | Assigned | Revoked | Computed | Fatal


@dataclass(eq=False)
class Request:
    """What the driver sends: `body` is a kio field dict (FindCoordinator) or a
    `protocol.connect_wire` request (the three extension APIs)."""

    api_key: int
    body: Any
    timeout: float
    to_coordinator: bool = True
    owned: Work = field(default_factory=Work)  # what a heartbeat reports
    sent_at: float = 0.0


class State(enum.Enum):
    JOINING = "joining"
    STABLE = "stable"
    FAILED = "failed"
    CLOSED = "closed"


@dataclass
class Settings:
    """The worker's settings, in Kafka Connect's names where it has them."""

    group_id: str  # group.id
    url: str  # rest.advertised.* : the URL other workers reach this one at
    rebalance_timeout_ms: int = 60_000  # rebalance.timeout.ms
    retry_backoff_ms: int = 100  # retry.backoff.ms
    request_timeout_ms: int = 30_000  # request.timeout.ms
    client_id: str = "groupshift-connect-worker"
    # The draft's static membership (InstanceId) is not built: a worker is always dynamic.
    group_instance_id: None = None

    def check(self) -> None:
        if not self.group_id:
            raise ValueError("group_id must not be empty")
        if not self.url:
            raise ValueError("url must not be empty")
        if self.rebalance_timeout_ms <= 0:
            raise ValueError("rebalance_timeout_ms must be positive")


@dataclass
class _Computation(Computation[cw.ConnectInstallRequest]):
    prepared: bool = False


@dataclass
class ConnectWorkerCore(ClientAssignmentSteps[Request, Event, cw.ConnectInstallRequest]):
    EVENT_PREFIX = "connect_worker"
    ASSIGNOR_FAILED = ASSIGNOR_FAILED
    ASSIGNOR_ERROR = ConnectAssignorError

    settings: Settings
    assignors: Sequence[ConnectAssignor]
    config_offset: int = 0
    member_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    state: State = State.JOINING
    coordinator: tuple[int, str, int] | None = None
    epoch: int = 0
    owned: Work = field(default_factory=Work)
    heartbeat_interval: float = 0.0
    log: EventLog = field(default_factory=StdlibEventLog)
    _in_flight: Request | None = None
    _not_before: float = 0.0
    _next_heartbeat: float = 0.0
    _acked: Work | None = None  # what the coordinator last heard the worker runs; None: send all
    _sent_assignors: tuple[cw.WireConnectAssignor, ...] | None = None
    _sent_offset: int = -1
    _computation: _Computation | None = None
    _done_epoch: int = -1
    _joined: bool = False
    _events: list[Event] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.settings.check()
        if not self.assignors:
            raise ValueError("a worker needs at least one Connect assignor")
        check_assignors(self.assignors)

    # -- the driver's questions ------------------------------------------------------------

    def next_request(self, now: float) -> Request | None:
        if self._held_back(now):
            return None
        if self.coordinator is None:
            body = find_coordinator_body(self.settings.group_id)
            return self._send(Request(FIND_COORDINATOR, body, self.timeout, to_coordinator=False), now)
        c = self._computation
        if c is not None:
            if not c.prepared:
                req = cw.ConnectPrepareRequest(self.settings.group_id, self.member_id, self.epoch)
                return self._send(Request(CONNECT_PREPARE, req, self.timeout), now)
            if c.install is not None:
                return self._send(Request(CONNECT_INSTALL, c.install, self.timeout), now)
        if self._heartbeat_due(now):
            return self._send(self._heartbeat(), now)
        return None

    def _heartbeat_due(self, now: float) -> bool:
        return (
            self._acked is None
            or now >= self._next_heartbeat
            or self._acked != self.owned
            or self._wire_assignors() != self._sent_assignors
            or self.config_offset != self._sent_offset
        )

    def _wire_assignors(self) -> tuple[cw.WireConnectAssignor, ...]:
        return wire_assignors(self.assignors)

    def _heartbeat(self) -> Request:
        """Every field on a join (and after an error); then only what changed, as the wire's
        "unchanged" values allow."""
        full = self._acked is None or self.epoch == 0
        assignors = self._wire_assignors()
        req = cw.ConnectHeartbeatRequest(
            self.settings.group_id,
            self.member_id,
            self.epoch,
            rebalance_timeout_ms=self.settings.rebalance_timeout_ms if full else -1,
            url=self.settings.url if full else None,
            config_offset=self.config_offset if full or self.config_offset != self._sent_offset else -1,
            assignors=assignors if full or assignors != self._sent_assignors else None,
            owned=to_wire(self.owned) if full or self._acked != self.owned else None,
        )
        return Request(CONNECT_HEARTBEAT, req, self.timeout, owned=self.owned)

    # -- the application's requests --------------------------------------------------------

    def set_config_offset(self, offset: int) -> None:
        """The worker read the config topic further (connectors added or removed): the next
        heartbeat says so and the coordinator asks for a new assignment."""
        self.config_offset = offset

    def close(self) -> Request | None:
        """Stop: everything run is revoked, and the leave heartbeat (epoch -1) to send, or None."""
        if self.state is State.CLOSED:
            return None
        self._revoke(lost=False)
        leave = None
        if self.coordinator is not None and self.state is not State.FAILED and self._joined:
            req = cw.ConnectHeartbeatRequest(self.settings.group_id, self.member_id, LEAVE_GROUP_EPOCH)
            leave = Request(CONNECT_HEARTBEAT, req, self.timeout)
        self.state = State.CLOSED
        self._in_flight = None
        return leave

    # -- answers ---------------------------------------------------------------------------

    def on_response(self, request: Request, response: Any, now: float) -> None:
        if request is not self._in_flight:
            return
        self._in_flight = None
        if request.api_key == FIND_COORDINATOR:
            self._on_find_coordinator(response, now)
        elif request.api_key == CONNECT_HEARTBEAT:
            self._on_heartbeat(request, response, now)
        elif request.api_key == CONNECT_PREPARE:
            self._on_prepare(response, now)
        elif request.api_key == CONNECT_INSTALL:
            self._on_install(response, now)

    def _fail(self, message: str, code: int = 0) -> None:
        self._revoke(lost=True)
        self.state = State.FAILED
        self._events.append(Fatal(ConnectWorkerError(message, code)))

    def _revoke(self, *, lost: bool) -> None:
        if self.owned:
            self._events.append(Revoked(self.owned, lost))
            self.owned = Work()

    def _forget_acknowledged(self) -> None:
        self._acked = None

    def _computed(self, group_epoch: int, error: int, installed: bool, message: str = "") -> Event:
        return Computed(group_epoch, error, installed, message)

    def _joined_event(self) -> Event:
        return Joined(self.member_id, self.epoch)

    def _on_heartbeat(self, request: Request, r: cw.ConnectHeartbeatResponse, now: float) -> None:
        code = r.error_code
        if code != NONE:
            self._on_heartbeat_error("ConnectGroupHeartbeat", code, r.error_message, now)
            return
        body = request.body
        assert isinstance(body, cw.ConnectHeartbeatRequest)
        self._acked = request.owned
        if body.assignors is not None:
            self._sent_assignors = body.assignors
        if body.config_offset >= 0:
            self._sent_offset = body.config_offset
        self._heartbeat_accepted(r.member_id, max(r.heartbeat_interval_ms, 0) / 1000, r.member_epoch, now)
        if r.assignment is not None:
            self._reconcile(from_wire(r.assignment.work))
        epoch = r.compute_assignment
        if epoch != cw.NO_COMPUTE and self._wants_computation(epoch):
            self._computation = _Computation(epoch)

    def _reconcile(self, target: Work) -> None:
        """Revoke before assign: stop what the assignment drops, then start what it adds; the
        next heartbeat (sent at once, `owned` changed) tells the coordinator."""
        revoked, added = self.owned - target, target - self.owned
        if revoked:
            self._events.append(Revoked(revoked, lost=False))
            self.owned = self.owned - revoked
        if added:
            self.owned = self.owned | added
            self._events.append(Assigned(added, self.owned, self.epoch))

    # -- a computation ------------------------------------------------------------------------

    def _assignor(self, name: str) -> ConnectAssignor | None:
        return next((a for a in self.assignors if a.name == name), None)

    def _on_prepare(self, r: cw.ConnectPrepareResponse, now: float) -> None:
        c = self._computation
        if c is None:
            return
        if r.error_code != NONE:
            self._prepare_refused(r, now)
            return
        c.prepared = True
        group = ConnectGroupState(
            self.settings.group_id,
            r.group_epoch,
            r.assignor_name,
            self.member_id,
            tuple(
                WorkerInfo(
                    m.member_id,
                    m.url,
                    m.config_offset,
                    m.metadata_version,
                    m.metadata,
                    from_wire(m.target),
                    m.reason,
                )
                for m in r.members
            ),
            tuple(HeldWork(d.member_id, d.url, d.remaining_ms, from_wire(d.work)) for d in r.delayed),
        )
        assignor = self._assignor(r.assignor_name)

        def assign() -> tuple[cw.InstalledWorker, ...]:
            if assignor is None:
                raise ConnectAssignorError(
                    f"the coordinator chose assignor {r.assignor_name!r}, not one of ours"
                )
            plan = assignor.assign(group)
            return tuple(
                cw.InstalledWorker(mid, to_wire(a.work), a.metadata_version, a.metadata)
                for mid, a in sorted(plan.items())
            )

        c.install = self._install_of(r.group_epoch, assign, cw.ConnectInstallRequest)
