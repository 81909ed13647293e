"""The sans-IO state machine of one member of a classic group, any protocol type.

Kafka's classic group membership protocol (KIP-62 heartbeats, KIP-345 static membership, KIP-394
MEMBER_ID_REQUIRED, KIP-814 skip_assignment), as Kafka's `AbstractCoordinator` drives it for the
consumer, Connect's workers and Schema Registry: find the coordinator, JoinGroup, the leader
computes every member's assignment, SyncGroup hands each its own, Heartbeat keeps the session
until the coordinator answers REBALANCE_IN_PROGRESS, LeaveGroup on the way out (dynamic members
only). The error handling follows the client's documented semantics (docs/membership.md has the
table and the differences).

Nothing here touches a socket, a clock or an event loop: the driver (`membership.client`) asks
`next_request(now)` for the request to send, hands back its answer (`on_response`) or its
failure (`on_failure`), sleeps until `wakeup(now)`, and drains `events()`: assignments,
revocations and a fatal error, which it delivers to the application. Time is a float of
seconds from any monotonic source.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from membership.event_log import EventLog, StdlibEventLog

FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14

# Kafka error codes this state machine tells apart, as plain ints (kio's ErrorCode is the
# table: clients/.../protocol/Errors.java).
NONE = 0
UNKNOWN_SERVER_ERROR = int(ErrorCode.unknown_server_error)
COORDINATOR_LOAD_IN_PROGRESS = int(ErrorCode.coordinator_load_in_progress)
COORDINATOR_NOT_AVAILABLE = int(ErrorCode.coordinator_not_available)
NOT_COORDINATOR = int(ErrorCode.not_coordinator)
ILLEGAL_GENERATION = int(ErrorCode.illegal_generation)
INCONSISTENT_GROUP_PROTOCOL = int(ErrorCode.inconsistent_group_protocol)
INVALID_GROUP_ID = int(ErrorCode.invalid_group_id)
UNKNOWN_MEMBER_ID = int(ErrorCode.unknown_member_id)
INVALID_SESSION_TIMEOUT = int(ErrorCode.invalid_session_timeout)
REBALANCE_IN_PROGRESS = int(ErrorCode.rebalance_in_progress)
GROUP_AUTHORIZATION_FAILED = int(ErrorCode.group_authorization_failed)
UNSUPPORTED_VERSION = int(ErrorCode.unsupported_version)
GROUP_MAX_SIZE_REACHED = int(ErrorCode.group_max_size_reached)
MEMBER_ID_REQUIRED = int(ErrorCode.member_id_required)
FENCED_INSTANCE_ID = int(ErrorCode.fenced_instance_id)

# The coordinator moved or is not there yet: find it again, keep the membership.
REDISCOVER = frozenset({COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR})
# The member id or generation is no longer the group's: forget them, join as new.
RESET = frozenset({UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION})


def error_name(code: int) -> str:
    """Kafka's name of an error code, or "error N" for a code kio does not know."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error {code}"


class MembershipError(Exception):
    """A fatal error: the member cannot go on (the application decides what next). `code` is
    the Kafka error code, 0 for a local failure (the leader's assignor raised, a protocol the
    group chose that this member did not offer)."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


def find_coordinator_body(group_id: str) -> dict[str, Any]:
    """FindCoordinator for a group, readable at every version (v0-v3 `key`, v4+ batched
    `coordinator_keys`, KIP-699)."""
    return {"key": group_id, "key_type": 0, "coordinator_keys": [group_id]}


def read_find_coordinator(response: Any) -> tuple[int, tuple[int, str, int] | None]:
    """The error code and the coordinator (node id, host, port; None when there is none) of a
    FindCoordinator response of any version (v4+: one entry per key)."""
    entries = getattr(response, "coordinators", None)
    if entries:
        e = entries[0]
        code, node, host, port = int(e.error_code), int(e.node_id), str(e.host), int(e.port)
    else:
        code, node = int(response.error_code), int(response.node_id)
        host, port = str(response.host), int(response.port)
    if code != NONE or node < 0:
        return code, None
    return code, (node, host, port)


@dataclass(frozen=True)
class Member:
    """One member as the leader sees it in the JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class GroupJoined:
    """What the leader's assignor gets: the generation, the protocol the coordinator chose (one
    every member offered) and every member with its metadata for that protocol."""

    generation: int
    protocol: str
    leader_id: str
    member_id: str
    members: tuple[Member, ...]


