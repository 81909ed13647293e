"""A coordinator shard's log kept in a partition of a compacted Kafka topic (docs/scale-out.md).

It honours `records.durability.CoordinatorLog`, so `CoordinatorStorage` and the shard runtime
use it exactly like the local `SegmentLog`:

* `append_records` buffers an operation's records in memory under local offsets (the engine's
  journal: nothing is visible to anyone yet);
* the group commit (`begin_sync` -> `run()` in a worker thread -> `finish_sync`) is one Kafka
  transaction of the shard's transactional producer: every buffered record is produced to the
  shard's partition and `commit_transaction` returns once Kafka acknowledged them all
  (`acks=all`) and wrote the commit marker. Only then does `durable_offset` advance, so the
  runtime releases no response whose records Kafka has not acknowledged (the local log's fsync
  rule, with the cluster's replication in place of the disk);
* a commit that fails -- `PRODUCER_FENCED` / `INVALID_PRODUCER_EPOCH` after another node
  initialised the same transactional id, a timeout, an unreachable cluster -- marks the log
  failed: every later call raises, and the runtime drops the shard (`ShardLog.failed`).

`fence_and_read` is the other half, run by a node that gains a shard: it initialises the
shard's transactional producer (Kafka's transaction coordinator bumps the producer epoch, which
fences the previous owner and aborts a transaction it left open), then reads the partition from
the beginning to its end with `read_committed` and returns the records as record batches in the
local log's format, which `gateway.coordinator_storage.load_shard` replays unchanged.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from records.batch import BatchHeader, build_batch, read_batch_header
from records.durability import FsyncPolicy
from records.errors import LogError

log = structlog.get_logger("scaleout")

LOAD_BATCH_RECORDS = 1000


class ShardLogFailed(LogError):
    """The shard's Kafka log refused or lost a commit; the shard must be dropped."""


def transactional_id(topic: str, shard: int) -> str:
    return f"{topic}-shard-{shard}"


