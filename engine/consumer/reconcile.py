"""Per-member reconciliation (KIP-848 "Reconciliation"; Kafka `CurrentAssignmentBuilder`).

Rules of this file:
* It decides one thing: given a member, its target (epoch + partitions), who owns what now, and
  what the member says it owns, which epoch/state/partitions the member moves to.
* It never assigns a partition that another member still owns, and never moves a member past a
  revocation the member has not acknowledged. Those two rules are the protocol's safety.
* It is pure: the caller writes the record and schedules timers.

Theory of operation. A member is in one of three states:

    STABLE                  at its epoch with everything it should have (or waiting for a new target)
    UNREVOKED_PARTITIONS    must give up `partitions_pending_revocation` before it moves on
    UNRELEASED_PARTITIONS   at the target epoch, waiting for partitions others still own

`STATE_RULES` below is the whole machine: one rule per state saying when the member may move and
from which epoch `next_assignment` computes. `next_assignment` then picks the destination:
revoke first (stay at the old epoch) -> else take what is free (target epoch, STABLE or
UNRELEASED) -> else wait at the target epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engine.assignment import EMPTY, Assignment
from engine.consumer.member import ConsumerGroupMember, MemberState
from engine.errors import CoordinatorError, Errors
from engine.metadata import TopicId
from records.consumer_group import TopicPartitions

PartitionEpochFn = Callable[[TopicId, int], int]
OwnedPartitions = Sequence[TopicPartitions] | None


def owns_any(owned: OwnedPartitions, partitions: Assignment) -> bool:
    """Does the member still report owning any of `partitions`? (null owned: assume yes)."""
    if owned is None:
        return True
    for tp in owned:
        revoking = partitions.get(tp.topic_id)
        if not revoking:
            continue
        rs = set(revoking)
        for p in tp.partitions:
            if p in rs:
                return True
    return False


class _Reconciler:
    __slots__ = ("member", "owned", "partition_epoch", "target", "target_epoch")

    def __init__(
        self,
        member: ConsumerGroupMember,
        target_epoch: int,
        target: Assignment,
        partition_epoch: PartitionEpochFn,
        owned: OwnedPartitions,
    ) -> None:
        self.member = member
        self.target_epoch = target_epoch
        self.target = target
        self.partition_epoch = partition_epoch
        self.owned = owned

    # --- the per-state rules (Kafka `build()`) ---------------------------------------------

    def stable(self) -> ConsumerGroupMember:
        m = self.member
        if m.member_epoch != self.target_epoch:
            return self.next_assignment(m.member_epoch)
        return m

    def unrevoked(self) -> ConsumerGroupMember:
        m = self.member
        if owns_any(self.owned, m.partitions_pending_revocation):
            return m  # still revoking: no progress until the member acknowledges
        return self.next_assignment(m.member_epoch + 1)

    def unreleased(self) -> ConsumerGroupMember:
        return self.next_assignment(self.member.member_epoch)

    def unknown(self) -> ConsumerGroupMember:
        # A state written by a newer coordinator: restart the member from scratch.
        if self.owned is None or len(self.owned) > 0:
            raise CoordinatorError(
                Errors.FENCED_MEMBER_EPOCH,
                "The consumer group member is in a unknown state. "
                "The member must abandon all its partitions and rejoin.",
            )
        return self.next_assignment(self.target_epoch)

    # --- the destination (Kafka `computeNextAssignment`) -----------------------------------

    def next_assignment(self, epoch_if_revoking: int) -> ConsumerGroupMember:
        m = self.member
        current = m.assigned_partitions
        target = self.target
        assigned: dict[TopicId, tuple[int, ...]] = {}
        revoking: dict[TopicId, tuple[int, ...]] = {}
        to_assign: dict[TopicId, tuple[int, ...]] = {}
        has_unreleased = False

        for t in _topics(target, current):
            tgt = target.get(t, ())
            cur = current.get(t, ())
            tgt_set = set(tgt)
            kept = tuple(p for p in cur if p in tgt_set)
            kept_set = set(kept)
            revoke = tuple(p for p in cur if p not in kept_set)
            new: list[int] = []
            for p in tgt:
                if p in kept_set:
                    continue
                if self.partition_epoch(t, p) != -1:
                    has_unreleased = True
                else:
                    new.append(p)
            if kept:
                assigned[t] = kept
            if revoke:
                revoking[t] = revoke
            if new:
                to_assign[t] = tuple(new)

        if revoking and owns_any(self.owned, revoking):
            return m.with_changes(
                state=MemberState.UNREVOKED_PARTITIONS,
                member_epoch=epoch_if_revoking,
                previous_member_epoch=m.member_epoch,
                assigned_partitions=assigned,
                partitions_pending_revocation=revoking,
            )
        if to_assign:
            for t, parts in to_assign.items():
                assigned[t] = assigned.get(t, ()) + parts
            state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
        elif has_unreleased:
            state = MemberState.UNRELEASED_PARTITIONS
        else:
            state = MemberState.STABLE
        return m.with_changes(
            state=state,
            member_epoch=self.target_epoch,
            previous_member_epoch=m.member_epoch,
            assigned_partitions=assigned,
            partitions_pending_revocation=EMPTY,
        )


STATE_RULES: dict[MemberState, Callable[[_Reconciler], ConsumerGroupMember]] = {
    MemberState.STABLE: _Reconciler.stable,
    MemberState.UNREVOKED_PARTITIONS: _Reconciler.unrevoked,
    MemberState.UNRELEASED_PARTITIONS: _Reconciler.unreleased,
    MemberState.UNKNOWN: _Reconciler.unknown,
}


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpochFn,
    owned: OwnedPartitions,
) -> ConsumerGroupMember:
    """The member after one reconciliation step; the same object when nothing changes."""
    if member.is_reconciled_to(target_epoch):
        return member
    r = _Reconciler(member, target_epoch, target, partition_epoch, owned)
    return STATE_RULES[member.state](r)


def pending_assignment(member: ConsumerGroupMember, target: Assignment) -> dict[TopicId, tuple[int, ...]]:
    """Target partitions an UNRELEASED member still waits for (the KIP's `pending-partitions`)."""
    if member.state is not MemberState.UNRELEASED_PARTITIONS:
        return {}
    out: dict[TopicId, tuple[int, ...]] = {}
    for t, parts in target.items():
        have = set(member.assigned_partitions.get(t, ()))
        missing = tuple(p for p in parts if p not in have)
        if missing:
            out[t] = missing
    return out


def waiting_on_unreleased_partition(
    member: ConsumerGroupMember, target: Assignment, partition_epoch: PartitionEpochFn
) -> bool:
    """Kafka `waitingOnUnreleasedPartition`: some missing target partition is still owned."""
    for t, parts in pending_assignment(member, target).items():
        for p in parts:
            if partition_epoch(t, p) != -1:
                return True
    return False


def _topics(a: Assignment, b: Assignment) -> list[TopicId]:
    # Target topics first (in target order), then topics only the member has: deterministic.
    out = list(a)
    out.extend(t for t in b if t not in a)
    return out
