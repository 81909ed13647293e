"""`groupshift serve --workers 2` (docs/workers.md): two worker processes as the brokers of one
cluster, with real clients.

One server for the module (about 30-40 s): Metadata lists both workers and worker 0 as the
controller; FindCoordinator sends groups of odd and even shards to different workers, and a
worker refuses another's group with NOT_COORDINATOR; a topic created and produced through worker
0 is consumed by confluent-kafka (group.protocol=consumer, KIP-848) and kafka-python (classic),
each group coordinated by worker 1; worker 1 is SIGKILLed mid-way, the supervisor restarts it,
its shards are reloaded, both clients carry on within their session timeouts, no acknowledged
commit is lost and every record is consumed exactly once by each group.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer

from e2e.harness import REPO
from e2e.migration import poll_unstranded
from gateway.groups.routing import partition_for
from tools.groups.wire import AdminWire

pytestmark = pytest.mark.e2e

SHARDS = 4
TOPIC = "workers-topic"
PARTITIONS = 4
FIRST, SECOND = 120, 120  # records produced before and after the kill
SESSION_S = 30  # kafka-python's session.timeout.ms; KIP-848's default is 45 s
HOST = "127.0.0.1"


def _free_port_pair() -> int:
    """A port P with P and P + 1 both free (worker i listens on P + i)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind((HOST, 0))
            port = int(s.getsockname()[1])
        try:
            with socket.socket() as s2:
                s2.bind((HOST, port + 1))
        except OSError:
            continue
        return port
    raise RuntimeError("no two consecutive free ports")


def _group_on(worker: int, prefix: str) -> str:
    return next(f"{prefix}-{i}" for i in range(1000) if partition_for(f"{prefix}-{i}", SHARDS) % 2 == worker)


class Workers:
    def __init__(self, base: Path) -> None:
        self.port = _free_port_pair()
        self.metrics_port = _free_port_pair()
        self.log_path = base / "workers.log"
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "groupshift",
                "serve",
                "--workers",
                "2",
                "--listen",
                f"{HOST}:{self.port}",
                "--data-dir",
                str(base / "data"),
                "--log-format",
                "json",
                "--set",
                f"offsets.topic.num.partitions={SHARDS}",
                "--set",
                f"metrics.listen={HOST}:{self.metrics_port}",
            ],
            cwd=REPO,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.wait_event("workers.serving", 120)

    def events(self, name: str) -> list[dict[str, Any]]:
        out = []
        for line in self.log_path.read_bytes().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if isinstance(e, dict) and e.get("event") == name:
                out.append(e)
        return out

    def wait_event(self, name: str, timeout: float, count: int = 1) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.events(name)
            if len(found) >= count:
                return found
            assert self.proc.poll() is None, self.tail()
            time.sleep(0.05)
        raise AssertionError(f"no {name} x{count} in {timeout}s:\n{self.tail()}")

    def tail(self) -> str:
        return "\n".join(self.log_path.read_bytes().decode("utf-8", "replace").splitlines()[-40:])

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(40)
        self.log.close()
        return code


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    w = Workers(tmp_path_factory.mktemp("workers"))
    try:
        yield w
    finally:
        if w.proc.poll() is None:
            assert w.stop() == 0, w.tail()
        # No worker outlived the supervisor.
        for started in w.events("workers.worker_started"):
            with pytest.raises(ProcessLookupError):
                os.kill(int(started["pid"]), 0)


def test_cluster_view_and_routing(workers: Workers) -> None:
    md = AdminClient({"bootstrap.servers": f"{HOST}:{workers.port}"}).list_topics(timeout=10)
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {
        0: (HOST, workers.port),
        1: (HOST, workers.port + 1),
    }
    assert md.controller_id == 0
    even, odd = _group_on(0, "routing"), _group_on(1, "routing")
    for bootstrap in (f"{HOST}:{workers.port}", f"{HOST}:{workers.port + 1}"):
        with AdminWire(bootstrap) as wire:
            assert wire.coordinator(even) == 0
            assert wire.coordinator(odd) == 1
    # Metadata asked of worker 1 is forwarded to worker 0 (the same brokers come back); each
    # worker serves its metrics on metrics.listen's port + its index, worker 1 counting that.
    md1 = AdminClient({"bootstrap.servers": f"{HOST}:{workers.port + 1}"}).list_topics(timeout=10)
    assert sorted(md1.brokers) == [0, 1] and md1.controller_id == 0
    for i in (0, 1):
        with urllib.request.urlopen(f"http://{HOST}:{workers.metrics_port + i}/metrics", timeout=10) as r:
            text = r.read().decode()
        forwarded = [
            float(line.split()[-1])
            for line in text.splitlines()
            if line.startswith("groupshift_worker_forwarded_requests_total")
        ]
        assert (forwarded[0] >= 1) if i == 1 else not forwarded, (i, forwarded)
    # Worker 1 is not the coordinator of an even shard's group: DescribeGroups says so.
    with AdminWire(f"{HOST}:{workers.port + 1}") as wire:
        resp, _ = wire._call(15, {"groups": [even], "include_authorized_operations": False})
        assert int(resp.groups[0].error_code) == 16  # NOT_COORDINATOR


