"""Rolling upgrade then rolling downgrade of a live group, with real clients on `groupshift
serve`, while a producer writes continuously to a 12-partition topic.

Four classic members form a classic group. They are replaced one at a time by confluent-kafka
KIP-848 members (`group.protocol=consumer`): each step starts the new member, waits until the
group is stable and evenly split, then closes one old member. The group becomes a `consumer`
group as soon as the first KIP-848 member joins. The KIP-848 members are then replaced one at a
time by classic members again; the group stays `consumer` while any KIP-848 member is left and
becomes `classic` when the last one leaves.

After every step: the group type (ListGroups v5) is the expected one, the group is stable, the
members' own assignments split the partitions evenly and match the server's (ConsumerGroupDescribe
while the group is a consumer group), and every record acknowledged so far has been consumed.
At the end: every acknowledged record was consumed, no partition was held by two members in
overlapping assign/revoke windows, duplicates occur only within the at-least-once window after a
hand-over, commits never went backwards and reached the log end (see e2e/migration.py).

The classic side is kafka-python eager (`range`, the issue's case 2), kafka-python
`cooperative-sticky` (KIP-429 incremental revocation inside a consumer group) and aiokafka
(eager `roundrobin`, its default; aiokafka has no cooperative assignor).
"""

from __future__ import annotations

import pytest

from e2e.conftest import Gateways
from e2e.migration import scenario

CLASSIC_KINDS = ["kafka-python-range", "kafka-python-cooperative-sticky", "aiokafka-roundrobin"]


@pytest.mark.parametrize("kind", CLASSIC_KINDS)
def test_rolling_upgrade_then_downgrade(gateways: Gateways, kind: str) -> None:
    short = {
        "kafka-python-range": "kpr",
        "kafka-python-cooperative-sticky": "kpc",
        "aiokafka-roundrobin": "aio",
    }[kind]
    with scenario(gateways, f"roll-{short}") as sc:
        cast = sc.cast
        classic = [cast.classic(kind) for _ in range(4)]
        sc.step("classic", f"four {kind} members")
        assert sc.conversions() == []

        upgraded = []
        for i, old in enumerate(classic):
            upgraded.append(cast.confluent("consumer"))
            sc.step("consumer", f"upgrade {i + 1}/4: {upgraded[-1].name} joined")
            old.stop()
            sc.step("consumer", f"upgrade {i + 1}/4: {old.name} left")
        assert sc.conversions() == [("classic", "consumer")]

        downgraded = []
        for i, old in enumerate(upgraded):
            downgraded.append(cast.classic(kind))
            sc.step("consumer", f"downgrade {i + 1}/4: {downgraded[-1].name} joined")
            old.stop()
            sc.step("classic" if i == 3 else "consumer", f"downgrade {i + 1}/4: {old.name} left")
        assert sc.conversions() == [("classic", "consumer"), ("consumer", "classic")]

        report = sc.finish()
        print(f"{kind}: {report}")
        assert report.handovers >= 16
