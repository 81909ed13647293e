"""The differential harness itself: its normaliser and comparison (run here without Kafka), and
three scenarios run against a real Apache Kafka 4.x node and groupshift with the same settings."""

from __future__ import annotations

import pytest

from e2e.differential import Exchange, Normaliser, Outcome, Session, compare, differences, plain


def test_normaliser_maps_member_ids_in_order_of_appearance() -> None:
    n = Normaliser()
    a = n({"member_id": "abc", "members": [{"member_id": "xyz"}, {"member_id": "abc"}]})
    assert a == {
        "member_id": "<member:1>",
        "members": [{"member_id": "<member:2>"}, {"member_id": "<member:1>"}],
    }


def test_normaliser_drops_server_specific_fields_and_maps_topic_ids() -> None:
    n = Normaliser()
    tid = "8d4c3a1e-0b4e-4c8e-9a55-2d1f3c6b7a90"
    n.learn_topic(tid, "orders")
    out = n({"throttle_time": 5, "node_id": 3, "topic_id": tid, "error_code": "none"})
    assert out == {"topic_id": "<topic:orders>", "error_code": "none"}


def test_compare_reports_unexplained_and_stale_known_differences() -> None:
    same = Outcome([Exchange("x", {"a": 1})], [Exchange("x", {"a": 1})], {})
    compare(same)
    differ = Outcome([Exchange("x", {"a": 1, "b": 2})], [Exchange("x", {"a": 1, "b": 3})], {})
    assert differences(differ) == {"x#0.b": (2, 3)}
    with pytest.raises(AssertionError, match=r"x#0.b: kafka=2 groupshift=3"):
        compare(differ)
    compare(differ, known={r"x#0\.b": "documented"})
    with pytest.raises(AssertionError, match="no longer differs"):
        compare(same, known={r"x#0\.a": "documented"})


def test_plain_turns_kio_entities_into_values() -> None:
    from protocol.client import make_request

    req = make_request(12, 4, group_id="g", generation_id=3, member_id="m", group_instance_id=None)
    assert plain(req) == {"group_id": "g", "generation_id": 3, "member_id": "m", "group_instance_id": None}


# --- scenarios against both backends --------------------------------------------------------------


def _cgh(s: Session, **over: object) -> object:
    fields: dict[str, object] = {
        "group_id": s.group(),
        "member_id": "",
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 30000,
        "subscribed_topic_names": [s.topic()],
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [],
    }
    fields.update(over)
    return s.call(68, 1, "ConsumerGroupHeartbeat", **fields)


def scenario_cgh_join_without_subscription(s: Session) -> None:
    s.create_topic(s.topic(), 3)
    s.wait_coordinator(s.group())
    _cgh(s, subscribed_topic_names=None)
    _cgh(s, member_id="not-a-member", member_epoch=5)


def scenario_cgh_join_and_assign(s: Session) -> None:
    from e2e.diffgroups import wait_visible_to_groups

    s.create_topic(s.topic(), 3)
    s.wait_coordinator(s.group())
    wait_visible_to_groups(s, [s.topic()])  # Kafka's coordinator learns of new topics a moment later
    import uuid as _uuid

    member = str(_uuid.uuid4())
    r = _cgh(s, member_id=member)
    epoch = r.member_epoch  # type: ignore[attr-defined]
    _cgh(
        s,
        member_id=member,
        member_epoch=epoch,
        subscribed_topic_names=None,
        rebalance_timeout=-1,
        topic_partitions=None,
    )
    _cgh(s, member_id=member, member_epoch=-1, subscribed_topic_names=None, topic_partitions=None)


def scenario_classic_join_requires_member_id(s: Session) -> None:
    s.wait_coordinator(s.group())
    join = {
        "group_id": s.group(),
        "session_timeout": 10000,
        "rebalance_timeout": 10000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"}],
        "reason": None,
    }
    r = s.call(11, 9, "JoinGroup", **join)
    s.call(11, 9, "JoinGroup", **{**join, "member_id": r.member_id})  # type: ignore[attr-defined]


@pytest.mark.e2e
@pytest.mark.parametrize(
    "scenario",
    [
        scenario_cgh_join_without_subscription,
        scenario_cgh_join_and_assign,
        scenario_classic_join_requires_member_id,
    ],
)
def test_smoke_scenarios_agree(scenario: object, differential_pair: tuple[str, str]) -> None:
    from e2e.differential import run_both

    kafka, ours = differential_pair
    compare(run_both(scenario, kafka, ours))  # type: ignore[arg-type]
