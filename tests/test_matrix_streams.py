"""The matrix's Kafka Streams family (harness/matrix/streams_clients.py): capabilities, the
grid's expansion and what it drops, the clients a run prepares, an instance's command line,
the backends' streams-group settings, and the reason a cell gives when a member is refused."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.matrix import clients as cl
from harness.matrix.backends import STREAMS_SETTINGS, streams_groups_ga
from harness.matrix.checks import MemberLog
from harness.matrix.grid import Cell, applicable, expand, load_grid
from harness.matrix.runner import needed_clients
from harness.matrix.runtime import ClientSpec
from harness.matrix.scenarios import CellRun, Member
from harness.matrix.streams_clients import MAIN, SOURCE, streams_argv

S39, S41, S44 = (
    ClientSpec("kafka-streams", "3.9"),
    ClientSpec("kafka-streams", "4.1"),
    ClientSpec("kafka-streams", "4.4"),
)


def test_capabilities() -> None:
    assert cl.new_protocol(S39) == "streams" and cl.new_protocol(ClientSpec("java", "4")) == "consumer"
    assert not cl.speaks(S39, "streams") and cl.speaks(S39, "classic")
    assert cl.speaks(S41, "streams") and cl.speaks(S44, "streams")
    assert not cl.speaks(S44, "consumer")  # a Kafka Streams instance is no KIP-848 consumer
    assert cl.speaks(ClientSpec("java", "4"), "consumer") and not cl.speaks(
        ClientSpec("java", "4"), "streams"
    )
    assert cl.partner(S39) == S44
    assert not cl.supports_static(S44)
    assert cl.classic_assignors(S39) == ("streams",)


def test_grid_expansion_keeps_what_applies_and_says_why_not() -> None:
    grid = expand(
        {
            "reference": "kafka-4",
            "cells": [
                {
                    "clients": ["kafka-streams@3.9", "kafka-streams@4.4"],
                    "protocols": ["classic", "consumer", "streams"],
                    "assignors": ["range", "cooperative-sticky"],
                    "static": [False, True],
                    "scenarios": [
                        "add-remove",
                        "static-bounce",
                        "offline-migration",
                        "rolling-upgrade",
                        "rolling-downgrade",
                        "flapping",
                    ],
                }
            ],
        },
        "t",
    )
    kept = {c.id.removesuffix("/groupshift") for c in grid.cells if c.backend == "groupshift"}
    assert kept == {
        "kafka-streams@3.9/classic/streams/dynamic/add-remove/bidirectional",
        "kafka-streams@3.9/classic/streams/dynamic/offline-migration/bidirectional",
        "kafka-streams@3.9/classic/streams/dynamic/rolling-upgrade/bidirectional",
        # 4.4 `streams` instances rolled back to 3.9 classic ones, and an offline migration
        # from a streams group of 4.4 instances to 3.9 classic ones
        "kafka-streams@3.9/streams/streams/dynamic/offline-migration/bidirectional",
        "kafka-streams@3.9/streams/streams/dynamic/rolling-downgrade/bidirectional",
        "kafka-streams@4.4/classic/streams/dynamic/add-remove/bidirectional",
        "kafka-streams@4.4/classic/streams/dynamic/offline-migration/bidirectional",
        "kafka-streams@4.4/classic/streams/dynamic/rolling-upgrade/bidirectional",
        "kafka-streams@4.4/streams/streams/dynamic/add-remove/bidirectional",
        "kafka-streams@4.4/streams/streams/dynamic/offline-migration/bidirectional",
        "kafka-streams@4.4/streams/streams/dynamic/rolling-downgrade/bidirectional",
    }
    # every groupshift cell has its Kafka 4 twin; the assignor list collapsed to Kafka Streams' own
    assert len(grid.cells) == 2 * len(kept)
    assert {c.assignor for c in grid.cells} == {"streams"}
    why = {
        c.id.removesuffix("/groupshift"): reason for c, reason in grid.dropped if c.backend == "groupshift"
    }
    assert why["kafka-streams@3.9/streams/streams/dynamic/add-remove/bidirectional"] == (
        "kafka-streams@3.9 does not speak the streams protocol"
    )
    assert why["kafka-streams@4.4/consumer/streams/dynamic/add-remove/bidirectional"] == (
        "kafka-streams@4.4 members speak classic or streams, not consumer"
    )
    assert "static membership" in why["kafka-streams@4.4/classic/streams/static/add-remove/bidirectional"]
    assert (
        "no Kafka Streams flapping scenario"
        in why["kafka-streams@4.4/classic/streams/dynamic/flapping/bidirectional"]
    )
    assert why["kafka-streams@4.4/classic/streams/dynamic/rolling-downgrade/bidirectional"] == (
        "a rolling downgrade starts from the streams protocol"
    )
    # a consumer library's cells are judged as before: `streams` is no protocol of theirs
    java = Cell("java@4", "streams", "range", False, "add-remove", "bidirectional", "groupshift")
    assert applicable(java) == "java@4 members speak classic or consumer, not streams"
    assert "assignor = streams" in str(
        applicable(
            Cell("kafka-streams@4.4", "classic", "range", False, "add-remove", "bidirectional", "groupshift")
        )
    )


def test_a_run_prepares_the_streams_partner_only_where_it_plays() -> None:
    def cell(client: str, protocol: str, scenario: str) -> Cell:
        return Cell(client, protocol, "streams", False, scenario, "bidirectional", "groupshift")

    assert needed_clients([cell("kafka-streams@3.9", "classic", "add-remove")]) == [S39]
    assert needed_clients([cell("kafka-streams@3.9", "classic", "rolling-upgrade")]) == [S39, S44]
    assert needed_clients([cell("kafka-streams@4.4", "classic", "rolling-upgrade")]) == [S44]


def test_builtin_grids() -> None:
    smoke = load_grid("streams-smoke")
    assert sorted(c.id for c in smoke.cells) == [
        "kafka-streams@3.9/classic/streams/dynamic/rolling-upgrade/bidirectional/groupshift",
        "kafka-streams@3.9/classic/streams/dynamic/rolling-upgrade/bidirectional/kafka-4",
        "kafka-streams@4.4/streams/streams/dynamic/add-remove/bidirectional/groupshift",
        "kafka-streams@4.4/streams/streams/dynamic/add-remove/bidirectional/kafka-4",
    ]
    default = load_grid("default").only("client=kafka-streams*")
    assert {c.scenario for c in default.cells} == {
        "add-remove",
        "offline-migration",
        "rolling-upgrade",
        "rolling-downgrade",
    }
    assert {c.protocol for c in default.cells} == {"classic", "streams"}
    assert {c.backend for c in default.cells} == {"groupshift", "kafka-4", "groupshift-kafka-3.9"}
    assert not [
        c for c in load_grid("smoke").cells if c.spec.library == "kafka-streams"
    ]  # CI's grid unchanged


def test_instance_command_line(tmp_path: Path) -> None:
    def argv(protocol: str) -> list[str]:
        return cl.consumer_argv(
            S44,
            bootstrap="127.0.0.1:9",
            topic="t",
            group="g",
            protocol=protocol,
            assignor="streams",
            instance_id=None,
            client_id="s1-g",
            config_dir=tmp_path,
        )

    classic, streams = argv("classic"), argv("streams")
    assert classic[0] == MAIN and SOURCE.exists() and SOURCE.stem == MAIN
    assert classic[classic.index("--group-id") + 1] == "g"  # the application id is the group
    assert classic[classic.index("--session-timeout") + 1] == "6000"
    assert classic[classic.index("--heartbeat-interval") + 1] == "1000"
    # a streams member's session and heartbeat are the server's (group.streams.*)
    assert "--session-timeout" not in streams and streams[streams.index("--group-protocol") + 1] == "streams"
    assert Path(streams[streams.index("--state-dir") + 1]) == (tmp_path / "state" / "s1-g").resolve()
    assert streams_argv(
        bootstrap="b", topic="t", group="g", protocol="streams", client_id="c", state_dir=tmp_path
    ) == [MAIN, "--bootstrap-server", "b", "--topic", "t", "--group-id", "g", "--group-protocol", "streams",
          "--client-id", "c", "--state-dir", str(tmp_path.resolve())]  # fmt: skip


def test_backends_serve_streams_groups() -> None:
    assert streams_groups_ga("4") and streams_groups_ga("4.3") and streams_groups_ga("4.4.0")
    assert not streams_groups_ga("4.1") and not streams_groups_ga("3.9")
    assert STREAMS_SETTINGS["group.streams.session.timeout.ms"] == "6000"


class _Handle:
    """A finished client: its stdout lines, nothing else."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self._lines = [json.dumps(e) for e in events]

    def lines(self) -> Iterator[str]:
        yield from self._lines

    def terminate(self) -> None: ...

    def kill(self) -> None: ...

    def wait(self, timeout: float) -> int:
        return 1


