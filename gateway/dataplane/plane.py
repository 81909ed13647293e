"""The data plane facade: topics, their partitions, appends, durability and change notifications.

On-disk layout of the data directory (Kafka's where it has one):
  meta.properties             cluster.id and node.id (Kafka's file of the same name)
  topics.json                 the topic registry (names, ids, partition counts)
  configs.json                dynamic topic and broker configs (`configs.ConfigStore`)
  producer-ids.json           reserved producer-id block
  .lock                       held by the running server (Kafka's `LogManager` lock)
  <topic>-<partition>/        one directory per partition, holding its log and
      partition.metadata      the owning topic id (Kafka's file), so a directory left by a
                              deleted or re-created topic is recognised on open;
      log-start-offset        the log start offset DeleteRecords advanced it to, if any.
  <topic>-<partition>.<id>-stray   a partition directory no registered topic owns, renamed
                              aside at start-up (Kafka's stray logs), never deleted;
  <topic>-<partition>.<id>-delete  a partition of a deleted topic, about to be removed.

Start-up cannot destroy (`gateway.dataplane.datadir`): the `.lock` is taken before anything is
read; a damaged `meta.properties` or `topics.json`, or a missing `topics.json` next to partition
directories, refuses to start with the file named (`ignore_topics_file` starts anyway with no
topics, every partition directory renamed aside); a directory no topic owns is renamed aside
with one `partition.strays_renamed` warning. Only DeleteTopics deletes partition data, and only
directories whose `partition.metadata` names the deleted topic's id.

Durability: a topic change is durable before it is visible (directories first, then the
registry file, atomically). Appends go to the OS at once, so they survive SIGKILL; produce
requests with acks=1/-1 also wait for an fsync, and concurrent requests share one fsync (group
commit) run on a worker thread so the event loop keeps serving.

Bounds (docs/robustness.md, Bounds): the partitions of all topics (`max.partitions`; a creation
beyond is refused with POLICY_VIOLATION), and the descriptors the partition logs hold
(`log.open.files.max`, `store.OpenFileBudget`: idle logs are closed and reopened on use, at
start-up too). A creation that fails on the disk midway removes the directories it created and
answers KAFKA_STORAGE_ERROR with the cause.

Event loop: creating topics does file work that grows with the partition count (a directory,
`partition.metadata` and the log's files per partition, several fsyncs each), so `create_topics`
does it on a worker thread, a whole request at once (one registry write for the request);
the topics become visible only when complete and durable, and a failure (descriptors or disk
exhausted) removes what it made and answers KAFKA_STORAGE_ERROR with the reason. Topic changes
made by requests are serialised by `topic_changes`. Deleted partitions' directories are removed
off the loop too.

Hooks for the group layer (exact signatures in `subscribe` and `metadata_image`): every topic
creation, deletion and partition increase is reported, after it is durable, to each subscriber
on the event loop, together with the new `engine.metadata.MetadataImage`; `subscribe_batches`
listeners get one call per request (all its changes and the image after them), so a request of
300 topics costs the group layer one metadata update, not 300.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import structlog
from kio.schema.errors import ErrorCode

from engine.ids import kafka_uuid_string
from engine.metadata import EMPTY_IMAGE, MetadataImage, TopicImage
from gateway.dataplane.configs import ConfigStore, ConfigValueError, check_topic_configs
from gateway.dataplane.datadir import (
    DAMAGED_SUFFIX,
    DELETE_SUFFIX,
    IGNORE_TOPICS_FLAG,
    STRAY_SUFFIX,
    DataDirError,
    DataDirLock,
    is_delete_dir,
    load_or_create_meta,
    rename_aside,
    stray_topic,
)
from gateway.dataplane.durable import fsync_dir, write_atomically
from gateway.dataplane.producers import PartitionProducers, ProducerIdAllocator
from gateway.dataplane.store import (
    OpenFileBudget,
    PartitionStore,
    StoreFactory,
    open_files_budget,
    open_segment_store,
)
from gateway.dataplane.topics import (
    TOPICS_FILE,
    TopicChange,
    TopicInfo,
    TopicRegistry,
    TopicsFileError,
    topic_name_error,
)
from records.batch import validate_client_batch
from records.errors import InvalidBatchError, LogError

log = structlog.get_logger("gateway.dataplane")
_T = TypeVar("_T")

PARTITION_META_FILE = "partition.metadata"
LOG_START_FILE = "log-start-offset"
MAX_PARTITIONS = 10_000  # per topic; a guard against accidental huge counts
# All partitions of the node (`max.partitions`): each costs memory, a directory and start-up time
# (its log is recovered at every start); descriptors are bounded apart (`log.open.files.max`).
DEFAULT_MAX_PARTITIONS = 50_000
LOG_CHUNK = 50  # `topic.changed` lines logged between two yields to the event loop

TopicListener = Callable[[TopicChange, MetadataImage], None]
TopicBatchListener = Callable[[Sequence[TopicChange], MetadataImage], None]


@dataclass(frozen=True, slots=True)
class NewTopic:
    """One topic of a CreateTopics (or auto-creating Metadata) request, already validated by
    the API layer except for what depends on the registry (`check_new_topic`)."""

    name: str
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)


class TopicError(Exception):
    """A topic operation failed with a Kafka error code and Kafka's message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Partition:
    """One partition: its store, producer state, fetch waiters and group-commit fsync."""

    def __init__(self, topic: TopicInfo, index: int, store: PartitionStore, path: Path) -> None:
        self.topic = topic
        self.index = index
        self.store = store
        self.path = path
        self.producers = PartitionProducers()
        self._waiters: list[asyncio.Future[None]] = []
        self._appended = 0  # appends so far
        self._synced = 0  # appends known durable
        self._sync_job: asyncio.Future[None] | None = None
        lso_file = path / LOG_START_FILE
        self._deleted_upto = int(lso_file.read_text().strip()) if lso_file.exists() else 0

    @property
    def high_watermark(self) -> int:
        return self.store.end_offset

    @property
    def log_start_offset(self) -> int:
        """The first offset readable: the log's start, or where DeleteRecords moved it."""
        return max(self.store.start_offset, min(self._deleted_upto, self.store.end_offset))

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset to `offset` (DeleteRecords); durable on return.

        `offset` must lie in [0, high watermark]; a smaller one than the current start changes
        nothing. The records stay on disk until their segment is dropped (groupshift has no
        retention), but nothing below the new start is ever served again. Returns the new
        log start offset (Kafka's low watermark).
        """
        if offset > self.log_start_offset:
            write_atomically(self.path / LOG_START_FILE, f"{offset}\n".encode())
            self._deleted_upto = offset
        return self.log_start_offset

    def append(self, raw_batch: bytes) -> tuple[int, int]:
        """Append one client batch; raises `records.errors.BatchError` for a refused batch,
        `SequenceError` for producer state, `LogFailedError` when the log has failed.

        A retried duplicate of a recent batch is not appended again: its original offsets are
        returned, as Kafka does for idempotent producers.
        """
        h = validate_client_batch(raw_batch)
        if h.is_transactional:
            raise InvalidBatchError(
                "transactional batches are not supported: groupshift has no transaction coordinator",
                offset=h.base_offset,
            )
        check = self.producers.check(h)
        if check.error != ErrorCode.none:
            raise SequenceError(check.error, check.message or check.error.name)
        if check.duplicate_of is not None:
            return check.duplicate_of
        base, last = self.store.append_batch(raw_batch)
        self.producers.record(h, base, last)
        self._appended += 1
        self._wake()
        return base, last

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def add_waiter(self, fut: asyncio.Future[None]) -> None:
        """Complete `fut` at the next append (long-polling Fetch)."""
        self._waiters.append(fut)

    def remove_waiter(self, fut: asyncio.Future[None]) -> None:
        with contextlib.suppress(ValueError):
            self._waiters.remove(fut)

    async def make_durable(self) -> None:
        """Return once every append made so far is fsynced; concurrent callers share fsyncs."""
        target = self._appended
        while self._synced < target:
            if self._sync_job is None:
                self._sync_job = asyncio.ensure_future(self._sync())
            await asyncio.shield(self._sync_job)

    async def _sync(self) -> None:
        upto = self._appended
        try:
            await asyncio.get_running_loop().run_in_executor(None, self.store.sync)
            self._synced = max(self._synced, upto)
        finally:
            self._sync_job = None

    async def close(self) -> None:
        self._wake()
        job = self._sync_job
        if job is not None:
            with contextlib.suppress(OSError, LogError):
                await asyncio.shield(job)
        try:
            self.store.close()
        except (OSError, LogError) as e:  # a failed log: its files are released all the same
            log.error("partition.close_failed", path=str(self.path), error=str(e))


class SequenceError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class DataPlane:
    """All embedded topics of one node."""

    def __init__(
        self,
        data_dir: Path,
        *,
        node_id: int = 0,
        num_partitions: int = 1,
        auto_create_topics: bool = True,
        segment_bytes: int = 1 << 30,
        open_store: StoreFactory = open_segment_store,
        static_configs: Mapping[str, str] | None = None,
        lock: DataDirLock | None = None,
        ignore_topics_file: bool = False,
        max_partitions: int = DEFAULT_MAX_PARTITIONS,
        open_files_max: int = 0,
    ) -> None:
        """Open `data_dir`: the `.lock` first (`lock`, if the caller took it already, is kept
        and released by `close`), then `meta.properties`, `topics.json` and the partitions.
        Raises `DataDirError` (a `ValueError`) naming the file when the directory cannot be used;
        nothing has been changed then.

        `max_partitions` bounds the partitions of all topics (creations beyond are refused);
        `open_files_max` the descriptors partition logs hold (0: a quarter of `ulimit -n`),
        `ValueError` when it does not fit the process's limit."""
        self.data_dir = data_dir
        self.node_id = node_id
        self.num_partitions = num_partitions
        self.auto_create_topics = auto_create_topics
        self._segment_bytes = segment_bytes
        self._open_store = open_store
        self.max_partitions = max_partitions
        self.file_budget = OpenFileBudget(open_files_budget(open_files_max))
        self._listeners: list[TopicListener] = []
        self._batch_listeners: list[TopicBatchListener] = []
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._image = EMPTY_IMAGE
        # held by every topic change made from a request: a change whose file work runs on a
        # worker thread must not interleave with another one's registry write
        self.topic_changes = asyncio.Lock()
        self.closing = False
        self._lock = lock if lock is not None else DataDirLock.acquire(data_dir)
        try:
            self.cluster_id = load_or_create_meta(data_dir, node_id)
            self.topics = self._load_topics(ignore_topics_file)
            self.configs = ConfigStore(data_dir, node_id, static_configs)
            self.configs.forget_topics_except(self._topics_with_data())
            self.producer_ids = ProducerIdAllocator(data_dir)
            self._open_partitions()
            self._image = MetadataImage(
                (TopicImage(t.topic_id, t.name, t.partitions) for t in self.topics.all()), 0
            )
        except BaseException:
            for p in self._partitions.values():
                with contextlib.suppress(OSError, LogError):
                    p.store.close()
            self._lock.release()
            raise

    # -- startup ------------------------------------------------------------------------------

    def _partition_dir(self, name: str, index: int) -> Path:
        return self.data_dir / f"{name}-{index}"

    def _partition_dirs(self) -> list[Path]:
        """Directories that look like a partition: `<name>-<index>` holding `partition.metadata`."""
        out = []
        for entry in sorted(self.data_dir.iterdir()):
            name, _, idx = entry.name.rpartition("-")
            if name and idx.isdigit() and entry.is_dir() and (entry / PARTITION_META_FILE).exists():
                out.append(entry)
        return out

    def _topics_with_data(self) -> set[str]:
        """Registered topics, and topics whose partition directories are on disk (strays
        included): the configs of those are kept with their data. Only a topic with neither,
        the configs left by a crash before its directories were written, is forgotten."""
        names = {t.name for t in self.topics.all()}
        names.update(p.name.rpartition("-")[0] for p in self._partition_dirs())
        for entry in self.data_dir.iterdir():
            if (topic := stray_topic(entry.name)) is not None:
                names.add(topic)
        return names

    def _load_topics(self, ignore_topics_file: bool) -> TopicRegistry:
        """The topic registry, or a refusal that names `topics.json` and the way out.

        A missing `topics.json` is normal for a new data directory (an empty one is written at
        once); next to partition directories it means the registry was lost, and starting
        would orphan every partition. With `ignore_topics_file` the server starts with no
        topics instead: a damaged file is kept as `topics.json.<id>-damaged` and the partition
        directories become strays (renamed aside by `_open_partitions`)."""
        path = self.data_dir / TOPICS_FILE
        partitions = self._partition_dirs()
        try:
            registry = TopicRegistry.load(self.data_dir)
        except TopicsFileError as e:
            if not ignore_topics_file:
                raise DataDirError(f"{e}: {_topics_recovery(partitions)}") from None
            kept = rename_aside(path, DAMAGED_SUFFIX)
            log.warning("topics.file_ignored", file=str(path), problem=e.problem, kept_as=str(kept))
            registry = TopicRegistry.empty(self.data_dir)
        else:
            if path.exists():
                return registry
            if partitions and not ignore_topics_file:
                shown = ", ".join(p.name for p in partitions[:3]) + (", ..." if len(partitions) > 3 else "")
                raise DataDirError(
                    f"{path} is missing but data directory {self.data_dir} holds "
                    f"{len(partitions)} partition directories ({shown}): "
                    f"{_topics_recovery(partitions)}"
                )
            if partitions:
                log.warning("topics.file_ignored", file=str(path), problem="missing")
        registry.persist()
        return registry

    def _open_partitions(self) -> None:
        """Open every registered partition; rename aside directories no registered topic owns
        (Kafka's strays), with one warning; finish removing partitions of deleted topics."""
        strays: list[str] = []
        for entry in sorted(self.data_dir.iterdir()):
            if not entry.is_dir():
                continue
            if is_delete_dir(entry.name):  # DeleteTopics renamed it, then stopped before removing
                shutil.rmtree(entry, ignore_errors=True)
                continue
            meta = entry / PARTITION_META_FILE
            name, _, idx = entry.name.rpartition("-")
            if not meta.exists() or not idx.isdigit():
                continue
            topic = self.topics.get(name)
            if topic is None or int(idx) >= topic.partitions or not _owned_by(entry, topic):
                strays.append(rename_aside(entry, STRAY_SUFFIX).name)
        if strays:
            log.warning(
                "partition.strays_renamed",
                count=len(strays),
                renamed_to=strays[:20],
                data_dir=str(self.data_dir),
                reason="no topic in topics.json owns these partition directories; kept, not deleted",
            )
        for topic in self.topics.all():
            for i in range(topic.partitions):
                self._open_partition(topic, i, create=True)

    def _open_partition(self, topic: TopicInfo, index: int, *, create: bool) -> Partition:
        path = self._partition_dir(topic.name, index)
        if create and not (path / PARTITION_META_FILE).exists():
            self._write_partition_meta(topic, path)
        p = self._new_partition(topic, index)
        self._partitions[(topic.name, index)] = p
        return p

    def _new_partition(self, topic: TopicInfo, index: int) -> Partition:
        """Open partition `index`'s log through the descriptor budget (not yet registered)."""
        path = self._partition_dir(topic.name, index)
        store = self._open_store(
            path, segment_bytes=self._segment_bytes, fsync_policy="explicit", budget=self.file_budget
        )
        return Partition(topic, index, store, path)

    def _create_partitions(self, topic: TopicInfo, indexes: range) -> list[Partition]:
        """Write and open partitions `indexes` of `topic` (durable), or undo what this call
        created and raise `TopicError` (KAFKA_STORAGE_ERROR with the cause) on an OS error such
        as EMFILE or ENOSPC: a failed creation leaves no partition directory of its own behind.
        A directory already there was renamed aside as a stray first and stays so."""
        created: list[Path] = []
        opened: list[Partition] = []
        try:
            for i in indexes:
                path = self._partition_dir(topic.name, i)
                self._write_partition_meta(topic, path, created)
            fsync_dir(self.data_dir)
            for i in indexes:
                opened.append(self._new_partition(topic, i))
            return opened
        except (OSError, LogError) as e:
            for p in opened:
                with contextlib.suppress(OSError, LogError):
                    p.store.close()
            for path in created:
                shutil.rmtree(path, ignore_errors=True)
            with contextlib.suppress(OSError):
                fsync_dir(self.data_dir)
            cause = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            where = f" ({e.filename})" if isinstance(e, OSError) and e.filename else ""
            log.error(
                "topic.create_failed",
                topic=topic.name,
                partitions=len(indexes),
                error=cause,
                removed_directories=len(created),
            )
            raise TopicError(
                ErrorCode.kafka_storage_error,
                f"Creating {len(indexes)} partitions of topic '{topic.name}' failed: {cause}{where}; "
                f"the {len(created)} partition directories this request created were removed.",
            ) from None

    def _write_partition_meta(self, topic: TopicInfo, path: Path, created: list[Path] | None = None) -> None:
        if path.exists():  # not this topic's (it would hold its partition.metadata): keep it aside
            kept = rename_aside(path, STRAY_SUFFIX)
            log.warning(
                "partition.strays_renamed", count=1, renamed_to=[kept.name], data_dir=str(self.data_dir)
            )
        path.mkdir(parents=True)
        if created is not None:
            created.append(path)
        write_atomically(
            path / PARTITION_META_FILE,
            f"version: 0\ntopic_id: {kafka_uuid_string(topic.topic_id.bytes)}\n".encode(),
        )

    # -- reads --------------------------------------------------------------------------------

    def topic(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self.topics.by_id(topic_id)

    def partition(self, name: str, index: int) -> Partition | None:
        return self._partitions.get((name, index))

    def metadata_image(self) -> MetadataImage:
        """The engine's view of the topics: name, id and partition count of each (kept up to
        date change by change, so that reading it costs nothing and consecutive images share
        their entries)."""
        return self._image

    # -- notifications ------------------------------------------------------------------------

    def subscribe(self, listener: TopicListener) -> Callable[[], None]:
        """Call `listener(change, image)` after every durable topic change; returns unsubscribe."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def subscribe_batches(self, listener: TopicBatchListener) -> Callable[[], None]:
        """Call `listener(changes, image)` once per durable change or batch of changes (a
        CreateTopics request), with the image after all of them; returns unsubscribe."""
        self._batch_listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._batch_listeners:
                self._batch_listeners.remove(listener)

        return unsubscribe

    def _notify(self, change: TopicChange) -> None:
        _log_change(change)
        self._notify_all([change])

    def _notify_all(self, changes: Sequence[TopicChange]) -> None:
        """Report `changes` to the listeners (logging them is the caller's)."""
        for change in changes:
            if self._listeners:  # one image per change for them
                self._image = _apply(self._image, (change,))
                self._call(self._listeners, change, self._image)
        if not self._listeners:
            self._image = _apply(self._image, changes)
        self._call(self._batch_listeners, changes, self._image)

    @staticmethod
    def _call(
        listeners: Sequence[Callable[[_T, MetadataImage], None]], arg: _T, image: MetadataImage
    ) -> None:
        for listener in list(listeners):
            try:
                listener(arg, image)
            except Exception as e:
                log.error("topic.listener_failed", error=repr(e), exc_info=e)

    # -- changes ------------------------------------------------------------------------------

    def check_new_topic(self, name: str, partitions: int) -> None:
        """Raise `TopicError` if `name` cannot be created with `partitions` partitions."""
        if (err := topic_name_error(name)) is not None:
            raise TopicError(ErrorCode.invalid_topic_exception, err)
        if self.topics.get(name) is not None:
            raise TopicError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        if (other := self.topics.collides_with(name)) is not None:
            raise TopicError(
                ErrorCode.invalid_topic_exception,
                f"Topic '{name}' collides with existing topic: {other}",
            )
        if partitions <= 0:
            raise TopicError(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
        if partitions > MAX_PARTITIONS:
            raise TopicError(
                ErrorCode.invalid_partitions,
                f"Number of partitions {partitions} exceeds the limit of {MAX_PARTITIONS}.",
            )
        self._check_partition_budget(partitions)

    def total_partitions(self) -> int:
        return sum(t.partitions for t in self.topics.all())

    def _check_partition_budget(self, more: int) -> None:
        """POLICY_VIOLATION when `more` partitions would take the node past `max.partitions`."""
        total = self.total_partitions()
        if total + more > self.max_partitions:
            raise TopicError(
                ErrorCode.policy_violation,
                f"Adding {more} partitions would make {total + more} partitions on this node, "
                f"more than max.partitions={self.max_partitions} ({total} exist).",
            )

    def create_topic(
        self, name: str, partitions: int | None = None, configs: Mapping[str, str] | None = None
    ) -> TopicInfo:
        """Create a topic (default partition count: `num.partitions`) with its topic config
        overrides; durable on return (directories, then configs, then the registry: a crash
        leaves the directories renamed aside as strays at the next start, their configs kept
        with them, and creating the topic again replaces those configs)."""
        count = self.num_partitions if partitions is None else partitions
        self.check_new_topic(name, count)
        if configs:
            try:
                check_topic_configs(configs)
            except ConfigValueError as e:
                raise TopicError(ErrorCode.invalid_config, e.message) from None
        topic = TopicInfo(name, uuid.uuid4(), count)  # KIP-516: random, never zero
        partitions_opened = self._create_partitions(topic, range(count))
        try:
            self.configs.set_topic(name, dict(configs or {}))
            self.topics.add(topic)
        except OSError as e:
            self._undo_partitions(partitions_opened)
            with contextlib.suppress(OSError):
                self.configs.drop_topic(name)
            raise _storage_error(name, e) from None
        for p in partitions_opened:
            self._partitions[(name, p.index)] = p
        self._notify(TopicChange("created", topic))
        return topic

    async def create_topics(self, new: Sequence[NewTopic]) -> list[TopicInfo | TopicError]:
        """Create many topics with their file work on a worker thread; per topic, its
        `TopicInfo` or the `TopicError` refusing it (same checks and errors as `create_topic`).

        Directories and stores are made and opened first, off the loop (one directory fsync for
        the batch), then the configs and the registry are written (the registry off the loop),
        then the topics become visible and are reported in one batch. If the file work fails,
        what it made is removed and every topic of the batch answers KAFKA_STORAGE_ERROR with
        the reason: nothing is left half-created."""
        async with self.topic_changes:
            results: list[TopicInfo | TopicError] = []
            batch: list[tuple[TopicInfo, Mapping[str, str]]] = []
            seen: dict[str, str] = {}  # collision key -> name, within this batch
            batch_partitions = 0  # `max.partitions` counts the batch's earlier topics too
            for nt in new:
                try:
                    self.check_new_topic(nt.name, nt.partitions)
                    self._check_partition_budget(batch_partitions + nt.partitions)
                    key = nt.name.replace(".", "_")
                    if (other := seen.get(key)) is not None:
                        if other == nt.name:
                            raise TopicError(
                                ErrorCode.topic_already_exists, f"Topic '{nt.name}' already exists."
                            )
                        raise TopicError(
                            ErrorCode.invalid_topic_exception,
                            f"Topic '{nt.name}' collides with existing topic: {other}",
                        )
                    if nt.configs:
                        check_topic_configs(nt.configs)
                except ConfigValueError as e:
                    results.append(TopicError(ErrorCode.invalid_config, e.message))
                    continue
                except TopicError as e:
                    results.append(e)
                    continue
                seen[key] = nt.name
                batch_partitions += nt.partitions
                topic = TopicInfo(nt.name, uuid.uuid4(), nt.partitions)  # KIP-516: random, never zero
                batch.append((topic, nt.configs))
                results.append(topic)
            if not batch:
                return results
            topics = [t for t, _ in batch]
            loop = asyncio.get_running_loop()
            made: list[Partition] = []
            try:
                made = await loop.run_in_executor(None, self._make_partitions, topics)
                self.configs.set_topics({t.name: c for t, c in batch})
                await loop.run_in_executor(None, self.topics.write, self.topics.staged(topics))
            except (OSError, LogError, TopicError) as e:
                # a TopicError comes from `_create_partitions` (the disk or descriptors, with the
                # cause); it removed its own topic's directories, `_remove_made` the others'
                failure = e if isinstance(e, TopicError) else self._creation_failed(topics, made, e)
                self._close_stores(made)
                with contextlib.suppress(OSError):
                    self.configs.set_topics({t.name: {} for t in topics})
                await loop.run_in_executor(None, self._remove_made, topics)
                return [failure if isinstance(r, TopicInfo) else r for r in results]
            self.topics.install(topics)
            for p in made:
                self._partitions[(p.topic.name, p.index)] = p
            changes = [TopicChange("created", t) for t in topics]
            self._notify_all(changes)
            for i, change in enumerate(changes):  # hundreds of log lines: let others run between
                _log_change(change)
                if i % LOG_CHUNK == LOG_CHUNK - 1:
                    await asyncio.sleep(0)
            return results

    def _make_partitions(self, topics: Sequence[TopicInfo]) -> list[Partition]:
        """Directories, `partition.metadata` and open stores of every partition of `topics`
        (worker thread); on failure closes what it opened and raises."""
        made: list[Partition] = []
        try:
            for topic in topics:
                made.extend(self._create_partitions(topic, range(topic.partitions)))
        except BaseException:
            self._close_stores(made)
            raise
        return made

    @staticmethod
    def _close_stores(partitions: Sequence[Partition]) -> None:
        for p in partitions:
            with contextlib.suppress(OSError, LogError):
                p.store.close()

    def _creation_failed(
        self, topics: Sequence[TopicInfo], made: Sequence[Partition], e: Exception
    ) -> TopicError:
        self._close_stores(made)
        names = [t.name for t in topics]
        log.error(
            "topic.create_failed",
            topics=names[:20],
            count=len(names),
            partitions=sum(t.partitions for t in topics),
            error=str(e),
        )
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        return TopicError(
            ErrorCode.kafka_storage_error,
            f"Could not create the partitions of {len(names)} topic(s) in {self.data_dir}: {reason}; "
            "nothing was created",
        )

    def _remove_made(self, topics: Sequence[TopicInfo]) -> None:
        """Remove the partition directories a failed creation made (worker thread): they are
        owned by the new topic ids, so hold no one else's data."""
        for topic in topics:
            for i in range(topic.partitions):
                path = self._partition_dir(topic.name, i)
                if path.exists() and _owned_by(path, topic):
                    shutil.rmtree(path, ignore_errors=True)
                elif path.is_dir():  # made, but its partition.metadata was not: remove if empty
                    with contextlib.suppress(OSError):
                        path.rmdir()
        with contextlib.suppress(OSError):
            fsync_dir(self.data_dir)

    async def auto_create(self, names: Sequence[str]) -> None:
        """Create the legal names of `names` that do not exist, with `num.partitions`, when
        auto-creation is on (Metadata's rule), all in one batch off the loop."""
        if not self.auto_create_topics:
            return
        wanted = [
            n for n in dict.fromkeys(names) if topic_name_error(n) is None and self.topics.get(n) is None
        ]
        if not wanted:
            return
        results = await self.create_topics([NewTopic(n, self.num_partitions) for n in wanted])
        for name, r in zip(wanted, results, strict=True):
            if isinstance(r, TopicError) and r.code != ErrorCode.topic_already_exists:
                # a bound or the disk: the topic stays unknown, and the log says why
                log.warning("topic.auto_create_refused", topic=name, error=r.code.name, reason=r.message)

    async def delete_topic(self, name: str) -> TopicInfo:
        """Delete `name`: the registry first (off the loop), then its partitions are closed and
        their directories removed on a worker thread (a topic may have thousands)."""
        async with self.topic_changes:
            topic = self.topics.get(name)
            if topic is None:
                raise TopicError(
                    ErrorCode.unknown_topic_or_partition,
                    "This server does not host this topic-partition.",
                )
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, self.topics.write, self.topics.staged_without(name))
            self.topics.uninstall(name)
            self.configs.drop_topic(name)
            for i in range(topic.partitions):
                p = self._partitions.pop((name, i), None)
                if p is not None:
                    await p.close()
            await loop.run_in_executor(None, self._remove_partition_dirs, topic)
            self._notify(TopicChange("deleted", topic))
            return topic

    def follow(self, topics: Sequence[TopicInfo]) -> list[TopicChange]:
        """Make the registry (in memory only) `topics`, as another process's `topics.json` now
        holds them, and report the difference to the listeners; the changes made. A worker of
        `serve --workers N` other than worker 0 keeps no partitions: it learns the topics of
        worker 0's data plane this way, for its coordinators' metadata image (docs/workers.md)."""
        wanted = {t.name: t for t in topics}
        changes: list[TopicChange] = []
        for old in self.topics.all():
            now = wanted.get(old.name)
            if now is None or now.topic_id != old.topic_id:
                self.topics.uninstall(old.name)
                changes.append(TopicChange("deleted", old))
        for t in wanted.values():
            had = self.topics.get(t.name)
            if had is None:
                changes.append(TopicChange("created", t))
            elif t.partitions > had.partitions:
                changes.append(TopicChange("partitions_added", t, had.partitions))
            else:
                continue
            self.topics.install([t])
        if changes:
            self._notify_all(changes)
        return changes

    def _remove_partition_dirs(self, topic: TopicInfo) -> None:
        """Remove a deleted topic's partition directories (worker thread); a directory that is
        not this topic's (another id in its `partition.metadata`) is kept aside, never deleted."""
        for i in range(topic.partitions):
            path = self._partition_dir(topic.name, i)
            if not path.exists():
                continue
            if not _owned_by(path, topic):  # not this topic's data: never deleted with it
                kept = rename_aside(path, STRAY_SUFFIX)
                log.warning(
                    "partition.strays_renamed", count=1, renamed_to=[kept.name], data_dir=str(self.data_dir)
                )
                continue
            shutil.rmtree(rename_aside(path, DELETE_SUFFIX), ignore_errors=True)

    def check_partition_increase(self, name: str, count: int) -> TopicInfo:
        topic = self.topics.get(name)
        if topic is None:
            raise TopicError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
        if count < topic.partitions:
            raise TopicError(
                ErrorCode.invalid_partitions,
                f"Topic currently has {topic.partitions} partitions, which is higher than the "
                f"requested {count}.",
            )
        if count == topic.partitions:
            raise TopicError(
                ErrorCode.invalid_partitions, f"Topic already has {topic.partitions} partitions."
            )
        if count > MAX_PARTITIONS:
            raise TopicError(
                ErrorCode.invalid_partitions,
                f"Number of partitions {count} exceeds the limit of {MAX_PARTITIONS}.",
            )
        self._check_partition_budget(count - topic.partitions)
        return topic

    def _undo_partitions(self, partitions: list[Partition]) -> None:
        """Close and remove partitions `_create_partitions` made, the registry unchanged."""
        for p in partitions:
            with contextlib.suppress(OSError, LogError):
                p.store.close()
            shutil.rmtree(p.path, ignore_errors=True)

    async def add_partitions(self, name: str, count: int) -> TopicInfo:
        """Grow `name` to `count` partitions (increase only); durable on return. The caller holds
        `topic_changes` (CreatePartitions does).

        The new partitions' directories and stores, and the registry, are written on a worker
        thread, as `create_topics` does: growing a topic by thousands of partitions (a
        directory, two fsyncs and an open log each) used to stall every client for seconds."""
        old = self.check_partition_increase(name, count)
        loop = asyncio.get_running_loop()
        added = await loop.run_in_executor(None, self._create_partitions, old, range(old.partitions, count))
        topic = TopicInfo(name, old.topic_id, count)
        try:
            await loop.run_in_executor(None, self.topics.write, self.topics.staged([topic]))
        except OSError as e:
            await loop.run_in_executor(None, self._undo_partitions, added)
            raise _storage_error(name, e) from None
        self.topics.install([topic])
        for i in range(old.partitions):  # this topic's partitions only, not every partition
            if (p := self._partitions.get((name, i))) is not None:
                p.topic = topic
        for p in added:
            p.topic = topic
            self._partitions[(name, p.index)] = p
        self._notify(TopicChange("partitions_added", topic, previous_partitions=old.partitions))
        return topic

    # -- shutdown -----------------------------------------------------------------------------

    def wake_fetchers(self) -> None:
        """Release every long-polling Fetch now (shutdown)."""
        self.closing = True
        for p in self._partitions.values():
            p._wake()

    async def close(self) -> None:
        """Close every partition, then release the data directory's `.lock`."""
        self.wake_fetchers()
        for p in list(self._partitions.values()):
            await p.close()
        self._partitions.clear()
        self._lock.release()


def _storage_error(name: str, e: OSError) -> TopicError:
    """The answer when writing the registry or configs failed (the partitions were removed)."""
    return TopicError(
        ErrorCode.kafka_storage_error,
        f"Creating partitions of topic '{name}' failed: {e.strerror or e}"
        + (f" ({e.filename})" if e.filename else "")
        + "; the partition directories this request created were removed.",
    )


def _log_change(change: TopicChange) -> None:
    log.info(
        "topic.changed",
        change=change.kind,
        topic=change.topic.name,
        topic_id=str(change.topic.topic_id),
        partitions=change.topic.partitions,
        previous_partitions=change.previous_partitions,
    )


def _apply(image: MetadataImage, changes: Sequence[TopicChange]) -> MetadataImage:
    """`image` after `changes`, one version per change."""
    added = [
        TopicImage(c.topic.topic_id, c.topic.name, c.topic.partitions) for c in changes if c.kind != "deleted"
    ]
    removed = [c.topic.name for c in changes if c.kind == "deleted"]
    return image.with_topics(added, removed, versions=len(changes))


def _owned_by(path: Path, topic: TopicInfo) -> bool:
    """Whether the partition directory's `partition.metadata` names `topic`'s id."""
    try:
        owner = _read_properties_colon(path / PARTITION_META_FILE).get("topic_id")
    except (OSError, UnicodeDecodeError):
        return False
    return owner == kafka_uuid_string(topic.topic_id.bytes)


def _topics_recovery(partitions: list[Path]) -> str:
    """The way out of a lost or damaged topic registry, for the refusal message."""
    return (
        f"it names the topic of every partition directory, so groupshift does not start without "
        f"it; restore {TOPICS_FILE} from a backup, or start with {IGNORE_TOPICS_FLAG} to start "
        f"with no topics ({len(partitions)} partition directories are then renamed aside as "
        f"<name>.<id>{STRAY_SUFFIX}; nothing is deleted; docs/robustness.md tells how to take them back)"
    )


def _read_properties_colon(path: Path) -> dict[str, str]:
    """Kafka's `partition.metadata` uses `key: value` lines."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        k, sep, v = line.partition(":")
        if sep:
            out[k.strip()] = v.strip()
    return out
