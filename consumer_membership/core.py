"""The sans-IO state machine of one member of a KIP-848 consumer group with client-side assignors.

KIP-848's member side ("Consumer Group Heartbeat", "Reconciliation", "Client-Side Assignor"):
find the coordinator, join with ConsumerGroupHeartbeat (epoch 0), heartbeat every interval the
coordinator gives, reconcile towards the assignment each response carries (revoke what is gone,
then take what is new, then tell the coordinator in the next heartbeat), leave with epoch -1 (-2
for a static member). The member lists its client assignors in the heartbeat's tag 10000
(docs/client-side-assignors.md); when a response carries COMPUTE_ASSIGNMENT (tag 10000) it reads
the group with ConsumerGroupPrepareAssignment, runs the assignor the coordinator chose and
installs the result with ConsumerGroupInstallAssignment (an assignor that raises installs an
error: the group keeps its current target).

Like `membership.core` (whose coordinator lookup, error names and fatal error it shares),
nothing here touches a socket, clock or loop: the driver (`consumer_membership.client`, on
`membership.driver`) asks `next_request(now)`, hands back the answer (`on_response`)
or the failure (`on_failure`), sleeps until `wakeup(now)` and drains `events()`. One request is
in flight at a time; a computation goes before a due heartbeat, and the acknowledgement of a
reconciliation goes at once.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from consumer_membership.assignor import (
    ASSIGNOR_FAILED,
    Assignor,
    AssignorError,
    GroupState,
    MemberInfo,
    TopicInfo,
)
from membership.client_assignment import ClientAssignmentSteps, Computation, check_assignors, wire_assignors
from membership.core import FIND_COORDINATOR as FIND_COORDINATOR
from membership.core import NONE, MembershipError, find_coordinator_body
from membership.event_log import EventLog, StdlibEventLog
from protocol import client_assignment_wire as caw

METADATA = 3
CONSUMER_GROUP_HEARTBEAT = caw.CONSUMER_GROUP_HEARTBEAT_KEY
PREPARE_ASSIGNMENT = caw.PREPARE_ASSIGNMENT_KEY
INSTALL_ASSIGNMENT = caw.INSTALL_ASSIGNMENT_KEY

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

STALE_MEMBER_EPOCH = int(ErrorCode.stale_member_epoch)
GROUP_ID_NOT_FOUND = int(ErrorCode.group_id_not_found)


class ConsumerMembershipError(MembershipError):
    """A fatal error: the member stops (`code`: Kafka's error code, 0 for a local failure)."""


TopicPartition = tuple[uuid.UUID, int]


@dataclass(frozen=True)
class Assigned:
    """Partitions this member now owns in addition to what it owned (`epoch`: its new epoch)."""

    partitions: frozenset[TopicPartition]
    epoch: int


@dataclass(frozen=True)
class Joined:
    """The coordinator accepted this member's (re)join: it is in the group (at `epoch`, 0 until
    a target including it is installed)."""

    member_id: str
    epoch: int


@dataclass(frozen=True)
class Revoked:
    """Partitions this member gave up. `lost`: it was fenced or left the group's view (Kafka's
    onPartitionsLost) rather than asked to hand them over."""

    partitions: frozenset[TopicPartition]
    lost: bool


@dataclass(frozen=True)
class Computed:
    """This member computed the group's target for `group_epoch` (`error`: the assignor's error
    code, 0 on success; `installed`: the coordinator accepted it)."""

    group_epoch: int
    error: int
    installed: bool
    message: str = ""


@dataclass(frozen=True)
class Fatal:
    error: ConsumerMembershipError


Event = Joined | Assigned | Revoked | Computed | Fatal


@dataclass(frozen=True)
class HeartbeatAnswer:
    """A decoded ConsumerGroupHeartbeat response: kio's body plus groupshift's tags."""

    response: Any
    compute_epoch: int | None
    assignment_metadata: tuple[int, bytes] | None


@dataclass(eq=False)
class Request:
    """What the driver sends. `body` is a kio field dict (FindCoordinator, Metadata,
    ConsumerGroupHeartbeat: then `assignors` is the tag's content, None for absent) or a
    `protocol.client_assignment_wire` request (the extension APIs)."""

    api_key: int
    body: Any
    timeout: float
    to_coordinator: bool = True
    assignors: tuple[caw.WireClientAssignor, ...] | None = None
    owned: frozenset[TopicPartition] = frozenset()  # what a heartbeat tells the coordinator
    sent_at: float = 0.0


class State(enum.Enum):
    JOINING = "joining"  # epoch 0: every heartbeat is a (re)join
    STABLE = "stable"  # an epoch, heartbeating
    FAILED = "failed"
    CLOSED = "closed"


@dataclass
class Settings:
    """The member's settings, in Kafka's names (docs/client-side-assignors.md, "The client")."""

    group_id: str
    topics: tuple[str, ...]
    rebalance_timeout_ms: int = 300_000  # max.poll.interval.ms
    retry_backoff_ms: int = 100  # retry.backoff.ms
    request_timeout_ms: int = 30_000  # request.timeout.ms
    group_instance_id: str | None = None  # group.instance.id
    rack_id: str | None = None  # client.rack
    client_id: str = "groupshift-consumer-membership"

    def check(self) -> None:
        if not self.group_id:
            raise ValueError("group_id must not be empty")
        if not self.topics:
            raise ValueError("subscribe to at least one topic")
        if self.group_instance_id is not None and not self.group_instance_id:
            raise ValueError("group_instance_id must not be empty (None: a dynamic member)")
        if self.rack_id is not None and not self.rack_id:
            raise ValueError("rack_id must not be empty (None: no rack)")


@dataclass
class _Computation(Computation[caw.InstallAssignmentRequest]):
    """One COMPUTE_ASSIGNMENT being served: prepare, then (maybe metadata), then install."""

    prepared: caw.PrepareAssignmentResponse | None = None
    needs_racks: bool = False


@dataclass
class ConsumerMembershipCore(ClientAssignmentSteps[Request, Event, caw.InstallAssignmentRequest]):
    EVENT_PREFIX = "consumer_membership"
    ASSIGNOR_FAILED = ASSIGNOR_FAILED
    ASSIGNOR_ERROR = AssignorError

    settings: Settings
    assignors: Sequence[Assignor]
    member_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    state: State = State.JOINING
    coordinator: tuple[int, str, int] | None = None
    epoch: int = 0
    owned: frozenset[TopicPartition] = frozenset()
    assignment_metadata: tuple[int, bytes] | None = None
    heartbeat_interval: float = 0.0
    log: EventLog = field(default_factory=StdlibEventLog)
    _in_flight: Request | None = None
    _not_before: float = 0.0
    _next_heartbeat: float = 0.0
    _sent: dict[str, Any] | None = None  # what the coordinator last acknowledged; None: send all
    _sent_assignors: tuple[caw.WireClientAssignor, ...] | None = None
    _computation: _Computation | None = None
    _done_epoch: int = -1  # the last epoch this member installed (or failed) for
    _joined: bool = False  # the coordinator answered this membership's join
    _events: list[Event] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.settings.check()
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
            if c.prepared is None:
                req = caw.PrepareAssignmentRequest(self.settings.group_id, self.member_id, self.epoch)
                return self._send(Request(PREPARE_ASSIGNMENT, req, self.timeout), now)
            if c.needs_racks:
                names = [t.topic_name for t in c.prepared.topics]
                body = {
                    "topics": [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names],
                    "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False,
                }
                return self._send(Request(METADATA, body, self.timeout, to_coordinator=False), now)
            if c.install is not None:
                return self._send(Request(INSTALL_ASSIGNMENT, c.install, self.timeout), now)
        if self._heartbeat_due(now):
            return self._send(self._heartbeat(), now)
        return None

    def _heartbeat_due(self, now: float) -> bool:
        return self._sent is None or now >= self._next_heartbeat or self._owned_changed()

    def _wire_assignors(self) -> tuple[caw.WireClientAssignor, ...]:
        return wire_assignors(self.assignors)

    def _owned_wire(self) -> list[dict[str, Any]]:
        by_topic: dict[uuid.UUID, list[int]] = {}
        for tid, p in self.owned:
            by_topic.setdefault(tid, []).append(p)
        return [
            {"topic_id": t, "partitions": sorted(ps)}
            for t, ps in sorted(by_topic.items(), key=lambda kv: str(kv[0]))
        ]

    def _owned_changed(self) -> bool:
        return self._sent is not None and self._sent.get("owned") != self.owned

    def _heartbeat(self) -> Request:
        """Kafka's member sends every field when it joins (and after an error), then only what
        changed; here, too (the client-assignor tag: absent when unchanged)."""
        full = self._sent is None or self.epoch == 0
        assignors = self._wire_assignors()
        body: dict[str, Any] = {
            "group_id": self.settings.group_id,
            "member_id": self.member_id,
            "member_epoch": self.epoch,
            "instance_id": self.settings.group_instance_id if full else None,
            "rack_id": self.settings.rack_id if full else None,
            "rebalance_timeout": self.settings.rebalance_timeout_ms if full else -1,
            "subscribed_topic_names": list(self.settings.topics) if full else None,
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": self._owned_wire() if full or self._owned_changed() else None,
        }
        if self.epoch == 0:
            body["topic_partitions"] = []
        send_assignors = assignors if full or assignors != self._sent_assignors else None
        return Request(
            CONSUMER_GROUP_HEARTBEAT, body, self.timeout, assignors=send_assignors, owned=self.owned
        )

    # -- the application's requests --------------------------------------------------------

    def close(self) -> Request | None:
        """Stop: what the member owns is revoked, and the leave heartbeat to send (epoch -1, or
        -2 for a static member), or None."""
        if self.state is State.CLOSED:
            return None
        self._revoke(lost=False)
        leave = None
        if self.coordinator is not None and self.state is not State.FAILED:
            leave = Request(
                CONSUMER_GROUP_HEARTBEAT,
                {
                    "group_id": self.settings.group_id,
                    "member_id": self.member_id,
                    "member_epoch": LEAVE_GROUP_STATIC_MEMBER_EPOCH
                    if self.is_static
                    else LEAVE_GROUP_MEMBER_EPOCH,
                    "instance_id": self.settings.group_instance_id,
                    "rack_id": None,
                    "rebalance_timeout": -1,
                    "subscribed_topic_names": None,
                    "subscribed_topic_regex": None,
                    "server_assignor": None,
                    "topic_partitions": None,
                },
                self.timeout,
            )
        self.state = State.CLOSED
        self._in_flight = None
        return leave

    # -- answers ---------------------------------------------------------------------------

    def _recover_from_failure(self, request: Request) -> bool:
        c = self._computation
        if request.api_key == METADATA and c is not None and c.prepared is not None:
            c.needs_racks = False
            self._compute(c, {})  # without racks rather than not at all
            return True
        return False

    def on_response(self, request: Request, response: Any, now: float) -> None:
        if request is not self._in_flight:
            return
        self._in_flight = None
        if request.api_key == FIND_COORDINATOR:
            self._on_find_coordinator(response, now)
        elif request.api_key == CONSUMER_GROUP_HEARTBEAT:
            assert isinstance(response, HeartbeatAnswer)
            self._on_heartbeat(request, response, now)
        elif request.api_key == PREPARE_ASSIGNMENT:
            self._on_prepare(response, now)
        elif request.api_key == METADATA:
            self._on_metadata(response)
        elif request.api_key == INSTALL_ASSIGNMENT:
            self._on_install(response, now)

    def _fail(self, message: str, code: int = 0) -> None:
        self._revoke(lost=True)
        self.state = State.FAILED
        self._events.append(Fatal(ConsumerMembershipError(message, code)))

    def _revoke(self, *, lost: bool) -> None:
        if self.owned:
            self._events.append(Revoked(self.owned, lost))
            self.owned = frozenset()

    def _forget_acknowledged(self) -> None:
        self._sent = None

    def _computed(self, group_epoch: int, error: int, installed: bool, message: str = "") -> Event:
        return Computed(group_epoch, error, installed, message)

    def _joined_event(self) -> Event:
        return Joined(self.member_id, self.epoch)

    def _on_heartbeat(self, request: Request, answer: HeartbeatAnswer, now: float) -> None:
        r = answer.response
        code = int(r.error_code)
        if code != NONE:
            self._on_heartbeat_error("ConsumerGroupHeartbeat", code, r.error_message, now)
            return
        self._sent = {"owned": request.owned}
        if request.assignors is not None:
            self._sent_assignors = request.assignors
        interval = r.heartbeat_interval  # kio: a timedelta
        seconds = interval.total_seconds() if hasattr(interval, "total_seconds") else int(interval) / 1000
        member_id = str(r.member_id) if r.member_id else None
        self._heartbeat_accepted(member_id, max(float(seconds), 0.0), int(r.member_epoch), now)
        if answer.assignment_metadata is not None:
            self.assignment_metadata = answer.assignment_metadata
        if r.assignment is not None:
            self._reconcile(r.assignment)
        epoch = answer.compute_epoch
        if self._wants_computation(epoch):
            assert epoch is not None
            self._computation = _Computation(epoch)

    def _reconcile(self, assignment: Any) -> None:
        """KIP-848 reconciliation: revoke what the new assignment drops, then take what it adds;
        the next heartbeat (sent at once) tells the coordinator what is owned."""
        target = frozenset((tp.topic_id, int(p)) for tp in assignment.topic_partitions for p in tp.partitions)
        revoked, added = self.owned - target, target - self.owned
        if revoked:
            self._events.append(Revoked(frozenset(revoked), lost=False))
        self.owned = target
        if added or not revoked:
            self._events.append(Assigned(frozenset(added), self.epoch))

    # -- a computation ------------------------------------------------------------------------

    def _on_prepare(self, r: caw.PrepareAssignmentResponse, now: float) -> None:
        c = self._computation
        if c is None:
            return
        if r.error_code != NONE:
            self._prepare_refused(r, now)
            return
        c.prepared = r
        assignor = self._assignor(r.assignor_name)
        c.needs_racks = assignor is not None and assignor.uses_partition_racks
        if not c.needs_racks:
            self._compute(c, {})

    def _on_metadata(self, r: Any) -> None:
        c = self._computation
        if c is None or c.prepared is None:
            return
        c.needs_racks = False
        racks = {int(b.node_id): b.rack for b in r.brokers}
        by_name: dict[str, tuple[frozenset[str], ...]] = {}
        for t in r.topics:
            if int(t.error_code) != NONE:
                continue
            parts = sorted(t.partitions, key=lambda p: int(p.partition_index))
            by_name[str(t.name)] = tuple(
                frozenset(rk for n in p.replica_nodes if (rk := racks.get(int(n))) is not None) for p in parts
            )
        self._compute(c, by_name)

    def _assignor(self, name: str) -> Assignor | None:
        return next((a for a in self.assignors if a.name == name), None)

    def _compute(self, c: _Computation, racks: Mapping[str, tuple[frozenset[str], ...]]) -> None:
        prepared = c.prepared
        assert prepared is not None
        assignor = self._assignor(prepared.assignor_name)
        topics = {
            t.topic_id: TopicInfo(
                t.topic_id,
                t.topic_name,
                t.num_partitions,
                racks.get(t.topic_name) if any(racks.get(t.topic_name, ())) else None,
            )
            for t in prepared.topics
        }
        group = GroupState(
            self.settings.group_id,
            prepared.group_epoch,
            prepared.assignor_name,
            tuple(
                MemberInfo(
                    m.member_id,
                    m.instance_id,
                    m.rack_id,
                    frozenset(m.subscribed_topic_ids),
                    m.metadata_version,
                    m.metadata,
                    {tp.topic_id: tuple(tp.partitions) for tp in m.target},
                    m.reason,
                )
                for m in prepared.members
            ),
            topics,
        )

        def assign() -> tuple[caw.InstalledMember, ...]:
            if assignor is None:
                raise AssignorError(
                    f"the coordinator chose assignor {prepared.assignor_name!r}, not one of this member's"
                )
            plan = assignor.assign(group)
            return tuple(
                caw.InstalledMember(
                    mid,
                    tuple(
                        caw.WireTopicPartitions(tid, tuple(sorted(ps)))
                        for tid, ps in sorted(a.partitions.items(), key=lambda kv: str(kv[0]))
                        if ps
                    ),
                    a.metadata_version,
                    a.metadata,
                )
                for mid, a in plan.items()
            )

        c.install = self._install_of(prepared.group_epoch, assign, caw.InstallAssignmentRequest)