def _produce(bootstrap: str, start: int, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(start, start + count):
        p.produce(TOPIC, value=str(i).encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0


def test_consume_across_a_worker_crash(workers: Workers) -> None:
    bootstrap = f"{HOST}:{workers.port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(15)
    _produce(bootstrap, 0, FIRST)
    g848, gclassic = _group_on(1, "workers-848"), _group_on(1, "workers-classic")

    c848 = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": g848,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c848.subscribe([TOPIC])
    cclassic = KafkaConsumer(
        TOPIC,
        bootstrap_servers=bootstrap,
        group_id=gclassic,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_S * 1000,
        heartbeat_interval_ms=1000,
    )
    seen: dict[str, list[int]] = {g848: [], gclassic: []}
    acked: dict[str, dict[int, int]] = {g848: {}, gclassic: {}}

    def poll_848() -> bool:
        msg = c848.poll(0.2)
        if msg is None or msg.error() is not None:
            return False
        seen[g848].append(int(msg.value()))
        try:
            c848.commit(message=msg, asynchronous=False)
        except Exception:
            return False  # not acknowledged: the record may come again, which the check sees
        acked[g848][msg.partition()] = msg.offset() + 1
        return True

    def poll_classic() -> bool:
        got = False
        for tp, records in poll_unstranded(cclassic, 200).items():
            for r in records:
                seen[gclassic].append(int(r.value))
            try:
                cclassic.commit()
            except Exception:
                return False
            acked[gclassic][tp.partition] = records[-1].offset + 1
            got = True
        return got

    def consume_until(total: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (len(seen[g848]) < total or len(seen[gclassic]) < total):
            if len(seen[g848]) < total:
                poll_848()
            if len(seen[gclassic]) < total:
                poll_classic()
        assert len(seen[g848]) >= total and len(seen[gclassic]) >= total, (
            {g: len(v) for g, v in seen.items()},
            workers.tail(),
        )

    try:
        consume_until(FIRST, 60)
        before = {g: dict(a) for g, a in acked.items()}
        worker1 = [e for e in workers.events("workers.worker_started") if e["worker"] == 1][-1]
        killed_at = time.monotonic()
        os.kill(int(worker1["pid"]), signal.SIGKILL)
        restarted = workers.wait_event("workers.worker_started", 30, count=3)[-1]
        assert restarted["worker"] == 1 and restarted["restarts"] == 1
        assert any(e["exit_code"] == -signal.SIGKILL for e in workers.events("workers.worker_exited"))
        # The acknowledged commits are all there once worker 1 serves again.
        with AdminWire(f"{HOST}:{workers.port + 1}", timeout=30) as wire:
            for g in (g848, gclassic):
                deadline = time.monotonic() + 30
                while True:
                    try:
                        committed = {p: o for (t, p), (o, _, _) in wire.offset_fetch(g).items() if t == TOPIC}
                        break
                    except Exception:
                        assert time.monotonic() < deadline, workers.tail()
                        time.sleep(0.2)
                        wire.reset()
                assert all(committed.get(p, -1) >= o for p, o in before[g].items()), (g, committed, before[g])
        _produce(bootstrap, FIRST, SECOND)
        consume_until(FIRST + SECOND, SESSION_S)
        recovered_s = time.monotonic() - killed_at
        print(f"recovered {recovered_s:.1f} s after the kill")
        assert recovered_s < SESSION_S, recovered_s
    finally:
        c848.close()
        cclassic.close()
    for g, values in seen.items():
        assert sorted(values) == list(range(FIRST + SECOND)), (g, len(values), len(set(values)))
    # The commits of both groups were written by worker 1 alone: worker 0 refuses them.
    with AdminWire(bootstrap) as wire:
        resp, _ = wire._call(15, {"groups": [g848], "include_authorized_operations": False})
        assert int(resp.groups[0].error_code) == 16


def test_refused_settings_and_a_worker_that_cannot_start(tmp_path: Path) -> None:
    """Port 0 cannot number the workers: usage error, exit 2. A worker that cannot listen (its
    port taken) fails the whole start: exit 1, and no worker is left running."""
    serve = [sys.executable, "-m", "groupshift", "serve", "--workers", "2", "--log-format", "json"]
    refused = subprocess.run(
        [*serve, "--listen", f"{HOST}:0", "--data-dir", str(tmp_path / "a")],
        cwd=REPO,
        capture_output=True,
        timeout=60,
    )
    assert refused.returncode == 2 and b"fixed port" in refused.stderr, refused.stderr
    port = _free_port_pair()
    with socket.socket() as taken:
        taken.bind((HOST, port + 1))  # bound, not listening: worker 1 cannot bind it
        failed = subprocess.run(
            [*serve, "--listen", f"{HOST}:{port}", "--data-dir", str(tmp_path / "b")],
            cwd=REPO,
            capture_output=True,
            timeout=120,
        )
    assert failed.returncode == 1, failed.stderr[-2000:]
    events = []
    for line in failed.stderr.splitlines():
        with contextlib.suppress(ValueError):
            events.append(json.loads(line))
    assert any(e.get("event") == "workers.start_failed" and e.get("worker") == 1 for e in events)
    for e in events:
        if e.get("event") == "workers.worker_started":
            with pytest.raises(ProcessLookupError):
                os.kill(int(e["pid"]), 0)
