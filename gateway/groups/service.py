"""The group coordinator service of the gateway (Kafka `GroupCoordinatorService`).

It owns `offsets.topic.num.partitions` shard runtimes (each with its own coordinator log under
`<data dir>/coordinator/__consumer_offsets-N`), routes a group id to its shard the way Kafka
does, feeds topic changes of the data plane to every shard as a new metadata image, keeps the
per-group dynamic configs (KIP-848 `consumer.session.timeout.ms` /
`consumer.heartbeat.interval.ms`), and exposes KIP-848's coordinator metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from engine.config import CoordinatorConfig, GroupConfig
from engine.ids import SystemIds
from engine.metadata import MetadataImage
from engine.shard import Shard
from gateway.coordinator_storage import CompactionPolicy, CoordinatorStorage
from gateway.groups import (
    client_assignment_apis,
    config_apis,
    connect_apis,
    group_apis,
    offset_apis,
    streams_apis,
)
from gateway.groups.group_metrics import GroupMetrics, group_counts
from gateway.groups.routing import partition_for
from gateway.groups.runtime import ShardRuntime
from records.durability import fsync_dir, fsync_file

if TYPE_CHECKING:
    from gateway.server import GatewayServer

log = structlog.get_logger("coordinator")

GROUP_CONFIGS_FILE = "group-configs.json"


# Scale-out's storage factory (docs/scale-out.md): (shard, now, config, ids, image) -> storage.
ShardOpener = Callable[[int, int, Any, Any, MetadataImage], CoordinatorStorage]


def merged_group_config(
    current: GroupConfig | None, values: Mapping[str, int | str | None], broker: CoordinatorConfig
) -> tuple[dict[str, Any], GroupConfig]:
    """A group's overrides after an IncrementalAlterConfigs (`values`; None removes an override)
    merged over `current`, and the config they make, validated against the broker's bounds (the
    `group.*` min/max settings, as Kafka's GroupConfigManager validates). A function of its own
    so that a test can apply the service's merge to a bare shard: a compiled class's methods
    cannot be borrowed by another class."""
    merged: dict[str, Any] = current.model_dump(by_alias=True) if current is not None else {}
    merged.update(values)
    merged = {k: v for k, v in merged.items() if v is not None}
    cfg = GroupConfig.model_validate(merged)
    cfg.validate_against(broker)
    return merged, cfg


class GroupCoordinatorService:
    def __init__(self, server: GatewayServer, open_shard: ShardOpener | None = None) -> None:
        self.server = server
        self.open_shard = open_shard
        self.config = server.config.group
        self.num_shards = self.config.offsets_topic_num_partitions
        self.base = Path(server.config.data_dir) / "coordinator"
        self.base.mkdir(parents=True, exist_ok=True)
        self.fsync_policy = server.config.coordinator_fsync_policy
        self.image = server.plane.metadata_image()
        self.audit = server.audit
        self._ids = SystemIds()
        m = server.metrics
        self._op_latency = m.summary(
            "groupshift_coordinator_event_processing_time_seconds",
            "Time to process one coordinator operation (KIP-848 event-processing-time)",
        )
        self._flush_latency = m.summary(
            "groupshift_coordinator_batch_flush_time_seconds",
            "Time of one group-commit fsync of a coordinator log (KIP-848 batch-flush-time)",
        )
        self._rebalances = m.counter(
            "groupshift_group_rebalances_total",
            "Group epoch bumps (consumer groups) and new generations (classic groups)",
            ("group_type",),
        )
        self._events = m.counter("groupshift_coordinator_events_total", "Coordinator events", ("event",))
        self.group_metrics = GroupMetrics(
            m,
            self._all_groups,
            self._lookup_group,
            self._log_end_offset,
            enabled=server.config.metrics_groups_enabled,
            max_groups=server.config.metrics_groups_max,
        )
        self.runtimes = [self._make_runtime(i) for i in range(self.num_shards)]
        self.group_configs: dict[str, GroupConfig] = {}
        self._load_group_configs()
        m.gauge(
            "groupshift_groups", "Groups by type and state (KIP-848 group-count)", ("group_type", "state")
        ).collect_from(self._group_counts)
        m.gauge(
            "groupshift_coordinator_pending_operations",
            "Responses waiting for durability (KIP-848 event-queue-size)",
        ).set_function(lambda: sum(len(r._waiting) for r in self.runtimes))
        m.gauge(
            "groupshift_coordinator_timers",
            "Coordinator timers scheduled (sessions, rebalance deadlines, retries); tracks members",
        ).set_function(lambda: sum(len(r.shard.timers) for r in self.runtimes))
        m.gauge("groupshift_coordinator_log_bytes", "Coordinator log size on disk (all shards)").set_function(
            self._coordinator_log_bytes
        )
        m.gauge(
            "groupshift_coordinator_compactions", "Coordinator log compactions since start (all shards)"
        ).set_function(lambda: sum(r.compactions for r in self.runtimes))
        server.plane.subscribe_batches(self._on_topic_change)
        server.ready_checks["coordinator_shards_loaded"] = lambda: all(r.loaded for r in self.runtimes)

    def _make_runtime(self, index: int) -> ShardRuntime:
        directory = str(self.base / f"__consumer_offsets-{index}")

        settings = self.server.config

        def open_storage(now: int) -> CoordinatorStorage:
            if self.open_shard is not None:
                return self.open_shard(index, now, self.config, self._ids, self.image)
            return CoordinatorStorage.open(
                directory,
                config=self.config,
                ids=self._ids,
                image=self.image,
                now_ms=now,
                fsync_policy=self.fsync_policy,
                tombstone_retention_ms=settings.log_cleaner_delete_retention_ms,
            )

        compaction = (
            CompactionPolicy(
                settings.log_cleaner_min_cleanable_ratio, settings.coordinator_compaction_min_bytes
            )
            if settings.log_cleaner_enable
            else None
        )
        runtime = ShardRuntime(
            index,
            open_storage,
            on_op_time=self._op_latency.labels().observe,
            on_flush_time=self._flush_latency.observe,
            on_event=self._count_event,
            compaction=compaction,
        )
        runtime.on_reopen = lambda shard: self._reapply_group_configs(index, shard)
        return runtime

    def _reapply_group_configs(self, index: int, shard: Shard) -> None:
        """A reloaded or reopened shard is a new engine shard: give it the shard's per-group
        configs again (they live in `group-configs.json`, not in the log)."""
        for gid, cfg in getattr(self, "group_configs", {}).items():
            if partition_for(gid, self.num_shards) == index:
                shard.set_group_config(gid, cfg)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        for r in self.runtimes:
            r.start(loop)

    def close(self) -> None:
        for r in self.runtimes:
            r.close()

    # --- routing -----------------------------------------------------------------------------

    def runtime_for(self, group_id: str) -> ShardRuntime:
        return self.runtimes[partition_for(group_id, self.num_shards)]

    def by_shard(self, group_ids: Iterable[str]) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for g in group_ids:
            out.setdefault(partition_for(g, self.num_shards), []).append(g)
        return out

    # --- metadata ------------------------------------------------------------------------------

    def _on_topic_change(self, changes: Any, image: MetadataImage) -> None:
        """One metadata update per shard for a whole batch of topic changes (a CreateTopics of
        many topics), not one per topic: each update compares images and walks the groups."""
        self.image = image
        for r in self.runtimes:
            r.run(lambda c, now: c.update_metadata(image, now))

    # --- per-group configs ------------------------------------------------------------------------

    def _load_group_configs(self) -> None:
        path = self.base / GROUP_CONFIGS_FILE
        if not path.exists():
            return
        data = json.loads(path.read_text())
        for gid, values in data.items():
            cfg = GroupConfig.model_validate(values)
            self.group_configs[gid] = cfg
            self.runtime_for(gid).shard.set_group_config(gid, cfg)

    def set_group_config(
        self, group_id: str, values: dict[str, int | str | None], *, apply: bool = True
    ) -> None:
        """Apply (validated) per-group overrides; a None value removes that override. With
        `apply=False` only validate (IncrementalAlterConfigs' validate_only)."""
        merged, cfg = merged_group_config(self.group_configs.get(group_id), values, self.config)
        if not apply:
            return
        shard = self.runtime_for(group_id).shard
        if merged:
            self.group_configs[group_id] = cfg
            shard.set_group_config(group_id, cfg)
        else:
            self.group_configs.pop(group_id, None)
            shard.set_group_config(group_id, None)
        self._save_group_configs()

    def _save_group_configs(self) -> None:
        path = self.base / GROUP_CONFIGS_FILE
        tmp = path.with_suffix(".tmp")
        data = {g: c.model_dump(by_alias=True, exclude_none=True) for g, c in self.group_configs.items()}
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, json.dumps(data, sort_keys=True).encode())
            fsync_file(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        fsync_dir(str(self.base))

    def effective_group_config(self, group_id: str) -> dict[str, int | str]:
        return self.runtime_for(group_id).shard.effective_group_config(group_id)

    # --- metrics --------------------------------------------------------------------------------

    def _count_event(self, name: str, fields: dict[str, Any]) -> None:
        self._events.labels(name).inc()
        if name == "group.epoch_bumped":
            self._rebalances.labels("consumer").inc()
        elif name == "group.generation_started":
            self._rebalances.labels("classic").inc()
        self.group_metrics.on_event(name, fields)

    def _coordinator_log_bytes(self) -> int:
        """Bytes of every coordinator log segment on disk (what compaction keeps bounded)."""
        total = 0
        for shard_dir in self.base.glob("__consumer_offsets-*"):
            for f in shard_dir.iterdir():
                with contextlib.suppress(OSError):  # a segment removed by compaction meanwhile
                    total += f.stat().st_size
        return total

    def _all_groups(self) -> Iterator[tuple[str, Any, Mapping[str, Mapping[int, Any]]]]:
        for r in self.runtimes:
            shard = r.shard
            for gid, g in shard.groups.items():
                yield gid, g, shard.offsets.group(gid)

    def _lookup_group(self, group_id: str) -> Any:
        if len(getattr(self, "runtimes", ())) != self.num_shards:
            return None  # events replayed while the shards are still being loaded
        return self.runtime_for(group_id).shard.groups.get(group_id)

    def _log_end_offset(self, topic: str, partition: int) -> int | None:
        p = self.server.plane.partition(topic, partition)
        return None if p is None else p.high_watermark

    def _group_counts(self) -> dict[tuple[str, ...], float]:
        counts: dict[tuple[str, ...], float] = {}
        for r in self.runtimes:
            for key, n in group_counts(r.shard.groups.values()).items():
                counts[key] = counts.get(key, 0) + n
        return counts


def install_group_layer(
    server: GatewayServer,
    open_shard: ShardOpener | None = None,
    *,
    create_topics: streams_apis.CreateTopics | None = None,
) -> GroupCoordinatorService:
    """`create_topics`: how a streams group's missing internal topics are created when not by
    this node's data plane (a worker of `serve --workers N` asks worker 0, docs/workers.md)."""
    service = GroupCoordinatorService(server, open_shard)
    group_apis.register(server.registry, service)
    client_assignment_apis.register(server.registry, service)
    connect_apis.register(server.registry, service)
    # Embedded mode creates a streams group's missing internal topics itself.
    if create_topics is None and server.config.upstream is None:
        create_topics = server.plane.create_topics
    streams_apis.register(server.registry, service, create_topics)
    offset_apis.register(server.registry, service)
    config_apis.register(server.registry, service)
    server.on_start.append(lambda loop: service.start(loop))
    server.on_stop.append(service.close)
    return service


Hook = Callable[..., None]
