"""The matrix's Kafka Connect family (harness/matrix/connect_scenario.py): capabilities, the
grid's expansion and what it drops (with the reason), the clients a run prepares, the built-in
grids, and the per-cell verdict over workers' intervals (no item on two workers at once, the SDK
worker's share between two classic workers) with the reason it gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.kafka_dist.connect import SHAPE, SdkSpans, every_item, overlaps
from harness.matrix import clients as cl
from harness.matrix.backends import GroupshiftBackend
from harness.matrix.connect_scenario import SDK_URL, ConnectCellRun, lanes
from harness.matrix.grid import Cell, applicable, expand, load_grid
from harness.matrix.runner import needed_clients
from harness.matrix.runtime import ClientSpec
from harness.matrix.scenarios import Step

C43 = ClientSpec("kafka-connect", "4.3")
CELL = Cell(
    "kafka-connect@4.3", "classic", "sessioned", False, "sdk-worker-conversion", "bidirectional", "groupshift"
)


def test_capabilities() -> None:
    assert cl.new_protocol(C43) == "connect"
    assert cl.speaks(C43, "classic") and cl.speaks(C43, "connect")  # the SDK worker, in the runner
    assert not cl.speaks(C43, "consumer") and not cl.speaks(C43, "streams")
    assert not cl.speaks(ClientSpec("java", "4"), "connect")
    assert cl.partner(C43) == C43 and not cl.supports_static(C43)
    assert cl.classic_assignors(C43) == ("sessioned",)


def test_grid_expansion_keeps_what_applies_and_says_why_not() -> None:
    grid = expand(
        {
            "reference": "kafka-4",
            "cells": [
                {
                    "clients": ["kafka-connect@4.3", "java@4"],
                    "protocols": ["classic", "consumer"],
                    "assignors": ["range"],  # replaced by sessioned for Connect
                    "scenarios": ["sdk-worker-conversion", "add-remove"],
                    "policies": ["bidirectional", "upgrade"],
                    "backends": ["groupshift", "groupshift-kafka-3.9"],
                }
            ],
        },
        "t",
    )
    connect = [c for c in grid.cells if c.spec.library == "kafka-connect"]
    assert connect == [CELL]
    why = {c.id: reason for c, reason in grid.dropped}
    base = "kafka-connect@4.3/{}/sessioned/dynamic/{}/{}/{}"
    assert why[base.format("classic", "sdk-worker-conversion", "bidirectional", "kafka-4")] == (
        "Kafka has no connect groups (the SDK worker's ConnectGroupHeartbeat is groupshift's)"
    )
    assert (
        "bidirectional policy"
        in why[base.format("classic", "sdk-worker-conversion", "upgrade", "groupshift")]
    )
    assert (
        "starts as classic workers"
        in why[base.format("consumer", "sdk-worker-conversion", "bidirectional", "groupshift")]
    )
    assert (
        "not verified in front of Kafka"
        in why[base.format("classic", "sdk-worker-conversion", "bidirectional", "groupshift-kafka-3.9")]
    )
    assert why[base.format("classic", "add-remove", "bidirectional", "groupshift")] == (
        "no Kafka Connect add-remove scenario (only sdk-worker-conversion)"
    )
    java = "java@4/classic/range/dynamic/sdk-worker-conversion/bidirectional/groupshift"
    assert why[java] == "sdk-worker-conversion is a Kafka Connect scenario (clients kafka-connect@VERSION)"
    assert applicable(CELL) is None
    assert "static" in str(applicable(Cell(*{**CELL.dimensions(), "static": True}.values())))


def test_a_run_prepares_the_connect_jars_only() -> None:
    assert needed_clients([CELL]) == [C43]


def test_builtin_grids() -> None:
    smoke = load_grid("connect-smoke")
    assert [c.id for c in smoke.cells] == [CELL.id]
    assert [c.backend for c, _ in smoke.dropped] == []  # no reference twin at all in this grid
    for name, versions in (("default", ["3.9", "4.3"]), ("full", ["3.7", "3.9", "4.0", "4.3"])):
        cells = [c for c in load_grid(name).cells if c.scenario == "sdk-worker-conversion"]
        assert [c.id for c in cells] == [CELL.id.replace("@4.3/", f"@{v}/") for v in versions]
    assert not [
        c for c in load_grid("smoke").cells if c.spec.library == "kafka-connect"
    ]  # CI's grid unchanged
    assert not [c for c in load_grid("streams-smoke").cells if c.spec.library == "kafka-connect"]


def test_groupshift_backends_serve_connect_groups(monkeypatch: Any, tmp_path: Path) -> None:
    seen: dict[str, str] = {}

    class Gateway:
        def __init__(self, workdir: Path, sets: dict[str, str], extra: tuple[str, ...] = ()) -> None:
            seen.update(sets)

    monkeypatch.setattr("harness.matrix.backends.GatewayServer", Gateway)
    GroupshiftBackend(tmp_path, "bidirectional")
    assert seen["group.connect.enable"] == "true"


class FakeBackend:
    name = "groupshift"
    version = "embedded"
    bootstrap = "127.0.0.1:1"

    def close(self) -> None:
        pass


def judged(spans: list[tuple[int, int, str]], sdk: list[tuple[int, int, str]]) -> list[str]:
    """ConnectCellRun.checks over classic workers' intervals (item, from, to, worker) and the
    SDK worker's (from, to, item), with three settled steps of the right types."""
    run = ConnectCellRun(CELL, FakeBackend(), Path("/nonexistent"))
    run.spans.spans = list(sdk)
    for label, kind in (("three", "classic"), ("replaced", "connect"), ("left", "classic")):
        run.steps.append(Step(label, kind, 0.0, 1.0, kind))
    intervals: dict[str, list[tuple[int, int, str]]] = {}
    for began, ended, worker_item in spans:
        worker, item = worker_item.split("|")
        intervals.setdefault(item, []).append((began, ended, worker))
    return run.checks(run.spans.add_to(intervals))


