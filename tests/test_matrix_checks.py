"""The matrix's invariant checkers (harness/matrix/checks.py), each fed an event stream that
violates it and one that does not; plus the grid model (expansion, applicability, --only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.matrix import checks
from harness.matrix.checks import MemberLog
from harness.matrix.grid import Cell, applicable, expand, load_grid, matches


def ev(t: float, name: str, **fields: Any) -> dict[str, Any]:
    return {"timestamp": int(t * 1000), "name": name, **fields}


def parts(*ps: int) -> list[dict[str, Any]]:
    return [{"topic": "t", "partition": p} for p in ps]


def consumed(t: float, p: int, lo: int, hi: int) -> dict[str, Any]:
    s = {"topic": "t", "partition": p, "count": hi - lo + 1, "minOffset": lo, "maxOffset": hi}
    return ev(t, "records_consumed", count=hi - lo + 1, partitions=[s])


def committed(t: float, p: int, o: int, success: bool = True) -> dict[str, Any]:
    return ev(t, "offsets_committed", offsets=[{"topic": "t", "partition": p, "offset": o}], success=success)


def member(name: str, *events: dict[str, Any], exited_at: float | None = None) -> MemberLog:
    return MemberLog(name, events=list(events), exited_at=exited_at)


def handover(second_assigned_at: float) -> list[MemberLog]:
    """a owns p0 from 1 to 5 (revoked at 5); b is assigned p0 at `second_assigned_at`."""
    a = member(
        "a",
        ev(1, "partitions_assigned", partitions=parts(0)),
        consumed(2, 0, 0, 9),
        committed(2.1, 0, 10),
        ev(5, "partitions_revoked", partitions=parts(0)),
    )
    b = member(
        "b",
        ev(second_assigned_at, "partitions_assigned", partitions=parts(0)),
        consumed(second_assigned_at + 1, 0, 10, 19),
        committed(second_assigned_at + 1.1, 0, 20),
    )
    return [a, b]


def test_no_overlap_accepts_a_clean_handover_and_reports_two_owners() -> None:
    assert checks.check_no_overlap(checks.ownership_windows(handover(5.0), 20)) == []
    bad = checks.check_no_overlap(checks.ownership_windows(handover(4.0), 20))
    assert len(bad) == 1 and "partition 0 held by a [1.000, 5.000] and b [4.000" in bad[0]


def test_a_killed_member_owns_nothing_after_its_process_exited() -> None:
    a = member("a", ev(1, "partitions_assigned", partitions=parts(0)), exited_at=3.0)
    b = member("b", ev(4, "partitions_assigned", partitions=parts(0)))
    assert checks.check_no_overlap(checks.ownership_windows([a, b], 20)) == []
    a.exited_at = 5.0
    assert checks.check_no_overlap(checks.ownership_windows([a, b], 20))


def test_a_closing_member_owns_nothing_after_it_stopped_polling() -> None:
    # Java < 2.4 leaves without a revocation callback: the next owner may start before the old
    # one printed shutdown_complete, but after it stopped polling (shutdown_requested)
    a = member(
        "a",
        ev(1, "partitions_assigned", partitions=parts(0)),
        ev(3, "shutdown_requested"),
        consumed(3.2, 0, 0, 4),
        ev(4, "shutdown_complete"),
    )
    b = member("b", ev(3.5, "partitions_assigned", partitions=parts(0)))
    assert checks.check_no_overlap(checks.ownership_windows([a, b], 20)) == []
    b.events[0] = ev(3.1, "partitions_assigned", partitions=parts(0))  # a still processing at 3.2
    assert checks.check_no_overlap(checks.ownership_windows([a, b], 20))


def test_reads_outside_ownership_are_reported() -> None:
    logs = handover(5.0)
    logs[0].events.append(consumed(6, 0, 10, 10))  # a reads p0 after it was revoked
    ws = checks.ownership_windows(logs, 20)
    bad = checks.check_reads_within_windows(ws, checks.reads(logs))
    assert len(bad) == 1 and "a consumed partition 0 offset 10" in bad[0]
    assert (
        checks.check_reads_within_windows(
            checks.ownership_windows(handover(5.0), 20), checks.reads(handover(5.0))
        )
        == []
    )


def test_every_acknowledged_record_consumed() -> None:
    logs = handover(5.0)
    rs = checks.reads(logs)
    assert checks.check_all_consumed({(0, o) for o in range(20)}, rs) == []
    bad = checks.check_all_consumed({(0, o) for o in range(22)}, rs)
    assert bad == ["2 acknowledged records never consumed, e.g. (partition, offset) [(0, 20), (0, 21)]"]


def test_duplicates_allowed_only_after_a_handover_and_beyond_the_commit() -> None:
    # b re-reads 8..9 after the hand-over: a read them but committed only 8 -> allowed
    a = member(
        "a",
        ev(1, "partitions_assigned", partitions=parts(0)),
        consumed(2, 0, 0, 9),
        committed(2.1, 0, 8),
        ev(5, "partitions_revoked", partitions=parts(0)),
    )
    b = member("b", ev(6, "partitions_assigned", partitions=parts(0)), consumed(7, 0, 8, 12))
    ws = checks.ownership_windows([a, b], 20)
    n, bad = checks.check_duplicates(ws, checks.reads([a, b]), [a, b])
    assert (n, bad) == (2, [])
    # b re-reads 5..9 although 8 was committed before its window: committed records redelivered
    b.events[1] = consumed(7, 0, 5, 12)
    n, bad = checks.check_duplicates(ws, checks.reads([a, b]), [a, b])
    assert n == 5 and any("although offset 8 was committed" in x for x in bad)
    # a reads 3 twice within one window: no hand-over in between
    a.events.insert(2, consumed(2.5, 0, 3, 3))
    n, bad = checks.check_duplicates(checks.ownership_windows([a], 20), checks.reads([a]), [a])
    assert any("twice within one ownership window of a" in x for x in bad)


def test_commits_monotonic() -> None:
    assert checks.check_commits_monotonic(handover(5.0)) == []
    logs = handover(5.0)
    logs[0].events.append(committed(7, 0, 4))  # a zombie commit moves partition 0 back to 4
    bad = checks.check_commits_monotonic(logs)
    assert bad == ["partition 0: a committed 4 after b had committed 20"]
    logs[0].events[-1] = committed(7, 0, 4, success=False)  # a failed commit does not count
    assert checks.check_commits_monotonic(logs) == []


def test_judge_collects_every_violation() -> None:
    v = checks.judge(handover(4.0), {(0, o) for o in range(25)}, 20)
    assert len(v.violations) == 2 and v.records == 25 and v.reads == 20


# -- the grid ----------------------------------------------------------------------------------


def cell(**kw: Any) -> Cell:
    base = dict(
        client="kafka-python@2.0.2",
        protocol="classic",
        assignor="range",
        static=False,
        scenario="rolling-upgrade",
        policy="upgrade",
        backend="groupshift",
    )
    return Cell(**{**base, **kw})


def test_applicability() -> None:
    assert applicable(cell()) is None
    assert "upgrade or bidirectional" in str(applicable(cell(policy="downgrade")))
    assert "static membership" in str(applicable(cell(static=True, scenario="static-bounce")))
    assert "consumer protocol" in str(
        applicable(cell(protocol="consumer", scenario="add-remove", assignor="server"))
    )
    assert (
        applicable(
            cell(client="confluent-kafka@2.12", protocol="consumer", scenario="add-remove", assignor="server")
        )
        is None
    )
    assert "no classic assignor" in str(
        applicable(cell(client="aiokafka@0.14.x", assignor="cooperative-sticky"))
    )
    assert "LIBRARY@VERSION" in str(applicable(cell(client="kafka-python")))


def test_builtin_grids_have_kafka_twins_and_only_filters() -> None:
    smoke = load_grid("smoke")
    assert 14 <= len(smoke.cells) <= 18
    groupshift = [c for c in smoke.cells if c.backend == "groupshift"]
    assert {c.reference("kafka-4") for c in groupshift} <= set(smoke.cells)
    assert len({c.scenario for c in smoke.cells}) == 6
    only = smoke.only("scenario=rolling-*,backend=kafka-4")
    assert {c.scenario for c in only.cells} == {"rolling-upgrade", "rolling-downgrade"}
    assert all(c.backend == "kafka-4" for c in only.cells)
    assert matches(cell(), "kafka-python@2.0.2") and not matches(cell(), "java@*")
    assert matches(cell(), "!java@*,!backend=kafka-*") and not matches(cell(), "!client=kafka-python@*")
    no_java = smoke.only("backend=groupshift,!client=java@*").cells
    assert no_java and all(c.backend == "groupshift" and c.spec.library != "java" for c in no_java)
    with pytest.raises(ValueError, match="no dimension"):
        matches(cell(), "colour=red")
    assert len(load_grid("default").cells) > len(smoke.cells)


def test_user_grid_file(tmp_path: Path) -> None:
    f = tmp_path / "mine.toml"
    f.write_text(
        'reference = ""\n[[cells]]\nclients = ["java@3.9", "aiokafka@0.8.1"]\n'
        'assignors = ["range", "cooperative-sticky"]\nscenarios = ["add-remove"]\n'
    )
    g = load_grid(str(f))
    assert g.name == "mine"
    assert sorted(c.id for c in g.cells) == [
        "aiokafka@0.8.1/classic/range/dynamic/add-remove/bidirectional/groupshift",
        "java@3.9/classic/cooperative-sticky/dynamic/add-remove/bidirectional/groupshift",
        "java@3.9/classic/range/dynamic/add-remove/bidirectional/groupshift",
    ]
    assert [why for _, why in g.dropped] == ["aiokafka@0.8.1 has no classic assignor 'cooperative-sticky'"]
    with pytest.raises(ValueError, match="unknown keys"):
        expand({"cells": [{"colours": ["red"]}]}, "bad")


def test_a_revocation_printed_while_closing_ends_nothing_after_it_stopped_reading() -> None:
    # librdkafka's close stalled against Kafka 4: the coordinator handed p0 over to b after
    # max.poll.interval.ms, and a's revocation callback ran only when the close went on
    a = member(
        "a",
        ev(1, "partitions_assigned", partitions=parts(0)),
        consumed(2, 0, 0, 4),
        ev(3, "shutdown_requested"),
        ev(40, "partitions_revoked", partitions=parts(0)),
        ev(40.1, "shutdown_complete"),
    )
    b = member("b", ev(20, "partitions_assigned", partitions=parts(0)), consumed(21, 0, 5, 9))
    ws = checks.ownership_windows([a, b], 60)
    assert checks.check_no_overlap(ws) == []
    assert [(w.member, w.start, w.end) for w in ws[0]] == [("a", 1, 3), ("b", 20, 60)]
    # still reading after shutdown_requested: owned until that last read, so b overlaps
    a.events.insert(3, consumed(25, 0, 5, 5))
    assert checks.check_no_overlap(checks.ownership_windows([a, b], 60))
