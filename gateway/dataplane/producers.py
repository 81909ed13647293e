"""Idempotent producers: producer ids (InitProducerId) and per-partition duplicate detection.

kafka-python 3 and librdkafka with `enable.idempotence` call InitProducerId and then number
their batches per partition (producer id, epoch, base sequence). Kafka uses that to drop a
retried batch it already appended (answering with the original offsets) and to refuse gaps
(`ProducerStateManager` / `ProducerAppendInfo`). Here:
  * ids come from blocks reserved durably in `producer-ids.json` (as Kafka's
    `ProducerIdManager` reserves blocks), so an id is never handed out twice across restarts;
    every new id starts at epoch 0;
  * per partition, the last five batches of each producer are remembered in memory: a batch
    equal to one of them is a duplicate; a newer epoch resets the state; an older epoch is
    INVALID_PRODUCER_EPOCH; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER. State is not
    rebuilt from the log on restart: a producer unknown to a partition is accepted at any
    sequence (Kafka accepts unknown producers the same way after their state expired).
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from kio.schema.errors import ErrorCode

from gateway.dataplane.durable import write_atomically
from records.batch import BatchHeader

PRODUCER_IDS_FILE = "producer-ids.json"
BLOCK_SIZE = 1000
CACHED_BATCHES = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN


class ProducerIdAllocator:
    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / PRODUCER_IDS_FILE
        reserved_until = 0
        if self._path.exists():
            reserved_until = int(json.loads(self._path.read_text())["reserved_until"])
        self._next = reserved_until
        self._limit = reserved_until

    def next_id(self) -> int:
        if self._next >= self._limit:
            self._limit = self._next + BLOCK_SIZE
            write_atomically(self._path, json.dumps({"reserved_until": self._limit}).encode())
        pid = self._next
        self._next += 1
        return pid


@dataclass(slots=True)
class _ProducerEntry:
    epoch: int
    # (first sequence, last sequence, base offset, last offset) of recent batches
    batches: deque[tuple[int, int, int, int]] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))


class SequenceCheck:
    """Outcome of checking a batch: append it, answer a duplicate, or refuse it."""

    __slots__ = ("duplicate_of", "error", "message")

    def __init__(
        self,
        error: ErrorCode = ErrorCode.none,
        message: str | None = None,
        duplicate_of: tuple[int, int] | None = None,
    ) -> None:
        self.error = error
        self.message = message
        self.duplicate_of = duplicate_of


_APPEND = SequenceCheck()


class PartitionProducers:
    """The producer state of one partition."""

    def __init__(self) -> None:
        self._entries: dict[int, _ProducerEntry] = {}

    def check(self, h: BatchHeader) -> SequenceCheck:
        if h.producer_id < 0:
            return _APPEND
        entry = self._entries.get(h.producer_id)
        if entry is None or h.producer_epoch > entry.epoch:
            return _APPEND
        if h.producer_epoch < entry.epoch:
            return SequenceCheck(
                ErrorCode.invalid_producer_epoch,
                f"Epoch of producer {h.producer_id} is {h.producer_epoch}, which is smaller "
                f"than the last seen epoch {entry.epoch}",
            )
        for first, last, base, last_offset in entry.batches:
            if first == h.base_sequence and last == h.last_sequence:
                return SequenceCheck(duplicate_of=(base, last_offset))
        if entry.batches:
            expected = (entry.batches[-1][1] + 1) % 2**31
            if h.base_sequence != expected:
                return SequenceCheck(
                    ErrorCode.out_of_order_sequence_number,
                    f"Out of order sequence number for producer {h.producer_id}: "
                    f"{h.base_sequence} (incoming seq. number), {expected - 1} "
                    "(current end sequence number)",
                )
        return _APPEND

    def record(self, h: BatchHeader, base_offset: int, last_offset: int) -> None:
        if h.producer_id < 0:
            return
        entry = self._entries.get(h.producer_id)
        if entry is None or h.producer_epoch != entry.epoch:
            entry = self._entries[h.producer_id] = _ProducerEntry(h.producer_epoch)
        entry.batches.append((h.base_sequence, h.last_sequence, base_offset, last_offset))
