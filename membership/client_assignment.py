"""The member-side steps of groupshift's client-side assignment extension, for any member that
computes its group's target: the KIP-848 consumer member (`consumer_membership.core`) and the
Connect worker (`connect_worker.core`).

The extension (docs/client-side-assignors.md, docs/connect-groups.md): a heartbeat response asks
one member to compute the target for a group epoch; that member reads the group with a
PrepareAssignment request, runs the assignor the coordinator chose and installs the result with
an InstallAssignment request, or installs an error when the assignor raises (the group keeps its
current target). An install the coordinator refuses as invalid is sent again as an error, so the
group does not wait on this member; any other refusal (a stale epoch, a moved coordinator) drops
the computation and lets the next heartbeat say what is current. The heartbeat's error handling
(rejoin when fenced, rediscover, retry, fail) is the same for both members, and so is the lookup
of the coordinator. The two cores differ in their requests, their assignor's view of the group
and their events; they parameterize these steps with those.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from membership.core import (
    COORDINATOR_LOAD_IN_PROGRESS,
    FIND_COORDINATOR,
    GROUP_AUTHORIZATION_FAILED,
    NONE,
    REDISCOVER,
    UNKNOWN_MEMBER_ID,
    UNKNOWN_SERVER_ERROR,
    EventT,
    MemberCoreSteps,
    error_name,
    read_find_coordinator,
)
from membership.event_log import EventLog
from protocol import extension_wire as ew

FENCED_MEMBER_EPOCH = int(ErrorCode.fenced_member_epoch)
INVALID_REQUEST = int(ErrorCode.invalid_request)
RETRY = frozenset({COORDINATOR_LOAD_IN_PROGRESS, UNKNOWN_SERVER_ERROR})
# The member's epoch is no longer the group's: it gives up what it holds (lost) and rejoins at
# epoch 0 with the same member id (KIP-848; KIP-1082 keeps the id for the member's life).
REJOIN = frozenset({FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID})


class ClientAssignorError(Exception):
    """An assignor's own refusal to compute: `code` (≠ 0) is the install's error, and the group
    keeps its current target. Each package's assignor error derives from it."""

    code: int


class OfferedAssignor(Protocol):
    """What a member says of each client assignor it offers (both packages' assignor bases)."""

    @property
    def name(self) -> str: ...

    @property
    def minimum_version(self) -> int: ...

    @property
    def maximum_version(self) -> int: ...

    @property
    def metadata_version(self) -> int: ...

    def metadata(self) -> bytes: ...

    def check(self) -> None: ...


def check_assignors(assignors: Sequence[OfferedAssignor]) -> None:
    """Each assignor's own settings are valid and no two share a name (the coordinator
    chooses one by name)."""
    names = [a.name for a in assignors]
    for a in assignors:
        a.check()
    if len(set(names)) != len(names):
        raise ValueError(f"assignor names repeat: {names}")


def wire_assignors(assignors: Sequence[OfferedAssignor]) -> tuple[ew.WireAssignor, ...]:
    """The heartbeat's assignor list: each assignor's versions and its current metadata."""
    return tuple(
        ew.WireAssignor(a.name, a.minimum_version, a.maximum_version, 0, a.metadata_version, a.metadata())
        for a in assignors
    )


class KeyedRequest(Protocol):
    api_key: int
    sent_at: float


class InstallRequest(Protocol):
    """The fields both InstallAssignment requests share (each is a frozen dataclass)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def group_id(self) -> str: ...

    @property
    def member_id(self) -> str: ...

    @property
    def member_epoch(self) -> int: ...

    @property
    def group_epoch(self) -> int: ...

    @property
    def error(self) -> int: ...


class StepAnswer(Protocol):
    """A PrepareAssignment or InstallAssignment response's outcome."""

    @property
    def error_code(self) -> int: ...

    @property
    def error_message(self) -> str | None: ...


