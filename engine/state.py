"""What a handler may see of its shard: the narrow context of every engine and translation
handler (Kafka's `GroupMetadataManager` fields, without the manager).

Rules of this file:
* Handlers read the configuration, the clock (`now_ms`, advanced only by the shard), the
  metadata image, the id source and the groups; they write nothing here except what the classic
  paths change in place (a classic group and its members, as Kafka's classic groups do). The
  groups map itself changes only through a committed `Operation` (`engine.replay`).
* Timers are not here: a handler asks for timer changes through its `Operation`, and
  `Shard.commit` applies them with the records. Appending, replaying and committing are not here
  either: only `engine.shard.Shard` does those, and no handler imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.binding import MEMBER, MemberBindings
from engine.classic.group import ClassicGroup
from engine.config import CoordinatorConfig, GroupConfig
from engine.connect.group import ConnectGroup
from engine.consumer.group import ConsumerGroup
from engine.errors import CoordinatorError, Errors
from engine.ids import IdSource
from engine.metadata import MetadataImage
from engine.offsets.store import OffsetStore
from engine.streams.group import StreamsGroup

if TYPE_CHECKING:
    from engine.hooks import MigrationHooks
    from engine.operation import Operation

# Every group of a shard is one of these; mypy checks each `match`/`isinstance` over the cases.
Group = ConsumerGroup | ClassicGroup | StreamsGroup | ConnectGroup


class ShardState:
    __slots__ = (
        "bindings",
        "config",
        "group_configs",
        "groups",
        "ids",
        "image",
        "migration",
        "now_ms",
        "offsets",
        "regex_topic_filter",
        "streams_initial_delays",
    )

    def __init__(
        self, config: CoordinatorConfig, ids: IdSource, image: MetadataImage, migration: MigrationHooks
    ) -> None:
        self.config = config
        self.ids = ids
        self.image = image
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore()
        self.group_configs: dict[str, GroupConfig] = {}
        self.now_ms = 0
        # What a request of one protocol does to a group of the other type (translation layer).
        self.migration = migration
        # The topics the heartbeating client may DESCRIBE, while its heartbeat is handled
        # (`RequestContext.topic_filter`); regexes resolved meanwhile keep only those.
        self.regex_topic_filter: Callable[[str], bool] | None = None
        # The principal each live member id and instance id is bound to (`engine.binding`); in
        # memory only, written by `Operation.after` actions.
        self.bindings = MemberBindings()
        # Streams groups waiting out their initial rebalance delay: group id -> when it ends.
        # In memory only, like the timer that ends it (Kafka keeps no record of it either: a
        # shard loaded meanwhile computes the assignment on the next heartbeat).
        self.streams_initial_delays: dict[str, int] = {}

    def bind_created(self, op: Operation, group_id: str, member_id: str, principal: str) -> None:
        """Where the coordinator generates a member id: once `op` commits, the id is bound to the
        principal that asked for it, before any other client can learn it (a classic leader's
        JoinGroup response lists every member id)."""
        if self.config.member_principal_binding:
            bindings, groups = self.bindings, self.groups
            op.after(lambda: bindings.bind_created(groups, (group_id, MEMBER, member_id), principal))

    # --- per-group settings (KIP-848 dynamic group configs) ---------------------------------------

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

    def streams_session_timeout_ms(self, group_id: str) -> int:
        gc = self.group_configs.get(group_id)
        if gc is not None and gc.streams_session_timeout_ms is not None:
            return gc.streams_session_timeout_ms
        return self.config.streams_session_timeout_ms

    def streams_heartbeat_interval_ms(self, group_id: str) -> int:
        gc = self.group_configs.get(group_id)
        if gc is not None and gc.streams_heartbeat_interval_ms is not None:
            return gc.streams_heartbeat_interval_ms
        return self.config.streams_heartbeat_interval_ms

    def streams_acceptable_recovery_lag(self, group_id: str) -> int:
        gc = self.group_configs.get(group_id)
        if gc is not None and gc.streams_acceptable_recovery_lag is not None:
            return gc.streams_acceptable_recovery_lag
        return self.config.streams_acceptable_recovery_lag

    def streams_initial_rebalance_delay_ms(self, group_id: str) -> int:
        gc = self.group_configs.get(group_id)
        if gc is not None and gc.streams_initial_rebalance_delay_ms is not None:
            return gc.streams_initial_rebalance_delay_ms
        return self.config.streams_initial_rebalance_delay_ms

    def streams_assignment_interval_ms(self, group_id: str) -> int:
        """The group's `streams.assignment.interval.ms`, else the broker's
        `group.streams.assignment.interval.ms` (Kafka 4.4 `streamsGroupAssignmentIntervalMs`)."""
        gc = self.group_configs.get(group_id)
        if gc is not None and gc.streams_assignment_interval_ms is not None:
            return gc.streams_assignment_interval_ms
        return self.config.streams_assignment_interval_ms

    def streams_num_standby_replicas(self, group_id: str) -> int:
        """The group's `streams.num.standby.replicas`, else the broker's
        `group.streams.num.standby.replicas` (Kafka 4.4 `streamsGroupAssignmentConfigs`)."""
        gc = self.group_configs.get(group_id)
        if gc is not None and gc.streams_num_standby_replicas is not None:
            return gc.streams_num_standby_replicas
        return self.config.streams_num_standby_replicas

    def streams_rack_aware_assignment_tags(self, group_id: str) -> tuple[str, ...]:
        """The group's `streams.rack.aware.assignment.tags`, else the broker's
        `group.streams.rack.aware.assignment.tags` (Kafka 4.4 `streamsGroupAssignmentConfigs`:
        a group's empty list overrides the broker's)."""
        gc = self.group_configs.get(group_id)
        tags = None if gc is None else gc.rack_aware_assignment_tags()
        return tags if tags is not None else self.config.streams_rack_aware_assignment_tags

    def streams_task_offset_interval_ms(self, group_id: str) -> int:
        """The group's `streams.task.offset.interval.ms`, else the broker's (Kafka 4.4
        `streamsGroupTaskOffsetIntervalMs`, answered in every heartbeat that keeps the member)."""
        gc = self.group_configs.get(group_id)
        if gc is not None and gc.streams_task_offset_interval_ms is not None:
            return gc.streams_task_offset_interval_ms
        return self.config.streams_task_offset_interval_ms

    def streams_num_warmup_replicas(self, group_id: str) -> int:
        """The group's `streams.num.warmup.replicas`, else the broker's (Kafka 4.4
        `streamsGroupNumWarmupReplicas`: only its identity refiner reads it, so no warm-ups)."""
        gc = self.group_configs.get(group_id)
        if gc is not None and gc.streams_num_warmup_replicas is not None:
            return gc.streams_num_warmup_replicas
        return self.config.streams_num_warmup_replicas

    def streams_assignor_offload_enable(self, group_id: str) -> bool:
        gc = self.group_configs.get(group_id)
        if gc is not None and gc.streams_assignor_offload_enable is not None:
            return gc.streams_assignor_offload_enable
        return self.config.streams_assignor_offload_enable

    # --- typed lookups ----------------------------------------------------------------------------

    def classic_group(self, group_id: str) -> ClassicGroup | None:
        g = self.groups.get(group_id)
        return g if isinstance(g, ClassicGroup) else None

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        g = self.groups.get(group_id)
        return g if isinstance(g, ConsumerGroup) else None

    def consumer_group_strict(self, group_id: str) -> ConsumerGroup:
        """The consumer group, or GROUP_ID_NOT_FOUND as Kafka's `consumerGroup(groupId)` says (the
        group a leave works on)."""
        group = self.groups.get(group_id)
        if group is None:
            raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if not isinstance(group, ConsumerGroup):
            raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        return group
