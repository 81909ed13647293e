"""Kafka 4.4's rack-aware standby tags of streams groups: the broker's
`group.streams.rack.aware.assignment.tags` and the group's `streams.rack.aware.assignment.tags`
(LISTs without duplicate keys), the `rack.aware.assignment.tags` entry of the assignment configs
(type 17) and StreamsGroupHeartbeat v1's MISSING_CLIENT_TAGS status in Kafka's words.
e2e/test_streams_differential.py compares the same against Kafka 4.4 over the wire."""

from __future__ import annotations

from typing import Any

import pytest

from engine.config import CoordinatorConfig, GroupConfig, split_list
from engine.streams.api import MISSING_CLIENT_TAGS
from engine.streams.group import StreamsGroup
from engine.streams.heartbeat import assignment_configs
from gateway.config import resolve_config
from gateway.groups.config_apis import GroupConfigs
from gateway.groups.service import merged_group_config
from records.streams_group import KeyValue
from tests.test_streams_groups import Streams

NAME = "streams.rack.aware.assignment.tags"


def detail(*missing: str) -> str:
    return (
        f"Missing required client tags for rack-aware standby assignment: [{', '.join(missing)}]. "
        "Configure them via 'client.tag.<tagKey>' in your Streams config."
    )


@pytest.mark.parametrize(
    ("value", "parts"),
    [
        ("", ()),
        ("  ", ()),
        (" zone , rack ", ("zone", "rack")),
        ("zone,", ("zone", "")),
        ("a,,b", ("a", "", "b")),
    ],
)
def test_lists_split_as_kafkas_configdef(value: str, parts: tuple[str, ...]) -> None:
    """`ConfigDef.parseType` trims, takes blank as the empty list and keeps empty entries."""
    assert split_list(value) == parts


def test_the_broker_setting_is_a_list_without_duplicates() -> None:
    assert CoordinatorConfig().streams_rack_aware_assignment_tags == ()
    # Taken from a server.properties (no longer an unused Kafka key with a warning).
    loaded = resolve_config({"group.streams.rack.aware.assignment.tags": "zone, rack"})
    assert loaded.ignored_kafka_keys == ()
    assert loaded.config.group.streams_rack_aware_assignment_tags == ("zone", "rack")
    cfg = CoordinatorConfig.from_kafka({"group.streams.rack.aware.assignment.tags": "zone, rack"})
    assert cfg.streams_rack_aware_assignment_tags == ("zone", "rack")
    refused = r"'group\.streams\.rack\.aware\.assignment\.tags' values must not be duplicated\."
    with pytest.raises(ValueError, match=refused):
        CoordinatorConfig.from_kafka({"group.streams.rack.aware.assignment.tags": "zone,zone"})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("zone,rack", None),
        ("", None),
        ("zone , zone", "streams.rack.aware.assignment.tags must not contain duplicate tag keys."),
        ("a,,b", "Configuration 'streams.rack.aware.assignment.tags' values must not be empty."),
    ],
)
def test_the_group_config_refuses_duplicates_in_kafkas_words(value: str, message: str | None) -> None:
    # Duplicates are checked before any other value (Kafka 4.4 `GroupConfig.validate`).
    gc = GroupConfig.model_validate({NAME: value, "streams.session.timeout.ms": 1})
    with pytest.raises(ValueError) as e:
        gc.validate_against(CoordinatorConfig())
    session = "streams.session.timeout.ms must be in the range 45000 to 60000 inclusive."
    assert str(e.value) == (message or session)


def test_the_assignment_configs_name_the_tags_only_when_there_are_some() -> None:
    h = Streams(group_streams_rack_aware_assignment_tags="zone,rack")
    standbys = KeyValue("num.standby.replicas", "0")
    tags = "rack.aware.assignment.tags"
    assert assignment_configs(h.shard.state, "app") == (standbys, KeyValue(tags, "zone,rack"))
    # The group's own list wins, an empty one included.
    h.shard.set_group_config("app", GroupConfig.model_validate({NAME: " rack "}))
    assert assignment_configs(h.shard.state, "app") == (standbys, KeyValue(tags, "rack"))
    h.shard.set_group_config("app", GroupConfig.model_validate({NAME: ""}))
    assert assignment_configs(h.shard.state, "app") == (standbys,)
    assert assignment_configs(Streams().shard.state, "app") == (standbys,)


