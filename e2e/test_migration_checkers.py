"""The analysis helpers of e2e/migration.py on hand-made timelines (no gateway): each checker
accepts a clean run and rejects the violation it exists for."""

from __future__ import annotations

import pytest

from e2e.migration import (
    Callback,
    Commit,
    Mark,
    Read,
    Timeline,
    check_all_consumed,
    check_commits_advance,
    check_duplicates,
    check_no_overlap,
    check_reads_within_windows,
    ownership_windows,
)

END = 100.0


def timeline(*events: Read | Callback | Commit | Mark) -> Timeline:
    tl = Timeline("t")
    for e in events:
        tl.add(e)
    return tl


def assign(t: float, member: str, *ps: int) -> Callback:
    return Callback(t, t, member, "assigned", frozenset(ps))


def revoke(t: float, member: str, *ps: int) -> Callback:
    return Callback(t - 0.1, t, member, "revoked", frozenset(ps))


def handover(b_assigned_at: float) -> Timeline:
    """A owns partition 0 from 1 until its revoke returns at 5; B is assigned it at `b_assigned_at`."""
    return timeline(
        Mark(0.5, "A", "member_id", "id-a"),
        assign(1, "A", 0),
        Read(2, "A", 0, 0, b"v0"),
        Commit(3, "A", {0: 1}),
        Read(4, "A", 0, 1, b"v1"),
        revoke(5, "A", 0),
        assign(b_assigned_at, "B", 0),
        Read(b_assigned_at + 1, "B", 0, 1, b"v1"),
    )


def test_clean_handover_passes_every_check() -> None:
    tl = handover(6)
    check_no_overlap(ownership_windows(tl, end_of_run=END))
    check_reads_within_windows(tl, END)
    check_all_consumed(tl, {(0, 0): b"v0", (0, 1): b"v1"})
    assert check_duplicates(tl, END) == 1  # offset 1: read by A after its last commit, again by B
    assert check_commits_advance(tl) == 1


def test_overlapping_owners_fail() -> None:
    with pytest.raises(AssertionError, match=r"partition 0 held by A .* and B"):
        check_no_overlap(ownership_windows(handover(4.5), end_of_run=END))


def test_a_killed_member_owns_until_the_gateway_fences_it() -> None:
    killed = timeline(Mark(0.5, "A", "member_id", "id-a"), assign(1, "A", 0), assign(8, "B", 0))
    with pytest.raises(AssertionError, match="held by A"):
        check_no_overlap(ownership_windows(killed, end_of_run=END))  # never fenced: A still owns it
    check_no_overlap(ownership_windows(killed, [(7.5, "id-a")], END))  # fenced before B got it
    with pytest.raises(AssertionError, match="held by A"):
        check_no_overlap(ownership_windows(killed, [(8.5, "id-a")], END))  # fenced after B got it


def test_closing_ends_ownership() -> None:
    closed = timeline(assign(1, "A", 0), Mark(3, "A", "closing"), assign(4, "B", 0))
    check_no_overlap(ownership_windows(closed, end_of_run=END))


def test_reading_a_partition_not_owned_fails() -> None:
    after_revoke = timeline(assign(1, "A", 0), revoke(2, "A", 0), Read(3, "A", 0, 0, b"v0"))
    with pytest.raises(AssertionError, match="outside its ownership windows"):
        check_reads_within_windows(after_revoke, END)


def test_unconsumed_or_altered_records_fail() -> None:
    tl = timeline(assign(1, "A", 0), Read(2, "A", 0, 0, b"v0"))
    with pytest.raises(AssertionError, match="1 acknowledged records never consumed"):
        check_all_consumed(tl, {(0, 0): b"v0", (0, 1): b"v1"})
    with pytest.raises(AssertionError, match="other values"):
        check_all_consumed(tl, {(0, 0): b"changed"})


def test_duplicates_outside_the_at_least_once_window_fail() -> None:
    committed_then_reread = timeline(
        assign(1, "A", 0),
        Read(2, "A", 0, 0, b"v0"),
        Commit(3, "A", {0: 1}),
        revoke(4, "A", 0),
        assign(5, "B", 0),
        Read(6, "B", 0, 0, b"v0"),
    )
    with pytest.raises(AssertionError, match="although offset 1 was committed"):
        check_duplicates(committed_then_reread, END)
    same_window = timeline(assign(1, "A", 0), Read(2, "A", 0, 0, b"v0"), Read(3, "A", 0, 0, b"v0"))
    with pytest.raises(AssertionError, match="within one ownership window"):
        check_duplicates(same_window, END)


def test_commits_going_backwards_fail() -> None:
    tl = timeline(Commit(1, "A", {0: 5}), Commit(2, "B", {0: 3}))
    with pytest.raises(AssertionError, match="B committed 3 after A had committed 5"):
        check_commits_advance(tl)
