"""Engine-level regressions for bugs the live migration e2e tests (e2e/test_migration_*.py) found,
each reproduced deterministically through the translation layer (tests/migration_harness.py)."""

from __future__ import annotations

from typing import Any

from engine.classic.group import ClassicGroup
from tests.migration_harness import MigrationHarness


def events(outs: Any, name: str) -> list[dict[str, Any]]:
    outs = outs if isinstance(outs, list) else [outs]
    return [fields for o in outs for n, fields in o.events if n == name]


def upgraded_group(h: MigrationHarness) -> None:
    """A classic member "c1" owning everything, then KIP-848 member "k1" joins: upgraded."""
    h.seed_classic_group(3, {"c1": [0, 1, 2, 3, 4, 5]}, session=600_000)
    r = h.cgh("k1", 0)
    assert r.error_code == 0 and h.shard.consumer_group("g") is not None


def test_last_kip848_member_leaving_is_logged_as_left_when_it_downgrades() -> None:
    """Found by test_migration_kill / the rolling tests: when the fence of the last KIP-848 member
    downgraded the group, only `group.converted` was logged and the fenced member was named
    nowhere (Kafka logs the fence, with its reason, before `convertToClassicGroup`). A leave the
    member asked for is `member.left`, not `member.fenced`."""
    h = MigrationHarness()
    upgraded_group(h)
    h.cgh("k1", -1)
    assert h.last is not None
    assert events(h.last, "member.fenced") == []
    fenced = events(h.last, "member.left")
    assert [(e["member"], e["reason"]) for e in fenced] == [("k1", "the member left the group.")]
    assert [e["to_type"] for e in events(h.last, "group.converted")] == ["classic"]
    assert isinstance(h.shard.groups["g"], ClassicGroup)


def test_last_kip848_member_session_expiry_is_logged_as_fenced_when_it_downgrades() -> None:
    h = MigrationHarness()
    upgraded_group(h)
    outs = h.advance(45_001)  # the consumer session timeout; c1's classic session is longer
    fenced = events(outs, "member.fenced")
    assert [(e["member"], e["reason"]) for e in fenced] == [("k1", "the member session expired.")]
    assert [e["to_type"] for e in events(outs, "group.converted")] == ["classic"]
    assert isinstance(h.shard.groups["g"], ClassicGroup)
