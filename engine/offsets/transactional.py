"""Transactional offset commits (TxnOffsetCommit, key 28): validation, pending offsets and their
completion (Kafka `OffsetMetadataManager.commitTransactionalOffset`,
`validateTransactionalOffsetCommit`, `replayEndTransactionMarker`, `hasPendingTransactionalOffsets`).

Kafka keeps a transactional commit as OffsetCommit records in a transactional batch of the
group's `__consumer_offsets` partition: replayed into a per-producer pending store, moved into
the committed offsets when the transaction's COMMIT marker is replayed, dropped at ABORT. While a
producer has pending offsets for a partition, OffsetFetch with `require_stable` answers that
partition UNSTABLE_OFFSET_COMMIT.

groupshift has no transaction coordinator and no markers of its own: in upstream mode the
transaction lives in the cluster and the gateway learns its outcome there
(`gateway.upstream.transactions`, docs/transactions.md). This module is the sans-IO part:

* `validate_transactional_commit`: who may commit, as Kafka's group coordinator decides it for
  classic, consumer and streams groups (generation / member epoch / member id / group instance
  id; an older member epoch only for the partitions or tasks the member held since then; a stale
  epoch is ILLEGAL_GENERATION, as Kafka maps it for TxnOffsetCommit up to v5);
* `PendingTransactionalOffsets`: the pending store, per partition, with the producer id and
  epoch each offset was accepted under. It is resolved per partition: once no transaction holds
  the partition where the outcome is read, every offset pending before that read has ended, and
  the partition's committed value there is the one Kafka's markers left;
* `materialize`: the records of a committed transaction's offsets. Kafka keeps the more recent of
  a transactional and a regular commit by their position in the log; groupshift compares the
  time the transactional commit was accepted with the regular commit's timestamp.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.classic.group import ClassicGroup
from engine.classic.state import ClassicGroupState
from engine.connect.group import ConnectGroup
from engine.consumer.group import ConsumerGroup
from engine.errors import CoordinatorError, Errors
from engine.metadata import TopicId
from engine.offsets.operations import offset_record
from engine.offsets.store import OffsetAndMetadata
from engine.offsets.validation import validate_consumer_commit, validate_streams_commit
from engine.operation import Operation

if TYPE_CHECKING:
    from engine.state import ShardState

TopicPartition = tuple[str, int]
# A transactional commit never needs OffsetCommit v9 (Kafka skips that check when transactional).
_TRANSACTIONAL_VERSION = 9


def validate_transactional_commit(
    shard: ShardState,
    group_id: str,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
    partitions: Iterable[TopicPartition] = (),
) -> None:
    """Kafka `validateTransactionalOffsetCommit`: a missing group accepts a commit with generation
    -1 (a "simple" group, created when the offsets are committed) and refuses any other with
    ILLEGAL_GENERATION; an existing group checks the member as a regular commit does
    (`Group.validateOffsetCommit` with `isTransactional`), then each of `partitions` (the ones
    the request may write: known, metadata not too large) against an older epoch's tasks or
    partitions. Up to TxnOffsetCommit v5 Kafka answers STALE_MEMBER_EPOCH as ILLEGAL_GENERATION
    (`supportsStaleMemberEpochError`: v6+; groupshift serves up to v4), and a partition that
    fails fails the whole request."""
    group = shard.groups.get(group_id)
    if group is None:
        if generation_id < 0:
            return
        raise CoordinatorError(Errors.ILLEGAL_GENERATION)
    if isinstance(group, ClassicGroup):
        _validate_classic(group, member_id, group_instance_id, generation_id)
        return
    if isinstance(group, ConnectGroup):
        raise CoordinatorError(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is a connect group.")
    # Consumer and streams groups (Kafka 4.x `ConsumerGroup` / `StreamsGroup.validateOffsetCommit`):
    # a transactional commit without member (TxnOffsetCommit v0-v2, or a producer given only
    # the group id) is accepted whatever the members; the OffsetCommit version check is skipped.
    if generation_id == -1 and member_id == "" and group_instance_id is None:
        return
    try:
        if isinstance(group, ConsumerGroup):
            check = validate_consumer_commit(
                group, member_id, generation_id, _TRANSACTIONAL_VERSION, _topic_id(shard)
            )
        else:
            check = validate_streams_commit(group, member_id, generation_id, _TRANSACTIONAL_VERSION)
        if check is not None:
            for topic, partition in partitions:
                check(topic, partition)
    except CoordinatorError as e:
        if e.code is Errors.STALE_MEMBER_EPOCH:
            raise CoordinatorError(Errors.ILLEGAL_GENERATION, e.message) from None
        raise


def _topic_id(shard: ShardState) -> Callable[[str], TopicId | None]:
    def resolve(name: str) -> TopicId | None:
        topic = shard.image.topic(name)
        return None if topic is None else topic.topic_id

    return resolve


def _validate_classic(group: ClassicGroup, member_id: str, instance_id: str | None, generation: int) -> None:
    """Kafka `ClassicGroup.validateOffsetCommit` with `isTransactional`: unlike a regular commit,
    one without member id and generation (TxnOffsetCommit v0-v2) is accepted in a group with
    members, and a group completing its rebalance accepts it."""
    if group.is_in_state(ClassicGroupState.DEAD):
        raise CoordinatorError(Errors.COORDINATOR_NOT_AVAILABLE)
    if generation < 0 and group.is_in_state(ClassicGroupState.EMPTY):
        return
    if generation >= 0 or member_id != "" or instance_id is not None:
        group.validate_member(member_id, instance_id)
        if generation != group.generation_id:
            raise CoordinatorError(Errors.ILLEGAL_GENERATION)


@dataclass(slots=True, frozen=True)
class PendingOffset:
    """One partition's offset in an open transaction, as accepted (`seq`: the gateway's number
    for the accepted TxnOffsetCommit, increasing)."""

    seq: int
    producer_id: int
    producer_epoch: int
    value: OffsetAndMetadata


class PendingTransactionalOffsets:
    """Kafka's `pendingTransactionalOffsets` / `openTransactionsByGroup`, kept per partition: the
    pending offsets of every open transaction that wrote the partition. A partition's pending
    offsets are resolved together, once no transaction holds it any more (the outcome is then
    the partition's committed value, which Kafka picks by log order among the transactions that
    committed). A partition can also be marked pending without a known offset
    (`mark_unknown`): a transaction found open where the outcome is read, after a restart."""

    __slots__ = ("_by_group", "_epochs")

    def __init__(self) -> None:
        self._by_group: dict[str, dict[TopicPartition, dict[int, PendingOffset | None]]] = {}
        self._epochs: dict[int, int] = {}  # producer id -> newest epoch with a pending offset

    def __len__(self) -> int:
        return sum(len(parts) for parts in self._by_group.values())

    def groups(self) -> list[str]:
        return list(self._by_group)

    def partitions(self, group_id: str) -> dict[TopicPartition, list[int]]:
        """The group's pending partitions and the seqs pending on each."""
        return {tp: list(seqs) for tp, seqs in self._by_group.get(group_id, {}).items()}

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        """Kafka `hasPendingTransactionalOffsets`."""
        return bool(self._by_group.get(group_id, {}).get((topic, partition)))

    def check_epoch(self, producer_id: int, producer_epoch: int) -> None:
        """A commit from an epoch older than one already accepted for the producer comes from a
        zombie: INVALID_PRODUCER_EPOCH, as Kafka's log answers a fenced transactional append."""
        newest = self._epochs.get(producer_id)
        if newest is not None and producer_epoch < newest:
            raise CoordinatorError(
                Errors.INVALID_PRODUCER_EPOCH,
                f"Producer {producer_id} epoch {producer_epoch} is older than {newest}.",
            )

    def add(
        self,
        seq: int,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> None:
        """Offsets accepted into a producer's open transaction (after `check_epoch`)."""
        self.check_epoch(producer_id, producer_epoch)
        self._epochs[producer_id] = producer_epoch
        parts = self._by_group.setdefault(group_id, {})
        for tp, value in offsets.items():
            parts.setdefault(tp, {})[seq] = PendingOffset(seq, producer_id, producer_epoch, value)

    def mark_unknown(self, seq: int, group_id: str, tp: TopicPartition) -> None:
        """A transaction holds the partition but its offset is not known here (restart)."""
        self._by_group.setdefault(group_id, {}).setdefault(tp, {})[seq] = None

    def pending(self, group_id: str, tp: TopicPartition) -> list[PendingOffset]:
        return [p for p in self._by_group.get(group_id, {}).get(tp, {}).values() if p is not None]

    def resolve(self, group_id: str, tp: TopicPartition, seqs: Iterable[int]) -> None:
        """The transactions behind `seqs` all ended (committed or aborted: no transaction held the
        partition when its outcome was read, and these were pending before it was read): they
        leave the pending store. Pending offsets accepted since stay."""
        parts = self._by_group.get(group_id)
        if parts is None:
            return
        pending = parts.get(tp)
        if pending is None:
            return
        for seq in seqs:
            gone = pending.pop(seq, None)
            if gone is not None and not self._holds_any(gone.producer_id):
                self._epochs.pop(gone.producer_id, None)
        if not pending:
            del parts[tp]
        if not parts:
            del self._by_group[group_id]

    def _holds_any(self, producer_id: int) -> bool:
        return any(
            p is not None and p.producer_id == producer_id
            for parts in self._by_group.values()
            for seqs in parts.values()
            for p in seqs.values()
        )

    def drop_partitions(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Kafka's replay of an offset tombstone: pending offsets of deleted partitions go too."""
        parts = self._by_group.get(group_id)
        if parts is None:
            return
        for tp in partitions:
            pending = parts.get(tp)
            if pending is not None:
                self.resolve(group_id, tp, list(pending))


def materialize(
    shard: ShardState, group_id: str, offsets: dict[TopicPartition, OffsetAndMetadata], op: Operation
) -> list[TopicPartition]:
    """The OffsetCommit records of a committed transaction's offsets, for the partitions whose
    stored offset is older than the transactional commit (Kafka keeps the most recent of a
    transactional and a regular commit). Their commit timestamp is the time the transactional
    commit was accepted. Returns the partitions written."""
    written = []
    for (topic, partition), value in offsets.items():
        existing = shard.offsets.get(group_id, topic, partition)
        if existing is not None and existing.commit_timestamp > value.commit_timestamp:
            op.event(
                "offset.txn_skipped",
                group=group_id,
                topic=topic,
                partition=partition,
                reason="newer commit stored",
            )
            continue
        if existing is not None and _same(existing, value):
            continue
        op.records.append(offset_record(group_id, topic, partition, value))
        written.append((topic, partition))
    return written


def _same(a: OffsetAndMetadata, b: OffsetAndMetadata) -> bool:
    return (a.offset, a.leader_epoch, a.metadata, a.commit_timestamp) == (
        b.offset,
        b.leader_epoch,
        b.metadata,
        b.commit_timestamp,
    )
