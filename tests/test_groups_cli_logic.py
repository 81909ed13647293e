"""The parts of `groupshift groups` that need no server: the migration judgement (pending
revocations and their age, the conversion check, the next step, the change story), the reset
plan's CSV, the assignment strings, and the ownership spans the plot draws (from polls and from
a gateway event log). The e2e tests run the same code against live servers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.groups.migration import Observation, Tracker, changes, conversion_check, render, report
from tools.groups.output import Style, assignment_string, table
from tools.groups.plot import Span, ownership_from_events, ownership_from_observations, plot_ownership
from tools.groups.reset_offsets import PlanError, parse_csv, parse_datetime, to_csv
from tools.groups.snapshot import Group, Member

POLICY = {
    "group.consumer.migration.policy": "bidirectional",
    "group.consumer.max.size": "3",
    "group.max.size": "2",
}


def consumer_group(members: list[Member], epoch: int = 5) -> Group:
    return Group(
        "g", True, "Reconciling", "consumer", "consumer", "uniform", epoch, epoch, None, members, "test"
    )


def classic_group(members: list[Member], protocol_type: str = "consumer") -> Group:
    return Group("g", True, "Stable", "classic", protocol_type, "range", None, None, None, members, "test")


def test_pending_revocation_ages_across_polls_and_clears() -> None:
    old = Member("a", "kp", "/h", protocol="classic", assignment={"t": [0, 1]}, target={"t": [0]})
    new = Member("b", "rd", "/h", protocol="consumer", assignment={}, target={"t": [1]})
    tracker = Tracker()
    first = Observation(100.0, consumer_group([old, new]), POLICY)
    tracker.observe(first)
    later = Observation(107.5, consumer_group([old, new]), POLICY)
    tracker.observe(later)
    rep = report(later, tracker, stuck_after=60)
    assert rep["pending_revocation"] == [
        {"partition": "t-1", "member_id": "a", "client_id": "kp", "protocol": "classic", "pending_for_s": 7.5}
    ]
    (b,) = [m for m in rep["members"] if m["member_id"] == "b"]
    assert b["awaiting"] == [{"partition": "t-1", "held_by": "a"}]
    assert rep["phase"] == "migrating" and rep["next_step"].startswith("Wait: 1 partition(s)")
    stuck = report(later, tracker, stuck_after=5)
    assert "has held t-1 for 7.5s" in stuck["next_step"]
    released = Member("a", "kp", "/h", protocol="classic", assignment={"t": [0]}, target={"t": [0]})
    tracker.observe(Observation(110.0, consumer_group([released, new]), POLICY))
    assert tracker.first_pending == {}


def test_upgrade_refusals_are_all_named() -> None:
    members = [
        Member(f"m{i}", "rdkafka", "/h", protocol="classic", assignment={"t": [i]}, user_data=(i == 0))
        for i in range(4)
    ]
    check = conversion_check(
        classic_group(members, protocol_type="connect"),
        {**POLICY, "group.consumer.migration.policy": "downgrade"},
    )
    assert check["direction"] == "upgrade" and check["allowed"] is False
    text = " | ".join(check["refusals"])
    assert "policy is downgrade" in text
    assert "protocol type is 'connect'" in text
    assert "4 members exceed group.consumer.max.size=3" in text
    assert "member m0 (client rdkafka) has assignment userData" in text
    unknown = conversion_check(classic_group(members[1:]), {"group.consumer.migration.policy": None})
    assert unknown["allowed"] is True and unknown["unknown"]


def test_downgrade_check_counts_classic_members_against_group_max_size() -> None:
    members = [Member(f"c{i}", "kp", "/h", protocol="classic") for i in range(3)]
    members.append(Member("n", "rd", "/h", protocol="consumer"))
    check = conversion_check(consumer_group(members), POLICY)
    assert check["direction"] == "downgrade"
    assert check["refusals"] == ["3 classic members exceed group.max.size=2"]
    empty = conversion_check(consumer_group([]), {**POLICY, "group.consumer.migration.policy": "disabled"})
    assert empty["allowed"] is True and empty["direction"] is None


def test_change_story_between_polls() -> None:
    a = Member("a", "kp", "/h", protocol="classic", assignment={"t": [0, 1]})
    before = Observation(1.0, classic_group([a]), POLICY)
    a2 = Member("a", "kp", "/h", protocol="classic", assignment={"t": [0]}, target={"t": [0]})
    b = Member("b", "rd", "/h", protocol="consumer", assignment={"t": [1]}, target={"t": [1]})
    after = Observation(2.0, consumer_group([a2, b], epoch=2), POLICY)
    assert changes(before, after) == [
        "group converted classic -> consumer",
        "state Stable -> Reconciling",
        "group epoch - -> 2",
        "member b joined (consumer, client rd)",
        "t-1: a -> b",
    ]


def test_reset_plan_csv_round_trip_and_errors() -> None:
    plan = {("orders", 1): 5, ("orders", 0): 7}
    text = to_csv(plan)
    assert text == "orders,0,7\norders,1,5\n"
    assert parse_csv(text, "g") == plan
    assert parse_csv("g,orders,0,3\nother,orders,1,9\n", "g") == {("orders", 0): 3}
    with pytest.raises(PlanError, match="line 2"):
        parse_csv("orders,0,1\norders,x,1\n", "g")
    assert parse_datetime("1970-01-01T00:00:01.500Z") == 1500
    assert parse_datetime("1970-01-01T01:00:00.000+01:00") == 0
    with pytest.raises(PlanError):
        parse_datetime("yesterday")


def test_tables_and_assignment_strings_match_kafkas_words() -> None:
    assert assignment_string({"b": [2, 0], "a": [1]}) == "a:1;b:0,2"
    assert assignment_string({}) == "-"
    out = table(["GROUP", "LAG"], [["g", 3], ["longer-group", None]], Style(False))
    assert out.splitlines() == ["GROUP        LAG", "g            3", "longer-group -"]
    coloured = table(["GROUP"], [["g"]], Style(True))
    assert coloured.startswith("\x1b[1m")


def test_ownership_spans_from_polls_merge_consecutive_owners() -> None:
    a = Member("member-a", "kp", "/h", protocol="classic", assignment={"t": [0, 1]})
    b = Member("member-b", "rd", "/h", protocol="consumer", assignment={"t": [1]})
    a2 = Member("member-a", "kp", "/h", protocol="classic", assignment={"t": [0]})
    obs = [
        Observation(0.0, classic_group([a]), POLICY),
        Observation(1.0, classic_group([a]), POLICY),
        Observation(2.0, consumer_group([a2, b]), POLICY),
    ]
    spans = ownership_from_observations(obs)
    assert sorted(spans, key=lambda s: (s.partition, s.start)) == [
        Span("t-0", "kp member-a", "classic", 0.0, 3.0),
        Span("t-1", "kp member-a", "classic", 0.0, 2.0),
        Span("t-1", "rd member-b", "consumer", 2.0, 3.0),
    ]


def test_ownership_spans_from_an_event_log(tmp_path: Path) -> None:
    log = tmp_path / "gateway.log"
    events = [
        {
            "event": "member.joined",
            "group": "g",
            "member": "a",
            "protocol": "classic",
            "timestamp": "2026-01-01T00:00:00Z",
        },
        {
            "event": "member.assignment_changed",
            "group": "g",
            "member": "a",
            "assigned": {"t": [0, 1]},
            "timestamp": "2026-01-01T00:00:01Z",
        },
        {
            "event": "member.assignment_changed",
            "group": "other",
            "member": "z",
            "assigned": {"t": [0]},
            "timestamp": "2026-01-01T00:00:01Z",
        },
        {
            "event": "member.assignment_changed",
            "group": "g",
            "member": "a",
            "assigned": ["t-0"],
            "timestamp": "2026-01-01T00:00:03Z",
        },
        {
            "event": "member.assignment_changed",
            "group": "g",
            "member": "b",
            "partitions": [{"topic": "t", "partition": 1}],
            "timestamp": "2026-01-01T00:00:04Z",
        },
        {"event": "member.left", "group": "g", "member": "a", "timestamp": "2026-01-01T00:00:06Z"},
    ]
    log.write_text("not json\n" + "\n".join(json.dumps(e) for e in events) + "\n")
    spans = sorted(ownership_from_events(log, "g"), key=lambda s: (s.partition, s.start))
    t0 = spans[0].start
    assert [(s.partition, s.owner, s.protocol, s.start - t0, s.end - t0) for s in spans] == [
        ("t-0", "a", "classic", 0.0, 5.0),
        ("t-1", "a", "classic", 0.0, 2.0),
        ("t-1", "b", None, 3.0, 5.0),
    ]
    bare = tmp_path / "bare.log"
    bare.write_text(
        json.dumps({"event": "member.assignment_changed", "group": "g", "member": "a", "timestamp": 1}) + "\n"
    )
    with pytest.raises(ValueError, match="lists its partitions"):
        ownership_from_events(bare, "g")
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib (extra 'plot')")
    png = tmp_path / "o.png"
    plot_ownership(spans, png, "g")
    assert png.read_bytes()[:4] == b"\x89PNG"


def run_cli(*argv: str) -> tuple[int, str, str]:
    import contextlib
    import io

    from groupshift.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


def test_usage_errors_exit_2_before_any_connection() -> None:
    # Port 1 on 127.0.0.1: nothing listens, so reaching the network would exit 1, not 2.
    assert run_cli("groups", "--bootstrap-server", "127.0.0.1:1")[0] == 2  # no sub-command
    code, _, err = run_cli("groups", "--bootstrap-server", "no-port", "list")
    assert code == 2 and "HOST:PORT" in err
    code, _, err = run_cli(
        "groups", "--bootstrap-server", "127.0.0.1:1", "reset-offsets", "g", "--topic", "t"
    )
    assert code == 2 and "exactly one of" in err
    code, _, err = run_cli(
        "groups",
        "--bootstrap-server",
        "127.0.0.1:1",
        "reset-offsets",
        "g",
        "--topic",
        "t",
        "--to-earliest",
        "--to-latest",
    )
    assert code == 2
    code, _, _ = run_cli(
        "groups", "--bootstrap-server", "127.0.0.1:1", "reset-offsets", "g", "--dry-run", "--execute"
    )
    assert code == 2  # argparse: mutually exclusive
    code, _, err = run_cli("groups", "--bootstrap-server", "127.0.0.1:1", "list", "--type", "share")
    assert code == 2 and "Invalid types list" in err
    code, _, err = run_cli("groups", "--bootstrap-server", "127.0.0.1:1", "--timeout", "1", "describe", "g")
    assert code == 1 and "cannot connect" in err


def test_no_upgrade_advice_on_a_server_without_kip848() -> None:
    from tools.groups.capabilities import ServerCapabilities

    off = ServerCapabilities(
        False, "group.coordinator.rebalance.protocols does not include consumer", "k:9092"
    )
    members = [Member("m0", "rdkafka", "/h", protocol="classic", assignment={"t": [0]})]
    for group in (classic_group(members), classic_group([])):
        rep = report(Observation(1.0, group, POLICY, off), Tracker(), 30.0)
        assert rep["conversion"]["allowed"] is False, rep
        assert rep["conversion"]["refusals"] == [
            "the server does not serve the KIP-848 consumer protocol: "
            "group.coordinator.rebalance.protocols does not include consumer"
        ]
        assert rep["next_step"].startswith("Do not start group.protocol=consumer members here")
        assert "groupshift serve --upstream k:9092" in rep["next_step"]
    on = ServerCapabilities(True, "served", "k:9092")
    rep = report(Observation(1.0, classic_group(members), POLICY, on), Tracker(), 30.0)
    assert (
        rep["next_step"]
        == "Restart one member with group.protocol=consumer: it converts the group (upgrade)."
    )


def test_partition_ranges() -> None:
    from tools.groups.migration import name_ranges, partition_ranges

    assert partition_ranges([("orders", p) for p in (7, 0, 1, 2, 3, 4, 5)]) == "orders:0-5,7"
    assert partition_ranges([("b", 1), ("a", 3), ("a", 5), ("a", 4), ("b", 1)]) == "a:3-5;b:1"
    assert partition_ranges([("t", 0), ("t", 2), ("t", 4)]) == "t:0,2,4"
    assert partition_ranges([]) == ""
    assert name_ranges(["my-topic-0", "my-topic-1", "my-topic-11"]) == "my-topic:0-1,11"


def _rollback_polls() -> list[Observation]:
    """A group upgraded by one consumer-protocol member, which then leaves (the rollback)."""
    kp = [Member(f"k{i}", "kp", "/h", protocol="classic", assignment={"t": [i]}) for i in range(2)]
    rd = Member("r", "rd", "/h", protocol="consumer", assignment={}, target={})
    return [
        Observation(100.0, classic_group(kp), POLICY),
        Observation(101.0, consumer_group([*kp, rd]), POLICY),
        Observation(102.0, classic_group(kp), POLICY),
    ]


def test_after_a_rollback_the_next_step_does_not_point_at_the_consumer_protocol() -> None:
    from tools.groups.migration import infer_intent

    polls = _rollback_polls()
    tracker = Tracker()
    for o in polls:
        tracker.observe(o)
    intent = infer_intent(tracker.observations, None)
    assert intent["inferred"] == intent["direction"] == "downgrade"
    assert "converted consumer -> classic" in intent["because"]
    rep = report(polls[-1], tracker, 60.0, intent)
    assert rep["next_step"].startswith("Rollback done") and "group.protocol=consumer" not in rep["next_step"]
    text = render(rep, Style(False))
    assert "Direction: downgrade (inferred: the group converted consumer -> classic" in text
    # the operator meant an upgrade: the view says the group went the other way
    expected = infer_intent(tracker.observations, "upgrade")
    assert expected["direction"] == "upgrade" and expected["away_from_expected"]
    rep = report(polls[-1], tracker, 60.0, expected)
    assert rep["next_step"].startswith("The group is moving away from the expected direction (upgrade)")
    assert "but the group is going the other way" in render(rep, Style(False))
    # the first poll alone: nothing converted yet, an upgrade is assumed (the old advice)
    first = Tracker()
    first.observe(polls[0])
    assert report(polls[0], first, 60.0)["next_step"].startswith(
        "Restart one member with group.protocol=consumer"
    )


def test_during_a_rollback_consumer_members_leaving_point_back_to_classic() -> None:
    from tools.groups.migration import infer_intent

    kp = Member("k", "kp", "/h", protocol="classic", assignment={"t": [0]})
    rd = [Member(f"r{i}", "rd", "/h", protocol="consumer", assignment={"t": [i + 1]}) for i in range(2)]
    polls = [
        Observation(100.0, classic_group([kp]), POLICY),
        Observation(101.0, consumer_group([kp, *rd]), POLICY),  # upgraded
        Observation(102.0, consumer_group([kp, rd[0]]), POLICY),  # r1 rolled back
    ]
    tracker = Tracker()
    for o in polls:
        tracker.observe(o)
    intent = infer_intent(tracker.observations, None)
    assert intent["direction"] == "downgrade", intent
    g = Group("g", True, "Stable", "consumer", "consumer", "uniform", 5, 5, None, [kp, rd[0]], "test")
    rep = report(Observation(102.0, g, POLICY), tracker, 60.0, intent)
    assert rep["next_step"].startswith(
        "Roll the remaining 1 consumer-protocol member(s) back to group.protocol=classic"
    ), rep["next_step"]
    # a conversion in the gateway's event log counts as much as one seen between polls
    from tools.groups.migration import Conversion

    logged = [Conversion(50.0, "consumer", "classic", "event log")]
    assert infer_intent([polls[0]], None, logged)["inferred"] == "downgrade"


def test_conversions_from_the_event_log(tmp_path: Path) -> None:
    from tools.groups.migration import conversions_from_events

    log = tmp_path / "events.log"
    log.write_text(
        "not json\n"
        + json.dumps({"event": "group.converted", "group": "g", "from_type": "classic",
                      "to_type": "consumer", "timestamp": 1_700_000_000_000}) + "\n"
        + json.dumps({"event": "group.converted", "group": "other", "from_type": "consumer",
                      "to_type": "classic", "timestamp": 1_700_000_001_000}) + "\n"
        + json.dumps({"event": "group.converted", "group": "g", "from_type": "consumer",
                      "to_type": "classic", "timestamp": 1_700_000_002_000}) + "\n"
    )  # fmt: skip
    got = conversions_from_events(log, "g")
    assert [(c.direction, c.at) for c in got] == [
        ("upgrade", 1_700_000_000.0),
        ("downgrade", 1_700_000_002.0),
    ]


def test_watch_redraws_in_place_on_a_terminal_and_appends_otherwise() -> None:
    from io import StringIO

    from tools.groups.migration import Screen

    class Tty(StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    screen = Screen(out, redraw=True)
    screen.show("a\nb\n")
    screen.show("c\n")
    screen.show("poll failed\n", keep=True)
    screen.show("d\n")
    assert out.getvalue() == "a\nb\n\x1b[2F\x1b[Jc\n\x1b[1F\x1b[Jpoll failed\nd\n"
    plain = StringIO()
    screen = Screen(plain, redraw=False)
    screen.show("a\nb\n")
    screen.show("c\n")
    assert plain.getvalue() == "a\nb\nc\n"


def test_one_colour_per_client_in_both_plot_modes_and_conversion_marks(tmp_path: Path) -> None:
    """Polls and the event log of the same group colour a client alike (and so does the matrix
    report, harness/matrix/report.py, which uses the same `client_colours`)."""
    from tools.groups.plot import PALETTE, client_colours

    a = Member("member-a", "kp", "/h", protocol="classic", assignment={"t": [0, 1]})
    b = Member("member-b", "rd", "/h", protocol="consumer", assignment={"t": [1]})
    polls = ownership_from_observations(
        [Observation(0.0, classic_group([a]), POLICY), Observation(1.0, consumer_group([a, b]), POLICY)]
    )
    log = tmp_path / "gateway.log"
    log.write_text(
        "\n".join(
            json.dumps(e)
            for e in [
                {
                    "event": "member.joined",
                    "group": "g",
                    "member": "member-a",
                    "client_id": "kp",
                    "protocol": "classic",
                    "timestamp": 0,
                },
                {
                    "event": "member.assignment_changed",
                    "group": "g",
                    "member": "member-a",
                    "assigned": ["t-0", "t-1"],
                    "timestamp": 0,
                },
                {
                    "event": "member.joined",
                    "group": "g",
                    "member": "member-b",
                    "client_id": "rd",
                    "protocol": "consumer",
                    "timestamp": 1,
                },
                {
                    "event": "member.assignment_changed",
                    "group": "g",
                    "member": "member-b",
                    "assigned": ["t-1"],
                    "timestamp": 1,
                },
            ]
        )
    )
    logged = ownership_from_events(log, "g")
    colours = client_colours(s.colour_key for s in polls)
    assert colours == client_colours(s.colour_key for s in logged) == {"kp": PALETTE[0], "rd": PALETTE[1]}
    assert {s.client for s in logged} == {"kp", "rd"}
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib (extra 'plot')")
    png = tmp_path / "marks.png"
    plot_ownership(polls, png, "g", conversions=[(1.0, "classic -> consumer")])
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_a_scale_in_of_a_consumer_group_is_not_a_rollback() -> None:
    from tools.groups.migration import infer_intent

    rd = [Member(f"r{i}", "rd", "/h", protocol="consumer", assignment={"t": [i]}) for i in range(3)]
    polls = [
        Observation(100.0, consumer_group(rd), POLICY),
        Observation(101.0, consumer_group(rd[:2]), POLICY),
    ]
    intent = infer_intent(polls, None)
    assert intent["inferred"] is None and intent["direction"] is None
    g = Group("g", True, "Stable", "consumer", "consumer", "uniform", 5, 5, None, rd[:2], "test")
    tracker = Tracker()
    for o in polls:
        tracker.observe(o)
    assert report(Observation(101.0, g, POLICY), tracker, 60.0, intent)["next_step"].startswith("Done")


def test_streams_reset_scope_is_committed_input_partitions() -> None:
    """A streams group's --all-input-topics is its committed partitions of the topics its
    subtopologies read (not of other topics it has offsets for); named partitions must be
    committed ones, as Kafka's StreamsGroupCommand requires."""
    import argparse

    from tools.groups.reset_offsets import streams_partitions_for

    committed = {("in", 0): 5, ("in", 1): 7, ("app-x-repartition", 0): 3, ("other", 0): 1}
    every = argparse.Namespace(all_topics=True, topic=None, group="app")
    scope = streams_partitions_for(None, every, committed, {"in", "app-x-repartition"})  # type: ignore[arg-type]
    assert scope == [("app-x-repartition", 0), ("in", 0), ("in", 1)]
    named = argparse.Namespace(all_topics=False, topic=["in:0,1"], group="app")
    assert streams_partitions_for(None, named, committed, {"in"}) == [("in", 0), ("in", 1)]  # type: ignore[arg-type]
    absent = argparse.Namespace(all_topics=False, topic=["in:2"], group="app")
    with pytest.raises(PlanError, match="One or more topics are not part of the group 'app'"):
        streams_partitions_for(None, absent, committed, {"in"})  # type: ignore[arg-type]
