"""Client-side assignors end to end: `python -m consumer_membership` processes (the public
KIP-848 member with its sticky assignor, docs/client-side-assignors.md) against one
`groupshift serve` with `group.consumer.client.assignors.enable=true`.

One group, one 12-partition topic, members with different metadata version ranges, in order:

1. **Mixed version ranges.** B [3-4] (metadata v3) joins alone and computes; A [1-5] (v1) joins:
   the versions in use are {1, 3}, which only A covers, so A computes from then on; C [1-4] (v2)
   joins: {1, 2, 3}, A (first in group order) still computes, B never again. (C's assignor is
   the rack-aware `sticky`: when it computes it asks Metadata for the partitions' racks, which
   groupshift's data plane does not have, and assigns as without them.)
2. **A member joins and leaves during an assignment in flight.** A's assignor is held (its
   `--hang-file`) while D joins (A is asked to compute), D2 joins and D2 leaves; released, A's
   install for the older epoch is refused (REBALANCE_IN_PROGRESS) and A computes again for the
   current epoch, which the group gets.
3. **The assigning member dies.** A is held computing again (E joins) and SIGKILLed: the
   coordinator fences it after its rebalance timeout (6 s, well before the 15 s session) and
   chooses C ([1-4] covers {1, 2, 3} without A), which computes a target without A.
4. **An assignor error keeps the current target.** C's assignor fails (`--fail-file`) when D
   leaves: C installs the error, B, C and E keep exactly what they own; when the failure is
   cleared and F joins, C computes and the group is whole again.

Throughout: no partition is owned by two members at once (ownership intervals from the events'
wall-clock times, a revocation being printed before the member tells the coordinator), and at
each end every partition is owned by exactly one live member.
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.canary import create_topics
from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from protocol.client import WireClient

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 12
REBALANCE_TIMEOUT_MS = 6000  # A is held below it in step 2 while two processes start and stop
SESSION_MS = 15000
SETTINGS = (
    "group.consumer.client.assignors.enable=true",
    f"group.consumer.session.timeout.ms={SESSION_MS}",
    "group.consumer.min.session.timeout.ms=1000",
    "group.consumer.heartbeat.interval.ms=300",
    "group.consumer.min.heartbeat.interval.ms=100",
)


class Member:
    """One `python -m consumer_membership` process and the JSON events it printed."""

    def __init__(self, gw: GatewayProcess, name: str, assignor: str, workdir: Path) -> None:
        self.name = name
        self.events: list[dict[str, Any]] = []
        self.hang_file = workdir / f"{name}.hang"
        self.fail_file = workdir / f"{name}.fail"
        self.killed_at: float | None = None
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "consumer_membership",
                "--bootstrap",
                gw.bootstrap,
                "--group",
                "csa-group",
                "--topic",
                "csa-topic",
                "--name",
                name,
                "--assignor",
                assignor,
                "--rebalance-timeout-ms",
                str(REBALANCE_TIMEOUT_MS),
                "--hang-file",
                str(self.hang_file),
                "--fail-file",
                str(self.fail_file),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.append(json.loads(line))

    def of(self, kind: str, after: float = 0.0) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e["event"] == kind and e["t"] > after]

    @property
    def member_id(self) -> str:
        return str(self.of("joining")[0]["member_id"])

    def owned(self) -> set[tuple[str, int]]:
        held: set[tuple[str, int]] = set()
        for e in list(self.events):
            if e["event"] == "assigned":
                held |= {(t, p) for t, p in e["added"]}
            elif e["event"] == "revoked":
                held -= {(t, p) for t, p in e["partitions"]}
        return held

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(15)

    def kill(self) -> None:
        self.killed_at = time.time()
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def wait(what: str, cond: Callable[[], Any], members: list[Member], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.05)
    detail = {m.name: (m.events[-5:], m.proc.poll()) for m in members}
    raise AssertionError(f"{what} not within {timeout} s: {json.dumps(detail, indent=1)}")


def whole(live: list[Member]) -> bool:
    """Every partition owned by exactly one of `live` (each of which owns some: 12 partitions,
    at most 5 members, a balanced assignor)."""
    if not all(m.owned() for m in live):
        return False
    counts: dict[tuple[str, int], int] = {}
    for m in live:
        for tp in m.owned():
            counts[tp] = counts.get(tp, 0) + 1
    return len(counts) == PARTITIONS and set(counts.values()) == {1}


def never_owned_twice(members: list[Member]) -> None:
    """Ownership intervals per partition, from each member's assigned/revoked events (a killed
    member's end at its kill), never overlap."""
    intervals: dict[tuple[str, int], list[tuple[float, float, str]]] = {}
    for m in members:
        start: dict[tuple[str, int], float] = {}
        for e in list(m.events):
            if e["event"] == "assigned":
                for t, p in e["added"]:
                    start[(t, p)] = e["t"]
            elif e["event"] == "revoked":
                for t, p in e["partitions"]:
                    intervals.setdefault((t, p), []).append((start.pop((t, p)), e["t"], m.name))
        end = m.killed_at if m.killed_at is not None else float("inf")
        for tp, t0 in start.items():
            intervals.setdefault(tp, []).append((t0, end, m.name))
    for tp, spans in intervals.items():
        spans.sort()
        for (a0, a1, am), (b0, _, bm) in itertools.pairwise(spans):
            assert b0 >= a1, f"{tp} owned by {am} ({a0}-{a1}) and {bm} (from {b0})"