def test_v1_members_missing_tags_are_told_which_and_v0_members_are_not() -> None:
    h = Streams(group_streams_rack_aware_assignment_tags="zone,rack")
    h.ctx = h.ctx.with_version(1)
    r = h.join("m1")
    assert [(s.code, s.detail) for s in r.status] == [(MISSING_CLIENT_TAGS, detail("zone", "rack"))]
    r = h.join("m2", client_tags=(KeyValue("rack", "r1"), KeyValue("other", "x")))
    assert [(s.code, s.detail) for s in r.status] == [(MISSING_CLIENT_TAGS, detail("zone"))]
    r = h.join("m3", client_tags=(KeyValue("rack", "r1"), KeyValue("zone", "z1")))
    assert r.status == ()
    # Every heartbeat says it again, with the tags the member reported last.
    assert [s.code for s in h.beat("m2").status] == [MISSING_CLIENT_TAGS]
    h.ctx = h.ctx.with_version(0)
    assert h.beat("m1").status == ()
    assert h.join("m4").status == ()


def test_setting_the_tags_bumps_the_group_epoch_and_replays() -> None:
    h = Streams()
    h.records = []
    h.join("m1")
    h.converge("m1")
    epoch = h.group.group_epoch
    h.shard.set_group_config("app", GroupConfig.model_validate({NAME: "zone"}))
    h.ctx = h.ctx.with_version(1)
    r = h.beat("m1")
    assert h.group.group_epoch == epoch + 1
    assert [s.detail for s in r.status] == [detail("zone")]
    assert h.group.last_assignment_configs[-1] == KeyValue("rack.aware.assignment.tags", "zone")
    replayed = h.replayed().groups["app"]
    assert isinstance(replayed, StreamsGroup)
    assert replayed.last_assignment_configs == h.group.last_assignment_configs


class Service:
    """`GroupCoordinatorService`'s merge and validation of group configs (`merged_group_config`)
    over one shard."""

    def __init__(self, **broker: Any) -> None:
        self.h = Streams(**broker)
        self.config = self.h.shard.state.config
        self.group_configs: dict[str, GroupConfig] = {}

    # GroupCoordinatorService's two methods over one shard, its merge and validation called (a
    # compiled class's methods cannot be called on this class's instances).
    def set_group_config(self, group_id: str, values: dict[str, Any], *, apply: bool = True) -> None:
        merged, cfg = merged_group_config(self.group_configs.get(group_id), values, self.config)
        if not apply:
            return
        if merged:
            self.group_configs[group_id] = cfg
        else:
            self.group_configs.pop(group_id, None)
        self.h.shard.set_group_config(group_id, cfg if merged else None)

    def effective_group_config(self, group_id: str) -> dict[str, int | str]:
        return self.h.shard.effective_group_config(group_id)


def test_describe_and_incremental_alter_treat_it_as_kafkas_list() -> None:
    service = Service(group_streams_rack_aware_assignment_tags="zone")
    configs = GroupConfigs(service)  # type: ignore[arg-type]
    _, _, every = configs.describe("app", None, False)
    (entry,) = [c for c in every if c["name"] == NAME]
    # LIST (7), the broker's value given explicitly (STATIC_BROKER_CONFIG, 4).
    assert (entry["value"], entry["config_source"], entry["config_type"]) == ("zone", 4, 7)
    assert configs.incremental_alter("app", [(NAME, 0, "a,b,a")], False) == (
        40,
        "streams.rack.aware.assignment.tags must not contain duplicate tag keys.",
    )
    assert configs.incremental_alter("app", [(NAME, 0, "a,b")], False) == (0, None)
    _, _, (entry,) = configs.describe("app", [NAME], False)
    assert (entry["value"], entry["config_source"]) == ("a,b", 8)
    assert service.h.shard.state.streams_rack_aware_assignment_tags("app") == ("a", "b")
    # Kafka 4.4's controller takes no GROUP config as a LIST: APPEND and SUBTRACT are refused.
    for op, verb in ((2, "APPEND"), (3, "SUBTRACT")):
        assert configs.incremental_alter("app", [(NAME, op, "c")], False) == (
            40,
            f"Can't {verb} to key {NAME} because its type is not LIST.",
        )
    assert configs.incremental_alter("app", [(NAME, 1, None)], False) == (0, None)
    assert service.h.shard.state.streams_rack_aware_assignment_tags("app") == ("zone",)


def test_client_tags_are_kept_as_kafkas_map_sorted_by_key_in_the_record() -> None:
    """Kafka 4.4 keeps a member's client tags as a map and writes them sorted by key; the last
    value of a key given twice is kept here (Kafka fails that heartbeat)."""
    h = Streams()
    h.join("m1", client_tags=(KeyValue("zone", "z"), KeyValue("rack", "r"), KeyValue("zone", "z2")))
    assert h.group.members["m1"].client_tags == (KeyValue("rack", "r"), KeyValue("zone", "z2"))
