"""The per-member reconciliation machine (Kafka `CurrentAssignmentBuilder`, Kafka
`CurrentAssignmentBuilder`)."""

from __future__ import annotations

import pytest

from engine.consumer.member import ConsumerGroupMember, MemberState
from engine.consumer.reconcile import STATE_RULES, reconcile
from engine.errors import CoordinatorError, Errors
from tests.consumer_harness import FOO, tp

FREE = lambda t, p: -1  # noqa: E731  every partition is free
TAKEN = lambda t, p: 7  # noqa: E731  every partition is owned by someone at epoch 7


def member(
    epoch: int = 10,
    state: MemberState = MemberState.STABLE,
    assigned: tuple[int, ...] = (),
    revoking: tuple[int, ...] = (),
) -> ConsumerGroupMember:
    return ConsumerGroupMember(
        member_id="m",
        member_epoch=epoch,
        previous_member_epoch=epoch - 1,
        state=state,
        assigned_partitions={FOO: assigned} if assigned else {},
        partitions_pending_revocation={FOO: revoking} if revoking else {},
    )


def test_every_member_state_has_a_rule() -> None:
    assert set(STATE_RULES) == set(MemberState)


def test_reconciled_member_is_returned_unchanged() -> None:
    m = member(11, assigned=(0, 1))
    assert reconcile(m, 11, {FOO: (0, 1)}, FREE, None) is m


def test_stable_member_with_nothing_to_revoke_moves_to_the_target_epoch_and_takes_free_partitions() -> None:
    m = reconcile(member(10, assigned=(0,)), 11, {FOO: (0, 1)}, FREE, None)
    assert (m.member_epoch, m.previous_member_epoch, m.state) == (11, 10, MemberState.STABLE)
    assert m.assigned_partitions == {FOO: (0, 1)}


def test_revocation_comes_first_and_keeps_the_old_epoch() -> None:
    m = reconcile(member(10, assigned=(0, 1, 2)), 11, {FOO: (0, 5)}, FREE, None)
    assert (m.member_epoch, m.state) == (10, MemberState.UNREVOKED_PARTITIONS)
    assert m.assigned_partitions == {FOO: (0,)}
    assert m.partitions_pending_revocation == {FOO: (1, 2)}


def test_unrevoked_member_waits_while_it_still_reports_a_revoked_partition() -> None:
    m = member(10, MemberState.UNREVOKED_PARTITIONS, assigned=(0,), revoking=(1, 2))
    assert reconcile(m, 11, {FOO: (0, 5)}, FREE, [tp(FOO, 0, 2)]) is m
    assert reconcile(m, 11, {FOO: (0, 5)}, FREE, None) is m  # null owned: not acknowledged


def test_acknowledged_revocation_moves_to_the_target_epoch() -> None:
    m = member(10, MemberState.UNREVOKED_PARTITIONS, assigned=(0,), revoking=(1, 2))
    n = reconcile(m, 11, {FOO: (0, 5)}, FREE, [tp(FOO, 0)])
    assert (n.member_epoch, n.state) == (11, MemberState.STABLE)
    assert n.assigned_partitions == {FOO: (0, 5)} and n.partitions_pending_revocation == {}


def test_partitions_still_owned_elsewhere_leave_the_member_unreleased_at_the_target_epoch() -> None:
    n = reconcile(member(10, assigned=(0,)), 11, {FOO: (0, 5)}, TAKEN, None)
    assert (n.member_epoch, n.state) == (11, MemberState.UNRELEASED_PARTITIONS)
    assert n.assigned_partitions == {FOO: (0,)}


def test_unreleased_member_picks_up_partitions_once_they_are_free() -> None:
    m = member(11, MemberState.UNRELEASED_PARTITIONS, assigned=(0,))
    n = reconcile(m, 11, {FOO: (0, 5)}, FREE, None)
    assert (n.member_epoch, n.state) == (11, MemberState.STABLE)
    assert n.assigned_partitions == {FOO: (0, 5)}


def test_member_that_owns_nothing_it_must_revoke_skips_revocation() -> None:
    # An eager classic member rejoins owning nothing: nothing is pending revocation.
    n = reconcile(member(10, assigned=(0, 1, 2)), 11, {FOO: (0,)}, FREE, [])
    assert (n.member_epoch, n.state) == (11, MemberState.STABLE)
    assert n.assigned_partitions == {FOO: (0,)}


def test_unknown_state_fences_unless_the_member_owns_nothing() -> None:
    m = member(10, MemberState.UNKNOWN, assigned=(0,))
    with pytest.raises(CoordinatorError) as e:
        reconcile(m, 11, {FOO: (0,)}, FREE, None)
    assert e.value.code == Errors.FENCED_MEMBER_EPOCH
    n = reconcile(m, 11, {FOO: (0,)}, FREE, [])
    assert (n.member_epoch, n.state) == (11, MemberState.STABLE)


def test_kept_partitions_keep_their_order_and_new_ones_are_appended() -> None:
    n = reconcile(member(10, assigned=(2, 5)), 11, {FOO: (4, 2, 5)}, FREE, None)
    assert n.assigned_partitions == {FOO: (2, 5, 4)}
