"""aiokafka 0.14 consumer groups (classic protocol, eager): members are asyncio tasks on one
loop; three members, one leaving and one joining mid-stream, every record consumed, the end
offsets committed, the partitions split exactly among the live members.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.conftest import Gateways
from e2e.groups import (
    FAST_GROUP_SETTINGS,
    AiokafkaMember,
    AsyncLoop,
    Ledger,
    create_topic,
    run_group_scenario,
)


@pytest.fixture
def aio_loop() -> Iterator[AsyncLoop]:
    loop = AsyncLoop()
    yield loop
    loop.close()


@pytest.mark.parametrize("assignor", ["default", "range"])
def test_aiokafka_group(gateways: Gateways, aio_loop: AsyncLoop, assignor: str) -> None:
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor

    gw = gateways.start("aio", sets=FAST_GROUP_SETTINGS)
    topic, group = f"aio-{assignor}", f"aio-group-{assignor}"
    create_topic(gw, topic)
    config = {} if assignor == "default" else {"partition_assignment_strategy": (RangePartitionAssignor,)}

    def member(name: str, ledger: Ledger) -> AiokafkaMember:
        return AiokafkaMember(name, ledger, aio_loop, gw.bootstrap, group, **config)

    result = run_group_scenario(gw, topic, group, member)
    protocols = {e.get("protocol") for e in gw.events("group.generation_started")} - {None}
    assert protocols == {"roundrobin" if assignor == "default" else "range"}
    if assignor == "range":
        # range on one topic: consecutive pairs, in member-id order
        assert sorted(map(sorted, result.second.values())) == [[0, 1], [2, 3], [4, 5]]