def test_the_cell_verdict_names_what_ran_twice_and_the_sdk_share() -> None:
    # w3 ran lines-out-1 until 10, the SDK worker 12..20, w2 from 21: fine
    good = [(0, 10, "w3|lines-out-1"), (21, 30, "w2|lines-out-1"), (0, 30, "w1|lines-out")]
    assert judged(good, [(12, 20, "lines-out-1")]) == []
    # the SDK worker started before w3 stopped: named, both sides with their times
    (bad,) = judged(good, [(9, 20, "lines-out-1")])
    assert bad == (
        f"a connector or task on two workers at once: lines-out-1: w3 [0, 10] and {SDK_URL} [9, 20]"
    )
    # the SDK worker ran nothing: the conversion gave it no share
    assert judged(good, []) == ["the SDK worker never ran a connector or task"]
    # nothing ran it after the SDK worker left
    (after,) = judged([(0, 10, "w3|lines-out-1")], [(12, 20, "lines-out-1")])
    assert after.startswith("lines-out-1 ran on ['w3', 'http://sdk-worker:8083']: not on a classic worker")


def test_a_step_listed_as_the_wrong_type_fails_the_cell() -> None:
    run = ConnectCellRun(CELL, FakeBackend(), Path("/nonexistent"))
    run.spans.spans = [(12, 20, "lines-out-1")]
    run.steps = [Step("replaced", "connect", 0.0, 1.0, "classic")]
    intervals = {"lines-out-1": [(0, 10, "w3"), (21, 30, "w2")]}
    assert run.checks(run.spans.add_to(intervals)) == ["replaced: group listed as classic, expected connect"]


