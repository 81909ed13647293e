"""bench.assignors' Kafka side: Apache Kafka's own assignors run in one JVM on the inputs
bench.assignors builds, and a result that does not assign every partition is refused."""

from __future__ import annotations

import pytest

from bench.assignors import HETEROGENEOUS, HOMOGENEOUS, Case, case_topic_ids, measure
from bench.kafka_assignors import KafkaAssignors

pytestmark = pytest.mark.e2e


def test_kafka_assignors_time_the_same_inputs_as_ours() -> None:
    with KafkaAssignors("4.4.0") as kafka:
        assert kafka.version == "4.4.0"
        for case in (
            Case("uniform", HOMOGENEOUS, False, 20, 10, 10),
            Case("range", HETEROGENEOUS, True, 20, 10, 10),
        ):
            wall, cpu, assigned = kafka.measure(
                case.assignor,
                case.subscription.value,
                case.incremental,
                case.members,
                case.ratio,
                case_topic_ids(case),
                0.05,
            )
            assert assigned == case.partitions_per_topic * case.topics == 200
            assert 5 <= len(wall) == len(cpu) <= 15
            assert all(w > 0 for w in wall)
        row = measure(Case("uniform", HETEROGENEOUS, False, 20, 10, 10), 0.05, kafka, kafka_first=True)
        assert row.kafka_median_ms is not None and row.kafka_median_ms > 0
        assert row.versus_kafka == pytest.approx(row.median_ms / row.kafka_median_ms)
