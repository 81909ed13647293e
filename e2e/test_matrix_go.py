"""The Go verifiable consumers of `groupshift matrix` (franz-go, Sarama) on an embedded groupshift.

The matrix judges every client by the JSON lines of Kafka's `VerifiableConsumer`; this checks that
each Go client (harness/matrix/clients/go/*, built by harness.matrix.go_clients) joins a group on
groupshift with the classic protocol (JoinGroup/SyncGroup, a client-side balancer) and, for
franz-go, with KIP-848's ConsumerGroupHeartbeat (its ServerSideBalancer; Sarama has none),
splits the partitions with a second member, consumes and commits every record, and prints
well-formed events in that shape.
The protocol the gateway logs for each joining member proves which one franz-go actually spoke (it
falls back to classic silently when a broker lacks ConsumerGroupHeartbeat v1).
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import Gateways
from e2e.groups import FAST_GROUP_SETTINGS, create_topic, produce
from harness.matrix.go_clients import GoUnavailable, go_client_binary
from harness.matrix.runtime import ClientSpec

PARTITIONS = 6
RECORDS = 120
TIMEOUT = 60.0

#: Fields every event of that name carries in Kafka's VerifiableConsumer output.
SHAPES: dict[str, set[str]] = {
    "startup_complete": set(),
    "partitions_assigned": {"partitions"},
    "partitions_revoked": {"partitions"},
    "records_consumed": {"count", "partitions"},
    "offsets_committed": {"offsets", "success"},
    "shutdown_requested": set(),
    "shutdown_complete": set(),
}


_binaries: dict[str, Path] = {}


def go_binary(library: str) -> Path:
    if library not in _binaries:
        try:
            _binaries[library] = go_client_binary(ClientSpec(library, "pinned"))
        except GoUnavailable as e:
            print(f"{library} client unavailable: {e}")
            pytest.skip(f"the {library} client cannot be built here: {e}")
    return _binaries[library]


class GoMember:
    """One franz-go verifiable consumer process; stdout parsed line by line on a thread."""

    def __init__(self, binary: Path, args: list[str], stderr: Path) -> None:
        self._stderr = open(stderr, "wb")  # noqa: SIM115 - closed in stop()
        self.stderr_path = stderr
        self.proc = subprocess.Popen(
            [str(binary), *args], stdout=subprocess.PIPE, stderr=self._stderr, stdin=subprocess.DEVNULL
        )
        self.events: list[dict[str, Any]] = []
        self.bad_lines: list[str] = []
        self._new: queue.Queue[None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode().strip()
            try:
                event = json.loads(line)
                assert isinstance(event, dict)
                self.events.append(event)
            except (ValueError, AssertionError):
                self.bad_lines.append(line)
            self._new.put(None)

    def owned(self) -> set[int]:
        owned: set[int] = set()
        for e in self.events:
            if e["name"] == "partitions_assigned":
                owned |= {p["partition"] for p in e["partitions"]}
            elif e["name"] == "partitions_revoked":
                owned -= {p["partition"] for p in e["partitions"]}
        return owned

    def committed(self) -> dict[int, int]:
        done: dict[int, int] = {}
        for e in self.events:
            if e["name"] == "offsets_committed" and e["success"]:
                for o in e["offsets"]:
                    done[o["partition"]] = max(done.get(o["partition"], 0), o["offset"])
        return done

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
            self._stderr.close()
        time.sleep(0.2)  # the reader thread takes the last lines
        return code

    def stderr_tail(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-2000:]


def wait_until(members: list[GoMember], condition: Any, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {i}: {m.events[-5:]}\n{m.stderr_tail()}" for i, m in enumerate(members))
            raise AssertionError(f"timed out waiting for {what}\n{tails}")
        for m in members:
            if m.proc.poll() is not None:
                raise AssertionError(f"a member exited ({m.proc.returncode}):\n{m.stderr_tail()}")
        time.sleep(0.05)


def check_well_formed(member: GoMember) -> None:
    assert member.bad_lines == []
    names = [e["name"] for e in member.events]
    assert names[0] == "startup_complete" and names[-1] == "shutdown_complete", names
    assert "shutdown_requested" in names
    for e in member.events:
        assert isinstance(e["timestamp"], int) and e["timestamp"] > 1_600_000_000_000, e
        assert e["name"] in SHAPES, e
        assert SHAPES[e["name"]] <= set(e), e
        if e["name"] == "records_consumed":
            assert e["count"] == sum(p["count"] for p in e["partitions"]) > 0, e
            for p in e["partitions"]:
                assert p["maxOffset"] - p["minOffset"] + 1 == p["count"], e
        if e["name"] in ("partitions_assigned", "partitions_revoked"):
            assert all(set(p) == {"topic", "partition"} for p in e["partitions"]), e
    stamps = [e["timestamp"] for e in member.events]
    assert stamps == sorted(stamps)


@pytest.mark.parametrize(
    ("library", "protocol", "assignor", "group_type"),
    [
        # one incremental and one eager classic case, and KIP-848 where the client has it
        ("franz-go", "classic", "cooperative-sticky", "classic"),
        ("franz-go", "consumer", "uniform", "consumer"),
        ("sarama", "classic", "range", "classic"),
    ],
)
def test_go_verifiable_consumer(
    gateways: Gateways, tmp_path: Path, library: str, protocol: str, assignor: str, group_type: str
) -> None:
    binary = go_binary(library)
    gw = gateways.start("go", sets=FAST_GROUP_SETTINGS)
    topic, group = f"{library}-{protocol}-{assignor}", f"{library}-group-{protocol}-{assignor}"
    create_topic(gw, topic, PARTITIONS)
    produce(gw, topic, range(RECORDS))

    def start(n: int) -> GoMember:
        args = [
            "--bootstrap-server", gw.bootstrap, "--topic", topic, "--group-id", group,
            "--group-protocol", protocol, "--assignor", assignor, "--client-id", f"go-{n}",
            "--session-timeout", "6000", "--heartbeat-interval", "250",
        ]  # fmt: skip
        return GoMember(binary, args, tmp_path / f"member-{n}.stderr")

    first = start(1)
    members = [first]
    try:
        everything = set(range(PARTITIONS))
        wait_until(members, lambda: first.owned() == everything, "the first member owning all partitions")
        wait_until(
            members,
            lambda: sum(first.committed().values()) == RECORDS,
            f"all {RECORDS} records consumed and committed",
        )
        second = start(2)
        members.append(second)
        wait_until(
            members,
            lambda: first.owned() and second.owned() and first.owned() | second.owned() == everything,
            "both members owning a share",
        )
        assert not first.owned() & second.owned()
    finally:
        codes = [m.stop() for m in members]
    assert codes == [0, 0], [m.stderr_tail() for m in members]
    for m in members:
        check_well_formed(m)
    consumed = sum(e["count"] for m in members for e in m.events if e["name"] == "records_consumed")
    assert consumed == RECORDS  # committed before the second joined: nothing read twice
    joined = {e["protocol"] for e in gw.events("member.joined") if e.get("group") == group}
    assert joined == {group_type}
