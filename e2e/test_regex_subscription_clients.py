"""Regex subscriptions (KIP-848 `SubscribedTopicRegex`) with a real client on `groupshift serve`.

Kafka's `VerifiableConsumer` subscribes by topic name only (`subscribe(List.of(topic))`), so the
Java-client tests (e2e/test_java_clients.py) cannot cover pattern subscriptions; librdkafka can:
a `^`-prefixed topic in `subscribe()` is a regex, which with `group.protocol=consumer` is sent
to the coordinator as the member's regex and resolved there. Two members subscribe to
`^rx-<run>-.*`: the matching topics' partitions are split between them and nothing else is
assigned; a topic created later that matches is picked up and assigned too.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from e2e.conftest import Gateways
from e2e.migration import FAST_GROUP_SETTINGS, wait_until


def test_confluent_regex_subscription_is_resolved_and_follows_new_topics(gateways: Gateways) -> None:
    gw = gateways.start("rx", sets=FAST_GROUP_SETTINGS)
    run = uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": gw.bootstrap})
    first = [f"rx-{run}-a", f"rx-{run}-b", f"other-{run}"]
    for f in admin.create_topics([NewTopic(t, 3, 1) for t in first]).values():
        f.result(15)
    members = [
        Consumer(
            {
                "bootstrap.servers": gw.bootstrap,
                "group.id": f"rx-group-{run}",
                "group.protocol": "consumer",
                "client.id": f"rx-{i}",
                "topic.metadata.refresh.interval.ms": 500,
            }
        )
        for i in range(2)
    ]
    try:
        for m in members:
            m.subscribe([f"^rx-{run}-.*"])

        def owned() -> set[tuple[str, int]]:
            out: set[tuple[str, int]] = set()
            for m in members:
                m.poll(0.05)
                parts = [(tp.topic, tp.partition) for tp in m.assignment()]
                assert not out & set(parts), f"a partition assigned twice: {parts}"
                out |= set(parts)
            return out

        want = {(t, p) for t in first[:2] for p in range(3)}
        # All 6 partitions can be owned by the first member before the second one joins: wait for
        # the split too (the second member's join is paced by its own heartbeats).
        wait_until(
            lambda: owned() == want and all(len(m.assignment()) == 3 for m in members),
            45,
            lambda: f"the regex's 6 partitions split 3/3, have {[m.assignment() for m in members]}",
        )
        admin.create_topics([NewTopic(f"rx-{run}-c", 2, 1)])[f"rx-{run}-c"].result(15)
        want |= {(f"rx-{run}-c", p) for p in range(2)}
        started = time.monotonic()
        wait_until(lambda: owned() == want, 45, lambda: f"the new topic's partitions, have {sorted(owned())}")
        print(f"a new matching topic was assigned {time.monotonic() - started:.1f}s after its creation")
    finally:
        for m in members:
            m.close()
