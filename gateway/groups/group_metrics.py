"""Per-group metrics for following a migration (KIP-848 "Broker Metrics", extended per group).

Kafka's group coordinator exports per-protocol and per-state counts (`group-count`,
`consumer-group-count`, `consumer-group-rebalance-count`); groupshift keeps those as aggregates
(`groupshift_groups`, `groupshift_group_rebalances_total`) and adds what an operator rolling a
fleet needs per group:

* `groupshift_group_members{group,protocol}`: members by protocol, `classic` or `consumer`
  (ConsumerGroupDescribe v1's `member_type`): the count of members still to roll;
* `groupshift_group_epoch{group}`: group epoch, or generation of a classic group;
* `groupshift_group_partitions_pending_revocation{group}`: partitions members still must release;
* `groupshift_group_seconds_since_stable{group}`: 0 when stable, else time since it last was;
* `groupshift_group_rebalances_by_group_total{group}`: group epoch bumps and new generations
  (Kafka's `consumer-group-rebalance-count`, per group);
* `groupshift_group_conversions_total{group,direction}`: `upgrade` (classic to consumer) and
  `downgrade`; `groupshift_group_conversion_refusals_total{group,direction,reason}`;
* `groupshift_group_committed_offset_lag{group}`: over the group's committed partitions, log end
  offset minus committed offset (embedded data plane);
* all groups: `groupshift_conversions_total{direction}`,
  `groupshift_conversion_refusals_total{direction,reason}`.

Cardinality is bounded: at most `metrics.groups.max` groups have series (the first seen; a
group that is deleted frees its slot, and `groupshift_group_metrics_untracked_groups` counts the
groups left out), and `metrics.groups.enabled=false` turns the per-group families off. Gauges
are computed at scrape time from the shards' state; counters (and the moment a group was last
seen stable, also refreshed at scrape time) are updated from events, which a steady heartbeat
never produces.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from engine.classic.group import ClassicGroup
from engine.classic.state import ClassicGroupState
from engine.connect.group import ConnectGroup, ConnectGroupState
from engine.consumer.group import ConsumerGroup, ConsumerGroupState
from engine.streams.group import StreamsGroup, StreamsGroupState
from gateway.metrics import Labels, MetricsRegistry

GroupLookup = Callable[[str], Any]  # group id -> the group object, or None


class _GroupStats:
    __slots__ = ("conversions", "last_stable_ms", "rebalances", "refusals")

    def __init__(self, now_ms: int) -> None:
        self.rebalances = 0
        self.conversions: dict[str, int] = {}
        self.refusals: dict[tuple[str, str], int] = {}
        self.last_stable_ms = now_ms


def group_counts(
    groups: Iterable[ConsumerGroup | ClassicGroup | StreamsGroup | ConnectGroup],
) -> dict[tuple[str, str], int]:
    """Groups by (type, state), for the KIP-848 group-count metric."""
    counts: dict[tuple[str, str], int] = {}
    for g in groups:
        if isinstance(g, ConsumerGroup):
            key = ("consumer", g.state().value)
        elif isinstance(g, ClassicGroup):
            key = ("classic", g.state.value)
        elif isinstance(g, ConnectGroup):
            key = ("connect", g.state())
        else:
            key = ("streams", g.state(g.validated_topology_epoch >= 0))
        counts[key] = counts.get(key, 0) + 1
    return counts


def is_stable(group: Any) -> bool:
    if isinstance(group, ConsumerGroup):
        return group.state() in (ConsumerGroupState.STABLE, ConsumerGroupState.EMPTY)
    if isinstance(group, ClassicGroup):
        return group.state in (ClassicGroupState.STABLE, ClassicGroupState.EMPTY)
    if isinstance(group, ConnectGroup):
        return group.state() in (ConnectGroupState.STABLE, ConnectGroupState.EMPTY)
    if isinstance(group, StreamsGroup):
        return group.state(group.validated_topology_epoch >= 0) in (
            StreamsGroupState.STABLE,
            StreamsGroupState.EMPTY,
        )
    return True


class GroupMetrics:
    def __init__(
        self,
        registry: MetricsRegistry,
        groups: Callable[[], Iterator[tuple[str, Any, Mapping[str, Mapping[int, Any]]]]],
        lookup: GroupLookup,
        log_end_offset: Callable[[str, int], int | None],
        *,
        enabled: bool = True,
        max_groups: int = 500,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._groups = groups
        self._lookup = lookup
        self._log_end_offset = log_end_offset
        self.enabled = enabled
        self.max_groups = max_groups
        self._clock = clock
        self.tracked: dict[str, _GroupStats] = {}
        self.untracked = 0
        self._conversions = registry.counter(
            "groupshift_conversions_total",
            "Group conversions between the classic and consumer protocols (all groups)",
            ("direction",),
        )
        self._refusals = registry.counter(
            "groupshift_conversion_refusals_total",
            "Refused group conversions by direction and reason (all groups)",
            ("direction", "reason"),
        )
        if not enabled:
            return
        per_group = [
            ("groupshift_group_members", "Members by protocol (member_type)", ("group", "protocol"), "gauge"),
            ("groupshift_group_epoch", "Group epoch, or generation of a classic group", ("group",), "gauge"),
            (
                "groupshift_group_partitions_pending_revocation",
                "Partitions members still have to release",
                ("group",),
                "gauge",
            ),
            (
                "groupshift_group_seconds_since_stable",
                "0 when the group is stable, else seconds since it last was",
                ("group",),
                "gauge",
            ),
            (
                "groupshift_group_rebalances_by_group_total",
                "Group epoch bumps / new generations (KIP-848 consumer-group-rebalance-count)",
                ("group",),
                "counter",
            ),
            (
                "groupshift_group_committed_offset_lag",
                "Sum of log end offset minus committed offset over the group's partitions",
                ("group",),
                "gauge",
            ),
        ]
        self._scrape: dict[str, dict[Labels, float]] = {}
        registry.before_render.append(self._refresh)
        for name, help_text, labels, kind in per_group:
            registry.collected(name, help_text, labels, self._reader(name), kind)
        registry.collected(
            "groupshift_group_conversions_total",
            "Conversions per group (upgrade: classic to consumer; downgrade: back)",
            ("group", "direction"),
            lambda: {(g, d): float(n) for g, s in self.tracked.items() for d, n in s.conversions.items()},
            "counter",
        )
        registry.collected(
            "groupshift_group_conversion_refusals_total",
            "Refused conversions per group by direction and reason",
            ("group", "direction", "reason"),
            lambda: {
                (g, d, r): float(n) for g, s in self.tracked.items() for (d, r), n in s.refusals.items()
            },
            "counter",
        )
        untracked = registry.gauge(
            "groupshift_group_metrics_untracked_groups",
            "Groups without per-group series because metrics.groups.max was reached",
        )
        untracked.set_function(lambda: float(self.untracked))

    # --- events (never on a steady heartbeat) ---------------------------------------------------

    def _stats(self, group_id: str) -> _GroupStats | None:
        stats = self.tracked.get(group_id)
        if stats is None and self.enabled and len(self.tracked) < self.max_groups:
            stats = self.tracked[group_id] = _GroupStats(int(self._clock() * 1000))
        return stats

    def on_event(self, name: str, fields: dict[str, Any]) -> None:
        if name == "group.converted":
            direction = "upgrade" if fields.get("to_type") == "consumer" else "downgrade"
            self._conversions.labels(direction).inc()
        elif name == "group.conversion_refused":
            self._refusals.labels(str(fields.get("direction")), str(fields.get("reason"))).inc()
        if not self.enabled:
            return
        gid = fields.get("group")
        if not isinstance(gid, str) or not gid:
            return
        stats = self._stats(gid)
        if stats is None:
            return
        if name in ("group.epoch_bumped", "group.generation_started"):
            stats.rebalances += 1
        elif name == "group.converted":
            direction = "upgrade" if fields.get("to_type") == "consumer" else "downgrade"
            stats.conversions[direction] = stats.conversions.get(direction, 0) + 1
        elif name == "group.conversion_refused":
            key = (str(fields.get("direction")), str(fields.get("reason")))
            stats.refusals[key] = stats.refusals.get(key, 0) + 1
        elif name == "group.deleted":
            self.tracked.pop(gid, None)
            return
        if is_stable(self._lookup(gid)):
            stats.last_stable_ms = int(self._clock() * 1000)

    # --- scrape time ------------------------------------------------------------------------------

    def _reader(self, name: str) -> Callable[[], dict[Labels, float]]:
        def read() -> dict[Labels, float]:
            return self._scrape.get(name, {})

        return read

    def _refresh(self) -> None:
        self._scrape = self.collect()

    def collect(self) -> dict[str, dict[Labels, float]]:
        """Every per-group gauge, for the tracked groups (admitting new ones up to the cap)."""
        out: dict[str, dict[Labels, float]] = {
            "groupshift_group_members": {},
            "groupshift_group_epoch": {},
            "groupshift_group_partitions_pending_revocation": {},
            "groupshift_group_seconds_since_stable": {},
            "groupshift_group_rebalances_by_group_total": {},
            "groupshift_group_committed_offset_lag": {},
        }
        now_ms = int(self._clock() * 1000)
        seen: set[str] = set()
        untracked = 0
        for gid, group, offsets in self._groups():
            seen.add(gid)
            stats = self._stats(gid)
            if stats is None:
                untracked += 1
                continue
            key = (gid,)
            if isinstance(group, ConsumerGroup):
                classic = sum(1 for m in group.members.values() if m.uses_classic_protocol)
                out["groupshift_group_members"][(gid, "classic")] = classic
                out["groupshift_group_members"][(gid, "consumer")] = len(group.members) - classic
                out["groupshift_group_epoch"][key] = group.group_epoch
                out["groupshift_group_partitions_pending_revocation"][key] = sum(
                    len(parts)
                    for m in group.members.values()
                    for parts in m.partitions_pending_revocation.values()
                )
            elif isinstance(group, ClassicGroup):
                out["groupshift_group_members"][(gid, "classic")] = len(group.members)
                out["groupshift_group_members"][(gid, "consumer")] = 0
                out["groupshift_group_epoch"][key] = group.generation_id
                out["groupshift_group_partitions_pending_revocation"][key] = 0
            elif isinstance(group, ConnectGroup):
                out["groupshift_group_members"][(gid, "connect")] = len(group.members)
                out["groupshift_group_epoch"][key] = group.group_epoch
                out["groupshift_group_partitions_pending_revocation"][key] = sum(
                    len(m.pending_revocation.connectors) + len(m.pending_revocation.tasks)
                    for m in group.members.values()
                )
            elif isinstance(group, StreamsGroup):
                # Classic Kafka Streams instances inside (online migration) count as classic:
                # the roll to `group.protocol=streams` is done at classic 0.
                classic = group.num_classic_members
                out["groupshift_group_members"][(gid, "classic")] = classic
                out["groupshift_group_members"][(gid, "streams")] = len(group.members) - classic
                out["groupshift_group_epoch"][key] = group.group_epoch
                # tasks = input partitions of a subtopology
                out["groupshift_group_partitions_pending_revocation"][key] = sum(
                    len(parts)
                    for m in group.members.values()
                    for parts in m.active_pending_revocation.values()
                )
            if is_stable(group):
                stats.last_stable_ms = now_ms
            out["groupshift_group_seconds_since_stable"][key] = (now_ms - stats.last_stable_ms) / 1000
            out["groupshift_group_rebalances_by_group_total"][key] = stats.rebalances
            lag = 0
            for topic, parts in offsets.items():
                for partition, committed in parts.items():
                    end = self._log_end_offset(topic, partition)
                    if end is not None:
                        lag += max(0, end - committed.offset)
            out["groupshift_group_committed_offset_lag"][key] = lag
        for gid in [g for g in self.tracked if g not in seen]:
            del self.tracked[gid]  # deleted groups free their slot
        self.untracked = untracked
        return out