class _Backend:
    def __init__(self, name: str, version: str) -> None:
        self.name, self.version, self.policy = name, version, "bidirectional"

    @property
    def bootstrap(self) -> str:
        return "127.0.0.1:9"

    def close(self) -> None: ...


def _refusal(
    backend: _Backend,
    *,
    terminated_first: bool,
    error: str = "GroupIdNotFoundException: Group g is not a streams group.",
) -> str:
    now = int(time.time() * 1000)
    events: list[dict[str, Any]] = [{"name": "startup_complete", "timestamp": now}]
    if terminated_first:
        events.append({"name": "shutdown_requested", "timestamp": now + 1})
    events.append(
        {
            "name": "client_error",
            "error": error,
            "timestamp": now + 2,
        }
    )
    events.append({"name": "shutdown_requested", "timestamp": now + 3})  # exit runs the hook
    cell = Cell(
        "kafka-streams@3.9", "classic", "streams", False, "rolling-upgrade", "bidirectional", backend.name
    )
    run = CellRun(cell, backend, runtime=None, workdir=Path("/nonexistent"))  # type: ignore[arg-type]
    member = Member(MemberLog("s4", "kafka-streams-4.4", "streams"), _Handle(events))
    assert member.done.wait(5)
    run.members.append(member)
    return run._refused()


def test_a_refused_streams_member_ends_the_cell_as_the_servers_behaviour() -> None:
    on_kafka = _refusal(_Backend("kafka-4", "4.4.0"), terminated_first=False)
    assert on_kafka.startswith("kafka-4 (4.4.0) refused the kafka-streams-4.4 streams member s4: ")
    assert "Kafka's behaviour" in on_kafka and "only offline" in on_kafka
    on_groupshift = _refusal(_Backend("groupshift", "embedded"), terminated_first=False)
    assert on_groupshift.startswith("the kafka-streams-4.4 streams member s4 stopped on an error: GroupId")
    # the downgrade's refusal: a classic instance joining Kafka's streams group
    inconsistent = (
        "InconsistentGroupProtocolException: The group member's supported protocols are incompatible"
    )
    on_kafka = _refusal(_Backend("kafka-4", "4.4.0"), terminated_first=False, error=inconsistent)
    assert on_kafka.startswith("kafka-4 (4.4.0) refused the ") and "Kafka's behaviour" in on_kafka
    # an error after the runner's own SIGTERM is part of a stop, not a refusal
    assert _refusal(_Backend("kafka-4", "4.4.0"), terminated_first=True) == ""
