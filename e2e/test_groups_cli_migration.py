"""`groupshift groups migration` during live migrations on `groupshift serve`, real clients.

A classic group of kafka-python members (a continuous producer writing a 12-partition topic, see
e2e/migration.py) is upgraded by confluent-kafka `group.protocol=consumer` members; the command
must tell the story as it happens: the group type and epoch, members by protocol and client,
who owns what, the conversion check and the next step. `--watch` runs as a separate process
through a whole rolling upgrade and its JSON lines are checked afterwards (and its `--plot` PNG);
a gateway whose policy forbids upgrades must be reported as refusing the conversion, with the
reason, before any consumer-protocol member tries.
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from e2e.conftest import Gateways
from e2e.groups_cli import groups, groups_json
from e2e.harness import REPO
from e2e.migration import scenario
from tools.groups.migration import conversions_from_events
from tools.groups.plot import ownership_from_events


def test_migration_report_during_a_live_upgrade(gateways: Gateways) -> None:
    with scenario(gateways, "mig-cli") as sc:
        bootstrap = sc.gw.bootstrap
        classic = [sc.cast.classic("kafka-python-range") for _ in range(2)]
        sc.step("classic", "two kafka-python members")
        rep = groups_json(bootstrap, "migration", sc.group)
        assert rep["phase"] == "classic" and rep["type"] == "classic" and rep["state"] == "Stable"
        assert rep["members_by_protocol"] == {"classic": 2}
        assert rep["conversion"]["direction"] == "upgrade" and rep["conversion"]["allowed"] is True
        assert rep["conversion"]["policy"] == "bidirectional"
        assert rep["next_step"].startswith("Restart one member with group.protocol=consumer")
        owned = sorted(p for m in rep["members"] for p in m["owns"])
        assert owned == sorted(f"{sc.topic}-{p}" for p in range(12))

        new = sc.cast.confluent("consumer")
        sc.step("consumer", "a confluent-kafka consumer-protocol member joined")
        rep = groups_json(bootstrap, "migration", sc.group)
        assert rep["type"] == "consumer" and rep["phase"] == "migrating"
        assert rep["members_by_protocol"] == {"classic": 2, "consumer": 1}
        clients = {(c["client_id"], c["protocol"]): c["members"] for c in rep["members_by_client"]}
        assert clients[(new.name, "consumer")] == 1
        assert sum(n for (_, p), n in clients.items() if p == "classic") == 2
        assert rep["group_epoch"] >= 1 and rep["assignment_epoch"] == rep["group_epoch"]
        assert rep["conversion"]["direction"] == "downgrade" and rep["conversion"]["allowed"] is True
        assert rep["next_step"].startswith("Roll the remaining 2 classic member(s)")
        by_id = {m["member_id"]: m for m in rep["members"]}
        assert by_id[new.member_id]["protocol"] == "consumer"
        for m in rep["members"]:  # settled: everyone owns exactly its target
            assert m["pending_revocation"] == [] and sorted(m["owns"]) == sorted(m["target"])
        for old in classic:
            old.stop()
        sc.step("consumer", "the classic members left")
        rep = groups_json(bootstrap, "migration", sc.group)
        assert rep["phase"] == "consumer" and rep["members_by_protocol"] == {"consumer": 1}
        assert rep["next_step"].startswith("Done")
        sc.finish()


def test_migration_watch_through_a_rolling_upgrade(gateways: Gateways, tmp_path: Path) -> None:
    plot = tmp_path / "ownership.png"
    with scenario(gateways, "mig-watch") as sc:
        classic = [sc.cast.classic("kafka-python-cooperative-sticky") for _ in range(2)]
        sc.step("classic", "two kafka-python cooperative members")
        watch = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "groupshift",
                "groups",
                "--bootstrap-server",
                sc.gw.bootstrap,
                "--json",
                "migration",
                sc.group,
                "--watch",
                "--interval",
                "0.3",
                "--plot",
                str(plot),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert watch.stdout is not None
        first = watch.stdout.readline()  # the first poll saw the classic group
        try:
            for i, old in enumerate(classic):
                sc.cast.confluent("consumer")
                sc.step("consumer", f"upgrade {i + 1}/2: consumer member joined")
                old.stop()
                sc.step("consumer", f"upgrade {i + 1}/2: {old.name} left")
            # The target assignment after the last leave may still be computing (Assigning):
            # wait until the group reports itself done, then give the watch a few more polls.
            deadline = time.monotonic() + 30
            while not groups_json(sc.gw.bootstrap, "migration", sc.group)["next_step"].startswith("Done"):
                assert time.monotonic() < deadline, "the group never reported the migration done"
                time.sleep(0.3)
            time.sleep(1.2)
        finally:
            watch.send_signal(signal.SIGINT)
            out, err = watch.communicate(timeout=60)
        assert watch.returncode == 0, err
        polls = [json.loads(line) for line in [first, *out.splitlines()] if line.strip()]
        # The same story from the gateway's own event log: who owns each partition at the end.
        from_log = tmp_path / "from-log.png"
        r = groups(
            sc.gw.bootstrap, "migration", sc.group, "--plot", str(from_log), "--events", str(sc.gw.log_path)
        )
        assert r.returncode == 0, r.stderr
        assert from_log.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        spans = ownership_from_events(sc.gw.log_path, sc.group)
        sc.finish()
    assert len(polls) >= 4, f"only {len(polls)} polls"
    phases = [p["phase"] for p in polls]
    assert phases[0] == "classic" and phases[-1] == "consumer"
    assert "migrating" in phases
    # Phases only move forward in a rolling upgrade.
    order = {"classic": 0, "migrating": 1, "consumer": 2}
    assert [order[p] for p in phases] == sorted(order[p] for p in phases)
    story = [c for p in polls for c in p["changes"]]
    assert "group converted classic -> consumer" in story
    assert sum("joined (consumer" in c for c in story) == 2
    assert sum("left (classic" in c for c in story) == 2
    assert polls[-1]["members_by_protocol"] == {"consumer": 2}
    assert polls[-1]["next_step"].startswith("Done")
    # Every partition pending revocation in any poll was owned by the member named in that poll.
    for p in polls:
        owns = {m["member_id"]: set(m["owns"]) for m in p["members"]}
        for pend in p["pending_revocation"]:
            assert pend["partition"] in owns[pend["member_id"]]
            assert pend["pending_for_s"] >= 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 5000
    last_owner = {
        p: m["member_id"] for m in polls[-1]["members"] for p in m["owns"]
    }  # the last poll, with both consumer members settled
    latest = {sp.partition: sp.owner for sp in sorted(spans, key=lambda sp: sp.start)}
    assert latest == last_owner
    # In the log's account (assigned + pending revocation) no partition had two owners at once:
    # a receiver is given a partition only after its previous owner released it.
    by_partition: dict[str, list[tuple[float, float]]] = {}
    for sp in spans:
        by_partition.setdefault(sp.partition, []).append((sp.start, sp.end))
    for p, windows in by_partition.items():
        windows.sort()
        for (_, e1), (s2, _) in itertools.pairwise(windows):
            assert s2 >= e1 - 1e-6, f"{p} owned twice at once: {windows}"


def test_migration_names_the_refusal_before_anyone_tries(gateways: Gateways) -> None:
    with scenario(gateways, "mig-refuse", sets=["group.consumer.migration.policy=downgrade"]) as sc:
        sc.cast.classic("kafka-python-range")
        sc.step("classic", "one kafka-python member")
        rep = groups_json(sc.gw.bootstrap, "migration", sc.group)
        assert rep["conversion"]["direction"] == "upgrade" and rep["conversion"]["allowed"] is False
        assert rep["conversion"]["policy"] == "downgrade"
        assert any("group.consumer.migration.policy is downgrade" in r for r in rep["conversion"]["refusals"])
        assert rep["next_step"].startswith("Fix before upgrading")
        assert "GROUP_ID_NOT_FOUND" in rep["next_step"]
        sc.finish()
    missing = groups_json(sc.gw.bootstrap, "migration", "no-such-group", expect=3)
    assert missing["exists"] is False and missing["phase"] == "not found"


def test_migration_watch_outlives_a_gateway_restart(gateways: Gateways) -> None:
    """A watch keeps going while the gateway is SIGKILLed and restarted on the same port: the
    polls in between report the failure (`poll_error`), the ones after see the group again
    (recovered from the coordinator log)."""
    from e2e.migration import FAST_GROUP_SETTINGS, create_topic, restart_same_port

    gw = gateways.start("watch-restart", sets=FAST_GROUP_SETTINGS)
    create_topic(gw, "wr-t", 3)
    ok = groups(gw.bootstrap, "reset-offsets", "wr-g", "--topic", "wr-t", "--to-earliest", "--execute")
    assert ok.returncode == 0, ok.stderr  # an empty group with committed offsets
    watch = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "groupshift",
            "groups",
            "--bootstrap-server",
            gw.bootstrap,
            "--timeout",
            "2",
            "--json",
            "migration",
            "wr-g",
            "--watch",
            "--interval",
            "0.3",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watch.stdout is not None
        first = json.loads(watch.stdout.readline())
        assert first["phase"] == "empty"
        gw.kill()
        time.sleep(1.0)
        restarted = restart_same_port(gateways, gw)
        assert restarted.port == gw.port
        time.sleep(2.0)
    finally:
        watch.send_signal(signal.SIGINT)
        out, err = watch.communicate(timeout=60)
    assert watch.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    errors = [i for i, line in enumerate(lines) if "poll_error" in line]
    assert errors, "no poll failed while the gateway was down"
    after = lines[errors[-1] + 1 :]
    assert after and all(p["phase"] == "empty" and p["exists"] for p in after)


def _wait_next_step(bootstrap: str, group: str, *args: str, starts: str) -> dict[str, Any]:
    """The report once its next step starts with `starts` (the last one seen fails the test)."""
    deadline = time.monotonic() + 30
    while True:
        rep: dict[str, Any] = groups_json(bootstrap, "migration", group, *args)
        if rep["next_step"].startswith(starts):
            return rep
        assert time.monotonic() < deadline, f"never {starts!r}: {rep['next_step']}"
        time.sleep(0.3)


def test_migration_view_after_a_rollback_points_back_to_classic(gateways: Gateways, tmp_path: Path) -> None:
    """An upgrade rolled back: two kafka-python classic members, two confluent-kafka
    consumer-protocol members join (the group converts), then leave one by one (the group
    converts back when the last one leaves). The migration view must follow the rollback: while
    consumer-protocol members leave, roll them back to classic; after the downgrade, nothing to
    do, and never "group.protocol=consumer". With `--expect upgrade` it says the group is moving
    away from the expected direction."""
    with scenario(gateways, "mig-rollback") as sc:
        bootstrap, log = sc.gw.bootstrap, str(sc.gw.log_path)
        for _ in range(2):
            sc.cast.classic("kafka-python-range")
        sc.step("classic", "two kafka-python members")
        watch = subprocess.Popen(
            [sys.executable, "-m", "groupshift", "groups", "--bootstrap-server", bootstrap, "--json",
             "migration", sc.group, "--watch", "--interval", "0.3"],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert watch.stdout is not None
        first = watch.stdout.readline()
        try:
            modern = [sc.cast.confluent("consumer") for _ in range(2)]
            sc.step("consumer", "upgraded: two confluent-kafka consumer-protocol members joined")
            time.sleep(1.0)
            modern[0].stop()
            sc.step("consumer", "rollback 1/2: a consumer-protocol member left")
            time.sleep(1.5)  # a few polls of the watch see the rollback under way
            modern[1].stop()
            sc.step("classic", "rollback 2/2: the last consumer-protocol member left: classic again")
            assert sc.conversions()[-1] == ("consumer", "classic")
            # One poll alone, told the conversions by the gateway's event log.
            rep = _wait_next_step(bootstrap, sc.group, "--events", log, starts="Rollback done")
            assert rep["intent"]["inferred"] == rep["intent"]["direction"] == "downgrade"
            assert "converted consumer -> classic" in rep["intent"]["because"]
            assert "group.protocol=consumer" not in rep["next_step"]
            assert rep["members_by_protocol"] == {"classic": 2}
            # The operator meant an upgrade: the view says the group went the other way.
            r = groups(bootstrap, "migration", sc.group, "--events", log, "--expect", "upgrade")
            assert r.returncode == 0, r.stderr
            assert "Next step: The group is moving away from the expected direction (upgrade)" in r.stdout
            assert "but the group is going the other way" in r.stdout
            assert "Direction: upgrade (--expect)" in r.stdout
            # Ranges, not every partition: the two classic members own 0-5 and 6-11 (range).
            assert "-topic:0-5" in r.stdout and "-topic:6-11" in r.stdout, r.stdout
            # The plot from the log marks both conversions.
            assert [c.direction for c in conversions_from_events(log, sc.group)] == ["upgrade", "downgrade"]
            png = tmp_path / "rollback.png"
            drawn = groups(bootstrap, "migration", sc.group, "--plot", str(png), "--events", log)
            assert drawn.returncode == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", drawn.stderr
            time.sleep(1.2)
        finally:
            watch.send_signal(signal.SIGINT)
            out, err = watch.communicate(timeout=60)
        assert watch.returncode == 0, err
        sc.finish()
    polls = [json.loads(line) for line in [first, *out.splitlines()] if line.strip()]
    steps = [p["next_step"] for p in polls]
    story = [c for p in polls for c in p["changes"]]
    assert "group converted classic -> consumer" in story and "group converted consumer -> classic" in story
    rolling_back = [
        p for p in polls
        if p["phase"] == "migrating" and p["members_by_protocol"] == {"classic": 2, "consumer": 1}
        and not p["pending_revocation"]
    ]  # fmt: skip
    assert rolling_back, steps
    for p in rolling_back:
        assert p["intent"]["direction"] == "downgrade", p["intent"]
        assert p["next_step"].startswith(
            "Roll the remaining 1 consumer-protocol member(s) back to group.protocol=classic"
        ), p["next_step"]
    after = polls[-1]
    assert after["phase"] == "classic" and after["intent"]["inferred"] == "downgrade"
    assert after["next_step"].startswith(("Rollback done", "Rolled back")), after["next_step"]
    converted = next(i for i, p in enumerate(polls) if "group converted consumer -> classic" in p["changes"])
    for p in polls[converted:]:
        assert "group.protocol=consumer" not in p["next_step"], p["next_step"]


def test_migration_watch_redraws_in_place_on_a_terminal(gateways: Gateways) -> None:
    """On a terminal (a pseudo-terminal here) `--watch` redraws its view in place: the second
    poll's view is preceded by cursor-up-and-clear, not appended; piped, the blocks append."""
    import os
    import pty

    from e2e.migration import FAST_GROUP_SETTINGS, create_topic

    gw = gateways.start("watch-tty", sets=FAST_GROUP_SETTINGS)
    create_topic(gw, "wt-t", 3)
    made = groups(gw.bootstrap, "reset-offsets", "wt-g", "--topic", "wt-t", "--to-earliest", "--execute")
    assert made.returncode == 0, made.stderr
    argv = [sys.executable, "-m", "groupshift", "groups", "--bootstrap-server", gw.bootstrap,
            "migration", "wt-g", "--watch", "--interval", "0.2", "--count", "3"]  # fmt: skip
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=slave, stderr=subprocess.PIPE)
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=60) == 0
    finally:
        os.close(master)
    shown = b"".join(chunks).decode()
    assert shown.count("\x1b[J") == 2, shown  # polls 2 and 3 replaced the view before them
    assert "poll 3" in shown and "Next step:" in shown
    piped = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0, piped.stderr
    assert "\x1b[" not in piped.stdout and piped.stdout.count("Next step:") == 3
