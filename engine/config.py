"""Group coordinator configuration with Kafka's names, defaults and bounds.

Kafka `GroupCoordinatorConfig` (broker configs) and `GroupConfig` (per-group overrides). The
names are Kafka's dotted names (aliases); Python attributes are snake_case. The min/max bounds of
the consumer session timeout and heartbeat interval are themselves configurable so that tests can
run a group with sub-second intervals, exactly as a Kafka broker can be configured.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engine import assignors

INT_MAX = 2**31 - 1

# Kafka's builtin server assignors by class name (`group.consumer.assignors` takes either).
KAFKA_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}
# Kafka 4.4's only builtin streams task assignor (`STREAMS_GROUP_BUILTIN_ASSIGNORS`), by its name
# or its class name (`group.streams.assignors` takes either).
STREAMS_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor": "sticky",
}
STREAMS_ASSIGNORS = ("sticky",)

MigrationPolicy = Literal["bidirectional", "upgrade", "downgrade", "disabled"]
# `streams` is accepted because Kafka 4.4's default list names it, so a server.properties copied
# from a 4.4 broker starts groupshift; streams groups are served whether or not it is listed
# (docs/deviations.md).
RebalanceProtocol = Literal["classic", "consumer", "streams"]


# Java's `String.trim` removes every code point up to U+0020.
JAVA_TRIMMED = "".join(map(chr, range(0x21)))


def split_list(value: str) -> tuple[str, ...]:
    """A Kafka LIST value as `ConfigDef.parseType` splits it: trimmed, empty is the empty list,
    else split on `\\s*,\\s*` keeping empty entries (Java's `split(regex, -1)`)."""
    trimmed = value.strip(JAVA_TRIMMED)
    return () if not trimmed else tuple(re.split(r"\s*,\s*", trimmed, flags=re.ASCII))


class CoordinatorConfig(BaseModel):
    """Broker-level group coordinator settings (`group.*`, `offsets.*`)."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    # --- consumer groups (KIP-848) ---
    consumer_session_timeout_ms: int = Field(
        45000, alias="group.consumer.session.timeout.ms", ge=1, le=INT_MAX
    )
    consumer_min_session_timeout_ms: int = Field(
        45000, alias="group.consumer.min.session.timeout.ms", ge=1, le=INT_MAX
    )
    consumer_max_session_timeout_ms: int = Field(
        60000, alias="group.consumer.max.session.timeout.ms", ge=1, le=INT_MAX
    )
    consumer_heartbeat_interval_ms: int = Field(
        5000, alias="group.consumer.heartbeat.interval.ms", ge=1, le=INT_MAX
    )
    consumer_min_heartbeat_interval_ms: int = Field(
        5000, alias="group.consumer.min.heartbeat.interval.ms", ge=1, le=INT_MAX
    )
    consumer_max_heartbeat_interval_ms: int = Field(
        15000, alias="group.consumer.max.heartbeat.interval.ms", ge=1, le=INT_MAX
    )
    consumer_max_size: int = Field(INT_MAX, alias="group.consumer.max.size", ge=1, le=INT_MAX)
    consumer_assignors: tuple[str, ...] = Field(
        ("uniform", "range"), alias="group.consumer.assignors", min_length=1
    )
    consumer_migration_policy: MigrationPolicy = Field(
        "bidirectional", alias="group.consumer.migration.policy"
    )
    rebalance_protocols: tuple[RebalanceProtocol, ...] = Field(
        ("classic", "consumer"), alias="group.coordinator.rebalance.protocols", min_length=1
    )

    # --- streams groups (KIP-1071) ---
    streams_session_timeout_ms: int = Field(45000, alias="group.streams.session.timeout.ms", ge=1, le=INT_MAX)
    streams_heartbeat_interval_ms: int = Field(
        5000, alias="group.streams.heartbeat.interval.ms", ge=1, le=INT_MAX
    )
    # The bounds a group's own `streams.session.timeout.ms` / `streams.heartbeat.interval.ms`
    # must keep (Kafka 4.3/4.4 `GroupCoordinatorConfig` defaults).
    streams_min_session_timeout_ms: int = Field(
        45000, alias="group.streams.min.session.timeout.ms", ge=1, le=INT_MAX
    )
    streams_max_session_timeout_ms: int = Field(
        60000, alias="group.streams.max.session.timeout.ms", ge=1, le=INT_MAX
    )
    streams_min_heartbeat_interval_ms: int = Field(
        5000, alias="group.streams.min.heartbeat.interval.ms", ge=1, le=INT_MAX
    )
    streams_max_heartbeat_interval_ms: int = Field(
        15000, alias="group.streams.max.heartbeat.interval.ms", ge=1, le=INT_MAX
    )
    streams_max_size: int = Field(INT_MAX, alias="group.streams.max.size", ge=1, le=INT_MAX)
    # How long the first assignment of a group waits for more members (Kafka 4.4's default).
    streams_initial_rebalance_delay_ms: int = Field(
        3000, alias="group.streams.initial.rebalance.delay.ms", ge=0, le=INT_MAX
    )
    # Later target assignments at most once per interval (Kafka 4.4's default and bounds,
    # `GroupCoordinatorConfig`); 0 computes each in the heartbeat that needs it.
    streams_assignment_interval_ms: int = Field(
        1000, alias="group.streams.assignment.interval.ms", ge=0, le=INT_MAX
    )
    streams_min_assignment_interval_ms: int = Field(
        0, alias="group.streams.min.assignment.interval.ms", ge=0, le=INT_MAX
    )
    streams_max_assignment_interval_ms: int = Field(
        15000, alias="group.streams.max.assignment.interval.ms", ge=0, le=INT_MAX
    )
    streams_num_standby_replicas: int = Field(0, alias="group.streams.num.standby.replicas", ge=0, le=INT_MAX)
    streams_max_standby_replicas: int = Field(2, alias="group.streams.max.standby.replicas", ge=0, le=INT_MAX)
    # Answered in StreamsGroupHeartbeat v1's AcceptableRecoveryLag (Kafka 4.4's default); no
    # warm-up task uses it yet.
    streams_acceptable_recovery_lag: int = Field(
        10000, alias="group.streams.acceptable.recovery.lag", ge=0, le=2**63 - 1
    )
    # Kafka 4.4's client tag keys for rack-aware standbys (a LIST, default empty, no duplicates):
    # recorded in the assignment configs and asked of v1 members (MISSING_CLIENT_TAGS); Kafka
    # 4.4.0's sticky assignor does not place standbys by them, nor does groupshift's.
    streams_rack_aware_assignment_tags: tuple[str, ...] = Field(
        (), alias="group.streams.rack.aware.assignment.tags"
    )
    # The task assignors a streams group may name in its `streams.assignor.name`; the first is
    # every other group's (Kafka 4.4 builds in only `sticky`; a custom class cannot be loaded).
    streams_assignors: tuple[str, ...] = Field(STREAMS_ASSIGNORS, alias="group.streams.assignors")
    # Kafka 4.4's internal settings, defaults and lower bounds (`GroupCoordinatorConfig`). The
    # task offset interval is answered in every heartbeat (TaskOffsetIntervalMs); the warm-up
    # count reaches only Kafka 4.4.0's `AssignmentRefiner.refine`, which returns the assignment
    # unchanged, so no warm-up task is ever assigned (docs/streams-groups.md). The offload switch
    # picks a thread in Kafka; groupshift assigns in the heartbeat either way.
    streams_assignor_offload_enable: bool = Field(True, alias="group.streams.assignor.offload.enable")
    streams_task_offset_interval_ms: int = Field(
        60000, alias="group.streams.task.offset.interval.ms", ge=1, le=INT_MAX
    )
    streams_min_task_offset_interval_ms: int = Field(
        15000, alias="group.streams.min.task.offset.interval.ms", ge=1, le=INT_MAX
    )
    streams_num_warmup_replicas: int = Field(2, alias="group.streams.num.warmup.replicas", ge=0, le=INT_MAX)
    streams_max_warmup_replicas: int = Field(20, alias="group.streams.max.warmup.replicas", ge=0, le=INT_MAX)

    # --- classic groups ---
    min_session_timeout_ms: int = Field(6000, alias="group.min.session.timeout.ms", ge=0, le=INT_MAX)
    max_session_timeout_ms: int = Field(1800000, alias="group.max.session.timeout.ms", ge=0, le=INT_MAX)
    initial_rebalance_delay_ms: int = Field(3000, alias="group.initial.rebalance.delay.ms", ge=0, le=INT_MAX)
    max_size: int = Field(INT_MAX, alias="group.max.size", ge=1, le=INT_MAX)

    # --- groupshift beyond Kafka (docs/security.md, "Member binding") ---
    member_principal_binding: bool = Field(True, alias="group.member.principal.binding.enable")
    # KIP-848's client-side assignors, never shipped by Kafka (docs/client-side-assignors.md).
    consumer_client_assignors_enable: bool = Field(False, alias="group.consumer.client.assignors.enable")
    # Connect groups on the new protocol, never built by Kafka (docs/connect-groups.md).
    connect_enable: bool = Field(False, alias="group.connect.enable")
    connect_session_timeout_ms: int = Field(45000, alias="group.connect.session.timeout.ms", ge=1, le=INT_MAX)
    connect_heartbeat_interval_ms: int = Field(
        5000, alias="group.connect.heartbeat.interval.ms", ge=1, le=INT_MAX
    )
    connect_scheduled_rebalance_max_delay_ms: int = Field(
        300000, alias="group.connect.scheduled.rebalance.max.delay.ms", ge=0, le=INT_MAX
    )

    # --- offsets ---
    offsets_retention_minutes: int = Field(10080, alias="offsets.retention.minutes", ge=1, le=INT_MAX)
    offsets_retention_check_interval_ms: int = Field(
        600000, alias="offsets.retention.check.interval.ms", ge=1
    )
    offset_metadata_max_bytes: int = Field(4096, alias="offset.metadata.max.bytes", ge=0, le=INT_MAX)
    offsets_topic_num_partitions: int = Field(50, alias="offsets.topic.num.partitions", ge=1, le=INT_MAX)

    @field_validator("consumer_assignors", mode="after")
    @classmethod
    def _known_assignors(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Kafka instantiates every listed assignor at start-up, so a wrong name stops the
        broker there instead of failing every heartbeat that needs an assignment. Kafka's class
        names of its builtin assignors stand for their names (a server.properties copied from
        a 3.x broker lists them that way)."""
        known = assignors.names()
        out = []
        for name in value:
            short = KAFKA_ASSIGNOR_CLASSES.get(name, name)
            if short not in known:
                raise ValueError(f"unknown assignor {name!r} (known: {', '.join(known)})")
            out.append(short)
        return tuple(out)

    @field_validator("streams_rack_aware_assignment_tags", mode="before")
    @classmethod
    def _tags_list(cls, value: Any) -> Any:
        """A Kafka LIST given as one string is split as Kafka's `ConfigDef` splits it."""
        return split_list(value) if isinstance(value, str) else value

    @field_validator("streams_rack_aware_assignment_tags", mode="after")
    @classmethod
    def _tags_unique(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Kafka 4.4 `ValidList.anyNonDuplicateValues(true, false)`: empty list allowed, no
        duplicate and no empty key."""
        name = "group.streams.rack.aware.assignment.tags"
        if len(set(value)) != len(value):
            raise ValueError(f"Configuration '{name}' values must not be duplicated.")
        if "" in value:
            raise ValueError(f"Configuration '{name}' values must not be empty.")
        return value

    @field_validator("streams_assignors", mode="before")
    @classmethod
    def _assignors_list(cls, value: Any) -> Any:
        """A Kafka LIST given as one string is split as Kafka's `ConfigDef` splits it."""
        return split_list(value) if isinstance(value, str) else value

    @field_validator("streams_assignors", mode="after")
    @classmethod
    def _known_streams_assignors(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Kafka 4.4 `ValidList.anyNonDuplicateValues(false, false)`, then each entry a builtin
        name or a class it can load (`streamsGroupAssignors`, in its words); groupshift knows
        Kafka's builtin `sticky` by either spelling."""
        name = "group.streams.assignors"
        if not value:
            raise ValueError(
                f"Configuration '{name}' must not be empty. Valid values include: any non-empty value"
            )
        if len(set(value)) != len(value):
            raise ValueError(f"Configuration '{name}' values must not be duplicated.")
        if "" in value:
            raise ValueError(f"Configuration '{name}' values must not be empty.")
        out = []
        for entry in value:
            short = STREAMS_ASSIGNOR_CLASSES.get(entry, entry)
            if short not in STREAMS_ASSIGNORS:
                raise ValueError(f"Invalid value {entry} for configuration {name}: Class cannot be found")
            if short in out:
                raise ValueError(
                    f"Invalid value {entry} for configuration {name}: Assignor name '{short}' is already "
                    "registered by another configured assignor. Assignor names, whether built-in or "
                    "custom, must be unique"
                )
            out.append(short)
        return tuple(out)

    @field_validator("consumer_migration_policy", mode="before")
    @classmethod
    def _policy_any_case(cls, value: Any) -> Any:
        """Kafka validates this config case-insensitively (`BIDIRECTIONAL` is accepted)."""
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check_bounds(self) -> CoordinatorConfig:
        s, hb = self.consumer_session_timeout_ms, self.consumer_heartbeat_interval_ms
        if not self.consumer_min_session_timeout_ms <= s <= self.consumer_max_session_timeout_ms:
            raise ValueError(
                f"group.consumer.session.timeout.ms={s} must be within "
                f"[{self.consumer_min_session_timeout_ms}, {self.consumer_max_session_timeout_ms}]"
            )
        if not (self.consumer_min_heartbeat_interval_ms <= hb <= self.consumer_max_heartbeat_interval_ms):
            raise ValueError(
                f"group.consumer.heartbeat.interval.ms={hb} must be within "
                f"[{self.consumer_min_heartbeat_interval_ms}, "
                f"{self.consumer_max_heartbeat_interval_ms}]"
            )
        if hb >= s:
            raise ValueError(
                f"group.consumer.heartbeat.interval.ms={hb} must be less than "
                f"group.consumer.session.timeout.ms={s}"
            )
        if self.streams_num_standby_replicas > self.streams_max_standby_replicas:
            raise ValueError(
                f"group.streams.num.standby.replicas={self.streams_num_standby_replicas} must not exceed "
                f"group.streams.max.standby.replicas={self.streams_max_standby_replicas}"
            )
        # Kafka 4.4 refuses to start on these (`GroupCoordinatorConfig`'s own words).
        low, high = self.streams_min_assignment_interval_ms, self.streams_max_assignment_interval_ms
        interval = self.streams_assignment_interval_ms
        if high < low:
            raise ValueError(
                "group.streams.max.assignment.interval.ms must be greater than or equal to "
                "group.streams.min.assignment.interval.ms"
            )
        if interval < low:
            raise ValueError(
                "group.streams.assignment.interval.ms must be greater than or equal to "
                "group.streams.min.assignment.interval.ms"
            )
        if interval > high:
            raise ValueError(
                "group.streams.assignment.interval.ms must be less than or equal to "
                "group.streams.max.assignment.interval.ms"
            )
        if self.streams_task_offset_interval_ms < self.streams_min_task_offset_interval_ms:
            raise ValueError(
                "group.streams.task.offset.interval.ms must be greater than or equal to "
                "group.streams.min.task.offset.interval.ms"
            )
        if self.streams_num_warmup_replicas > self.streams_max_warmup_replicas:
            raise ValueError(
                "group.streams.num.warmup.replicas must be less than or equal to "
                "group.streams.max.warmup.replicas"
            )
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")
        if len(set(self.consumer_assignors)) != len(self.consumer_assignors):
            raise ValueError("group.consumer.assignors lists an assignor twice")
        if "classic" not in self.rebalance_protocols:
            raise ValueError("group.coordinator.rebalance.protocols must include 'classic'")
        return self

    @property
    def consumer_protocol_enabled(self) -> bool:
        return "consumer" in self.rebalance_protocols

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @classmethod
    def from_kafka(cls, settings: dict[str, Any]) -> CoordinatorConfig:
        """Build from Kafka-named settings (`{"group.consumer.max.size": 10}`)."""
        return cls.model_validate(settings)


class GroupConfig(BaseModel):
    """Per-group dynamic overrides (KIP-848 "Dynamic group configs"): `consumer.*` names, and
    KIP-1071's `streams.num.standby.replicas`."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    consumer_session_timeout_ms: int | None = Field(None, alias="consumer.session.timeout.ms")
    consumer_heartbeat_interval_ms: int | None = Field(None, alias="consumer.heartbeat.interval.ms")
    streams_session_timeout_ms: int | None = Field(None, alias="streams.session.timeout.ms")
    streams_heartbeat_interval_ms: int | None = Field(None, alias="streams.heartbeat.interval.ms")
    streams_num_standby_replicas: int | None = Field(None, alias="streams.num.standby.replicas")
    streams_initial_rebalance_delay_ms: int | None = Field(None, alias="streams.initial.rebalance.delay.ms")
    streams_assignment_interval_ms: int | None = Field(None, alias="streams.assignment.interval.ms")
    # An internal group config in Kafka 4.4 (`defineInternal`): answered by StreamsGroupHeartbeat v1.
    streams_acceptable_recovery_lag: int | None = Field(None, alias="streams.acceptable.recovery.lag")
    # Kafka 4.4's LIST, kept as given (Kafka keeps the string); `rack_aware_assignment_tags` parses.
    streams_rack_aware_assignment_tags: str | None = Field(None, alias="streams.rack.aware.assignment.tags")
    # Kafka 4.4's internal group configs of warm-ups and the assignor's thread (`defineInternal`):
    # the task offset interval is answered in the group's heartbeats; the warm-up count reaches
    # only Kafka 4.4.0's identity refiner; the offload switch picks a thread in Kafka alone.
    streams_assignor_offload_enable: bool | None = Field(None, alias="streams.assignor.offload.enable")
    streams_task_offset_interval_ms: int | None = Field(None, alias="streams.task.offset.interval.ms")
    streams_num_warmup_replicas: int | None = Field(None, alias="streams.num.warmup.replicas")
    # The group's task assignor by name, one of the broker's `group.streams.assignors`.
    streams_assignor_name: str | None = Field(None, alias="streams.assignor.name")

    def rack_aware_assignment_tags(self) -> tuple[str, ...] | None:
        """The tag keys set for the group (an empty list overrides the broker's), else None."""
        tags = self.streams_rack_aware_assignment_tags
        return None if tags is None else split_list(tags)

    def validate_against(self, broker: CoordinatorConfig) -> None:
        """Kafka checks per-group values against the broker's min/max bounds (messages as Kafka
        4.3's `GroupConfig` validation words them)."""
        tags = self.rack_aware_assignment_tags()
        # Kafka 4.4 `validateNoDuplicateRackAwareAssignmentTags` runs before any other check,
        # then the LIST's own `ValidList` (no empty key).
        if tags is not None and len(set(tags)) != len(tags):
            raise ValueError("streams.rack.aware.assignment.tags must not contain duplicate tag keys.")
        if tags is not None and "" in tags:
            raise ValueError("Configuration 'streams.rack.aware.assignment.tags' values must not be empty.")
        s = self.consumer_session_timeout_ms
        hb = self.consumer_heartbeat_interval_ms
        # Kafka 4.3 checks the heartbeat interval first, then the session timeout, and names the
        # broker bound that was crossed.
        if hb is not None and hb < broker.consumer_min_heartbeat_interval_ms:
            raise ValueError(
                "consumer.heartbeat.interval.ms must be greater than or equal to "
                "group.consumer.min.heartbeat.interval.ms"
            )
        if hb is not None and hb > broker.consumer_max_heartbeat_interval_ms:
            raise ValueError(
                "consumer.heartbeat.interval.ms must be less than or equal to "
                "group.consumer.max.heartbeat.interval.ms"
            )
        if s is not None and s < broker.consumer_min_session_timeout_ms:
            raise ValueError(
                "consumer.session.timeout.ms must be greater than or equal to "
                "group.consumer.min.session.timeout.ms"
            )
        if s is not None and s > broker.consumer_max_session_timeout_ms:
            raise ValueError(
                "consumer.session.timeout.ms must be less than or equal to "
                "group.consumer.max.session.timeout.ms"
            )
        # Then the streams group's, in Kafka 4.4's order (heartbeat, session, standbys) and words
        # (4.4 words every range check alike; the consumer ones above keep 4.3's, which the
        # consumer differential suite pins).
        shb, ss = self.streams_heartbeat_interval_ms, self.streams_session_timeout_ms
        for name, value, low, high in (
            (
                "streams.heartbeat.interval.ms",
                shb,
                broker.streams_min_heartbeat_interval_ms,
                broker.streams_max_heartbeat_interval_ms,
            ),
            (
                "streams.session.timeout.ms",
                ss,
                broker.streams_min_session_timeout_ms,
                broker.streams_max_session_timeout_ms,
            ),
        ):
            if value is not None and not low <= value <= high:
                raise ValueError(f"{name} must be in the range {low} to {high} inclusive.")
        delay = self.streams_initial_rebalance_delay_ms
        if delay is not None and delay < 0:  # Kafka 4.4: the type's own range, no broker bound
            raise ValueError(
                f"Invalid value {delay} for configuration streams.initial.rebalance.delay.ms: "
                "Value must be at least 0"
            )
        lag = self.streams_acceptable_recovery_lag
        if lag is not None and lag < 0:  # Kafka 4.4: Range.atLeast(0), no broker bound
            raise ValueError(
                f"Invalid value {lag} for configuration streams.acceptable.recovery.lag: "
                "Value must be at least 0"
            )
        standbys = self.streams_num_standby_replicas
        # Kafka 4.4's words: the type's range check, then the broker's maximum by value.
        if standbys is not None and standbys < 0:
            raise ValueError(
                f"Invalid value {standbys} for configuration streams.num.standby.replicas: "
                "Value must be at least 0"
            )
        if standbys is not None and standbys > broker.streams_max_standby_replicas:
            raise ValueError(
                "streams.num.standby.replicas must be less than or equal to "
                f"{broker.streams_max_standby_replicas}"
            )
        every = self.streams_assignment_interval_ms
        # Kafka 4.4: the type's range, then the broker's bounds (`validateIntRange`).
        if every is not None and every < 0:
            raise ValueError(
                f"Invalid value {every} for configuration streams.assignment.interval.ms: "
                "Value must be at least 0"
            )
        low, high = broker.streams_min_assignment_interval_ms, broker.streams_max_assignment_interval_ms
        if every is not None and not low <= every <= high:
            raise ValueError(
                f"streams.assignment.interval.ms must be in the range {low} to {high} inclusive."
            )
        # Kafka 4.4: the types' ranges (`ConfigDef.parse`), then `validateIntMin` / `validateIntMax`
        # against the broker's bounds by value, then the assignor's name among the broker's.
        offsets_every = self.streams_task_offset_interval_ms
        if offsets_every is not None and offsets_every < 1:
            raise ValueError(
                f"Invalid value {offsets_every} for configuration streams.task.offset.interval.ms: "
                "Value must be at least 1"
            )
        warmups = self.streams_num_warmup_replicas
        if warmups is not None and warmups < 0:
            raise ValueError(
                f"Invalid value {warmups} for configuration streams.num.warmup.replicas: "
                "Value must be at least 0"
            )
        if offsets_every is not None and offsets_every < broker.streams_min_task_offset_interval_ms:
            raise ValueError(
                "streams.task.offset.interval.ms must be greater than or equal to "
                f"{broker.streams_min_task_offset_interval_ms}"
            )
        if warmups is not None and warmups > broker.streams_max_warmup_replicas:
            raise ValueError(
                "streams.num.warmup.replicas must be less than or equal to "
                f"{broker.streams_max_warmup_replicas}"
            )
        assignor = self.streams_assignor_name
        if assignor is not None and assignor not in broker.streams_assignors:
            raise ValueError(
                f"streams.assignor.name '{assignor}' is not a registered task assignor. Registered assignors "
                f"are: [{', '.join(broker.streams_assignors)}]."
            )
        session = s if s is not None else broker.consumer_session_timeout_ms
        interval = hb if hb is not None else broker.consumer_heartbeat_interval_ms
        if interval >= session:
            raise ValueError(
                "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
            )
        streams_session = ss if ss is not None else broker.streams_session_timeout_ms
        streams_interval = shb if shb is not None else broker.streams_heartbeat_interval_ms
        if streams_interval >= streams_session:
            raise ValueError("streams.session.timeout.ms must be greater than streams.heartbeat.interval.ms")