Assignor = Callable[[GroupJoined], Mapping[str, bytes]]
"""The leader's plug-in: member id -> that member's assignment bytes (a member left out gets an
empty assignment). Called on the driver's event loop; it must not block for long (the group
waits for the leader's SyncGroup up to the rebalance timeout)."""


@dataclass(frozen=True)
class Assignment:
    """One generation as this member received it from SyncGroup."""

    generation: int
    member_id: str
    leader_id: str
    protocol: str
    data: bytes

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader_id


@dataclass(frozen=True)
class Assigned:
    assignment: Assignment


@dataclass(frozen=True)
class Revoked:
    """The assignment is no longer valid. `lost`: the member was removed (session expired,
    fenced generation, coordinator gone past the session) rather than rebalancing on its own
    terms -- Kafka's onPartitionsLost versus onPartitionsRevoked."""

    assignment: Assignment
    reason: str
    lost: bool


@dataclass(frozen=True)
class Fatal:
    error: MembershipError


Event = Assigned | Revoked | Fatal


@dataclass(eq=False)
class Request:
    """A request the driver sends: `to_coordinator` False means any bootstrap broker.
    `sent_at` is when `next_request` handed it out (the lease counts from it)."""

    api_key: int
    body: dict[str, Any]
    timeout: float
    to_coordinator: bool = True
    generation: int = -1
    sent_at: float = 0.0


class State(enum.Enum):
    UNJOINED = "unjoined"  # needs to (re)join; the coordinator may be unknown
    JOINING = "joining"  # JoinGroup in flight
    SYNCING = "syncing"  # SyncGroup to send or in flight
    STABLE = "stable"  # assignment held, heartbeating
    FAILED = "failed"  # a fatal error; nothing more is sent
    CLOSED = "closed"


@dataclass
class Settings:
    """The member's settings, in Kafka's names where Kafka has one (docs/membership.md)."""

    group_id: str
    protocol_type: str
    session_timeout_ms: int = 45_000  # session.timeout.ms
    rebalance_timeout_ms: int = 300_000  # max.poll.interval.ms / rebalance.timeout.ms (Connect)
    heartbeat_interval_ms: int = 3_000  # heartbeat.interval.ms
    retry_backoff_ms: int = 100  # retry.backoff.ms
    request_timeout_ms: int = 30_000  # request.timeout.ms
    group_instance_id: str | None = None  # group.instance.id (static membership)
    client_id: str = "groupshift-membership"

    def check(self) -> None:
        if not self.group_id:
            raise ValueError("group_id must not be empty")
        if not self.protocol_type:
            raise ValueError("protocol_type must not be empty")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be lower than session_timeout_ms")
        if self.group_instance_id is not None and not self.group_instance_id:
            raise ValueError("group_instance_id must not be empty (None: a dynamic member)")


class MemberSettings(Protocol):
    """The settings every member core and its driver read (Kafka's names)."""

    @property
    def group_id(self) -> str: ...

    @property
    def client_id(self) -> str: ...

    @property
    def retry_backoff_ms(self) -> int: ...

    @property
    def request_timeout_ms(self) -> int: ...

    @property
    def group_instance_id(self) -> str | None: ...


class SentRequest(Protocol):
    sent_at: float


RequestT = TypeVar("RequestT", bound=SentRequest)
EventT = TypeVar("EventT")