@pytest.fixture(scope="module")
def server(module_gateways: Gateways) -> GatewayProcess:
    gw = module_gateways.start("csa", sets=SETTINGS)
    with WireClient(gw.port, timeout=30.0) as c:
        assert create_topics(c, ["csa-topic"], partitions=PARTITIONS).topics[0].error_code == 0
    return gw


@pytest.fixture
def started(server: GatewayProcess, tmp_path: Path) -> Iterator[Callable[..., Member]]:
    members: list[Member] = []

    def start(name: str, versions: str, kind: str = "sticky") -> Member:
        m = Member(server, name, f"{kind}:{versions}", tmp_path)
        members.append(m)
        return m

    try:
        yield start
    finally:
        for m in members:
            m.stop()


def test_three_python_members_with_a_client_side_assignor(started: Callable[..., Member]) -> None:
    b = started("b", "3:4:3")
    wait("b computes alone", lambda: whole([b]), [b])
    a = started("a", "1:5:1")
    wait("a joins", lambda: a.of("joined"), [a, b])
    joined_a = a.of("joined")[0]["t"]
    c = started("c", "1:4:2", "sticky-rack")  # computes in step 3: Metadata for racks (none here)
    members = [a, b, c]
    wait("a, b, c share the topic", lambda: whole(members), members)
    # 1. the versions {1, 3} and then {1, 2, 3}: only A [1-5] covers them, B [3-4] never again
    assert a.of("computed") and not b.of("computing", after=joined_a)
    assert not c.of("computing")
    assert len(a.of("computing")[-1]["members"]) == 3

    # 2. D joins (A asked to compute, held), D2 joins and leaves; released, A recomputes
    a.hang_file.touch()
    mark = time.time()
    d = started("d", "1:5:1")
    members.append(d)
    wait("a asked to compute for d", lambda: a.of("computing", after=mark), members)
    d2 = started("d2", "1:5:1")
    wait("d2 joins", lambda: d2.of("joined"), [*members, d2])
    d2.terminate()
    assert d2.of("closed")
    a.hang_file.unlink()
    stale = wait("a's stale install refused", lambda: a.of("computed", after=mark), members)[0]
    assert stale["installed"] is False and "REBALANCE_IN_PROGRESS" in stale["message"], stale
    wait("a, b, c, d share the topic", lambda: whole(members), members)
    final = a.of("computed", after=mark)[-1]
    assert final["installed"] is True and final["group_epoch"] > stale["group_epoch"]
    assert d2.member_id not in a.of("computing", after=mark)[-1]["members"]

    # 3. A dies while computing (E joins): fenced after its rebalance timeout, C is chosen
    a.hang_file.touch()
    mark = time.time()
    e = started("e", "1:5:1")
    asked = wait("a asked to compute for e", lambda: a.of("computing", after=mark), [*members, e])[0]
    a.kill()
    members = [b, c, d, e]
    took_over = wait("c computes instead of a", lambda: c.of("computing", after=mark), members)[0]
    assert a.member_id not in took_over["members"]
    # the rebalance timeout (6 s), not the session (15 s), handed the computation over
    assert took_over["t"] - asked["t"] < SESSION_MS / 1000 - 3, (asked, took_over)
    wait("b, c, d, e share the topic", lambda: whole(members), members)

    # 4. C's assignor fails when D leaves: the target stays, nobody's partitions move
    c.fail_file.touch()
    before = {m.name: m.owned() for m in (b, c, e)}
    mark = time.time()
    d.terminate()
    failed = wait("c reports its assignor's error", lambda: c.of("computed", after=mark), [b, c, e])[0]
    assert failed["error"] == 7 and failed["installed"] is True, failed
    time.sleep(1.5)  # several heartbeat intervals: a new target would have arrived
    assert {m.name: m.owned() for m in (b, c, e)} == before
    assert len(set().union(*before.values())) < PARTITIONS  # D's wait for the next computation
    c.fail_file.unlink()
    f = started("f", "1:5:1")
    members = [b, c, e, f]
    wait("b, c, e, f share the topic", lambda: whole(members), members)
    assert c.of("computed")[-1]["error"] == 0

    never_owned_twice([a, b, c, d, d2, e, f])
    for m in members:
        assert m.proc.poll() is None and not m.of("fatal"), m.events[-3:]