def test_sdk_spans_record_the_callbacks() -> None:
    spans = SdkSpans(SDK_URL)
    spans.assigned(frozenset({"lines-in"}), frozenset({("lines-out", 1)}))
    spans.revoked(frozenset(), frozenset({("lines-out", 1)}))
    assert set(spans.open) == {"lines-in"} and [i for _, _, i in spans.spans] == ["lines-out-1"]
    spans.left()
    assert spans.open == {} and sorted(i for _, _, i in spans.spans) == ["lines-in", "lines-out-1"]
    assert overlaps(spans.add_to({"lines-in": [(0, 1, "w1")]})) == []
    assert (
        lanes()
        == sorted(every_item(SHAPE))
        == [
            "lines-in",
            "lines-in-0",
            "lines-out",
            "lines-out-0",
            "lines-out-1",
            "lines-out-2",
        ]
    )


def test_worker_log_lines_of_both_logging_backends_give_epoch_ms() -> None:
    """Kafka 4's log4j2 lines carry epoch ms, Kafka 3's reload4j lines a UTC date to the ms (the
    worker runs with -Duser.timezone=UTC): both give the same instant."""
    from harness.kafka_dist.connect import _LINE, log_time_ms

    message = "INFO [task thread] Creating task lines-out-1 (org.apache.kafka.connect.runtime.Worker)"
    lines = [f"1795964401123 {message}", f"2026-11-29 15:00:01.123 {message}"]
    found = [_LINE.match(line) for line in lines]
    assert all(found)
    assert {log_time_ms(m.group(1)) for m in found if m} == {1795964401123}
    assert {m.group(2).split(" ")[2] for m in found if m} == {"lines-out-1"}
    assert _LINE.match("2026-11-29 15:00:01 INFO [t] Creating task x-0 (c)") is None  # no ms: not read


def test_a_step_not_settled_fails_the_cell_with_what_was_last_seen(monkeypatch: Any, tmp_path: Path) -> None:
    """A step that never settles ends the cell at the settle timeout, the reason naming the step,
    the type expected and what the last look saw; the cell's other results are still written."""
    monkeypatch.setattr("harness.matrix.connect_scenario.SETTLE_TIMEOUT", 0.3)
    run = ConnectCellRun(CELL, FakeBackend(), tmp_path / "cell")
    monkeypatch.setattr(run, "listed_type", lambda: "classic")

    def scenario() -> None:
        run.settle("worker 3 replaced by an SDK worker", "connect", 0.0, lambda: "group described as X")

    monkeypatch.setattr(run, "scenario", scenario)
    result = run.run()
    assert result.verdict == "fail"
    assert result.reason == (
        "worker 3 replaced by an SDK worker: not settled as a connect group within 0s; group described as X"
    )
    (step,) = result.steps
    assert step.observed_type == "classic" and step.seconds is None and step.error == result.reason
    assert result.verdict_detail is not None and result.verdict_detail.windows == {}


def test_a_crash_of_the_cell_is_its_reason(monkeypatch: Any, tmp_path: Path) -> None:
    run = ConnectCellRun(CELL, FakeBackend(), tmp_path / "cell")

    def scenario() -> None:
        raise OSError("connection refused")

    monkeypatch.setattr(run, "scenario", scenario)
    result = run.run()
    assert (result.verdict, result.reason) == ("fail", "OSError: connection refused")


def test_the_timeline_names_a_connect_cell_s_lanes() -> None:
    from harness.matrix.report import timeline_svg

    row: dict[str, Any] = {
        "id": CELL.id,
        "lanes": lanes(),
        "members": {"w1": {"client": "kafka-connect-4.3", "protocol": "classic"}},
        "windows": [{"member": "w1", "partition": 4, "start": 0.0, "end": 2.0}],
        "steps": [],
        "duration": 3.0,
    }
    svg = timeline_svg(row)
    assert ">lines-out-1</text>" in svg and "w1 owns lines-out-1 0.00s-2.00s" in svg
    assert "connector / task" in svg and ">p0</text>" not in svg
    plain = timeline_svg({**row, "lanes": []})  # a consumer cell's: partitions
    assert ">p4</text>" in plain and "w1 owns p4" in plain and "connector / task" not in plain
