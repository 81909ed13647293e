"""The public membership client (docs/membership.md) against groupshift and against Apache Kafka
4.4: three `python -m membership` leader-election processes join one classic group.

* `test_leader_killed_then_closed`: one leader and two followers agree on it; the leader is
  SIGKILLed and a survivor is elected once the coordinator expires its session (bound: session
  timeout plus one heartbeat interval, the rejoin and the load of a two-core machine); then the
  new leader is stopped with SIGTERM: it leaves the group (LeaveGroup), so the last process is
  elected well before a session timeout.
* `test_static_members_fence_and_do_not_leave`: a process started under a live member's
  `group.instance.id` fences it (FENCED_INSTANCE_ID, fatal, exit 1) and takes its place; a static
  member stopped with SIGTERM does not leave, so the survivor is elected only after its session.

One groupshift and one Kafka per module (short sessions: both allow 1 s as the minimum here).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import GatewayProcess

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
SESSION_MS = 3000
HEARTBEAT_MS = 500
# What a new leader after a SIGKILL may take beyond the session timeout: the heartbeat that
# learns of the rebalance, the rejoin and SyncGroup, on a loaded two-core machine.
FAILOVER_SLACK_SECONDS = 4.0
GROUP_SETTINGS = {"group.min.session.timeout.ms": "1000", "group.initial.rebalance.delay.ms": "0"}


class Candidate:
    """One `python -m membership` process and the JSON events it printed."""

    def __init__(self, bootstrap: str, group: str, name: str, instance: str | None = None) -> None:
        self.name = name
        self.events: list[dict[str, Any]] = []
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "membership",
                "--bootstrap",
                bootstrap,
                "--group",
                group,
                "--name",
                name,
                "--session-timeout-ms",
                str(SESSION_MS),
                "--heartbeat-interval-ms",
                str(HEARTBEAT_MS),
                "--rebalance-timeout-ms",
                str(SESSION_MS),
                *(["--group-instance-id", instance] if instance else []),
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

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read()[-3000:] if self.proc.poll() is not None else "(running)"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def _elected(cands: list[Candidate], after: float) -> list[tuple[Candidate, dict[str, Any]]]:
    return [(c, e) for c in cands for e in list(c.events) if e["event"] == "elected" and e["at"] > after]


def _in_group(cand: Candidate, after: float) -> list[dict[str, Any]]:
    return [e for e in list(cand.events) if e["event"] in ("elected", "following") and e["at"] > after]


def _wait(what: str, cond: Any, timeout: float, cands: list[Candidate]) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.05)
    detail = {c.name: (c.events[-6:], c.proc.poll()) for c in cands}
    raise AssertionError(f"{what} not within {timeout} s: {detail}")


@pytest.fixture(scope="module", params=["groupshift", "kafka-4.4"])
def bootstrap(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp(f"membership-{request.param}")
    if request.param == "groupshift":
        gw = GatewayProcess.start(base / "gw", sets=[f"{k}={v}" for k, v in GROUP_SETTINGS.items()])
        try:
            yield gw.bootstrap
        finally:
            gw.stop()
        return
    from harness.kafka_dist import KafkaCluster

    cluster = KafkaCluster(
        "4.4", configs={**GROUP_SETTINGS, "offsets.topic.num.partitions": "1"}, workdir=base / "k"
    )
    cluster.start()
    try:
        yield cluster.bootstrap
    finally:
        cluster.stop()


def test_leader_killed_then_closed(bootstrap: str) -> None:
    group = f"election-{uuid.uuid4().hex[:8]}"
    cands = [Candidate(bootstrap, group, n) for n in ("a", "b", "c")]
    try:
        start = time.time() - 1
        # One leader, and both others follow it in the same generation.
        (leader, won), *more = _wait("a leader", lambda: _elected(cands, start), 60, cands)
        assert not more, f"two leaders: {_elected(cands, start)}"

        def followers_agree() -> bool:
            return all(
                any(
                    e["event"] == "following"
                    and e["leader"] == leader.name
                    and e["generation"] >= won["generation"]
                    for e in list(c.events)
                )
                for c in cands
                if c is not leader
            )

        _wait("followers agreeing on the leader", followers_agree, 30, cands)

        # SIGKILL: no LeaveGroup; the coordinator must expire the session first.
        killed_at = time.time()
        os.kill(leader.proc.pid, signal.SIGKILL)
        leader.proc.wait(10)
        rest = [c for c in cands if c is not leader]
        (second, _), *more = _wait("a new leader", lambda: _elected(rest, killed_at), 30, cands)
        assert not more
        failover = second_at = max(e["at"] for c, e in _elected(rest, killed_at) if c is second) - killed_at
        print(f"new leader {failover:.2f} s after SIGKILL (session timeout {SESSION_MS / 1000} s)")
        assert failover <= SESSION_MS / 1000 + FAILOVER_SLACK_SECONDS, failover

        # SIGTERM: the leader closes, leaves the group, the last one is elected at once.
        stopped_at = time.time()
        second.proc.send_signal(signal.SIGTERM)
        assert second.proc.wait(15) == 0, second.stderr()
        assert any(e["event"] == "demoted" for e in second.events), second.events
        (third, _), *_ = _wait("the last candidate elected", lambda: _elected(rest, stopped_at), 30, cands)
        assert third is not second
        handover = max(e["at"] for c, e in _elected(rest, stopped_at) if c is third) - stopped_at
        print(f"new leader {handover:.2f} s after SIGTERM of the leader (second_at {second_at:.2f})")
        assert handover < SESSION_MS / 1000, handover
    finally:
        for c in cands:
            c.stop()


def test_static_members_fence_and_do_not_leave(bootstrap: str) -> None:
    """Static membership (KIP-345): a second process under a live member's group.instance.id
    takes its place and the first is fenced (FENCED_INSTANCE_ID, fatal: it exits 1); a static
    member stopped with SIGTERM sends no LeaveGroup, so the group changes only when its session
    expires."""
    group = f"static-{uuid.uuid4().hex[:8]}"
    a = Candidate(bootstrap, group, "a", instance="inst-a")
    b = Candidate(bootstrap, group, "b", instance="inst-b")
    cands = [a, b]
    try:
        start = time.time() - 1
        _wait(
            "both static members in one generation",
            lambda: _in_group(a, start) and _in_group(b, start),
            60,
            cands,
        )
        replaced_at = time.time()
        a2 = Candidate(bootstrap, group, "a", instance="inst-a")
        cands.append(a2)
        fatal = _wait(
            "the replaced member fenced",
            lambda: [e for e in list(a.events) if e["event"] == "fatal"],
            SESSION_MS / 1000 + 10,
            cands,
        )
        assert fatal[0]["code"] == 82, fatal  # FENCED_INSTANCE_ID
        assert a.proc.wait(10) == 1
        _wait("the replacement in the group", lambda: _in_group(a2, replaced_at), 30, cands)

        stopped_at = time.time()
        b.proc.send_signal(signal.SIGTERM)
        assert b.proc.wait(15) == 0, b.stderr()
        (_, e), *_ = _wait("the survivor elected", lambda: _elected([a2], stopped_at), 30, cands)
        handover = e["at"] - stopped_at
        print(f"static: survivor elected {handover:.2f} s after SIGTERM (session {SESSION_MS / 1000} s)")
        # Its last heartbeat may precede the SIGTERM by one interval; a LeaveGroup would have
        # handed over in about half a second (test_leader_killed_then_closed).
        earliest = (SESSION_MS - HEARTBEAT_MS) / 1000 - 0.25
        assert earliest <= handover <= SESSION_MS / 1000 + FAILOVER_SLACK_SECONDS, handover
    finally:
        for c in cands:
            c.stop()