def producer_config(
    bootstrap: str, topic: str, shard: int, timeout_ms: int, security: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The shard's transactional producer; `security` is the `upstream.` security settings in
    librdkafka's names (gateway/upstream/security.py)."""
    return {
        **(security or {}),
        "bootstrap.servers": bootstrap,
        "transactional.id": transactional_id(topic, shard),
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 0,
        "transaction.timeout.ms": max(timeout_ms * 2, 10000),
        "message.timeout.ms": timeout_ms,
        "socket.connection.setup.timeout.ms": min(timeout_ms, 10000),
        "client.id": f"groupshift-shard-{shard}",
        "log.connection.close": False,  # idle connections closed by brokers are not news
    }


@dataclass
class Loaded:
    """What `fence_and_read` hands to the loop: the fenced producer and the partition's records."""

    shard: int
    producer: Producer
    batches: list[bytes]
    records: int
    end_offset: int
    seconds: float
    fence_seconds: float = 0.0


def fence_and_read(
    bootstrap: str,
    topic: str,
    shard: int,
    *,
    timeout_ms: int,
    stop: threading.Event | None = None,
    on_fenced: Callable[[], None] | None = None,
    security: dict[str, Any] | None = None,
) -> Loaded:
    """Fence the previous owner of `shard` and read its partition to the end (blocking).
    `on_fenced` is called once the fence is over, whether it succeeded or failed."""
    started = time.monotonic()
    # The reader is created (connects, fetches metadata) while the producer fences; it reads
    # nothing before the fence is complete.
    consumer = Consumer(
        {
            **(security or {}),
            "bootstrap.servers": bootstrap,
            "group.id": f"groupshift-loader-{topic}",  # never joined: partitions are assigned
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 64 * 1024 * 1024,
            # The partition ends with a transaction marker, never delivered, so the end is known
            # from an empty fetch (partition EOF): do not let the broker hold that one back.
            "fetch.wait.max.ms": 10,
            "client.id": f"groupshift-loader-{shard}",
            "log.connection.close": False,
        }
    )
    try:
        producer = Producer(producer_config(bootstrap, topic, shard, timeout_ms, security))
        producer.init_transactions(timeout_ms / 1000)
    except BaseException:
        consumer.close()
        raise
    finally:
        if on_fenced is not None:
            on_fenced()
    fenced_at = time.monotonic()
    batches: list[bytes] = []
    records = 0
    try:
        tp = TopicPartition(topic, shard)
        _low, high = consumer.get_watermark_offsets(tp, timeout=timeout_ms / 1000)
        if high > 0:
            consumer.assign([TopicPartition(topic, shard, 0)])
            pending: list[tuple[bytes | None, bytes | None]] = []
            ts = 0
            deadline = time.monotonic() + max(timeout_ms / 1000, 30.0)
            done = False
            while not done:
                if stop is not None and stop.is_set():
                    raise ShardLogFailed(f"loading shard {shard} was cancelled")
                if time.monotonic() > deadline:
                    raise ShardLogFailed(f"shard {shard}: partition not read to {high} in time")
                # consume() waits out its timeout unless 10,000 records arrive: keep it short,
                # the end of the partition is recognised by its EOF event, not by a pause.
                for msg in consumer.consume(num_messages=10000, timeout=0.05):
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            done = (msg.offset() or 0) >= high
                            continue
                        raise ShardLogFailed(f"shard {shard}: reading failed: {err}")
                    pending.append((msg.key(), msg.value()))
                    ts = msg.timestamp()[1]
                    if len(pending) >= LOAD_BATCH_RECORDS:
                        batches.append(build_batch(pending, base_offset=records, timestamp_ms=max(ts, 0)))
                        records += len(pending)
                        pending = []
                    if (msg.offset() or 0) >= high - 1:
                        done = True
            if pending:
                batches.append(build_batch(pending, base_offset=records, timestamp_ms=max(ts, 0)))
                records += len(pending)
    finally:
        consumer.close()
    return Loaded(shard, producer, batches, records, high, time.monotonic() - started, fenced_at - started)


@dataclass
class _Commit:
    """One group commit: the buffered batches, committed as one transaction by `run()`."""

    log: KafkaShardLog
    batches: list[tuple[list[tuple[bytes | None, bytes | None]], int]]
    end: int
    error: BaseException | None = None
    done: bool = field(default=False)

    def run(self) -> None:
        self.log._commit(self)


class KafkaShardLog:
    """`CoordinatorLog` over shard `shard`'s partition, written by a fenced producer."""

    def __init__(self, loaded: Loaded, topic: str, *, timeout_ms: int) -> None:
        self.topic = topic
        self.shard = loaded.shard
        self._producer: Producer | None = loaded.producer
        self._loaded: list[bytes] | None = loaded.batches
        self._timeout = timeout_ms / 1000
        self._end = loaded.records
        self._durable = loaded.records
        self._buffer: list[tuple[list[tuple[bytes | None, bytes | None]], int]] = []
        self._lock = threading.Lock()  # one transaction at a time (sync() and a worker's run())
        self.failed: str | None = None
        self.commits = 0

    @property
    def directory(self) -> str:
        return f"kafka:{self.topic}-{self.shard}"

    @property
    def fsync_policy(self) -> FsyncPolicy:
        return "batch"

    @property
    def end_offset(self) -> int:
        return self._end

    @property
    def durable_offset(self) -> int:
        return self._durable

    def _check(self) -> None:
        if self.failed is not None:
            raise ShardLogFailed(f"shard {self.shard}: {self.failed}")
        if self._producer is None:
            raise ShardLogFailed(f"shard {self.shard}: the log is closed")

    def append_records(
        self, records: Sequence[tuple[bytes | None, bytes | None]], timestamp_ms: int
    ) -> tuple[int, int]:
        self._check()
        base = self._end
        self._buffer.append((list(records), timestamp_ms))
        self._end = base + len(records)
        return base, self._end - 1

    def begin_sync(self) -> _Commit:
        self._check()
        job = _Commit(self, self._buffer, self._end)
        self._buffer = []
        return job

    def finish_sync(self, pending: Any) -> int:
        assert isinstance(pending, _Commit)
        if pending.error is not None:
            raise ShardLogFailed(f"shard {self.shard}: {pending.error}")
        self._durable = max(self._durable, pending.end)
        return self._durable

    def sync(self) -> int:
        job = self.begin_sync()
        job.run()
        return self.finish_sync(job)

    def _commit(self, job: _Commit) -> None:
        """Produce the job's records and commit them as one transaction (worker thread)."""
        with self._lock:
            producer = self._producer
            try:
                if self.failed is not None or producer is None:
                    raise ShardLogFailed(self.failed or "the log is closed")
                if not job.batches:
                    job.done = True
                    return
                producer.begin_transaction()
                for records, ts in job.batches:
                    for key, value in records:
                        producer.produce(self.topic, value=value, key=key, partition=self.shard, timestamp=ts)
                producer.commit_transaction(self._timeout)
                self.commits += 1
                job.done = True
            except (KafkaException, BufferError, ShardLogFailed) as e:
                reason = _describe(e)
                self.failed = reason
                job.error = ShardLogFailed(reason)
                log.warning("scaleout.shard_commit_failed", shard=self.shard, error=reason)
                if isinstance(e, KafkaException) and _requires_abort(e) and producer is not None:
                    with contextlib.suppress(KafkaException):
                        producer.abort_transaction(self._timeout)
                raise job.error from None

    def batches(self, from_offset: int | None = None) -> Iterator[tuple[BatchHeader, bytes]]:
        loaded, self._loaded = self._loaded or [], None  # replayed once, then let go
        for raw in loaded:
            yield read_batch_header(raw), raw

    def close(self) -> None:
        # A transaction in flight in a worker thread finishes or fails on its own; nothing more
        # is appended. The producer is released with its last reference (librdkafka's destroy).
        self._producer = None
        self._buffer = []


def _requires_abort(e: KafkaException) -> bool:
    err = e.args[0] if e.args else None
    return isinstance(err, KafkaError) and bool(err.txn_requires_abort())


def _describe(e: BaseException) -> str:
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        err: KafkaError = e.args[0]
        kind = "fenced" if err.code() in _FENCED else ("fatal" if err.fatal() else "failed")
        return f"{kind}: {err.name()}: {err.str()}"
    return str(e) or type(e).__name__


_FENCED = frozenset(
    code
    for code in (
        getattr(KafkaError, "_FENCED", None),
        getattr(KafkaError, "PRODUCER_FENCED", None),
        getattr(KafkaError, "INVALID_PRODUCER_EPOCH", None),
    )
    if code is not None
)
