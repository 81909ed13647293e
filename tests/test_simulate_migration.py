"""`groupshift simulate` migration scenarios (sim/migration_scenarios.py): the KIP-848 "Online
Migration" case study, a rolling upgrade and a rolling downgrade, driven through the real
translation layer with classic (JoinGroup/SyncGroup) and KIP-848 members on a virtual clock."""

from __future__ import annotations

import io

import pytest

from engine.classic.group import ClassicGroup
from engine.consumer.group import ConsumerGroup
from groupshift.cli import main as cli_main
from sim.migration_scenarios import SCENARIOS, run
from translation.embedded_protocol import parse_assignment

ALL = {f"foo-{p}" for p in range(6)}


def owned_partitions(sim: object) -> list[str]:
    """Every partition some member owns, once per owner (a partition twice = a double owner)."""
    g = sim.shard.groups["group"]  # type: ignore[attr-defined]
    if isinstance(g, ClassicGroup):
        return [
            f"{t}-{p}"
            for m in g.members.values()
            for t, ps in parse_assignment(m.assignment).partitions
            for p in ps
        ]
    assert isinstance(g, ConsumerGroup)
    return [f"foo-{p}" for m in g.members.values() for ps in m.assigned_partitions.values() for p in ps]


def test_online_migration_follows_the_case_study() -> None:
    sim = run("online-migration")
    texts = [t for t, _ in sim.steps]
    assert texts[0] == "We start with a classic group at generation 22"
    converted = [t for t in texts if "converted to a consumer group" in t]
    assert converted == [
        "A rejoins with group.protocol=consumer (the group is converted to a consumer group)"
    ]
    # The classic generation becomes the group epoch; B's leave bumps it once more.
    after_conversion = sim.steps[texts.index(converted[0])][1]
    assert "Group (epoch=23)" in after_conversion and "A (consumer)" in after_conversion
    assert "B (classic)" in after_conversion
    g = sim.shard.groups["group"]
    assert isinstance(g, ConsumerGroup) and g.group_epoch == 24
    assert sorted(owned_partitions(sim)) == sorted(ALL)
    assert {m.member_id for m in g.members.values() if m.uses_classic_protocol} == {"C"}


def test_rolling_upgrade_ends_with_a_consumer_group_of_kip848_members() -> None:
    sim = run("rolling-upgrade")
    g = sim.shard.groups["group"]
    assert isinstance(g, ConsumerGroup)
    assert sorted(g.members) == ["K1", "K2", "K3"] and not any(
        m.uses_classic_protocol for m in g.members.values()
    )
    assert sorted(owned_partitions(sim)) == sorted(ALL)
    assert [t for t, _ in sim.steps if "converted" in t] == [
        "K1 joins with group.protocol=consumer (the group is converted to a consumer group)"
    ]


def test_rolling_downgrade_ends_with_a_classic_group() -> None:
    sim = run("rolling-downgrade")
    g = sim.shard.groups["group"]
    assert isinstance(g, ClassicGroup) and len(g.members) == 3
    assert sorted(owned_partitions(sim)) == sorted(ALL)
    assert [t for t, _ in sim.steps if "converted" in t] == [
        "K3 leaves (the group is converted to a classic group)"
    ]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_cli_prints_numbered_steps(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["simulate", "--scenario", name]) == 0
    out = capsys.readouterr().out
    assert out.startswith("0. ") and "\n1. " in out and "(classic)" in out and "(consumer)" in out
    assert io.StringIO(out).read().count("Member Assignment") >= 1