class MemberCoreSteps(Generic[RequestT, EventT]):
    """What every sans-IO member core does alike, whatever its protocol (this module's classic
    member, `consumer_membership.core`'s KIP-848 one): one request in flight at a time, a
    backoff before the next, events queued for the driver, a fatal failure the driver saw. A
    core is a dataclass with these attributes; its `State` has FAILED and CLOSED."""

    settings: MemberSettings
    state: enum.Enum
    _in_flight: RequestT | None
    _not_before: float
    _events: list[EventT]

    @property
    def backoff(self) -> float:
        return self.settings.retry_backoff_ms / 1000

    @property
    def timeout(self) -> float:
        return self.settings.request_timeout_ms / 1000

    @property
    def is_static(self) -> bool:
        return self.settings.group_instance_id is not None

    @property
    def stopped(self) -> bool:
        """Failed or closed: nothing more is sent (the driver's loop ends)."""
        return self.state.name in ("FAILED", "CLOSED")

    @property
    def closed(self) -> bool:
        return self.state.name == "CLOSED"

    def events(self) -> list[EventT]:
        out, self._events = self._events, []
        return out

    def _held_back(self, now: float) -> bool:
        """Nothing may be sent now: a request is in flight, the member stopped, or the backoff
        runs."""
        return self._in_flight is not None or self.stopped or now < self._not_before

    def _send(self, request: RequestT, now: float) -> RequestT:
        request.sent_at = now
        self._in_flight = request
        return request

    def fail(self, message: str, code: int = 0) -> None:
        """A fatal failure the driver saw (refused credentials, no common API version)."""
        self._in_flight = None
        self._fail(message, code)

    def _fail(self, message: str, code: int = 0) -> None:
        raise NotImplementedError


