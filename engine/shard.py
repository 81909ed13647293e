"""One coordinator shard: the engine's whole surface (Kafka `GroupCoordinatorShard`).

A shard owns the groups hashed to one `__consumer_offsets` partition, their offsets and timers,
and the metadata image they assign from. Its surface is small, like h11's: handle a request at
`now`, `expire(now)` due timers, `replay(record)`, and `append_completed` for operations whose
follow-up waits for their records to be durable.

Two kinds of operations, as in Kafka:
* consumer groups, offsets and group deletion compute records from the current state and change
  state only by replaying those records (`Operation(replay=True)`), so a restart and a live run
  cannot diverge;
* classic groups change in place and write a GroupMetadata snapshot (`replay=False`).

Requests of one protocol that reach a group of the other type go to `self.migration`
(`engine.hooks.MigrationHooks`); the translation layer installs its implementation.

Durability: the runtime installs `journal`, which appends an operation's records to the log
(without waiting for fsync) and raises `AppendError` when it cannot. The shard calls it before
applying anything, so a failed append leaves the state exactly as it was and the client gets
Kafka's mapped error (Kafka `CoordinatorRuntime`). Classic paths, which change state in place, learn of the
failure through their append continuation, as Kafka's append futures do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from engine.assignment import Assignment
from engine.classic import describe as classic_describe
from engine.classic.api import (
    DescribedGroup,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from engine.classic.group import ClassicGroup
from engine.classic.heartbeat import heartbeat_classic_group, leave_classic_group
from engine.classic.join import join_classic_group
from engine.classic.rebalance import prepare_rebalance, reschedule_heartbeat
from engine.classic.records import group_from_record
from engine.classic.state import ClassicGroupState
from engine.classic.sync import PROTOCOL_FIELDS_REQUIRED_VERSION, sync_classic_group
from engine.config import CoordinatorConfig, GroupConfig
from engine.consumer import heartbeat as cg_heartbeat
from engine.consumer.api import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    DescribedMember,
    DescribedTopicPartitions,
    ListedGroup,
)
from engine.consumer.group import ConsumerGroup, ReplayError
from engine.consumer.member import MemberState
from engine.consumer.membership import (
    fence_member,
    schedule_rebalance_timeout,
    schedule_session_timeout,
)
from engine.consumer.replay import CONSUMER_GROUP_KEYS, apply_record
from engine.context import RequestContext
from engine.errors import AppendError, CoordinatorError, Errors, append_error_to_response
from engine.hooks import MigrationHooks, RefuseMigration
from engine.ids import IdSource, SeededIds
from engine.metadata import MetadataImage, TopicId
from engine.offsets import operations as offsets_ops
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
from engine.offsets.store import OffsetStore
from engine.operation import AppendContinuation, Operation
from engine.outcome import Outcome, Pending
from engine.timers import Timers
from records.classic_group import GroupMetadataKey, GroupMetadataValue
from records.consumer_group import (
    ConsumerGroupMetadataKey,
)
from records.coordinator import CoordinatorRecord
from records.offsets import OffsetCommitKey

S = ClassicGroupState
OFFSET_EXPIRATION_KEY = "expire-group-metadata"

_CONSUMER_KEYS = CONSUMER_GROUP_KEYS


class Shard:
    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        ids: IdSource | None = None,
        image: MetadataImage | None = None,
    ) -> None:
        self.config = config if config is not None else CoordinatorConfig()
        self.ids: IdSource = ids if ids is not None else SeededIds(0)
        self.image = image if image is not None else MetadataImage.EMPTY
        self.timers = Timers()
        self.groups: dict[str, Any] = {}
        self.offsets = OffsetStore()
        self.group_configs: dict[str, GroupConfig] = {}
        self.now_ms = 0
        self.migration: MigrationHooks = RefuseMigration()
        # Replay anomalies tolerated on load (KAFKA-21117); the loader logs and clears them.
        self.replay_warnings: list[tuple[str, dict[str, Any]]] = []
        # Appends an operation's records (no fsync); raises AppendError. None: no log (tests).
        self.journal: Callable[[Sequence[CoordinatorRecord]], None] | None = None

    # --- time and configuration ---------------------------------------------------------------

    def tick(self, now_ms: int) -> int:
        """Advance the shard's clock (never backwards) and return it."""
        if now_ms > self.now_ms:
            self.now_ms = now_ms
        return self.now_ms

    def consumer_session_timeout_ms(self, group_id: str) -> int:
        gc = self.group_configs.get(group_id)
        if gc is not None and gc.consumer_session_timeout_ms is not None:
            return gc.consumer_session_timeout_ms
        return self.config.consumer_session_timeout_ms

    def consumer_heartbeat_interval_ms(self, group_id: str) -> int:
        gc = self.group_configs.get(group_id)
        if gc is not None and gc.consumer_heartbeat_interval_ms is not None:
            return gc.consumer_heartbeat_interval_ms
        return self.config.consumer_heartbeat_interval_ms

    def set_group_config(self, group_id: str, config: GroupConfig | None) -> None:
        if config is None:
            self.group_configs.pop(group_id, None)
        else:
            config.validate_against(self.config)
            self.group_configs[group_id] = config

    # --- running operations ---------------------------------------------------------------------

    def commit(
        self, op: Operation, response: Any, on_error: Callable[[CoordinatorError], Any] | None = None
    ) -> Outcome[Any]:
        """Journal the operation's records, apply them (replaying operations) and package it.

        When the journal refuses the records nothing is applied: a replaying operation answers
        `on_error(mapped error)`; a classic one runs its append continuation with the error."""
        if op.records and self.journal is not None:
            try:
                self.journal(op.records)
            except AppendError as e:
                return self._append_failed(op, response, on_error, e)
        if op.replay and op.records:
            self.apply(op.records)
        op.run_after()
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
        failure = {
            "error": e.code.name,
            "answered": mapped.name,
            "records": len(op.records),
            "reason": e.message,
        }
        events = [*op.events, ("append.failed", failure)]
        if op.replay:
            failed = on_error(CoordinatorError(mapped, e.message)) if on_error is not None else None
            # Parked requests the operation already answered (an upgrade tells a rebalancing
            # classic group's members to rejoin) keep their answers, as Kafka's futures do.
            return Outcome(failed, (), op.completions, events)
        # Classic paths already changed the group: their continuation undoes or reports it.
        completions = list(op.completions)
        if op.on_append is not None:
            follow = Operation(replay=False)
            op.on_append(mapped, follow)
            completions.extend(follow.completions)
            events.extend(follow.events)
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
        replay: bool = True,
        group_id: str = "",
        member_id: str = "",
    ) -> Outcome[Any]:
        self.tick(now_ms)
        op = Operation(replay=replay)
        try:
            response = fn(op)
        except CoordinatorError as e:
            # Nothing of the operation is kept but the events that explain the rejection.
            return Outcome(
                on_error(e),
                events=[
                    *op.explanations,
                    (
                        "request.rejected",
                        {
                            "api": api,
                            "group": group_id,
                            "member": member_id,
                            "error": e.code.name,
                            "reason": e.message,
                        },
                    ),
                ],
            )
        return self.commit(op, response, on_error)

    def classic_timer(self, fn: Callable[[Operation], None]) -> Outcome[None]:
        """A fired classic-group timer runs as an operation of its own."""
        op = Operation(replay=False)
        fn(op)
        return self.commit(op, None)

    # --- ConsumerGroupHeartbeat ---------------------------------------------------------------

    def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[ConsumerGroupHeartbeatResponse]:
        self.tick(now_ms)
        op = Operation()
        try:
            response = cg_heartbeat.heartbeat(self, request, ctx, op)
        except CoordinatorError as e:
            return Outcome(
                ConsumerGroupHeartbeatResponse(error_code=int(e.code), error_message=e.message),
                events=[
                    *op.explanations,
                    (
                        "request.rejected",
                        {
                            "api": "ConsumerGroupHeartbeat",
                            "group": request.group_id,
                            "member": request.member_id,
                            "member_epoch": request.member_epoch,
                            "error": e.code.name,
                            "reason": e.message,
                        },
                    ),
                ],
            )
        return self.commit(
            op,
            response,
            lambda e: ConsumerGroupHeartbeatResponse(error_code=int(e.code), error_message=e.message),
        )

    def consumer_group_for_heartbeat(self, group_id: str, create: bool, op: Operation) -> ConsumerGroup:
        """Kafka `getOrMaybeCreateConsumerGroup`: the group a heartbeat works on."""
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            return ConsumerGroup(group_id)  # materialised by replaying the join's records
        if isinstance(group, ConsumerGroup):
            return group
        if isinstance(group, ClassicGroup) and group.is_empty() and create:
            # An empty classic group (even an offsets-only one) is replaced whatever the
            # migration policy; offsets are keyed by group id and stay (Kafka converts empty groups
            # whatever the policy).
            from engine.classic.records import group_metadata_tombstone

            op.records.append(group_metadata_tombstone(group_id))
            op.event(
                "group.converted",
                group=group_id,
                from_type="classic",
                to_type="consumer",
                reason="empty classic group",
            )
            return ConsumerGroup(group_id)
        if isinstance(group, ClassicGroup) and create:
            return self.migration.consumer_heartbeat_to_classic_group(group, create, op)
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    def consumer_group_strict(self, group_id: str) -> ConsumerGroup:
        """Kafka `consumerGroup(groupId)`: the group a leave works on, with its messages."""
        group = self.groups.get(group_id)
        if group is None:
            raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if not isinstance(group, ConsumerGroup):
            raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        return group

    def fence_consumer_member(
        self, group_id: str, member_id: str, reason: str, only_at_epoch: int | None = None
    ) -> Outcome[None] | None:
        """Timer-driven fencing (session or rebalance timeout); nothing when already gone."""
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            return None
        member = group.members.get(member_id)
        if member is None:
            return None
        if only_at_epoch is not None and member.member_epoch != only_at_epoch:
            return None
        op = Operation()
        try:
            fence_member(self, group, member, op, reason)
        except CoordinatorError:
            return None
        return self.commit(op, None)

    # --- classic groups ---------------------------------------------------------------------

    def classic_group(self, group_id: str) -> ClassicGroup | None:
        g = self.groups.get(group_id)
        return g if isinstance(g, ClassicGroup) else None

    def join_group(
        self, req: JoinGroupRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[JoinGroupResponse]:
        def fn(op: Operation) -> Any:
            if not req.group_id:
                raise CoordinatorError(Errors.INVALID_GROUP_ID)
            if (
                not self.config.min_session_timeout_ms
                <= req.session_timeout_ms
                <= self.config.max_session_timeout_ms
            ):
                raise CoordinatorError(Errors.INVALID_SESSION_TIMEOUT)
            if req.rebalance_timeout_ms < 0:
                req.rebalance_timeout_ms = req.session_timeout_ms  # JoinGroup v0 has none
            group = self.groups.get(req.group_id)
            if isinstance(group, ConsumerGroup):
                if not group.is_empty():
                    return self.migration.classic_join_to_consumer_group(group, req, ctx, op)
                # An empty consumer group is replaced by a classic group whatever the policy.
                offsets_ops.group_tombstones(group, op.records)
                del self.groups[req.group_id]
                op.event(
                    "group.converted",
                    group=req.group_id,
                    from_type="consumer",
                    to_type="classic",
                    reason="empty consumer group",
                )
            return join_classic_group(self, req, ctx, op)

        return self._run(
            now_ms,
            "JoinGroup",
            fn,
            # Kafka answers a join its consumer-group path refused (an exception) without a member
            # id (`GroupCoordinatorService.joinGroup`).
            lambda e: JoinGroupResponse(
                error_code=int(e.code),
                member_id="" if isinstance(self.groups.get(req.group_id), ConsumerGroup) else req.member_id,
            ),
            replay=False,
            group_id=req.group_id,
            member_id=req.member_id,
        )

    def sync_group(
        self, req: SyncGroupRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[SyncGroupResponse]:
        def fn(op: Operation) -> Any:
            if not req.group_id:
                raise CoordinatorError(Errors.INVALID_GROUP_ID)
            if ctx.api_version >= PROTOCOL_FIELDS_REQUIRED_VERSION and (
                req.protocol_type is None or req.protocol_name is None
            ):
                raise CoordinatorError(Errors.INCONSISTENT_GROUP_PROTOCOL)
            group = self.groups.get(req.group_id)
            if group is None or group.is_empty():
                raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID)
            if isinstance(group, ConsumerGroup):
                return self.migration.classic_sync_to_consumer_group(group, req, ctx, op)
            return sync_classic_group(self, group, req, ctx, op)

        return self._run(
            now_ms,
            "SyncGroup",
            fn,
            lambda e: SyncGroupResponse(error_code=int(e.code)),
            replay=False,
            group_id=req.group_id,
            member_id=req.member_id,
        )

    def heartbeat(
        self, req: HeartbeatRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[HeartbeatResponse]:
        def fn(op: Operation) -> Any:
            if not req.group_id:
                raise CoordinatorError(Errors.INVALID_GROUP_ID)
            group = self.groups.get(req.group_id)
            if isinstance(group, ClassicGroup):
                return heartbeat_classic_group(self, group, req)
            if isinstance(group, ConsumerGroup):
                return self.migration.classic_heartbeat_to_consumer_group(group, req, ctx, op)
            raise CoordinatorError(Errors.UNKNOWN_MEMBER_ID, f"Group {req.group_id} not found.")

        return self._run(
            now_ms,
            "Heartbeat",
            fn,
            lambda e: HeartbeatResponse(int(e.code)),
            replay=False,
            group_id=req.group_id,
            member_id=req.member_id,
        )

    def leave_group(
        self, req: LeaveGroupRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[LeaveGroupResponse]:
        def fn(op: Operation) -> Any:
            if not req.group_id:
                raise CoordinatorError(Errors.INVALID_GROUP_ID)
            group = self.groups.get(req.group_id)
            if isinstance(group, ClassicGroup):
                return leave_classic_group(self, group, req, op)
            if isinstance(group, ConsumerGroup):
                op.replay = True  # classic members leaving a consumer group write consumer records
                return self.migration.classic_leave_to_consumer_group(group, req, ctx, op)
            return LeaveGroupResponse(
                members=[
                    MemberResponse(m.member_id, m.group_instance_id, int(Errors.UNKNOWN_MEMBER_ID))
                    for m in req.members
                ]
            )

        return self._run(
            now_ms,
            "LeaveGroup",
            fn,
            lambda e: LeaveGroupResponse(error_code=int(e.code)),
            replay=False,
            group_id=req.group_id,
        )

    def describe_groups(self, group_ids: Iterable[str]) -> list[DescribedGroup]:
        """DescribeGroups for classic groups; missing groups are Dead. Consumer groups are
        described in classic shape by the translation layer (it owns the embedded protocol)."""
        out = []
        for gid in group_ids:
            g = self.groups.get(gid)
            if isinstance(g, ClassicGroup):
                out.append(classic_describe.describe_classic_group(g))
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

        return self._run(
            now_ms,
            "OffsetCommit",
            lambda op: offsets_ops.commit_offsets(self, req, ctx, op),
            failed,
            group_id=req.group_id,
            member_id=req.member_id,
        )

    def offset_fetch(
        self, groups: Iterable[OffsetFetchGroupRequest], require_stable: bool = False
    ) -> list[OffsetFetchGroupResponse]:
        return [offsets_ops.fetch_offsets(self, g, require_stable) for g in groups]

    def offset_delete(
        self, req: OffsetDeleteRequest, ctx: RequestContext, now_ms: int
    ) -> Outcome[OffsetDeleteResponse]:
        return self._run(
            now_ms,
            "OffsetDelete",
            lambda op: offsets_ops.delete_offsets(self, req, op),
            lambda e: OffsetDeleteResponse(error_code=int(e.code)),
            group_id=req.group_id,
        )

    def delete_groups(
        self, group_ids: list[str], ctx: RequestContext, now_ms: int
    ) -> Outcome[list[DeleteGroupResult]]:
        return self._run(
            now_ms,
            "DeleteGroups",
            lambda op: offsets_ops.delete_groups(self, group_ids, op),
            lambda e: [DeleteGroupResult(g, int(e.code)) for g in group_ids],
        )

    def schedule_offset_expiration(self) -> None:
        def fire(now: int) -> Outcome[None]:
            op = Operation()
            offsets_ops.expire_offsets(self, op)
            self.schedule_offset_expiration()
            return self.commit(op, None)

        self.timers.schedule(
            OFFSET_EXPIRATION_KEY, self.config.offsets_retention_check_interval_ms, self.now_ms, fire
        )

    # --- timers ------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def expire(self, now_ms: int) -> list[Outcome[Any]]:
        """Run every timer due at `now_ms`, earliest first; each fired timer is one operation."""
        self.tick(now_ms)
        out: list[Outcome[Any]] = []
        while True:
            entry = self.timers.pop_due(now_ms)
            if entry is None:
                return out
            result = entry.callback(now_ms)
            if isinstance(result, Outcome) and (result.records or result.completions or result.events):
                out.append(result)

    # --- metadata ----------------------------------------------------------------------------

    def update_metadata(self, image: MetadataImage, now_ms: int | None = None) -> Outcome[set[str]]:
        """Install a new topic image. Consumer groups subscribed to a changed topic refresh on
        their next heartbeat (Kafka `onNewMetadataImage`); offsets of deleted topics are deleted
        (Kafka `onPartitionsDeleted`). The response is the set of groups marked for refresh."""
        if now_ms is not None:
            self.tick(now_ms)
        old, self.image = self.image, image
        changed = old.changed_topic_names(image)
        op = Operation()
        marked: set[str] = set()
        if changed:
            created_or_deleted = {n for n in changed if (old.topic(n) is None) != (image.topic(n) is None)}
            for gid, group in self.groups.items():
                if not isinstance(group, ConsumerGroup):
                    continue
                if (group.subscribed_regexes and created_or_deleted) or not changed.isdisjoint(
                    group.subscribed_topic_names()
                ):
                    group.metadata_refresh_needed = True
                    marked.add(gid)
            deleted = {n for n in changed if image.topic(n) is None}
            if deleted:
                offsets_ops.offsets_of_deleted_topics(self, deleted, op)
        return self.commit(op, marked)

    # --- load --------------------------------------------------------------------------------

    def on_loaded(self, now_ms: int) -> list[Outcome[Any]]:
        """Kafka's load duties after replaying a shard: timers for every member (consumer
        groups use the group's consumer session timeout, also for classic members), rebalance
        timers for members still revoking, a metadata re-check for every consumer group,
        classic heartbeats, a rebalance for classic groups above `group.max.size`, and the
        periodic offset expiration."""
        self.tick(now_ms)
        out: list[Outcome[Any]] = []
        for gid, group in list(self.groups.items()):
            if isinstance(group, ConsumerGroup):
                group.metadata_refresh_needed = True
                for mid, m in group.members.items():
                    schedule_session_timeout(self, gid, mid, self.consumer_session_timeout_ms(gid))
                    if m.state is MemberState.UNREVOKED_PARTITIONS and not m.uses_classic_protocol:
                        schedule_rebalance_timeout(self, gid, m)
            elif isinstance(group, ClassicGroup):
                for cm in group.members.values():
                    reschedule_heartbeat(self, group, cm)
                if group.num_members > self.config.max_size:
                    reason = f"group exceeds group.max.size={self.config.max_size}"

                    def rebalance(op: Operation, g: ClassicGroup = group, why: str = reason) -> None:
                        prepare_rebalance(self, g, op, why)

                    out.append(self.classic_timer(rebalance))
        self.schedule_offset_expiration()
        return out

    # --- replay ------------------------------------------------------------------------------

    def apply(self, records: Iterable[CoordinatorRecord]) -> None:
        for r in records:
            self.replay(r)

    def replay(self, record: CoordinatorRecord) -> None:
        key: Any = record.key
        kt = type(key)
        if kt is OffsetCommitKey:
            # Inlined (most of a log is offset commits): a key's value is of its own type, as
            # records.codec decodes and encodes it.
            value: Any = record.value
            if value is not None and key.group not in self.groups:
                # Offsets of a group that has no group record: a "simple" classic group.
                self.groups[key.group] = ClassicGroup(key.group, self.now_ms)
            self.offsets.replay(key, value)
        elif kt is GroupMetadataKey:
            self._replay_group_metadata(key.group, record.value)
        elif kt in _CONSUMER_KEYS:
            self._replay_consumer_record(record)
        else:
            raise ReplayError(f"no replay rule for record key {kt.__name__}")

    def _replay_group_metadata(self, group_id: str, value: Any) -> None:
        if value is None:
            self.groups.pop(group_id, None)
            return
        assert isinstance(value, GroupMetadataValue)
        if isinstance(self.groups.get(group_id), ConsumerGroup):
            # A downgrade deletes the consumer group (tombstones) before writing this record.
            raise ReplayError(
                f"Group {group_id} is a consumer group: a GroupMetadata record cannot replace it "
                "without the consumer group's tombstones before it."
            )
        self.groups[group_id] = group_from_record(group_id, value, self.now_ms)

    def _consumer_group_for_replay(self, group_id: str, create: bool) -> ConsumerGroup | None:
        """Kafka `getOrMaybeCreatePersistedConsumerGroup`, made lenient for KAFKA-21117: log
        compaction can drop the GroupMetadata tombstone an upgrade wrote, so a consumer-group
        record may follow a classic group's record. Such a record turns the group into a consumer
        group, and consumer tombstones for a classic group are ignored."""
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                return None
            group = self.groups[group_id] = ConsumerGroup(group_id)
            return group
        if isinstance(group, ConsumerGroup):
            return group
        if isinstance(group, ClassicGroup):
            if not create:
                if not group.is_simple():
                    self.replay_warnings.append(
                        (
                            "replay.tombstone_ignored",
                            {"group": group_id, "reason": "consumer-group tombstone for a classic group"},
                        )
                    )
                return None
            if not group.is_simple():
                self.replay_warnings.append(
                    (
                        "replay.group_type_replaced",
                        {
                            "group": group_id,
                            "from_type": "classic",
                            "to_type": "consumer",
                            "reason": "consumer-group record after a classic group (KAFKA-21117)",
                        },
                    )
                )
            group = self.groups[group_id] = ConsumerGroup(group_id)
            return group
        raise ReplayError(f"Group {group_id} is not a consumer group.")

    def _replay_consumer_record(self, record: CoordinatorRecord) -> None:
        key: Any = record.key
        value: Any = record.value
        group = self._consumer_group_for_replay(key.group_id, value is not None)
        if group is None:
            return
        if value is None and type(key) is ConsumerGroupMetadataKey:
            if not group.can_be_deleted():
                raise ReplayError(
                    f"cannot delete consumer group {key.group_id}: members, targets and the "
                    "assignment metadata must be deleted first"
                )
            del self.groups[key.group_id]
            return
        apply_record(group, record)

    # --- reads -------------------------------------------------------------------------------

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        g = self.groups.get(group_id)
        return g if isinstance(g, ConsumerGroup) else None

    def describe_consumer_groups(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        """ConsumerGroupDescribe data; GROUP_ID_NOT_FOUND for missing or classic groups (so admin
        clients fall back to DescribeGroups, as with Kafka)."""
        out: list[DescribedConsumerGroup] = []
        for gid in group_ids:
            g = self.groups.get(gid)
            if g is None:
                out.append(
                    DescribedConsumerGroup(gid, int(Errors.GROUP_ID_NOT_FOUND), f"Group {gid} not found.")
                )
            elif not isinstance(g, ConsumerGroup):
                out.append(
                    DescribedConsumerGroup(
                        gid, int(Errors.GROUP_ID_NOT_FOUND), f"Group {gid} is not a consumer group."
                    )
                )
            else:
                out.append(self._describe(g))
        return out

    def _names(self, assignment: Assignment) -> tuple[DescribedTopicPartitions, ...]:
        out = []
        for t, parts in assignment.items():
            topic = self.image.topic_by_id(t)
            out.append(DescribedTopicPartitions(t, topic.name if topic else "", tuple(sorted(parts))))
        return tuple(out)

    def _describe(self, g: ConsumerGroup) -> DescribedConsumerGroup:
        members = tuple(
            DescribedMember(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex or "",  # Kafka's member default
                # Kafka `asConsumerGroupDescribeMember`: what the member still holds, i.e. its
                # assigned partitions and those pending revocation.
                assignment=self._names(_held(m.assigned_partitions, m.partitions_pending_revocation)),
                target_assignment=self._names(g.target(m.member_id)),
                member_type=0 if m.uses_classic_protocol else 1,
                state=m.state.name,
            )
            for m in g.members.values()
        )
        return DescribedConsumerGroup(
            group_id=g.group_id,
            group_state=g.state().value,
            group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch,
            assignor_name=g.preferred_server_assignor() or self.config.consumer_assignors[0],
            members=members,
        )

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
        return {"groups": groups, "offsets": self.offsets.snapshot()}


def _held(
    assigned: Mapping[TopicId, tuple[int, ...]], pending: Mapping[TopicId, tuple[int, ...]]
) -> dict[TopicId, tuple[int, ...]]:
    """Assigned partitions plus those pending revocation, topic by topic."""
    out = dict(assigned)
    for t, parts in pending.items():
        out[t] = tuple(sorted({*out.get(t, ()), *parts}))
    return out
