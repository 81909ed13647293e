"""One request must not stall every group: work that grows with the cluster stays off the event
loop, so a canary group's heartbeats keep their latency while another client sends
(a) one CreateTopics of 300 topics, (b) a ConsumerGroupHeartbeat with a new regex matching 1,000
topics, (c) a CreateTopics of one topic with 10,000 partitions.

Kafka answers these without delaying other groups (regexes are resolved on its background
threads, topics are created by the controller). The canary is a real KIP-848 member sending
ConsumerGroupHeartbeat v1 frames every 50 ms on its own connection.

Two bounds. By default (CI, a shared 2-core machine running the whole suite) the test asserts
that nothing *stalls*: canary p99 under 1 s and max under 2 s, which the code before the fix
failed by 5 to 50 times (10.4 s for 300 topics, 24-114 s for 10,000 partitions). The robustness
issue's latency target, p99 under 100 ms and max under 500 ms, is a speed figure that moves with
the machine's load; it is asserted with `GROUPSHIFT_STRICT_LATENCY=1` on a quiet machine
(docs/robustness.md, "Event loop"), where the figures are recorded.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.conftest import Gateways
from e2e.harness import GatewayProcess
from protocol.client import WireClient, make_request

STRICT = os.environ.get("GROUPSHIFT_STRICT_LATENCY") == "1"
P99_BOUND_S, MAX_BOUND_S = (0.100, 0.500) if STRICT else (1.0, 2.0)
# Refusals a partition/descriptor budget may answer for a 10,000-partition topic.
INVALID_PARTITIONS, POLICY_VIOLATION, KAFKA_STORAGE_ERROR = 37, 44, 56
RESOURCE_LIMIT_CODES = {INVALID_PARTITIONS, POLICY_VIOLATION, KAFKA_STORAGE_ERROR}


def create_topics(c: WireClient, names: list[str], partitions: int = 1, timeout_s: float = 300.0) -> Any:
    c.sock.settimeout(timeout_s)
    return c.request(
        make_request(
            19,
            5,
            topics=[
                {
                    "name": n,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
                for n in names
            ],
            timeout=int(timeout_s * 1000),
            validate_only=False,
        )
    )


def cgh(group_id: str, member_id: str, epoch: int, **overrides: Any) -> Any:
    values: dict[str, Any] = {
        "group_id": group_id,
        "member_id": member_id,
        "member_epoch": epoch,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 30000,
        "subscribed_topic_names": None,
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": None,
    }
    values.update(overrides)
    return make_request(68, 1, **values)


def _canary_main(port: int, stop: Any, out: Any) -> None:
    """The canary process: join, then heartbeat every 50 ms until `stop`; sends back
    ([(sent at, round trip)], [errors]). CLOCK_MONOTONIC is system-wide, so the times compare
    with the test process's."""
    samples: list[tuple[float, float]] = []
    errors: list[str] = []
    member_id = "canary-member-0000000001"
    with WireClient(port, timeout=30.0) as client:
        r = client.request(
            cgh("loop-canary", member_id, 0, subscribed_topic_names=["canary-topic"], topic_partitions=[])
        )
        epoch = r.member_epoch
        if r.error_code != 0:
            errors.append(f"join: {r.error_code}: {r.error_message}")
        out.send("joined")
        while not errors and not stop.is_set():
            sent = time.monotonic()
            r = client.request(cgh("loop-canary", member_id, epoch))
            rtt = time.monotonic() - sent
            samples.append((sent, rtt))
            if r.error_code != 0:
                errors.append(f"{r.error_code}: {r.error_message}")
            epoch = r.member_epoch
            stop.wait(max(0.0, 0.05 - rtt))
    out.send((samples, errors))


