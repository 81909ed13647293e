"""Upstream mode's BROKER DescribeConfigs rewrite (gateway.upstream.group_settings_configs):
groupshift's own group coordinator settings replace or join the upstream broker's entries, for
the resources and keys the request asked about; everything else passes as the broker said."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.upstream.group_settings_configs import (
    enforced_settings,
    requested_broker_keys,
    rewrite_answer,
)
from protocol.client import make_request
from protocol.codec import api_schema, decode_response, encode_request, encode_response
from protocol.entity_builder import build

ENFORCED = enforced_settings(
    {"group.consumer.migration.policy": "upgrade", "group.max.size": 5, "not.a.kafka.name": 1}
)
OWN = {"group.consumer.migration.policy": "upgrade", "group.max.size": "5"}


def own_entry(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "value": OWN[name],
        "read_only": False,
        "config_source": 4,
        "is_sensitive": False,
        "synonyms": [{"name": name, "value": OWN[name], "source": 4}],
        "config_type": 2,
        "documentation": "groupshift's",
    }


def request_frame(version: int, resources: list[dict[str, Any]], synonyms: bool = False) -> bytes:
    req = make_request(
        32, version, resources=resources, include_synonyms=synonyms, include_documentation=False
    )
    return encode_request(req, correlation_id=9, client_id="t")[4:]


def upstream_answer(version: int, results: list[dict[str, Any]]) -> bytes:
    schema = api_schema(32, version)
    assert schema is not None
    body = build(schema.response_type, {"throttle_time": 0, "results": results})
    return encode_response(schema, 77, body)[4:]


def broker_result(name: str, configs: dict[str, str], rtype: int = 4) -> dict[str, Any]:
    return {
        "error_code": 0,
        "error_message": None,
        "resource_type": rtype,
        "resource_name": name,
        "configs": [
            {"name": k, "value": v, "read_only": True, "config_source": 4, "is_sensitive": False,
             "synonyms": [], "config_type": 2, "documentation": None}
            for k, v in configs.items()
        ],
    }  # fmt: skip


def configs_of(raw: bytes, version: int) -> list[dict[str, tuple[str | None, int, int]]]:
    schema = api_schema(32, version)
    assert schema is not None
    cid, body = decode_response(schema.response_type, raw)
    assert cid == 77
    return [
        {str(c.name): (c.value, int(c.config_source), len(c.synonyms)) for c in r.configs}
        for r in body.results
    ]


def test_enforced_settings_are_kafka_broker_names() -> None:
    assert frozenset(OWN) == ENFORCED


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_a_full_broker_describe_shows_groupshift_values(version: int) -> None:
    frame = request_frame(
        version,
        [
            {"resource_type": 4, "resource_name": "3", "configuration_keys": None},
            {"resource_type": 2, "resource_name": "t", "configuration_keys": None},
            {"resource_type": 4, "resource_name": "", "configuration_keys": None},
        ],
    )
    requested = requested_broker_keys(frame, version, ENFORCED)
    assert requested is not None and requested.keys == {"3": None}  # not the topic, not ""
    raw = upstream_answer(
        version,
        [
            broker_result("3", {"group.consumer.migration.policy": "disabled", "num.io.threads": "8"}),
            broker_result("t", {"group.max.size": "1"}, rtype=2),
            broker_result("", {"group.max.size": "1"}),
        ],
    )
    got = configs_of(rewrite_answer(raw, version, requested, ENFORCED, own_entry), version)
    assert got[0] == {
        "group.consumer.migration.policy": ("upgrade", 4, 0),  # replaced, synonyms not asked for
        "num.io.threads": ("8", 4, 0),  # the broker's own
        "group.max.size": ("5", 4, 0),  # added: the broker did not list it
    }
    assert got[1] == {"group.max.size": ("1", 4, 0)} and got[2] == {"group.max.size": ("1", 4, 0)}


def test_named_keys_get_only_what_was_asked() -> None:
    frame = request_frame(
        4,
        [
            {
                "resource_type": 4,
                "resource_name": "1",
                "configuration_keys": ["group.max.size", "num.io.threads"],
            }
        ],
        synonyms=True,
    )
    requested = requested_broker_keys(frame, 4, ENFORCED)
    assert requested is not None and requested.synonyms
    raw = upstream_answer(4, [broker_result("1", {"num.io.threads": "8"})])
    got = configs_of(rewrite_answer(raw, 4, requested, ENFORCED, own_entry), 4)
    assert got == [{"num.io.threads": ("8", 4, 0), "group.max.size": ("5", 4, 1)}]


def test_requests_without_group_settings_are_not_rewritten() -> None:
    keys_elsewhere = [{"resource_type": 4, "resource_name": "1", "configuration_keys": ["num.io.threads"]}]
    assert requested_broker_keys(request_frame(4, keys_elsewhere), 4, ENFORCED) is None
    topics = [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}]
    assert requested_broker_keys(request_frame(4, topics), 4, ENFORCED) is None
