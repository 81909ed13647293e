"""The reference Kafka launcher (compat.kafka_dist): resolution from Maven Central into the cache,
KRaft clusters of 4.x, 3.9 and 3.7, and Kafka's own Java tools against them.

These start real JVMs (a node takes ~3-8 s on two cores); the jars come from the user cache,
which CI pre-warms, so no test here waits for a download after the first run.
"""

from __future__ import annotations

import time

import pytest

from compat.kafka_dist import KafkaCluster, cache_root, cached_versions, resolve
from compat.kafka_dist.wire import API_CONSUMER_GROUP_HEARTBEAT
from compat.pytest_kafka import skip_without_tools


@pytest.fixture(scope="module", autouse=True)
def _tools() -> None:
    skip_without_tools()


def test_resolve_is_cached_and_second_call_does_not_download() -> None:
    first = resolve("4")
    marker = first.lib / "dist.json"
    stamp = marker.stat().st_mtime_ns
    began = time.monotonic()
    second = resolve("4")
    elapsed = time.monotonic() - began
    assert second == first
    assert marker.stat().st_mtime_ns == stamp  # not rewritten: nothing was downloaded again
    assert elapsed < 1.0, f"cached resolve took {elapsed:.2f}s"
    assert first.lib.is_relative_to(cache_root())
    assert first.version_tuple >= (4, 0, 0)
    assert first.version in cached_versions()
    assert first.jar("kafka_2.13").exists()
    assert first.jar("kafka-clients").exists()


def test_exact_release_resolves_to_itself() -> None:
    dist = resolve(resolve("3.9").version)
    assert dist.version.startswith("3.9.")


def test_bad_spec_is_refused() -> None:
    with pytest.raises(ValueError, match="bad Kafka version spec"):
        resolve("four")


def test_kafka4_answers_api_versions_with_consumer_group_heartbeat(kafka4: KafkaCluster) -> None:
    apis = kafka4.api_versions()
    assert API_CONSUMER_GROUP_HEARTBEAT in apis
    assert kafka4.log_path(0).exists()
    assert kafka4.bootstrap == f"127.0.0.1:{kafka4.port(0)}"