class Canary:
    """A consumer-group member heartbeating every 50 ms on its own connection, from its own
    process (the test process decoding a large answer must not delay the canary's clock);
    `window()` keeps only the round trips that overlap the attack."""

    def __init__(self, port: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._stop = ctx.Event()
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_canary_main, args=(port, self._stop, child), daemon=True)
        self.samples: list[tuple[float, float]] = []
        self.errors: list[str] = []

    def __enter__(self) -> Canary:
        self._proc.start()
        assert self._conn.poll(60), "the canary did not join"
        assert self._conn.recv() == "joined"
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._conn.poll(60):
            self.samples, self.errors = self._conn.recv()
        self._proc.join(30)

    def window(self, start: float, end: float) -> list[float]:
        return [rtt for sent, rtt in self.samples if start <= sent <= end or start <= sent + rtt <= end]


def latency(rtts: list[float]) -> tuple[float, float]:
    """(p99, max) of round trips."""
    ordered = sorted(rtts)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], ordered[-1]


@pytest.fixture
def gw(gateways: Gateways) -> Iterator[GatewayProcess]:
    gw = gateways.start("loop", sets=["metrics.listen=127.0.0.1:0"])
    with WireClient(gw.port) as c:
        (t,) = create_topics(c, ["canary-topic"], partitions=3).topics
        assert t.error_code == 0, t
    yield gw


def measure(gw: GatewayProcess, attack: Any) -> tuple[Any, float, float, int]:
    """Run `attack(client)` while the canary heartbeats; (its result, p99, max, samples)."""
    with WireClient(gw.port, timeout=600.0) as c, Canary(gw.port) as canary:
        time.sleep(0.3)  # a few steady heartbeats before
        start = time.monotonic()
        result = attack(c)
        end = time.monotonic()
        time.sleep(0.3)
    assert not canary.errors, canary.errors
    rtts = canary.window(start, end)
    assert rtts, "no canary heartbeat during the attack"
    p99, worst = latency(rtts)
    print(
        f"attack took {end - start:.2f}s; canary p99 {p99 * 1000:.1f} ms, max {worst * 1000:.1f} ms",
        len(rtts),
    )
    return result, p99, worst, len(rtts)


def assert_bound(p99: float, worst: float) -> None:
    assert p99 < P99_BOUND_S, f"canary heartbeat p99 {p99 * 1000:.0f} ms >= {P99_BOUND_S * 1000:.0f} ms"
    assert worst < MAX_BOUND_S, f"canary heartbeat max {worst * 1000:.0f} ms >= {MAX_BOUND_S * 1000:.0f} ms"


def test_create_300_topics_does_not_stall_heartbeats(gw: GatewayProcess) -> None:
    names = [f"bulk-{i:04d}" for i in range(300)]
    resp, p99, worst, _ = measure(gw, lambda c: create_topics(c, names))
    assert sorted(t.name for t in resp.topics if t.error_code == 0) == names, resp
    assert_bound(p99, worst)
    metrics = gw.metrics()  # the loop-lag series are served
    assert "groupshift_event_loop_lag_seconds" in metrics and "groupshift_event_loop_blocked_total" in metrics


def test_new_regex_against_1000_topics_does_not_stall_heartbeats(gw: GatewayProcess) -> None:
    names = [f"rx-{i:04d}" for i in range(1000)]
    with WireClient(gw.port, timeout=600.0) as c:
        for i in range(0, len(names), 250):
            resp = create_topics(c, names[i : i + 250])
            assert all(t.error_code == 0 for t in resp.topics), resp

    def subscribe(c: WireClient) -> Any:
        return c.request(
            cgh(
                "loop-regex",
                "regex-member-000000000001",
                0,
                subscribed_topic_regex="rx-.*",
                topic_partitions=[],
            )
        )

    r, p99, worst, _ = measure(gw, subscribe)
    assert r.error_code == 0, r
    assert_bound(p99, worst)


def test_10000_partition_topic_does_not_stall_heartbeats(gw: GatewayProcess) -> None:
    resp, p99, worst, _ = measure(gw, lambda c: create_topics(c, ["wide"], partitions=10_000))
    (t,) = resp.topics
    # A descriptor/partition budget may refuse it cleanly; either way no other group stalls.
    assert t.error_code == 0 or (t.error_code in RESOURCE_LIMIT_CODES and t.error_message), t
    assert_bound(p99, worst)
