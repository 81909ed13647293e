"""The client-side assignors of a classic group's leader (Kafka's `RangeAssignor`,
`RoundRobinAssignor` and a cooperative sticky one), as the simulated clients run them.

A classic group (JoinGroup/SyncGroup) leaves the assignment to its leader: the JoinGroup answer
gives the leader every member's subscription and the leader sends the plan with its SyncGroup.
The simulator's clients (sim/migration_scenarios.py, sim/migration_world.py) and the fleet
synthesiser (tools/fleet/synth.py) all compute it here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from translation.embedded_protocol import Subscription


def range_assign(
    subscriptions: Mapping[str, Iterable[str]], partitions: Mapping[str, int]
) -> dict[str, dict[str, list[int]]]:
    """Kafka's client-side RangeAssignor: per topic, members in id order take contiguous ranges
    (a member subscribed to a topic gets its entry, empty when there are fewer partitions than
    members)."""
    subs = {m: set(ts) for m, ts in subscriptions.items()}
    out: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    for topic, count in sorted(partitions.items()):
        members = sorted(m for m, ts in subs.items() if topic in ts)
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
    subscriptions: Mapping[str, Iterable[str]], partitions: Mapping[str, int]
) -> dict[str, dict[str, list[int]]]:
    """Kafka's RoundRobinAssignor: every partition of every topic (sorted), in turn, to the next
    member (in id order) subscribed to its topic."""
    subs = {m: set(ts) for m, ts in subscriptions.items()}
    out: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    members = sorted(subs)
    i = 0
    for topic in sorted(partitions):
        for p in range(partitions[topic]):
            for _ in range(len(members)):
                m = members[i % len(members)]
                i += 1
                if topic in subs[m]:
                    out[m].setdefault(topic, []).append(p)
                    break
    return out


def assign(
    protocol: str, members: list[tuple[str, Subscription]], counts: dict[str, int]
) -> dict[str, set[tuple[str, int]]]:
    """What a classic leader computes for `protocol` (member order = the JoinGroup answer's),
    as (topic, partition) pairs per member."""
    if protocol in ("range", "roundrobin"):
        subs = {mid: s.topics for mid, s in members}
        plan = (range_assign if protocol == "range" else roundrobin_assign)(subs, counts)
        return {mid: {(t, p) for t, ps in plan[mid].items() for p in ps} for mid in sorted(plan)}
    assert protocol == "cooperative-sticky", protocol
    return cooperative_sticky(members, counts)


def cooperative_sticky(
    members: list[tuple[str, Subscription]], counts: dict[str, int]
) -> dict[str, set[tuple[str, int]]]:
    """Sticky and balanced, then the cooperative adjustment: a partition whose (believed) owner
    changes is given to nobody in this generation. Claims: the highest generation wins; two
    claims at the same generation are both disbelieved and the partition is withheld."""
    subs = {mid: set(s.topics) for mid, s in members}
    order = sorted(subs)
    claims: dict[tuple[str, int], list[tuple[int, str]]] = defaultdict(list)
    for mid, s in members:
        for t, ps in s.owned_partitions:
            for p in ps:
                claims[(t, p)].append((s.generation_id, mid))
    owner: dict[tuple[str, int], str] = {}
    contested: set[tuple[str, int]] = set()
    for tp, cl in claims.items():
        best = max(g for g, _ in cl)
        winners = [m for g, m in cl if g == best]
        if len(winners) == 1:
            owner[tp] = winners[0]
        else:
            contested.add(tp)
    out: dict[str, set[tuple[str, int]]] = {mid: set() for mid in order}
    for (t, p), m in owner.items():
        if t in subs[m] and p < counts.get(t, 0):
            out[m].add((t, p))
    taken = set().union(*out.values()) if out else set()
    topics = sorted(set().union(*subs.values())) if subs else []
    every = [(t, p) for t in topics for p in range(counts.get(t, 0))]
    for tp in every:
        if tp in taken:
            continue
        eligible = [m for m in order if tp[0] in subs[m]]
        m = min(eligible, key=lambda x: (len(out[x]), order.index(x)))
        out[m].add(tp)
    for _ in range(len(every) + 1):  # balance: move from the fullest to an eligible emptier one
        moved = False
        for a in sorted(order, key=lambda x: (-len(out[x]), x)):
            for tp in sorted(out[a], reverse=True):
                cands = [b for b in order if b != a and tp[0] in subs[b] and len(out[b]) + 1 < len(out[a])]
                if cands:
                    b = min(cands, key=lambda x: (len(out[x]), x))
                    out[a].discard(tp)
                    out[b].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    for m in order:
        out[m] = {tp for tp in out[m] if tp not in contested and owner.get(tp, m) == m}
    return out
