"""One coordinator shard: the engine's whole surface (Kafka `GroupCoordinatorShard`).

A shard owns the groups hashed to one `__consumer_offsets` partition, their offsets and timers,
and the metadata image they assign from. Its surface is small, like h11's: handle a request at
`now`, `expire(now)` due timers, `replay(record)`, and `append_completed` for operations whose
follow-up waits for their records to be durable.

Rules of this file:
* One way to change state. A request is checked, routed (`engine.routing.ROUTES` names the path
  and the operation's replay mode) and computed into an `Operation` by a handler that sees only
  `ShardState`; `commit` then journals the records and, only if the journal accepted them,
  applies the records (`engine.replay`), the group changes (a group created or replaced:
  `Operation.put_group`), the `after` actions and the timer changes. Nothing else here or in a handler changes
  a consumer group, the groups map, an offset or a timer.
* Two kinds of operations, as in Kafka: consumer groups, offsets and group deletion compute
  records from the current state and change state only by replaying them
  (`Operation(replay=True)`), so a restart and a live run cannot diverge; classic groups change
  in place and write a GroupMetadata snapshot (`replay=False`).
* A fired timer is a `TimerTask`, dispatched by kind through `engine.expiry.EXPIRY`.

Requests of one protocol that reach a group of the other type go to the `MigrationHooks`
(`engine.hooks`) in `ShardState.migration`; the translation layer installs its implementation.

Durability: the runtime installs `journal`, which appends an operation's records to the log
(without waiting for fsync) and raises `AppendError` when it cannot. The shard calls it before
applying anything, so a failed append leaves the state and the timers exactly as they were and
the client gets Kafka's mapped error (Kafka `CoordinatorRuntime`). Classic paths, which change
state in place, learn of the failure through their append continuation, as Kafka's append
futures do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from engine.binding import MEMBER, Key, Refused
from engine.classic import describe as classic_describe
from engine.classic.api import (
    DescribedGroup,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from engine.classic.group import ClassicGroup
from engine.classic.rebalance import prepare_rebalance, reschedule_heartbeat
from engine.classic.state import ClassicGroupState
from engine.classic.sync import PROTOCOL_FIELDS_REQUIRED_VERSION
from engine.config import CoordinatorConfig, GroupConfig
from engine.connect import assignment as connect_assignment
from engine.connect import describe as connect_describe
from engine.connect.group import ConnectGroup, WorkerState
from engine.consumer import client_assignment
from engine.consumer import describe as consumer_describe
from engine.consumer import heartbeat as cg_heartbeat
from engine.consumer.api import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    ListedGroup,
)
from engine.consumer.group import ConsumerGroup
from engine.consumer.member import MemberState
from engine.consumer.membership import schedule_rebalance_timeout, schedule_session_timeout
from engine.context import RequestContext
from engine.errors import AppendError, CoordinatorError, Errors, append_error_to_response
from engine.expiry import EXPIRY, RETRY_BACKOFF_MS, schedule_offset_expiration
from engine.hooks import MigrationHooks, RefuseMigration
from engine.ids import IdSource, SeededIds
from engine.metadata import EMPTY_IMAGE, MetadataImage
from engine.offsets import operations as offsets_ops
from engine.offsets import transactional as offsets_txn
from engine.offsets.api import (
    DeleteGroupResult,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchGroupRequest,
    OffsetFetchGroupResponse,
    PartitionResult,
    TopicResult,
)
from engine.offsets.store import OffsetAndMetadata, OffsetStore
from engine.operation import AppendContinuation, Operation
from engine.outcome import Outcome, Pending
from engine.replay import apply_group_changes, replay
from engine.routing import CONSUMER_ROUTES, ROUTES, kind_of
from engine.state import Group, ShardState
from engine.streams import describe as streams_describe
from engine.streams.api import StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse
from engine.streams.describe import DescribedStreamsGroup
from engine.streams.group import MemberState as StreamsMemberState
from engine.streams.group import StreamsGroup
from engine.timers import (
    TimerKind,
    Timers,
    TimerTask,
    apply_timer_changes,
)
from protocol import connect_wire as cw
from records.coordinator import CoordinatorRecord

S = ClassicGroupState

_NO_OP = Operation()  # stands for the operation of a request refused before it has one


# The checks of a request that do not depend on its group, run before the routing table as Kafka
# orders its errors: (request, request context, the shard's configuration).
Check = Callable[[Any, RequestContext, CoordinatorConfig], None]


def _check_group_id(req: Any, ctx: RequestContext, config: CoordinatorConfig) -> None:
    if not req.group_id:
        raise CoordinatorError(Errors.INVALID_GROUP_ID)


def _check_nothing(req: Any, ctx: RequestContext, config: CoordinatorConfig) -> None:
    """StreamsGroupHeartbeat's checks depend on nothing but the request and run in its handler
    (`engine.streams.heartbeat.validate`), where Kafka orders them."""


def _consumer_group_heartbeat_error(e: CoordinatorError) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(error_code=int(e.code), error_message=e.message)


def _check_join_group(req: JoinGroupRequest, ctx: RequestContext, config: CoordinatorConfig) -> None:
    if not req.group_id:
        raise CoordinatorError(Errors.INVALID_GROUP_ID)
    if not config.min_session_timeout_ms <= req.session_timeout_ms <= config.max_session_timeout_ms:
        raise CoordinatorError(Errors.INVALID_SESSION_TIMEOUT)
    if req.rebalance_timeout_ms < 0:
        req.rebalance_timeout_ms = req.session_timeout_ms  # JoinGroup v0 has none


def _check_sync_group(req: SyncGroupRequest, ctx: RequestContext, config: CoordinatorConfig) -> None:
    if not req.group_id:
        raise CoordinatorError(Errors.INVALID_GROUP_ID)
    if ctx.api_version >= PROTOCOL_FIELDS_REQUIRED_VERSION and (
        req.protocol_type is None or req.protocol_name is None
    ):
        raise CoordinatorError(Errors.INCONSISTENT_GROUP_PROTOCOL)


def _rejected(
    api: str,
    group_id: str,
    member_id: str,
    member_epoch: int | None,
    e: CoordinatorError,
    op: Operation,
    on_error: Callable[[CoordinatorError], Any],
) -> Outcome[Any]:
    """A request its handler refused: nothing of its operation is kept but the answers it gave
    parked requests, the events that explain the refusal, and a `request.rejected` event (with
    the member epoch for a ConsumerGroupHeartbeat)."""
    if type(e) is Refused:
        # Bound to another principal (`engine.binding`): one event, which the gateway audits.
        return Outcome(on_error(e), events=[e.event(api)])
    fields: dict[str, Any] = {"api": api, "group": group_id, "member": member_id}
    if member_epoch is not None:
        fields["member_epoch"] = member_epoch
    fields["error"] = e.code.name
    fields["reason"] = e.message
    # Parked requests the handler already answered before it refused (an upgrade tells a
    # rebalancing classic group's members to rejoin, then the joining member is refused
    # UNSUPPORTED_ASSIGNOR) keep their answers: the group no longer counts them as parked, and
    # Kafka's futures, completed in place, are not taken back by a later exception either.
    return Outcome(
        on_error(e), completions=op.completions, events=[*op.explanations, ("request.rejected", fields)]
    )


class Shard:
    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        ids: IdSource | None = None,
        image: MetadataImage | None = None,
        migration: Callable[[ShardState], MigrationHooks] | None = None,
    ) -> None:
        # What handlers see (config, clock, ids, image, groups, offsets, migration hooks). The
        # migration hooks are built here, from the state they work on, by the layer that
        # implements them (`translation.migration.Migration`); without them the engine refuses
        # every cross-protocol request, as Kafka does when no conversion is possible. They never
        # change afterwards.
        self.state = ShardState(
            config if config is not None else CoordinatorConfig(),
            ids if ids is not None else SeededIds(0),
            image if image is not None else EMPTY_IMAGE,
            RefuseMigration(),
        )
        if migration is not None:
            self.state.migration = migration(self.state)
        self.timers = Timers()
        # Replay anomalies tolerated on load (KAFKA-21117); the loader logs and clears them.
        self.replay_warnings: list[tuple[str, dict[str, Any]]] = []
        # Appends an operation's records (no fsync); raises AppendError. None: no log (tests).
        self.journal: Callable[[Sequence[CoordinatorRecord]], None] | None = None

    # --- the state, as the runtime, the loader and tests read it ----------------------------------

    @property
    def config(self) -> CoordinatorConfig:
        return self.state.config

    @property
    def ids(self) -> IdSource:
        return self.state.ids

    @property
    def image(self) -> MetadataImage:
        return self.state.image

    @property
    def groups(self) -> dict[str, Group]:
        return self.state.groups

    @property
    def offsets(self) -> OffsetStore:
        return self.state.offsets

    @property
    def group_configs(self) -> dict[str, GroupConfig]:
        return self.state.group_configs

    @property
    def now_ms(self) -> int:
        return self.state.now_ms

    @property
    def migration(self) -> MigrationHooks:
        return self.state.migration

    # --- time and configuration ---------------------------------------------------------------

    def tick(self, now_ms: int) -> int:
        """Advance the shard's clock (never backwards) and return it."""
        st = self.state
        if now_ms > st.now_ms:
            st.now_ms = now_ms
        return st.now_ms

    def consumer_session_timeout_ms(self, group_id: str) -> int:
        return self.state.consumer_session_timeout_ms(group_id)

    def consumer_heartbeat_interval_ms(self, group_id: str) -> int:
        return self.state.consumer_heartbeat_interval_ms(group_id)

    def _set_assignor_name(self, group_id: str) -> str | None:
        gc = self.state.group_configs.get(group_id)
        return None if gc is None else gc.streams_assignor_name

    def effective_group_config(self, group_id: str) -> dict[str, int | str]:
        """The KIP-848 group configs in force for `group_id` (its overrides, else the defaults)."""
        return {
            "consumer.session.timeout.ms": self.state.consumer_session_timeout_ms(group_id),
            "consumer.heartbeat.interval.ms": self.state.consumer_heartbeat_interval_ms(group_id),
            "streams.session.timeout.ms": self.state.streams_session_timeout_ms(group_id),
            "streams.heartbeat.interval.ms": self.state.streams_heartbeat_interval_ms(group_id),
            "streams.num.standby.replicas": self.state.streams_num_standby_replicas(group_id),
            "streams.initial.rebalance.delay.ms": self.state.streams_initial_rebalance_delay_ms(group_id),
            "streams.assignment.interval.ms": self.state.streams_assignment_interval_ms(group_id),
            "streams.acceptable.recovery.lag": self.state.streams_acceptable_recovery_lag(group_id),
            # Described as Kafka's `ConfigDef.convertToString` writes a LIST.
            "streams.rack.aware.assignment.tags": ",".join(
                self.state.streams_rack_aware_assignment_tags(group_id)
            ),
            # Described as Kafka's `ConfigDef.convertToString` writes a BOOLEAN.
            "streams.assignor.offload.enable": str(
                self.state.streams_assignor_offload_enable(group_id)
            ).lower(),
            "streams.task.offset.interval.ms": self.state.streams_task_offset_interval_ms(group_id),
            "streams.num.warmup.replicas": self.state.streams_num_warmup_replicas(group_id),
            # The name set (described even if the broker no longer lists it), else the default.
            "streams.assignor.name": self._set_assignor_name(group_id)
            or self.state.config.streams_assignors[0],
        }

    def set_group_config(self, group_id: str, config: GroupConfig | None) -> None:
        if config is None:
            self.state.group_configs.pop(group_id, None)
        else:
            config.validate_against(self.state.config)
            self.state.group_configs[group_id] = config

    # --- running operations ---------------------------------------------------------------------

    def commit(
        self, op: Operation, response: Any, on_error: Callable[[CoordinatorError], Any] | None = None
    ) -> Outcome[Any]:
        """The only place state changes: journal the operation's records, then apply them
        (replaying operations), its group changes (groups created or replaced), its
        `after` actions and its timer changes, and package it.

        When the journal refuses the records nothing is applied: a replaying operation, or one
        that creates or replaces a group, answers `on_error(mapped error)`; a classic
        one (whose group already changed in place) runs its append continuation with the error
        and keeps the timer changes that go with its group."""
        if op.records and self.journal is not None:
            try:
                self.journal(op.records)
            except AppendError as e:
                return self._append_failed(op, response, on_error, e)
        if op.replay and op.records:
            self.apply(op.records)
        if op.group_changes:
            apply_group_changes(self.state, op.group_changes)
        if op._after:
            op.run_after()
        if self.state.bindings.departed:
            self.state.bindings.forget_departed(self.state.groups)
        if op.timers:
            apply_timer_changes(self.timers, op.timers, self.state.now_ms)
        completions: Any = op.completions
        if isinstance(response, Pending) and completions:
            # The operation also completed its own parked request (e.g. the last member to
            # join ends the join phase): answer it directly.
            for i, (handle, value) in enumerate(completions):
                if handle is response:
                    response = value
                    completions = completions[:i] + completions[i + 1 :]
                    break
        on_append = None
        if op.on_append is not None:
            cont = op.on_append
            on_append = lambda error: self.append_completed(cont, error)  # noqa: E731
        return Outcome(response, op.records, completions, op.events, on_append)

    def _append_failed(
        self,
        op: Operation,
        response: Any,
        on_error: Callable[[CoordinatorError], Any] | None,
        e: AppendError,
    ) -> Outcome[Any]:
        mapped = append_error_to_response(e.code)
        op.append_error = mapped
        failure = {
            "error": e.code.name,
            "answered": mapped.name,
            "records": len(op.records),
            "reason": e.message,
        }
        events = [*op.events, ("append.failed", failure)]
        if op.replay or op.group_changes:
            if not op.replay:
                # The group that would have replaced another (or appeared) never existed: no
                # conversion happened. (A new classic group's join is only ever parked, so such an
                # operation has no append continuation and no other parked request to answer.)
                events = [ev for ev in events if ev[0] != "group.converted"]
            failed = on_error(CoordinatorError(mapped, e.message)) if on_error is not None else None
            # Parked requests the operation already answered (an upgrade tells a rebalancing
            # classic group's members to rejoin) keep their answers, as Kafka's futures do.
            # Its timer and group changes are dropped with its records: the state they were for
            # is not there (Kafka reverts the snapshot that held a new group). Those that go with
            # the answers it keeps are applied: a classic member whose parked SyncGroup a failed
            # conversion answered stays in its group and needs its session timer again (seed 6127).
            if op.refused_timers:
                apply_timer_changes(self.timers, op.refused_timers, self.state.now_ms)
            return Outcome(failed, (), op.completions, events)
        # Classic paths already changed the group: their continuation undoes or reports it.
        completions = list(op.completions)
        if op.on_append is not None:
            follow = Operation(replay=False)
            op.on_append(mapped, follow)
            completions.extend(follow.completions)
            events.extend(follow.events)
            op.timers.extend(follow.timers)
        op.records = []
        op.completions = completions
        op.events = events
        op.on_append = None
        return self.commit(op, response)

    def append_completed(self, cont: AppendContinuation, error: Errors) -> Outcome[None]:
        """Run an operation's follow-up once its records are durable (or failed)."""
        op = Operation(replay=False)
        cont(append_error_to_response(error), op)
        return self.commit(op, None)

    def _run(
        self,
        now_ms: int,
        api: str,
        fn: Callable[[Operation], Any],
        on_error: Callable[[CoordinatorError], Any],
        group_id: str = "",
        member_id: str = "",
    ) -> Outcome[Any]:
        """Run a request that is not routed by group type (offsets, group deletion)."""
        self.tick(now_ms)
        op = Operation()
        try:
            response = fn(op)
        except CoordinatorError as e:
            return _rejected(api, group_id, member_id, None, e, op, on_error)
        return self.commit(op, response, on_error)

    def _route(
        self,
        now_ms: int,
        api: str,
        req: Any,
        ctx: RequestContext,
        check: Check,
        on_error: Callable[[CoordinatorError], Any],
        member_id: str = "",
    ) -> Outcome[Any]:
        """Run a group API: the request checks, then the path `engine.routing.ROUTES` names for
        the group the request finds, in an operation of the route's replay mode. Every steady
        heartbeat comes here: nothing is allocated but the operation and its outcome."""
        self.tick(now_ms)
        st = self.state
        op = _NO_OP
        try:
            check(req, ctx, st.config)
            group = st.groups.get(req.group_id)
            # The consumer-group cell without computing the group's kind (every steady heartbeat).
            if type(group) is ConsumerGroup and group.members:
                r = CONSUMER_ROUTES[api]
            else:
                r = ROUTES[api][kind_of(group)]
            to_bind = self._check_binding(group, req, ctx) if st.config.member_principal_binding else None
            op = Operation(r.replay)
            response = r.path(st, group, req, ctx, op)
            if to_bind is not None:
                self._bind_after(op, to_bind, ctx.principal)
        except CoordinatorError as e:
            epoch = req.member_epoch if type(req) is ConsumerGroupHeartbeatRequest else None
            return _rejected(api, req.group_id, member_id, epoch, e, op, on_error)
        return self.commit(op, response, on_error)

    def _check_binding(self, group: Group | None, req: Any, ctx: RequestContext) -> list[Key] | None:
        """Member binding (`engine.binding`): raises `Refused` when the request carries a live
        member or instance id bound to another principal; else the ids to bind once it commits."""
        return self.state.bindings.check_request(group, req.group_id, req, ctx.principal)

    def _bind_after(self, op: Operation, keys: list[Key], principal: str) -> None:
        bindings, groups = self.state.bindings, self.state.groups
        op.after(lambda: bindings.bind(groups, keys, principal))

    # --- ConsumerGroupHeartbeat ---------------------------------------------------------------

    def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[ConsumerGroupHeartbeatResponse]:
        self.state.regex_topic_filter = ctx.topic_filter
        try:
            return self._route(
                now_ms,
                "ConsumerGroupHeartbeat",
                request,
                ctx,
                cg_heartbeat.validate,
                _consumer_group_heartbeat_error,
                request.member_id,
            )
        finally:
            self.state.regex_topic_filter = None

    # --- client-side assignors (docs/client-side-assignors.md) ---------------------------------

    def _check_member_binding(self, group_id: str, member_id: str, principal: str) -> None:
        """Member binding (`engine.binding`) for the extension APIs: a member id bound to another
        principal is refused as unknown, as for every other group API."""
        st = self.state
        if st.config.member_principal_binding and member_id:
            st.bindings.check(st.groups.get(group_id), [(group_id, MEMBER, member_id)], principal)

    def prepare_assignment(
        self, request: client_assignment.PrepareAssignmentRequest, now_ms: int, principal: str
    ) -> Outcome[client_assignment.PrepareAssignmentResponse]:
        def run(op: Operation) -> client_assignment.PrepareAssignmentResponse:
            self._check_member_binding(request.group_id, request.member_id, principal)
            return client_assignment.prepare_assignment(self.state, request, op)

        return self._run(
            now_ms,
            "ConsumerGroupPrepareAssignment",
            run,
            lambda e: client_assignment.PrepareAssignmentResponse(int(e.code), e.message),
            request.group_id,
            request.member_id,
        )

    def install_assignment(
        self, request: client_assignment.InstallAssignmentRequest, now_ms: int, principal: str
    ) -> Outcome[client_assignment.InstallAssignmentResponse]:
        def run(op: Operation) -> client_assignment.InstallAssignmentResponse:
            self._check_member_binding(request.group_id, request.member_id, principal)
            return client_assignment.install_assignment(self.state, request, op)

        return self._run(
            now_ms,
            "ConsumerGroupInstallAssignment",
            run,
            lambda e: client_assignment.InstallAssignmentResponse(int(e.code), e.message),
            request.group_id,
            request.member_id,
        )

    def consumer_group_strict(self, group_id: str) -> ConsumerGroup:
        return self.state.consumer_group_strict(group_id)

    # --- StreamsGroupHeartbeat, StreamsGroupDescribe (KIP-1071) -------------------------------

    def streams_group_heartbeat(
        self, request: StreamsGroupHeartbeatRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[StreamsGroupHeartbeatResponse]:
        return self._route(
            now_ms,
            "StreamsGroupHeartbeat",
            request,
            ctx,
            _check_nothing,
            lambda e: StreamsGroupHeartbeatResponse(
                error_code=int(e.code),
                error_message=e.message,
                member_id="",  # Kafka 4.4 answers an error without the member id (measured)
                member_epoch=0,
                status=(),
            ),
            request.member_id,
        )

    def describe_streams_groups(self, group_ids: Iterable[str]) -> list[DescribedStreamsGroup]:
        return streams_describe.describe_streams_groups(self.state, group_ids)

    # --- Connect groups (groupshift extension, docs/connect-groups.md) --------------------------

    def connect_group_heartbeat(
        self, request: cw.ConnectHeartbeatRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[cw.ConnectHeartbeatResponse]:
        return self._route(
            now_ms,
            "ConnectGroupHeartbeat",
            request,
            ctx,
            _check_nothing,
            lambda e: cw.ConnectHeartbeatResponse(error_code=int(e.code), error_message=e.message),
            request.member_id,
        )

    def connect_prepare_assignment(
        self, request: cw.ConnectPrepareRequest, now_ms: int, principal: str
    ) -> Outcome[cw.ConnectPrepareResponse]:
        def run(op: Operation) -> cw.ConnectPrepareResponse:
            self._check_member_binding(request.group_id, request.member_id, principal)
            return connect_assignment.prepare(self.state, request, op)

        return self._run(
            now_ms,
            "ConnectGroupPrepareAssignment",
            run,
            lambda e: cw.ConnectPrepareResponse(int(e.code), e.message),
            request.group_id,
            request.member_id,
        )

    def connect_install_assignment(
        self, request: cw.ConnectInstallRequest, now_ms: int, principal: str
    ) -> Outcome[cw.ConnectInstallResponse]:
        def run(op: Operation) -> cw.ConnectInstallResponse:
            self._check_member_binding(request.group_id, request.member_id, principal)
            return connect_assignment.install(self.state, request, op)

        return self._run(
            now_ms,
            "ConnectGroupInstallAssignment",
            run,
            lambda e: cw.ConnectInstallResponse(int(e.code), e.message),
            request.group_id,
            request.member_id,
        )

    # --- classic groups ---------------------------------------------------------------------

    def classic_group(self, group_id: str) -> ClassicGroup | None:
        return self.state.classic_group(group_id)

    def join_group(
        self, req: JoinGroupRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[JoinGroupResponse]:
        return self._route(
            now_ms,
            "JoinGroup",
            req,
            ctx,
            _check_join_group,
            # Kafka answers a join its consumer-group path refused (an exception) without a member
            # id (`GroupCoordinatorService.joinGroup`).
            lambda e: JoinGroupResponse(
                error_code=int(e.code),
                member_id="" if isinstance(self.groups.get(req.group_id), ConsumerGroup) else req.member_id,
            ),
            req.member_id,
        )

    def sync_group(
        self, req: SyncGroupRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[SyncGroupResponse]:
        return self._route(
            now_ms,
            "SyncGroup",
            req,
            ctx,
            _check_sync_group,
            lambda e: SyncGroupResponse(error_code=int(e.code)),
            req.member_id,
        )

    def heartbeat(
        self, req: HeartbeatRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[HeartbeatResponse]:
        return self._route(
            now_ms,
            "Heartbeat",
            req,
            ctx,
            _check_group_id,
            lambda e: HeartbeatResponse(int(e.code)),
            req.member_id,
        )

    def leave_group(
        self, req: LeaveGroupRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[LeaveGroupResponse]:
        return self._route(
            now_ms,
            "LeaveGroup",
            req,
            ctx,
            _check_group_id,
            lambda e: LeaveGroupResponse(error_code=int(e.code)),
        )

    def describe_groups(self, group_ids: Iterable[str]) -> list[DescribedGroup]:
        """DescribeGroups; missing groups are Dead. Consumer groups go to the migration hooks: the
        translation layer describes them in classic shape (it owns the embedded protocol), the
        engine alone answers Dead as Kafka does."""
        out = []
        for gid in group_ids:
            g = self.groups.get(gid)
            if isinstance(g, ClassicGroup):
                out.append(classic_describe.describe_classic_group(g))
            elif isinstance(g, ConsumerGroup):
                out.append(self.state.migration.describe_consumer_group_as_classic(g))
            elif isinstance(g, ConnectGroup):
                out.append(connect_describe.describe_as_classic(g))
            elif isinstance(g, StreamsGroup):
                out.append(self.state.migration.describe_streams_group_as_classic(g))
            else:
                out.append(classic_describe.dead_group(gid))
        return out

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[ListedGroup]:
        return classic_describe.list_groups(self.groups.values(), states, types)

    # --- offsets -----------------------------------------------------------------------------

    def offset_commit(
        self, req: OffsetCommitRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[OffsetCommitResponse]:
        def failed(e: CoordinatorError) -> OffsetCommitResponse:
            return OffsetCommitResponse(
                [
                    TopicResult(
                        t.name, [PartitionResult(p.partition_index, int(e.code)) for p in t.partitions]
                    )
                    for t in req.topics
                ],
                error_code=int(e.code),
            )

        def commit(op: Operation) -> OffsetCommitResponse:
            st = self.state
            to_bind = None
            if st.config.member_principal_binding:
                to_bind = self._check_binding(st.groups.get(req.group_id), req, ctx)
            response = offsets_ops.commit_offsets(st, req, ctx, op)
            if to_bind is not None:
                self._bind_after(op, to_bind, ctx.principal)
            return response

        return self._run(
            now_ms,
            "OffsetCommit",
            commit,
            failed,
            group_id=req.group_id,
            member_id=req.member_id,
        )

    def commit_transactional_offsets(
        self, group_id: str, offsets: dict[tuple[str, int], OffsetAndMetadata], now_ms: int
    ) -> Outcome[list[tuple[str, int]] | None]:
        """The offsets of a transaction that committed (Kafka's COMMIT marker replayed): written
        as regular OffsetCommit records; they were validated when the TxnOffsetCommit was
        accepted (`engine.offsets.transactional`). A missing group becomes a simple group.
        Answers the partitions written, or None when the log refused the records."""
        return self._run(
            now_ms,
            "TxnOffsetCommit",
            lambda op: offsets_txn.materialize(self.state, group_id, offsets, op),
            lambda e: None,
            group_id=group_id,
        )

    def offset_fetch(
        self, groups: Iterable[OffsetFetchGroupRequest], require_stable: bool = False
    ) -> list[OffsetFetchGroupResponse]:
        return [offsets_ops.fetch_offsets(self.state, g, require_stable) for g in groups]

    def offset_delete(
        self, req: OffsetDeleteRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[OffsetDeleteResponse]:
        return self._run(
            now_ms,
            "OffsetDelete",
            lambda op: offsets_ops.delete_offsets(self.state, req, op),
            lambda e: OffsetDeleteResponse(error_code=int(e.code)),
            group_id=req.group_id,
        )

    def delete_groups(
        self, group_ids: list[str], ctx: RequestContext, now_ms: int
    ) -> Outcome[list[DeleteGroupResult]]:
        return self._run(
            now_ms,
            "DeleteGroups",
            lambda op: offsets_ops.delete_groups(self.state, group_ids, op),
            lambda e: [DeleteGroupResult(g, int(e.code)) for g in group_ids],
        )

    def schedule_offset_expiration(self) -> None:
        op = Operation()
        schedule_offset_expiration(self.state, op)
        self.commit(op, None)

    # --- timers ------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def mark_next_deadline(self) -> int | None:
        """`next_deadline()` for the runtime's event-loop timer (`Timers.mark`)."""
        return self.timers.mark()

    def no_timer_due_before(self, deadline: int) -> bool:
        """True when no timer can be due before `deadline`, the last `mark_next_deadline()`
        (or a later one): the runtime's timer armed there need not move (`Timers.none_set_before`)."""
        return self.timers.none_set_before(deadline)

    def expire(self, now_ms: int) -> list[Outcome[Any]]:
        """Run every timer due at `now_ms`, earliest first; each fired timer is one operation,
        dispatched by its kind through `engine.expiry.EXPIRY`."""
        self.tick(now_ms)
        out: list[Outcome[Any]] = []
        while True:
            entry = self.timers.pop_due(now_ms)
            if entry is None:
                return out
            task: TimerTask = entry.callback
            expiry = EXPIRY[task.kind]
            op = Operation(replay=expiry.replay)
            try:
                expiry.fire(self.state, task, op)
            except CoordinatorError:
                result = None
            else:
                result = self.commit(op, None)
                if op.append_error is not None and op.replay:
                    # The state the timer was for is still there: try again (Kafka's timer retry).
                    self.timers.schedule(task.key, RETRY_BACKOFF_MS, now_ms, task)
            if expiry.periodic:
                self.schedule_offset_expiration()
            if result is not None and (result.records or result.completions or result.events):
                out.append(result)

    # --- metadata ----------------------------------------------------------------------------

    def update_metadata(self, image: MetadataImage, now_ms: int | None = None) -> Outcome[set[str]]:
        """Install a new topic image. Consumer groups subscribed to a changed topic refresh on
        their next heartbeat (Kafka `onNewMetadataImage`); offsets of deleted topics are deleted
        (Kafka `onPartitionsDeleted`). The response is the set of groups marked for refresh."""
        if now_ms is not None:
            self.tick(now_ms)
        old, self.state.image = self.state.image, image
        # Computed once for all shards (`MetadataImage.delta`); per group, a lookup per changed
        # name in its subscription indexes, not a copy of its subscribed topics.
        delta = old.delta(image)
        op = Operation()
        marked: set[str] = set()
        if delta.changed:
            for gid, group in self.groups.items():
                if type(group) is not ConsumerGroup:
                    continue
                if (group.subscribed_regexes and delta.created_or_deleted) or group.subscribes_to_any(
                    delta.changed
                ):
                    group.metadata_refresh_needed = True
                    marked.add(gid)
            if delta.deleted:
                offsets_ops.offsets_of_deleted_topics(self.state, set(delta.deleted), op)
        return self.commit(op, marked)

    # --- load --------------------------------------------------------------------------------

    def on_loaded(self, now_ms: int) -> list[Outcome[Any]]:
        """Kafka's load duties after replaying a shard: timers for every member (consumer
        groups use the group's consumer session timeout, also for classic members), rebalance
        timers for members still revoking (consumer and streams groups), a metadata re-check
        for every consumer group, classic heartbeats, a rebalance for classic groups above
        `group.max.size`, and the periodic offset expiration."""
        self.tick(now_ms)
        st = self.state
        out: list[Outcome[Any]] = []
        timers = Operation()
        for gid, group in list(st.groups.items()):
            if isinstance(group, ConsumerGroup):
                group.metadata_refresh_needed = True
                for mid, m in group.members.items():
                    schedule_session_timeout(timers, gid, mid, st.consumer_session_timeout_ms(gid))
                    if m.state is MemberState.UNREVOKED_PARTITIONS and not m.uses_classic_protocol:
                        schedule_rebalance_timeout(timers, gid, m)
            elif isinstance(group, StreamsGroup):
                for mid, sm in group.members.items():
                    timers.schedule(TimerKind.STREAMS_SESSION, gid, mid, st.streams_session_timeout_ms(gid))
                    if sm.state is StreamsMemberState.UNREVOKED_TASKS:
                        # as for consumer groups: a member still revoking when the shard loaded
                        # must give its tasks up within its rebalance timeout, or it keeps them
                        # (and blocks their new owners) for as long as it heartbeats
                        timeout = max(sm.rebalance_timeout_ms, 0)
                        timers.schedule(
                            TimerKind.STREAMS_REBALANCE, gid, mid, timeout, sm.member_epoch, timeout
                        )
            elif isinstance(group, ConnectGroup):
                for mid, w in group.members.items():
                    session = (
                        w.classic.session_timeout_ms
                        if w.classic is not None
                        else st.config.connect_session_timeout_ms
                    )
                    timers.schedule(TimerKind.CONNECT_SESSION, gid, mid, session)
                    if w.state is WorkerState.UNREVOKED:
                        timers.schedule(
                            TimerKind.CONNECT_REBALANCE,
                            gid,
                            mid,
                            w.rebalance_timeout_ms,
                            w.member_epoch,
                            w.rebalance_timeout_ms,
                        )
                for mid, d in group.delayed.items():
                    timers.schedule(TimerKind.CONNECT_DELAY, gid, mid, max(0, d.deadline_ms - now_ms))
            else:
                for cm in group.members.values():
                    reschedule_heartbeat(timers, group, cm)
        schedule_offset_expiration(st, timers)
        self.commit(timers, None)
        for group in list(st.groups.values()):
            if isinstance(group, ClassicGroup) and group.num_members > st.config.max_size:
                op = Operation(replay=False)
                prepare_rebalance(st, group, op, f"group exceeds group.max.size={st.config.max_size}")
                out.append(self.commit(op, None))
        return out

    # --- replay ------------------------------------------------------------------------------

    def apply(self, records: Iterable[CoordinatorRecord]) -> None:
        st, warnings = self.state, self.replay_warnings
        for r in records:
            replay(st, r, warnings)

    def replay(self, record: CoordinatorRecord) -> None:
        replay(self.state, record, self.replay_warnings)

    # --- reads -------------------------------------------------------------------------------

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        g = self.groups.get(group_id)
        return g if isinstance(g, ConsumerGroup) else None

    def describe_consumer_groups(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        return consumer_describe.describe_consumer_groups(self.state, group_ids)

    def list_consumer_groups(self) -> list[ListedGroup]:
        return self.list_groups(types=["consumer"])

    def persisted_state(self) -> dict[str, Any]:
        """Everything the records determine, comparable across a live run and a replay."""
        from engine.classic.records import persisted_view

        groups: dict[str, Any] = {}
        for gid, g in self.groups.items():
            if isinstance(g, ConsumerGroup):
                groups[gid] = ("consumer", g.persisted_state())
            elif isinstance(g, ClassicGroup):
                groups[gid] = ("classic", persisted_view(g))
            elif isinstance(g, ConnectGroup):
                groups[gid] = ("connect", g.persisted_state())
            else:
                groups[gid] = ("streams", g.persisted_state())
        return {"groups": groups, "offsets": self.offsets.snapshot()}
