"""kafka-python 3.0.12 consumer groups (classic protocol) with each of its assignors: three
members, a member leaving and another joining mid-stream, every record consumed, the end offsets
committed, and the partitions split exactly among the live members after each change.
"""

from __future__ import annotations

import pytest

from e2e.conftest import Gateways
from e2e.groups import FAST_GROUP_SETTINGS, KafkaPythonMember, Ledger, create_topic, run_group_scenario

ASSIGNORS = [
    "RangePartitionAssignor",
    "RoundRobinPartitionAssignor",
    "StickyPartitionAssignor",
    "CooperativeStickyAssignor",
]


def assignor_class(name: str) -> type:
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    return {
        c.__name__: c
        for c in (
            RangePartitionAssignor,
            RoundRobinPartitionAssignor,
            StickyPartitionAssignor,
            CooperativeStickyAssignor,
        )
    }[name]


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_kafka_python_group(gateways: Gateways, assignor: str) -> None:
    gw = gateways.start("kp", sets=FAST_GROUP_SETTINGS)
    topic, group = f"kp-{assignor}", f"kp-group-{assignor}"
    create_topic(gw, topic)
    cls = assignor_class(assignor)

    def member(name: str, ledger: Ledger) -> KafkaPythonMember:
        return KafkaPythonMember(name, ledger, gw.bootstrap, group, partition_assignment_strategy=[cls])

    result = run_group_scenario(gw, topic, group, member)
    names = {e.get("protocol") for e in gw.events("group.generation_started")}
    assert cls.name in names, names
    if assignor == "CooperativeStickyAssignor":
        # incremental: m2 and m3 keep what they had and are only ever handed new partitions
        for name in ("m2", "m3"):
            kept = result.first[name] & result.second[name]
            assert kept, f"{name} lost all of {sorted(result.first[name])}"
