"""`groupshift check` on file inputs, without servers: `__consumer_offsets-N` directories written
here as Kafka lays them out (magic-2 batch segments, `partition.metadata` beside them), read by
tools.check.inputs; the CLI's table, `--json`, settings from `--set`/`--config`, and exit codes."""

from __future__ import annotations

import base64
import json
import uuid
from io import StringIO
from pathlib import Path

import pytest

from groupshift.cli import main
from records.batch import build_batch
from records.classic_group import GroupMemberMetadata, GroupMetadataKey, GroupMetadataValue
from records.codec import encode_record
from records.consumer_group import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    TopicPartitions,
)
from records.coordinator import CoordinatorRecord
from records.offsets import OffsetCommitKey, OffsetCommitValue
from records.segment import segment_name
from tools.check.inputs import read_logs, topic_names
from translation.embedded_protocol import Subscription, serialize_assignment, serialize_subscription

TOPIC_ID = uuid.UUID("6f1c7d1e-0b7a-4a57-9d0e-3a3c1f1e2d4c")


def member(mid: str, user_data: bytes | None = None) -> GroupMemberMetadata:
    return GroupMemberMetadata(
        mid,
        None,
        "rdkafka",
        "/127.0.0.1",
        30000,
        10000,
        serialize_subscription(Subscription(1, ("orders",))),
        serialize_assignment({"orders": [0]}, 1, user_data),
    )


def write_log_dir(base: Path) -> Path:
    """A broker log dir: __consumer_offsets-0 with three groups, and the topic `orders`."""
    log = base / "__consumer_offsets-0"
    log.mkdir(parents=True)
    records = [
        CoordinatorRecord(
            GroupMetadataKey("ok"), GroupMetadataValue("consumer", 4, "range", "a", 0, (member("a"),))
        ),
        CoordinatorRecord(
            GroupMetadataKey("sticky"),
            GroupMetadataValue("consumer", 3, "cooperative-sticky", "b", 0, (member("b", b"\x00\x01"),)),
        ),
        CoordinatorRecord(OffsetCommitKey("ok", "orders", 0), OffsetCommitValue(10, -1, "", 0)),
        CoordinatorRecord(ConsumerGroupMetadataKey("cg"), ConsumerGroupMetadataValue(6)),
        CoordinatorRecord(
            ConsumerGroupMemberMetadataKey("cg", "m1"),
            ConsumerGroupMemberMetadataValue(None, None, "rdkafka", "/h", ("orders",), None),
        ),
        CoordinatorRecord(
            ConsumerGroupCurrentMemberAssignmentKey("cg", "m1"),
            ConsumerGroupCurrentMemberAssignmentValue(6, 5, 0, (TopicPartitions(TOPIC_ID, (0, 1)),)),
        ),
    ]
    batch = build_batch([encode_record(r) for r in records], base_offset=0, timestamp_ms=1_700_000_000_000)
    (log / segment_name(0)).write_bytes(batch)
    (log / "00000000000000000000.index").write_bytes(b"")
    part = base / "orders-0"
    part.mkdir()
    tid = base64.urlsafe_b64encode(TOPIC_ID.bytes).decode().rstrip("=")
    (part / "partition.metadata").write_text(f"version: 0\ntopic_id: {tid}\n")
    return base


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_log_dir_facts(tmp_path: Path) -> None:
    base = write_log_dir(tmp_path)
    assert topic_names(str(base)) == {TOPIC_ID: "orders"}
    got = read_logs([str(base)])
    assert got.problems == []
    assert sorted(got.facts) == ["cg", "ok", "sticky"]
    assert got.facts["cg"].members[0].owned == (("orders", 0), ("orders", 1))
    assert got.facts["ok"].offsets == (("orders", 0, 10),)
    assert got.facts["sticky"].members[0].assignment_user_data
    # one partition directory is an input too
    assert sorted(read_logs([str(base / "__consumer_offsets-0")]).facts) == ["cg", "ok", "sticky"]


def test_upgrade_table_and_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_log_dir(tmp_path)
    code, out, _ = run(["check", "upgrade", "--log-dir", str(base), "--all"], capsys)
    assert code == 1  # one NOT-READY
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["GROUP", "TYPE", "MEMBERS", "VERDICT"]
    rows = {line.split()[0]: line.split()[3] for line in lines[1:4]}
    assert rows == {"cg": "READY", "ok": "READY", "sticky": "NOT-READY"}
    assert "sticky: a group.protocol=consumer member is refused: Cannot upgrade classic group sticky" in out
    assert "librdkafka cooperative-sticky leaders copy sticky userData" in out
    assert lines[-1].endswith("3 group(s): 1 NOT-READY, 2 READY")
    # only the READY groups: exit 0
    code, _, _ = run(["check", "upgrade", "--log-dir", str(base), "ok", "cg"], capsys)
    assert code == 0


