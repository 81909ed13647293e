"""Restart durability of groups: two groups (classic via kafka-python, consumer protocol via
librdkafka) consume the first half of a topic and commit; the gateway is SIGKILLed (no shutdown
path runs) and restarted on the same data directory. Topics, records, committed offsets and the
groups themselves are intact, and new consumers of the same groups resume from the commits:
they read the second half and nothing of the first.
"""

from __future__ import annotations

from e2e.conftest import Gateways
from e2e.expected import COUNT, PARTITIONS, PER_PARTITION
from e2e.groups import (
    FAST_GROUP_SETTINGS,
    ConfluentMember,
    KafkaPythonMember,
    Ledger,
    Member,
    committed_offsets,
    create_topic,
    produce,
    read_all,
    wait_partitioned,
    wait_until,
)
from e2e.test_durability import topic_ids

TOPIC = "durable-orders"
CLASSIC, CONSUMER = "durable-classic", "durable-consumer"
HALF = COUNT // 2


def consume_with_group(gw, group: str, expected: range) -> Ledger:
    """Three members of `group` consume until every record of `expected` is in and committed."""
    ledger = Ledger(TOPIC)

    def member(i: int) -> Member:
        if group == CLASSIC:
            return KafkaPythonMember(f"{group}-{i}", ledger, gw.bootstrap, group)
        return ConfluentMember(f"{group}-{i}", ledger, gw.bootstrap, group, **{"group.protocol": "consumer"})

    members = [member(i).start() for i in range(3)]
    try:
        wait_partitioned(members, f"{group} to assign the partitions")
        target = {p: (expected.stop // PARTITIONS) for p in range(PARTITIONS)}
        wait_until(lambda: ledger.distinct() >= len(expected), 60, f"{group} to consume")
        wait_until(
            lambda: committed_offsets(gw, group, TOPIC) == target, 20, f"{group} to commit", interval=0.3
        )
    finally:
        for m in members:
            m.stop()
    for m in members:
        assert not m.errors, (m.name, m.errors)
    ledger.check_consumed(expected)
    return ledger


def test_groups_and_commits_survive_sigkill(gateways: Gateways) -> None:
    from kafka.admin import KafkaAdminClient

    gw = gateways.start("durable-groups", sets=FAST_GROUP_SETTINGS)
    create_topic(gw, TOPIC)
    produce(gw, TOPIC, range(HALF))
    for group in (CLASSIC, CONSUMER):
        consume_with_group(gw, group, range(HALF))
    ids_before = topic_ids(gw)
    half = dict.fromkeys(range(PARTITIONS), HALF // PARTITIONS)

    gw.kill()
    gw = gateways.restart(gw)

    assert topic_ids(gw) == ids_before
    for group in (CLASSIC, CONSUMER):
        assert committed_offsets(gw, group, TOPIC) == half, group
    admin = KafkaAdminClient(bootstrap_servers=gw.bootstrap, request_timeout_ms=10000)
    try:
        listed = {g["group_id"]: (g["group_type"], g["group_state"]) for g in admin.list_groups()}
    finally:
        admin.close()
    assert listed == {CLASSIC: ("classic", "Empty"), CONSUMER: ("consumer", "Empty")}

    produce(gw, TOPIC, range(HALF, COUNT))
    for group in (CLASSIC, CONSUMER):
        # resumes at the commits: exactly the second half, nothing read again from offset 0
        ledger = consume_with_group(gw, group, range(HALF, COUNT))
        assert min(r.offset for r in ledger.reads) == HALF // PARTITIONS
        assert committed_offsets(gw, group, TOPIC) == dict.fromkeys(range(PARTITIONS), PER_PARTITION)

    # every record of both halves is still there, in order
    got = read_all(gw, TOPIC)
    assert [(p, o) for p, o, _, _ in got] == sorted(
        (p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)
    )
