"""The classic protocol's client-side assignors: what a classic group's leader computes.

In the classic protocol the coordinator does not assign partitions: JoinGroup hands the leader
every member's subscription and the leader runs its `partition.assignment.strategy` (Kafka's
`org.apache.kafka.clients.consumer.RangeAssignor` / `RoundRobinAssignor`), then sends the
result in its SyncGroup. groupshift's coordinator never runs these; the simulators and the
synthetic fleets that play classic leaders (`translation.simulate`, `tools.fleet.synth`) do.

Both take `{member id: subscribed topics}` and `{topic: partition count}` and return
`{member id: {topic: [partitions]}}`, every member present (an empty dict: nothing assigned).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["range_assign", "roundrobin_assign"]


def range_assign(
    subscriptions: Mapping[str, Sequence[str]], partitions: Mapping[str, int]
) -> dict[str, dict[str, list[int]]]:
    """Kafka's RangeAssignor: per topic, its subscribers in member id order take contiguous
    ranges, the first `count % subscribers` of them one partition more."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    for topic, count in sorted(partitions.items()):
        members = sorted(m for m, ts in subscriptions.items() if topic in ts)
        if not members:
            continue
        per, extra = divmod(count, len(members))
        start = 0
        for i, m in enumerate(members):
            n = per + (1 if i < extra else 0)
            out[m][topic] = list(range(start, start + n))
            start += n
    return out


def roundrobin_assign(
    subscriptions: Mapping[str, Sequence[str]], partitions: Mapping[str, int]
) -> dict[str, dict[str, list[int]]]:
    """Kafka's RoundRobinAssignor: all partitions in topic order dealt to the members in id
    order, skipping a member not subscribed to the partition's topic."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    members = sorted(subscriptions)
    i = 0
    for topic in sorted(partitions):
        for p in range(partitions[topic]):
            for _ in range(len(members)):
                m = members[i % len(members)]
                i += 1
                if topic in subscriptions[m]:
                    out[m].setdefault(topic, []).append(p)
                    break
    return out
