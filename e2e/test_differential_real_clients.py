"""Real-client differential scenarios: the same live scenario, with the same clients and group
settings, on a real Apache Kafka 4.x node and on `groupshift serve`, the outcomes compared and the
timings printed side by side.

- the rolling upgrade then downgrade: 4 Kafka Java consumers (`VerifiableConsumer`, kafka-clients
  4.x) in a classic group on a 12-partition topic with a producer writing throughout are replaced
  one at a time by KIP-848 Java consumers (`group.protocol=consumer`), then back;
- a member added to a stable KIP-848 group of three.

Compared: the group type after every step (ListGroups v5), and on each backend the checkers of
e2e/migration.py (every acknowledged record consumed with its value, no partition owned twice at
once, duplicates only after hand-overs, commits advancing to the log end). Timings (seconds from
a step's change until the group is stable, evenly split and caught up) are printed per step.

Both backends run at the same time (a thread each) on this shared machine, so they see the same
noise; the timings are indications, not benchmarks (bench/ has those). The servers use
e2e/migration.py's fast group settings (Kafka additionally computes assignments in the
heartbeat: `group.consumer.assignment.interval.ms=0`, see e2e/conftest.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from e2e.conftest import KAFKA_ONLY, Gateways
from e2e.java import add_java
from e2e.migration import FAST_GROUP_SETTINGS, Scenario
from e2e.realclients import KafkaBackend, Outcome, run_scenario, timed_step
from harness.kafka_dist.java_clients import JavaClients


@pytest.fixture(scope="module")
def backends(module_gateways: Gateways, kafka_cluster_factory: Any) -> Iterator[dict[str, Any]]:
    settings = dict(s.split("=", 1) for s in FAST_GROUP_SETTINGS)
    kafka = kafka_cluster_factory(
        "4",
        configs={**settings, **KAFKA_ONLY, "group.consumer.migration.policy": "bidirectional"},
        name="differential-real-clients",
    )
    gw = module_gateways.start("groupshift", sets=FAST_GROUP_SETTINGS)
    yield {"groupshift": gw, "kafka": KafkaBackend(kafka.bootstrap)}


def both(
    backends: dict[str, Any], name: str, body: Callable[[Scenario, Outcome], None]
) -> dict[str, Outcome]:
    outcomes: dict[str, Outcome] = {}

    def go(backend_name: str) -> None:
        outcomes[backend_name] = run_scenario(backend_name, backends[backend_name], name, body)

    threads = [threading.Thread(target=go, args=(b,)) for b in ("groupshift", "kafka")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    ours, theirs = outcomes["groupshift"], outcomes["kafka"]
    print(f"\n{name}: seconds until stable, split and caught up (both run at once)")
    print(f"  {'step':<44} {'groupshift':>10} {'kafka 4.x':>10}")
    for (step, a), (_, b) in zip(ours.timings, theirs.timings, strict=False):
        print(f"  {step:<44} {a:>10.2f} {b:>10.2f}")
    for o in (ours, theirs):
        print(f"  {o.backend}: {o.report if o.report else o.error!r}")
    for o in (ours, theirs):
        if o.error is not None:
            raise AssertionError(f"{o.backend}: {o.error}") from o.error
    assert ours.types == theirs.types, (ours.types, theirs.types)
    return outcomes


def test_differential_rolling_upgrade_then_downgrade_java(
    backends: dict[str, Any], kafka_clients4: JavaClients
) -> None:
    def body(sc: Scenario, o: Outcome) -> None:
        t = time.monotonic()
        classic = [add_java(sc.cast, kafka_clients4, "classic") for _ in range(4)]
        timed_step(sc, o, "classic", "four Java classic members", t)
        upgraded = []
        for i, old in enumerate(classic):
            t = time.monotonic()
            upgraded.append(add_java(sc.cast, kafka_clients4, "consumer"))
            timed_step(sc, o, "consumer", f"upgrade {i + 1}/4: KIP-848 member joined", t)
            t = time.monotonic()
            old.stop()
            timed_step(sc, o, "consumer", f"upgrade {i + 1}/4: classic member left", t)
        for i, old in enumerate(upgraded):
            t = time.monotonic()
            add_java(sc.cast, kafka_clients4, "classic")
            timed_step(sc, o, "consumer", f"downgrade {i + 1}/4: classic member joined", t)
            t = time.monotonic()
            old.stop()
            timed_step(sc, o, "classic" if i == 3 else "consumer", f"downgrade {i + 1}/4: KIP-848 left", t)

    outcomes = both(backends, "diff-roll", body)
    for o in outcomes.values():
        assert o.report is not None and o.report.handovers >= 16, o.report
    assert [t for _, t in outcomes["kafka"].types] == ["classic", *["consumer"] * 15, "classic"]


def test_differential_member_added_to_a_stable_group_java(
    backends: dict[str, Any], kafka_clients4: JavaClients
) -> None:
    def body(sc: Scenario, o: Outcome) -> None:
        t = time.monotonic()
        for _ in range(3):
            add_java(sc.cast, kafka_clients4, "consumer")
        timed_step(sc, o, "consumer", "three KIP-848 Java members", t)
        t = time.monotonic()
        add_java(sc.cast, kafka_clients4, "consumer")
        timed_step(sc, o, "consumer", "a fourth added to the stable group", t)

    outcomes = both(backends, "diff-add", body)
    for o in outcomes.values():
        assert o.report is not None and o.report.handovers >= 3, o.report
