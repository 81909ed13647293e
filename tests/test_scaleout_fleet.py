"""Scale-out's pure parts (docs/scale-out.md): the fleet leader's shard assignment (balanced,
sticky, a returning node takes its share back), the JSON carried in member metadata and
assignments, the unowned shard's log, and the `upstream.coordinator.*` settings."""

from __future__ import annotations

import pytest

from engine.errors import AppendError, Errors
from gateway.config import ConfigError, build_config
from gateway.scaleout.fleet import FleetView, NodeInfo, assign, plan
from gateway.scaleout.ownership import UnownedLog
from gateway.scaleout.shard_log import ShardLogFailed, transactional_id


def _members(owned: dict[int, tuple[int, ...]]) -> dict[str, NodeInfo]:
    return {f"m-{n}": NodeInfo(n, "127.0.0.1", 9000 + n, o) for n, o in owned.items()}


def _by_node(members: dict[str, NodeInfo], out: dict[int, str]) -> dict[int, set[int]]:
    res: dict[int, set[int]] = {i.node_id: set() for i in members.values()}
    for s, m in out.items():
        res[members[m].node_id].add(s)
    return res


@pytest.mark.parametrize("nodes", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("shards", [1, 6, 50])
def test_every_shard_once_and_balanced(nodes: int, shards: int) -> None:
    members = _members({n: () for n in range(1, nodes + 1)})
    out = assign(members, shards)
    assert sorted(out) == list(range(shards))
    sizes = [len(v) for v in _by_node(members, out).values()]
    assert max(sizes) - min(sizes) <= 1, sizes


def test_sticky_members_keep_their_shards() -> None:
    members = _members({1: (0, 1), 2: (2, 3), 3: (4, 5)})
    assert _by_node(members, assign(members, 6)) == {1: {0, 1}, 2: {2, 3}, 3: {4, 5}}


def test_a_dead_nodes_shards_go_to_the_survivors_and_nothing_else_moves() -> None:
    members = _members({1: (0, 1), 2: (2, 3)})  # node 3 (4, 5) is gone
    got = _by_node(members, assign(members, 6))
    assert {0, 1} <= got[1] and {2, 3} <= got[2]
    assert got[1] | got[2] == set(range(6)) and len(got[1]) == len(got[2]) == 3


def test_a_returning_node_takes_its_share_back() -> None:
    members = _members({1: (0, 1, 4), 2: (2, 3, 5), 3: ()})
    got = _by_node(members, assign(members, 6))
    assert len(got[3]) == 2 and len(got[1]) == len(got[2]) == 2
    assert got[1] <= {0, 1, 4} and got[2] <= {2, 3, 5}  # only surplus moved


def test_a_shard_claimed_twice_is_assigned_once() -> None:
    members = _members({1: (0, 1, 2), 2: (2, 3), 3: (4, 5)})
    out = assign(members, 6)
    assert sorted(out) == list(range(6))
    assert sum(1 for m in out.values() if members[m].node_id == 1) == 2


def test_claims_outside_the_shard_count_are_ignored() -> None:
    members = _members({1: (0, 99, -1), 2: ()})
    assert sorted(assign(members, 2)) == [0, 1]


def test_view_and_node_info_round_trip() -> None:
    view = FleetView(
        7, {0: 1001, 1: 1002}, {1001: ("127.0.0.1", 9092), 1002: ("10.0.0.2", 9093)}, {0: "m-a", 1: "m-b"}
    )
    assert FleetView.decode(view.encode()) == view
    assert view.shards_of(1002) == {1}
    received = FleetView.decode(view.encode(), "m-b")
    assert received.mine() == {1} and FleetView.decode(view.encode()).mine() == set()
    info = NodeInfo(1001, "127.0.0.1", 9092, (3, 4))
    assert NodeInfo.decode(info.encode()) == info


def test_unowned_log_refuses_appends() -> None:
    log = UnownedLog(3)
    with pytest.raises(ShardLogFailed, match="not owned"):
        log.append_records([(b"k", b"v")], 0)
    assert log.end_offset == log.durable_offset == 0 and list(log.batches()) == []


def test_unowned_shard_journal_answers_a_storage_error() -> None:
    from engine.config import CoordinatorConfig
    from engine.ids import SystemIds
    from engine.metadata import EMPTY_IMAGE
    from gateway.coordinator_storage import CoordinatorStorage
    from records.coordinator import CoordinatorRecord
    from records.offsets import OffsetCommitKey, OffsetCommitValue

    storage = CoordinatorStorage.load(
        UnownedLog(0), config=CoordinatorConfig(), ids=SystemIds(), image=EMPTY_IMAGE, now_ms=0
    )
    record = CoordinatorRecord(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, -1, "", 0))
    with pytest.raises(AppendError) as e:
        storage._journal([record])
    assert e.value.code == Errors.KAFKA_STORAGE_ERROR


def test_transactional_ids_are_per_shard_and_topic() -> None:
    assert transactional_id("groupshift-coordinator", 4) == "groupshift-coordinator-shard-4"


def test_settings() -> None:
    config = build_config(
        {
            "upstream.bootstrap.servers": "127.0.0.1:9092",
            "upstream.coordinator.storage": "kafka",
            "upstream.coordinator.fleet.session.timeout.ms": "3000",
        }
    )
    assert config.upstream is not None
    assert config.upstream.coordinator_storage == "kafka"
    assert config.upstream.fleet_session_timeout_ms == 3000
    assert config.upstream.coordinator_topic == "groupshift-coordinator"
    with pytest.raises(ConfigError, match=r"coordinator\.storage"):
        build_config(
            {"upstream.bootstrap.servers": "127.0.0.1:9092", "upstream.coordinator.storage": "zookeeper"}
        )


def test_a_duplicate_node_id_gets_no_shards() -> None:
    members = {
        "a": NodeInfo(1001, "127.0.0.1", 9092),
        "b": NodeInfo(1001, "127.0.0.1", 9192),
        "c": NodeInfo(1002, "127.0.0.1", 9292),
    }
    view = plan(3, members, 6)
    assert set(view.members.values()) == {"a", "c"}
    assert view.nodes == {1001: ("127.0.0.1", 9092), 1002: ("127.0.0.1", 9292)}
    assert FleetView.decode(view.encode(), "b").mine() == set()
    assert len(FleetView.decode(view.encode(), "a").mine()) == 3