@dataclass
class MembershipCore(MemberCoreSteps[Request, Event]):
    settings: Settings
    protocols: Callable[[], Sequence[tuple[str, bytes]]]
    assignor: Assignor
    state: State = State.UNJOINED
    coordinator: tuple[int, str, int] | None = None
    member_id: str = ""
    generation: int = -1
    assignment: Assignment | None = None
    lease_deadline: float = 0.0
    rejoin_reason: str = "first join"
    _in_flight: Request | None = None
    _not_before: float = 0.0  # backoff: no request before this
    _next_heartbeat: float = 0.0
    _last_heartbeat_ok: float = 0.0
    _offered: tuple[str, ...] = ()
    _pending_sync: dict[str, Any] | None = None
    _leader: str = ""
    _protocol: str = ""
    _events: list[Event] = field(default_factory=list)
    log: EventLog = field(default_factory=StdlibEventLog)

    def __post_init__(self) -> None:
        self.settings.check()

    # -- derived values --------------------------------------------------------------------

    @property
    def session(self) -> float:
        return self.settings.session_timeout_ms / 1000

    @property
    def interval(self) -> float:
        return self.settings.heartbeat_interval_ms / 1000

    # -- the driver's questions ------------------------------------------------------------

    def next_request(self, now: float) -> Request | None:
        """The request to send now, or None (then sleep until `wakeup(now)` or an answer)."""
        if self._held_back(now):
            return None
        if self.coordinator is None:
            return self._send(
                Request(
                    FIND_COORDINATOR,
                    find_coordinator_body(self.settings.group_id),
                    self.settings.request_timeout_ms / 1000,
                    to_coordinator=False,
                ),
                now,
            )
        if self.state is State.UNJOINED:
            return self._send(self._join_request(), now)
        if self.state is State.SYNCING and self._pending_sync is not None:
            return self._send(
                Request(
                    SYNC_GROUP,
                    self._pending_sync,
                    self.settings.request_timeout_ms / 1000,
                    generation=self.generation,
                ),
                now,
            )
        if self.state is State.STABLE:
            if now - self._last_heartbeat_ok > self.session:
                # No heartbeat succeeded for a whole session (Kafka's "session timed out
                # without receiving a heartbeat response"): the coordinator is unreachable or
                # not ours any more; look for it again, the next heartbeat will tell.
                self._lose_coordinator("no successful heartbeat within the session timeout")
                return self.next_request(now)
            if now >= self._next_heartbeat:
                return self._send(
                    Request(
                        HEARTBEAT,
                        {
                            "group_id": self.settings.group_id,
                            "generation_id": self.generation,
                            "member_id": self.member_id,
                            "group_instance_id": self.settings.group_instance_id,
                        },
                        min(self.settings.request_timeout_ms / 1000, self.session),
                        generation=self.generation,
                    ),
                    now,
                )
        return None

    def wakeup(self, now: float) -> float:
        """When `next_request` may next have something, if no answer arrives before."""
        if self.state is State.STABLE and self._in_flight is None:
            return max(self._not_before, self._next_heartbeat)
        return max(self._not_before, now + self.interval)

    def _join_request(self) -> Request:
        offered = list(self.protocols())
        if not offered:
            raise ValueError("a member must offer at least one protocol")
        self._offered = tuple(name for name, _ in offered)
        self.state = State.JOINING
        return Request(
            JOIN_GROUP,
            {
                "group_id": self.settings.group_id,
                "session_timeout": self.settings.session_timeout_ms,
                "rebalance_timeout": self.settings.rebalance_timeout_ms,
                "member_id": self.member_id,
                "group_instance_id": self.settings.group_instance_id,
                "protocol_type": self.settings.protocol_type,
                "protocols": [{"name": n, "metadata": m} for n, m in offered],
                "reason": self.rejoin_reason,
            },
            # A JoinGroup waits for the whole rebalance (Kafka's client allows rebalance
            # timeout + 5 s before it gives up on the answer).
            self.settings.rebalance_timeout_ms / 1000 + 5.0,
        )

    # -- the application's requests --------------------------------------------------------

    def request_rejoin(self, reason: str) -> None:
        """Leave the current generation at the next step and join again (the application's
        metadata changed, or it dropped what it was given)."""
        if self.state is State.STABLE:
            self._revoke(reason, lost=False)
            self.state = State.UNJOINED
            self.rejoin_reason = reason

    def restart(self, reason: str) -> None:
        """Start over as a new member after a fatal error (for a supervisor that must keep
        trying, such as groupshift's fleet): what was held is lost."""
        if self.state is State.CLOSED:
            return
        self._revoke(reason, lost=True)
        self.state = State.UNJOINED
        self.member_id = ""
        self.generation = -1
        self.coordinator = None
        self._in_flight = None
        self._pending_sync = None
        self.rejoin_reason = reason

    def close(self) -> Request | None:
        """Stop; the LeaveGroup to send (dynamic members with a member id and a known
        coordinator, as Kafka's clients do), or None."""
        if self.state is State.CLOSED:
            return None
        if self.assignment is not None:
            self._revoke("closing", lost=False)
        leave = None
        if (
            not self.is_static
            and self.member_id
            and self.coordinator is not None
            and self.state is not State.FAILED
        ):
            leave = Request(
                LEAVE_GROUP,
                {
                    "group_id": self.settings.group_id,
                    "member_id": self.member_id,
                    "members": [
                        {"member_id": self.member_id, "group_instance_id": None, "reason": "closing"}
                    ],
                },
                self.settings.request_timeout_ms / 1000,
            )
        self.state = State.CLOSED
        self._in_flight = None
        return leave

    # -- answers ---------------------------------------------------------------------------

    def on_failure(self, request: Request, now: float, reason: str) -> None:
        """The request got no answer (connection refused, closed, timed out): the coordinator
        is unknown again; the membership is kept (its session may still be alive)."""
        if request is not self._in_flight:
            return
        self._in_flight = None
        self.log.info(
            "membership.request_failed", group=self.settings.group_id, api=request.api_key, reason=reason
        )
        self._not_before = now + self.backoff
        if request.api_key == FIND_COORDINATOR:
            return
        if request.api_key == JOIN_GROUP:
            self.state = State.UNJOINED
        if request.api_key == SYNC_GROUP:
            self.state = State.UNJOINED
        self._lose_coordinator(reason)

    def on_response(self, request: Request, response: Any, now: float) -> None:
        if request is not self._in_flight:
            return  # an answer the state machine no longer waits for (after close)
        self._in_flight = None
        code = int(getattr(response, "error_code", 0) or 0)
        if code != NONE:
            self.log.info(
                "membership.error_answer",
                group=self.settings.group_id,
                api=request.api_key,
                error=error_name(code),
                generation=self.generation,
            )
        handler = {
            FIND_COORDINATOR: self._on_find_coordinator,
            JOIN_GROUP: self._on_join,
            SYNC_GROUP: self._on_sync,
            HEARTBEAT: self._on_heartbeat,
        }[request.api_key]
        handler(request, response, now)

    def _fail(self, message: str, code: int = 0) -> None:
        if self.assignment is not None:
            self._revoke(message, lost=True)
        self.state = State.FAILED
        self._events.append(Fatal(MembershipError(message, code)))

    def _lose_coordinator(self, reason: str) -> None:
        if self.coordinator is not None:
            self.log.info("membership.coordinator_lost", group=self.settings.group_id, reason=reason)
        self.coordinator = None

    def _renew(self, sent: float) -> None:
        """A successful answer to a request sent at `sent`: the coordinator cannot have removed
        this member before sent + session timeout. One heartbeat interval less is the lease the
        application may rely on (docs/membership.md, "The lease")."""
        self.lease_deadline = max(self.lease_deadline, sent + self.session - self.interval)

    def _revoke(self, reason: str, *, lost: bool) -> None:
        if self.assignment is not None:
            self._events.append(Revoked(self.assignment, reason, lost))
            self.assignment = None

    def _reset(self, reason: str, *, keep_member_id: bool = False) -> None:
        """Kafka's reset on a response error: forget the generation and, unless the error was
        ILLEGAL_GENERATION (the member id is still the group's), the member id; join again."""
        self.log.warning(
            "membership.member_reset", group=self.settings.group_id, generation=self.generation, reason=reason
        )
        self._revoke(reason, lost=True)
        if not keep_member_id:
            self.member_id = ""
        self.generation = -1
        self.state = State.UNJOINED
        self.rejoin_reason = reason

    def _on_find_coordinator(self, request: Request, response: Any, now: float) -> None:
        code, coordinator = read_find_coordinator(response)
        if code == GROUP_AUTHORIZATION_FAILED:
            self._fail(f"not authorized to use group {self.settings.group_id!r}", code)
            return
        if coordinator is None:
            self.log.info("membership.no_coordinator", group=self.settings.group_id, error=error_name(code))
            self._not_before = now + self.backoff
            return
        self.coordinator = coordinator
        self._last_heartbeat_ok = now  # the session timer starts again with the coordinator

    def _on_join(self, request: Request, r: Any, now: float) -> None:
        code = int(r.error_code)
        if code == NONE:
            self.member_id = str(r.member_id)
            self.generation = int(r.generation_id)
            protocol = str(r.protocol_name or "")
            if getattr(r, "protocol_type", None) not in (None, self.settings.protocol_type):
                self._fail(
                    f"the group's protocol type is {r.protocol_type!r}, not {self.settings.protocol_type!r}",
                    INCONSISTENT_GROUP_PROTOCOL,
                )
                return
            if protocol not in self._offered:
                self._fail(
                    f"the coordinator chose protocol {protocol!r}, not one offered",
                    INCONSISTENT_GROUP_PROTOCOL,
                )
                return
            self._renew(request.sent_at)
            assignments: list[dict[str, Any]] = []
            leader = str(r.leader)
            if leader == self.member_id and not getattr(r, "skip_assignment", False):
                members = tuple(
                    Member(str(m.member_id), m.group_instance_id, bytes(m.metadata)) for m in r.members
                )
                joined = GroupJoined(self.generation, protocol, leader, self.member_id, members)
                try:
                    plan = self.assignor(joined)
                    assignments = [
                        {"member_id": m, "assignment": bytes(plan.get(m, b""))}
                        for m in sorted({x.member_id for x in members})
                    ]
                except Exception as exc:  # the plug-in failed: fatal, as in Kafka's client
                    self.log.error("membership.assignor_failed", group=self.settings.group_id, exc_info=exc)
                    self._fail(f"the leader's assignor raised {exc!r}")
                    return
            self._pending_sync = {
                "group_id": self.settings.group_id,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": self.settings.group_instance_id,
                "protocol_type": self.settings.protocol_type,
                "protocol_name": protocol,
                "assignments": assignments,
            }
            self._leader = leader
            self._protocol = protocol
            self.state = State.SYNCING
            return
        self.state = State.UNJOINED
        if code == MEMBER_ID_REQUIRED:  # KIP-394: join again, now with the id given
            self.member_id = str(r.member_id)
            self.rejoin_reason = "member id required"
            return
        if code == UNKNOWN_MEMBER_ID:  # join again at once, as a new member
            self._reset(f"JoinGroup: {error_name(code)}")
            return
        if code in REDISCOVER:
            self._lose_coordinator(f"JoinGroup: {error_name(code)}")
            self._not_before = now + self.backoff
            return
        if code in (COORDINATOR_LOAD_IN_PROGRESS, REBALANCE_IN_PROGRESS, UNKNOWN_SERVER_ERROR):
            self._not_before = now + self.backoff
            return
        if code == FENCED_INSTANCE_ID:
            self._fail(
                f"group.instance.id {self.settings.group_instance_id!r} is used by another member "
                "(this one was fenced)",
                code,
            )
            return
        self._fail(
            f"JoinGroup failed: {error_name(code)} {getattr(r, 'error_message', '') or ''}".strip(), code
        )

    def _on_sync(self, request: Request, r: Any, now: float) -> None:
        code = int(r.error_code)
        self._pending_sync = None
        if code == NONE:
            if getattr(r, "protocol_type", None) not in (None, self.settings.protocol_type):
                self._fail(
                    f"SyncGroup answered protocol type {r.protocol_type!r}", INCONSISTENT_GROUP_PROTOCOL
                )
                return
            if getattr(r, "protocol_name", None) not in (None, self._protocol):
                self._fail(
                    f"SyncGroup answered protocol {r.protocol_name!r}, JoinGroup chose {self._protocol!r}",
                    INCONSISTENT_GROUP_PROTOCOL,
                )
                return
            self._renew(request.sent_at)
            self.assignment = Assignment(
                self.generation, self.member_id, self._leader, self._protocol, bytes(r.assignment or b"")
            )
            self.state = State.STABLE
            self._last_heartbeat_ok = now
            self._next_heartbeat = now + self.interval
            self.rejoin_reason = ""
            self._events.append(Assigned(self.assignment))
            return
        self.state = State.UNJOINED
        if code == REBALANCE_IN_PROGRESS:  # another rebalance began: join it, same member id
            self.rejoin_reason = "rebalance in progress during SyncGroup"
            return
        self._after_error("SyncGroup", code, now, backoff_after_reset=True)

    def _on_heartbeat(self, request: Request, r: Any, now: float) -> None:
        if self.state is not State.STABLE or request.generation != self.generation:
            return  # an answer about a generation already left
        code = int(r.error_code)
        self._next_heartbeat = now + self.interval
        if code == NONE:
            self._renew(request.sent_at)
            self._last_heartbeat_ok = now
            return
        if code == REBALANCE_IN_PROGRESS:
            # Still a member (the coordinator answered this generation): revoke, then join.
            self._renew(request.sent_at)
            self._revoke("rebalance in progress", lost=False)
            self.state = State.UNJOINED
            self.rejoin_reason = "rebalance in progress"
            return
        self._after_error("Heartbeat", code, now, backoff_after_reset=False)

    def _after_error(self, api: str, code: int, now: float, *, backoff_after_reset: bool) -> None:
        """What SyncGroup and Heartbeat errors share (Kafka's AbstractCoordinator handles both
        the same way): a lost generation resets the member (ILLEGAL_GENERATION keeps its id), a
        lost coordinator is looked up again after the backoff, a loading or failing coordinator
        is asked again after it, a fenced static member and anything else end the membership."""
        if code in RESET:
            self._reset(f"{api}: {error_name(code)}", keep_member_id=code == ILLEGAL_GENERATION)
            if backoff_after_reset:
                self._not_before = now + self.backoff
            return
        if code in REDISCOVER:
            self._lose_coordinator(f"{api}: {error_name(code)}")
            self._not_before = now + self.backoff
            return
        if code in (COORDINATOR_LOAD_IN_PROGRESS, UNKNOWN_SERVER_ERROR):
            self._not_before = now + self.backoff
            return
        if code == FENCED_INSTANCE_ID:
            self._fail(f"group.instance.id {self.settings.group_instance_id!r} was fenced", code)
            return
        self._fail(f"{api} failed: {error_name(code)}", code)