KeyedRequestT = TypeVar("KeyedRequestT", bound=KeyedRequest)
InstallT = TypeVar("InstallT", bound=InstallRequest)
MemberT = TypeVar("MemberT")


@dataclass
class Computation(Generic[InstallT]):
    """One compute request being served: prepared, then the install (`install`) to send."""

    epoch: int
    install: InstallT | None = None


class ClientAssignmentSteps(MemberCoreSteps[KeyedRequestT, EventT], Generic[KeyedRequestT, EventT, InstallT]):
    """What a client-side-assignor member core does alike (see the module). A core is a
    dataclass with these attributes and hooks; `EVENT_PREFIX` names its log events."""

    EVENT_PREFIX: ClassVar[str]
    ASSIGNOR_FAILED: ClassVar[int]  # the install's error when the assignor raises anything else
    ASSIGNOR_ERROR: ClassVar[type[ClientAssignorError]]

    coordinator: tuple[int, str, int] | None
    member_id: str
    epoch: int
    heartbeat_interval: float
    log: EventLog
    _next_heartbeat: float
    _computation: Computation[InstallT] | None
    _done_epoch: int  # the last epoch this member installed (or failed) for
    _joined: bool  # the coordinator answered this membership's join

    # -- hooks -----------------------------------------------------------------------------

    def _forget_acknowledged(self) -> None:
        """The next heartbeat is a full one (the coordinator may not know this member's state)."""
        raise NotImplementedError

    def _heartbeat_due(self, now: float) -> bool:
        raise NotImplementedError

    def _revoke(self, *, lost: bool) -> None:
        raise NotImplementedError

    def _computed(self, group_epoch: int, error: int, installed: bool, message: str = "") -> EventT:
        raise NotImplementedError

    def _joined_event(self) -> EventT:
        raise NotImplementedError

    def _recover_from_failure(self, request: KeyedRequestT) -> bool:
        """A failed request the core handles itself (True); by default none."""
        return False

    # -- shared steps ----------------------------------------------------------------------

    def wakeup(self, now: float) -> float:
        """When `next_request` may next have something, if no answer arrives before."""
        if self._in_flight is None and self.coordinator is not None:
            if self._computation is not None or self._heartbeat_due(-math.inf):
                return self._not_before  # held back only by the backoff
            return max(self._not_before, self._next_heartbeat)
        return max(self._not_before, now + max(self.backoff, 0.05))

    def _lose_coordinator(self) -> None:
        self.coordinator = None
        self._forget_acknowledged()

    def on_failure(self, request: KeyedRequestT, now: float, reason: str) -> None:
        """No answer: the coordinator is looked up again; the membership and what the member
        holds are kept (its session may be alive) and the next heartbeat is a full one."""
        if request is not self._in_flight:
            return
        self._in_flight = None
        self.log.info(f"{self.EVENT_PREFIX}.request_failed", api=request.api_key, reason=reason)
        self._not_before = now + self.backoff
        if self._recover_from_failure(request):
            return
        if request.api_key != FIND_COORDINATOR:
            self._lose_coordinator()
            self._computation = None

    def _on_find_coordinator(self, response: Any, now: float) -> None:
        code, coordinator = read_find_coordinator(response)
        if code == GROUP_AUTHORIZATION_FAILED:
            self._fail(f"not authorized to use group {self.settings.group_id!r}", code)
            return
        if coordinator is None:
            self._not_before = now + self.backoff
            return
        self.coordinator = coordinator

    def _on_heartbeat_error(self, api: str, code: int, message: str | None, now: float) -> None:
        self.log.info(
            f"{self.EVENT_PREFIX}.heartbeat_error",
            group=self.settings.group_id,
            error=error_name(code),
            message=message,
        )
        if code in REJOIN:
            self._revoke(lost=True)
            self._joined = False
            self.epoch = 0
            self.state = type(self.state)["JOINING"]
            self._forget_acknowledged()
            self._computation = None
            # A new membership: the group may be another one by now (converted to classic and
            # back, or deleted and created again), whose epochs start lower.
            self._done_epoch = -1
            return
        if code in REDISCOVER:
            self._lose_coordinator()
            self._not_before = now + self.backoff
            return
        if code in RETRY:
            self._not_before = now + self.backoff
            return
        self._fail(f"{api} failed: {error_name(code)} {message or ''}".strip(), code)

    def _heartbeat_accepted(self, member_id: str | None, interval: float, epoch: int, now: float) -> None:
        """A heartbeat answered without error: the member's id (when the coordinator gives one),
        the next heartbeat's time and the member's epoch; the first answer of a membership is
        its join."""
        if member_id:
            self.member_id = member_id
        self.heartbeat_interval = interval
        self._next_heartbeat = now + interval
        self.epoch = epoch
        self.state = type(self.state)["STABLE" if epoch > 0 else "JOINING"]
        if not self._joined:
            self._joined = True
            self._events.append(self._joined_event())

    def _wants_computation(self, epoch: int | None) -> bool:
        """A heartbeat asked for the target of `epoch`, newer than done and not being served."""
        return (
            epoch is not None
            and epoch > self._done_epoch
            and (self._computation is None or self._computation.epoch != epoch)
        )

    def _prepare_refused(self, r: StepAnswer, now: float) -> None:
        self.log.info(
            f"{self.EVENT_PREFIX}.prepare_refused",
            group=self.settings.group_id,
            error=error_name(r.error_code),
            message=r.error_message,
        )
        self._computation = None  # not (or no longer) this member's to compute; asked again if so
        if r.error_code in REDISCOVER:
            self._lose_coordinator()
        self._not_before = now + self.backoff

    def _install_of(
        self,
        group_epoch: int,
        assign: Callable[[], tuple[MemberT, ...]],
        install: Callable[[str, str, int, int, int, tuple[MemberT, ...]], InstallT],
    ) -> InstallT:
        """Run the assignor (`assign`: the installed members) and build the install to send: the
        plan, or the assignor's error (the group keeps its target; a plug-in's failure is not
        fatal to the member)."""
        group_id, event = self.settings.group_id, f"{self.EVENT_PREFIX}.assignor_failed"
        error, members = 0, tuple[MemberT, ...]()
        try:
            members = assign()
        except self.ASSIGNOR_ERROR as exc:
            error = exc.code
            self.log.warning(
                f"{self.EVENT_PREFIX}.assignor_failed", group=self.settings.group_id, error=str(exc)
            )
        except Exception as exc:
            error = self.ASSIGNOR_FAILED
            self.log.error(event, group=group_id, exc_info=exc)
        return install(
            self.settings.group_id,
            self.member_id,
            self.epoch,
            group_epoch,
            error,
            members if not error else (),
        )

    def _on_install(self, r: StepAnswer, now: float) -> None:
        c = self._computation
        if c is None or c.install is None:
            return
        self._computation = None
        epoch, error = c.install.group_epoch, c.install.error
        if r.error_code == NONE:
            self._done_epoch = max(self._done_epoch, epoch)
            self._events.append(self._computed(epoch, error, True))
            self._next_heartbeat = now  # the new target reaches this member at once
            return
        message = f"{error_name(r.error_code)} {r.error_message or ''}".strip()
        self._events.append(self._computed(epoch, error, False, message))
        if r.error_code == INVALID_REQUEST and error == 0:
            # The assignor produced a plan the coordinator refuses: report it as the assignor's
            # error, so the group keeps its target instead of waiting on this member.
            retry = dataclasses.replace(c.install, error=self.ASSIGNOR_FAILED, members=())
            self._computation = dataclasses.replace(c, epoch=epoch, install=retry)
            return
        if r.error_code in REDISCOVER:
            self._lose_coordinator()
        # REBALANCE_IN_PROGRESS: computed for an older epoch; the next heartbeat asks for the
        # current one. STALE_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: no longer this member's to do.
        self._next_heartbeat = now
