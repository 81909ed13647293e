"""One coordinator shard: the engine's whole surface (Kafka `GroupCoordinatorShard`).

A shard owns the groups hashed to one `__consumer_offsets` partition, their timers and the
metadata image they assign from. Its surface is small, like h11's: handle a request at `now`,
`expire(now)` due timers, `replay(record)`. Every request handler computes an `Operation`
(records, events, completions) from the current state; `_commit` then replays the records, so the
in-memory state only ever changes the way a restart would change it.

Group types live side by side in `groups`: consumer groups (KIP-848) here, classic groups and
offsets with their own modules. The translation layer installs hooks (`on_consumer_member_fenced`,
`on_static_member_replaced`, `classic_group_for_heartbeat`) to convert groups between types;
without them the engine refuses a ConsumerGroupHeartbeat to a classic group as Kafka does when
migration is disabled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from engine.assignment import Assignment, from_records
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
from engine.consumer.member import ConsumerGroupMember
from engine.consumer.membership import fence_member
from engine.context import RequestContext
from engine.errors import CoordinatorError, Errors
from engine.ids import IdSource, SeededIds
from engine.metadata import MetadataImage
from engine.operation import Operation
from engine.outcome import Outcome
from engine.timers import Timers
from records.consumer_group import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
)
from records.coordinator import CoordinatorRecord

FenceHook = Callable[[ConsumerGroup, ConsumerGroupMember, Operation, str], bool]
ReplaceHook = Callable[[ConsumerGroup, ConsumerGroupMember, ConsumerGroupMember, Operation], None]
HeartbeatToOtherGroupHook = Callable[[Any, bool, Operation], ConsumerGroup]

_CONSUMER_KEYS = (
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupRegularExpressionKey,
)


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
        self.group_configs: dict[str, GroupConfig] = {}
        self.now_ms = 0
        # Translation-layer hooks (None: plain engine behaviour).
        self.on_consumer_member_fenced: FenceHook | None = None
        self.on_static_member_replaced: ReplaceHook | None = None
        self.heartbeat_to_other_group: HeartbeatToOtherGroupHook | None = None
        # Record replay for other record families (classic groups, offsets) plugs in here.
        self._replayers: dict[type, Callable[[CoordinatorRecord], None]] = {}
        for k in _CONSUMER_KEYS:
            self._replayers[k] = self._replay_consumer_record

    # --- time -----------------------------------------------------------------------------

    def tick(self, now_ms: int) -> int:
        """Advance the shard's clock (never backwards) and return it."""
        if now_ms > self.now_ms:
            self.now_ms = now_ms
        return self.now_ms

    # --- configuration ----------------------------------------------------------------------

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

    # --- operations -------------------------------------------------------------------------

    def commit(self, op: Operation, response: Any) -> Outcome[Any]:
        """Apply an operation's records to the state and package what it produced."""
        if op.records:
            self.apply(op.records)
        op.run_after()
        return Outcome(response, op.records, op.completions, op.events)

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
                    )
                ],
            )
        return self.commit(op, response)

    def consumer_group_for_heartbeat(self, group_id: str, create: bool, op: Operation) -> ConsumerGroup:
        """Kafka `getOrMaybeCreateConsumerGroup`: the group a heartbeat works on."""
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            return ConsumerGroup(group_id)  # materialised by replaying the join's records
        if isinstance(group, ConsumerGroup):
            return group
        hook = self.heartbeat_to_other_group
        if hook is not None:
            return hook(group, create, op)
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    def consumer_group_strict(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
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
            if isinstance(result, Outcome):
                out.append(result)

    # --- metadata ----------------------------------------------------------------------------

    def update_metadata(self, image: MetadataImage) -> set[str]:
        """Install a new topic image; groups subscribed to a changed topic refresh on their next
        heartbeat (Kafka `onNewMetadataImage`). Returns the groups marked for refresh."""
        old, self.image = self.image, image
        changed = old.changed_topic_names(image)
        if not changed:
            return set()
        created_or_deleted = {n for n in changed if (old.topic(n) is None) != (image.topic(n) is None)}
        marked: set[str] = set()
        for gid, group in self.groups.items():
            if not isinstance(group, ConsumerGroup):
                continue
            if (group.subscribed_regexes and created_or_deleted) or not changed.isdisjoint(
                group.subscribed_topic_names()
            ):
                group.metadata_refresh_needed = True
                marked.add(gid)
        return marked

    # --- replay ------------------------------------------------------------------------------

    def register_replayer(self, key_type: type, fn: Callable[[CoordinatorRecord], None]) -> None:
        self._replayers[key_type] = fn

    def apply(self, records: Iterable[CoordinatorRecord]) -> None:
        for r in records:
            self.replay(r)

    def replay(self, record: CoordinatorRecord) -> None:
        fn = self._replayers.get(type(record.key))
        if fn is None:
            raise ReplayError(f"no replay rule for record key {type(record.key).__name__}")
        fn(record)

    def _consumer_group_for_replay(self, group_id: str, create: bool) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                return None
            group = self.groups[group_id] = ConsumerGroup(group_id)
            return group
        if isinstance(group, ConsumerGroup):
            return group
        replace = self.replace_group_for_consumer_record
        if replace is not None:
            return replace(group_id, group, create)
        raise ReplayError(f"Group {group_id} is not a consumer group.")

    # Classic/offset modules override this to allow "simple group -> consumer group" replay.
    replace_group_for_consumer_record: Callable[[str, Any, bool], ConsumerGroup | None] | None = None

    def _replay_consumer_record(self, record: CoordinatorRecord) -> None:
        key: Any = record.key
        value: Any = record.value
        group = self._consumer_group_for_replay(key.group_id, value is not None)
        if group is None:
            return
        kt = type(key)
        if kt is ConsumerGroupCurrentMemberAssignmentKey:
            group.replay_current_assignment(key.member_id, value)
        elif kt is ConsumerGroupMemberMetadataKey:
            group.replay_member_metadata(key.member_id, value)
        elif kt is ConsumerGroupTargetAssignmentMemberKey:
            target: Assignment | None = None
            if value is not None:
                assert isinstance(value, ConsumerGroupTargetAssignmentMemberValue)
                target = from_records(value.topic_partitions)
            group.replay_target_member(key.member_id, target)
        elif kt is ConsumerGroupMetadataKey:
            if value is None:
                if not group.can_be_deleted():
                    raise ReplayError(
                        f"cannot delete consumer group {key.group_id}: members, targets and the "
                        "assignment metadata must be deleted first"
                    )
                del self.groups[key.group_id]
            else:
                group.replay_group_epoch(value.epoch)
        elif kt is ConsumerGroupTargetAssignmentMetadataKey:
            group.replay_assignment_epoch(None if value is None else value.assignment_epoch)
        elif kt is ConsumerGroupPartitionMetadataKey:
            group.replay_subscription_metadata(None if value is None else value.topics)
        elif kt is ConsumerGroupRegularExpressionKey:
            group.replay_regex(key.regular_expression, value)

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
                continue
            if not isinstance(g, ConsumerGroup):
                out.append(
                    DescribedConsumerGroup(
                        gid, int(Errors.GROUP_ID_NOT_FOUND), f"Group {gid} is not a consumer group."
                    )
                )
                continue
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
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=self._names(m.assigned_partitions),
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
        return [
            ListedGroup(gid, "consumer", g.state().value, "consumer")
            for gid, g in self.groups.items()
            if isinstance(g, ConsumerGroup)
        ]