def test_json_and_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_log_dir(tmp_path)
    props = tmp_path / "server.properties"
    props.write_text("# broker\ngroup.consumer.migration.policy=downgrade\n")
    code, out, _ = run(
        ["check", "upgrade", "--log-dir", str(base), "ok", "--json", "--config", str(props)], capsys
    )
    doc = json.loads(out)
    assert code == 1 and doc["exit_status"] == 1
    (g,) = doc["groups"]
    assert {"group", "verdict", "reason", "fix", "kafka_message", "details"} <= set(g)
    assert g["kafka_message"].endswith("because online upgrade is disabled.")
    assert doc["settings"]["known"] == ["group.consumer.migration.policy"]
    # --set wins over --config
    code, out, _ = run(
        ["check", "upgrade", "--log-dir", str(base), "ok", "--json", "--config", str(props), "--set",
         "group.consumer.migration.policy=bidirectional"],
        capsys,
    )  # fmt: skip
    assert code == 0 and json.loads(out)["groups"][0]["verdict"] == "READY"


def test_downgrade_targets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_log_dir(tmp_path)
    code, out, _ = run(
        ["check", "downgrade", "--to", "classic-protocol", "--log-dir", str(base), "--all", "--json",
         "--set", "group.max.size=0"],
        capsys,
    )  # fmt: skip
    assert code == 3  # Kafka's bounds: group.max.size >= 1
    code, out, _ = run(
        ["check", "downgrade", "--to", "classic-protocol", "--log-dir", str(base), "cg", "--json",
         "--set", "group.consumer.migration.policy=disabled"],
        capsys,
    )  # fmt: skip
    assert code == 2 and json.loads(out)["groups"][0]["verdict"] == "UNSAFE"
    code, out, _ = run(
        ["check", "downgrade", "--to", "kafka-3.9", "--log-dir", str(base), "cg", "--json"], capsys
    )
    (g,) = json.loads(out)["groups"]
    kinds = [d["reason"] for d in g["details"]]
    assert any("ConsumerGroupMetadata v0" in k for k in kinds), kinds
    assert code in (0, 1, 2) and g["target"] == "kafka-3.9"


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "upgrade", "--all"],  # no input
        ["check", "upgrade", "--log-dir", "/nonexistent", "--all"],
        ["check", "upgrade", "--log-dir", "."],  # neither groups nor --all
        ["check", "downgrade", "--log-dir", ".", "--all"],  # no --to
        ["check", "downgrade", "--to", "kafka-0.8", "--log-dir", ".", "--all"],
        ["check", "upgrade", "--bootstrap-server", "127.0.0.1:1", "--all", "--timeout", "1"],
    ],
)
def test_input_errors_exit_3(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own errors, raised by our error handler
        code = int(e.code or 0)
    _, err = capsys.readouterr()
    assert code == 3, err
    assert "error" in err


def test_unknown_group_is_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_log_dir(tmp_path)
    code, _, err = run(["check", "upgrade", "--log-dir", str(base), "nope"], capsys)
    assert code == 3 and "group(s) not found: nope" in err


def test_verbose_lists_every_check(tmp_path: Path) -> None:
    base = write_log_dir(tmp_path)
    out = StringIO()
    from tools.check.command import render
    from tools.check.rules import Settings, upgrade_verdict

    facts = read_logs([str(base)]).facts
    render([upgrade_verdict(facts["ok"], Settings())], [], True, out)
    text = out.getvalue()
    assert "ok [ok] policy:" in text and "ok [info] server-assignor" not in text
    assert "ok [warning] server-assignor" in text


def test_set_refuses_a_key_serve_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_log_dir(tmp_path)
    code, _, err = run(
        [
            "check",
            "upgrade",
            "--log-dir",
            str(base),
            "--all",
            "--set",
            "group.consumer.migraton.policy=upgrade",
        ],
        capsys,
    )
    assert code == 3 and "unknown configuration key 'group.consumer.migraton.policy'" in err
    # a Kafka broker key check does not use is accepted, as serve accepts it
    code, _, _ = run(
        ["check", "upgrade", "--log-dir", str(base), "--all", "--set", "num.io.threads=4"], capsys
    )
    assert code in (0, 1)


def test_a_server_without_kip848_makes_every_group_not_ready(tmp_path: Path) -> None:
    from tools.check.command import exit_status, render
    from tools.check.rules import NOT_READY, READY, Settings, upgrade_verdict
    from tools.groups.capabilities import ServerCapabilities

    facts = read_logs([str(write_log_dir(tmp_path))]).facts
    off = ServerCapabilities(False, "group.version is 0", "kafka:9092")
    on = ServerCapabilities(True, "ConsumerGroupHeartbeat v0-v1 served", "kafka:9092")
    verdicts = [upgrade_verdict(f, Settings(), off) for f in facts.values() if f.live]
    assert verdicts and {v.verdict for v in verdicts} == {NOT_READY} and exit_status(verdicts) == 1
    v = verdicts[0]
    assert v.reason == "the server does not serve the KIP-848 consumer protocol: group.version is 0"
    assert v.fix is not None and "Kafka 4.0+" in v.fix and "groupshift serve --upstream kafka:9092" in v.fix
    assert v.details[0].name == "server" and v.kafka_message is None
    out = StringIO()
    render(verdicts, [], False, out, off)
    text = out.getvalue()
    assert text.startswith("Server kafka:9092: does not serve the KIP-848 consumer protocol\n")
    assert "way out 2: put groupshift in front: groupshift serve --upstream kafka:9092" in text
    served = upgrade_verdict(facts["ok"], Settings(), on)
    assert served.verdict == upgrade_verdict(facts["ok"], Settings()).verdict == READY
    assert served.details[0].name == "server" and served.details[0].status == "ok"
    unknown = upgrade_verdict(facts["ok"], Settings(), ServerCapabilities(None, "no answer"))
    assert unknown.verdict == READY and unknown.details[0].status == "unknown"
    assert off.to_json()["ways_out"] and on.to_json()["ways_out"] == []


def printed_commands(text: str) -> list[list[str]]:
    """Every command the text output suggests: its `$ ` lines, split as a shell splits them."""
    import shlex

    return [shlex.split(line.strip()[2:]) for line in text.splitlines() if line.strip().startswith("$ ")]


def run_printed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """A printed `groupshift ...` command, run through the console script's `main`; a command
    that would start a server (`serve`) is run at --help level."""
    assert argv[0] == "groupshift", argv
    if argv[1] == "serve":
        argv = [*argv, "--help"]
    try:
        code = main(argv[1:])
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out + err


def test_check_output_fits_the_terminal_with_reasons_and_fixes_on_their_own_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = write_log_dir(tmp_path)
    monkeypatch.setenv("COLUMNS", "60")
    for argv in (
        ["check", "upgrade", "--log-dir", str(base), "--all", "--verbose"],
        ["check", "downgrade", "--to", "kafka-3.7", "--log-dir", str(base), "--all", "--verbose"],
    ):
        _, out, _ = run(argv, capsys)
        lines = out.splitlines()
        # a command stays on one line (to be copied); a line of one word longer than the width
        # (this test's long temporary path) cannot be wrapped
        too_wide = [
            line
            for line in lines
            if len(line) > 60 and not line.lstrip().startswith("$ ") and len(line.split()) > 1
        ]
        assert not too_wide, "\n".join(too_wide)
        assert any(line.startswith("  reason: ") for line in lines)
        assert any(line.startswith("  fix: ") for line in lines)
        assert "record-" not in out  # the record checks are named by record type
    assert "ConsumerGroupMetadata records:" in out
    # piped without COLUMNS: one line per reason, for grep
    monkeypatch.delenv("COLUMNS")
    _, out, _ = run(["check", "upgrade", "--log-dir", str(base), "sticky"], capsys)
    (reason,) = [line for line in out.splitlines() if line.startswith("  reason: ")]
    assert reason.endswith("KAFKA-18134)")


def test_every_printed_fix_command_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Real inputs whose fixes come with commands; each printed command runs as printed (the
    what-if checks come back READY/SAFE: exit 0; the rewrite writes its log dir)."""
    base = write_log_dir(tmp_path / "logs")
    props = tmp_path / "server.properties"
    props.write_text("group.consumer.migration.policy=downgrade\n")
    cases = [
        ["check", "upgrade", "--log-dir", str(base), "ok", "--config", str(props)],
        ["check", "upgrade", "--log-dir", str(base), "--all", "--set",
         "group.consumer.migration.policy=disabled"],
        ["check", "downgrade", "--to", "classic-protocol", "--log-dir", str(base), "cg", "--set",
         "group.consumer.migration.policy=disabled"],
        ["check", "downgrade", "--to", "kafka-3.7", "--log-dir", str(base), "--all"],
    ]  # fmt: skip
    ran = []
    for argv in cases:
        code, out, err = run(argv, capsys)
        assert code in (1, 2), (argv, out, err)
        commands = printed_commands(out)
        assert commands, out
        for command in commands:
            got, said = run_printed(command, capsys)
            assert got == 0, f"{' '.join(command)}: exit {got}\n{said}"
            ran.append(command)
    rewrite = [c for c in ran if c[1:3] == ["records", "rewrite"]]
    assert rewrite and Path(rewrite[0][rewrite[0].index("--out") + 1]).is_dir()
    assert any("--set" in c and "group.consumer.migration.policy=bidirectional" in c for c in ran)


def test_the_way_out_command_of_a_server_without_kip848_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tools.check.command import render
    from tools.check.rules import Settings, upgrade_verdict
    from tools.groups.capabilities import ServerCapabilities

    facts = read_logs([str(write_log_dir(tmp_path))]).facts
    off = ServerCapabilities(False, "group.version is 0", "kafka:9092")
    out = StringIO()
    render([upgrade_verdict(facts["ok"], Settings(), off)], [], False, out, off)
    (command,) = printed_commands(out.getvalue())
    assert command == ["groupshift", "serve", "--upstream", "kafka:9092"]
    code, said = run_printed(command, capsys)
    assert code == 0 and "--upstream" in said
