"""Live scenarios with real clients on either backend: `groupshift serve` (a GatewayProcess) or a
real Apache Kafka node (`KafkaBackend`), with e2e/migration.py's producer, cast and checkers.

Used by the real-client differential tests (e2e/test_differential_real_clients.py) and by
`python -m bench.versus_kafka`. On Kafka there is no gateway event log: conversions are seen
through the group type (ListGroups v5) alone, and no member is fenced from the server's side
(the scenarios here never kill a member).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from e2e.migration import Cast, ContinuousProducer, Report, Scenario, Timeline, create_topic, group_type


@dataclass
class KafkaBackend:
    """What the scenario helpers need of a server, for a Kafka node (no gateway event log)."""

    bootstrap: str
    host: str = "127.0.0.1"
    port: int = 0

    def __post_init__(self) -> None:
        self.port = int(self.bootstrap.rsplit(":", 1)[1])

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        return []


@dataclass
class Outcome:
    backend: str
    types: list[tuple[str, str | None]] = field(default_factory=list)  # (step, group type)
    timings: list[tuple[str, float]] = field(default_factory=list)
    report: Report | None = None
    error: BaseException | None = None


def run_scenario(
    backend_name: str, backend: Any, name: str, body: Callable[[Scenario, Outcome], None]
) -> Outcome:
    outcome = Outcome(backend_name)
    topic, group = f"{name}-topic", f"{name}-group"
    try:
        create_topic(backend, topic)
        timeline = Timeline(topic)
        producer = ContinuousProducer(backend, topic)
        producer.start()
        cast = Cast(backend, group, timeline)
        sc = Scenario(backend, topic, group, timeline, producer, cast)
        try:
            body(sc, outcome)
            outcome.report = sc.finish()
        finally:
            producer._halt.set()
            try:
                cast.stop_all()
            finally:
                producer.join(90)
    except BaseException as e:
        outcome.error = e
    return outcome


def timed_step(sc: Scenario, outcome: Outcome, expect: str, what: str, since: float) -> None:
    sc.step(expect, what)
    outcome.timings.append((what, time.monotonic() - since))
    outcome.types.append((what, group_type(sc.gw, sc.group)))
