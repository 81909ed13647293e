"""Upstream mode: DescribeConfigs on a BROKER shows the group coordinator settings groupshift
enforces, not the upstream broker's.

In front of a cluster, groupshift is the group coordinator: `group.consumer.migration.policy`,
the `group.consumer.*` session, heartbeat, size and assignor bounds, the classic `group.*`
bounds, `group.coordinator.rebalance.protocols` and the offsets settings are groupshift's own
(`engine.config.CoordinatorConfig`), whatever the brokers behind it are configured with. A
BROKER DescribeConfigs still goes to the upstream broker (every other broker setting is its
own), and its answer is rewritten: for a broker id resource (Kafka's
`ConfigHelper.describeConfigs` on one node; the cluster-default resource "" lists dynamic
defaults only and is left alone), each such setting the request asked for (all of them when it
named no keys) is replaced by groupshift's entry (value, source, synonyms as embedded mode
answers them, `gateway.dataplane.configs.ConfigStore.broker_entry`), or added where the upstream
did not list it (Kafka 3.x leaves out the KIP-848 settings it treats as internal). Tools that
read the policy from a broker (`groupshift groups migration`) then see the one that decides.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from typing import Any

from gateway.dataplane.configs import BROKER_DEFS
from protocol.codec import DecodeFailure, api_schema, decode, decode_response, encode_response
from protocol.entity_builder import build

BROKER_RESOURCE = 4
DESCRIBE_CONFIGS = 32
DEFAULT_CONFIG = 5  # DescribeConfigs config_source


@dataclasses.dataclass(frozen=True)
class Requested:
    """What a DescribeConfigs request asked of per-broker resources."""

    keys: dict[str, frozenset[str] | None]  # broker resource name -> keys asked for (None: all)
    synonyms: bool
    documentation: bool


def enforced_settings(coordinator_settings: Mapping[str, Any]) -> frozenset[str]:
    """The Kafka broker names of groupshift's group coordinator settings (its config by alias)."""
    return frozenset(name for name in coordinator_settings if name in BROKER_DEFS)


def requested_broker_keys(frame: bytes, version: int, enforced: frozenset[str]) -> Requested | None:
    """The per-broker resources of a DescribeConfigs request whose answer names a setting in
    `enforced`; None when there is nothing to rewrite (the answer is passed on as received)."""
    schema = api_schema(DESCRIBE_CONFIGS, version)
    if schema is None:
        return None
    try:
        _, req = decode(schema, frame)
    except DecodeFailure:
        return None
    out: dict[str, frozenset[str] | None] = {}
    for res in req.resources or ():
        if int(res.resource_type) != BROKER_RESOURCE or not res.resource_name:
            continue
        keys = None if res.configuration_keys is None else frozenset(map(str, res.configuration_keys))
        if keys is None or keys & enforced:
            out[str(res.resource_name)] = keys
    if not out:
        return None
    return Requested(
        out, bool(getattr(req, "include_synonyms", False)), bool(getattr(req, "include_documentation", False))
    )


def rewrite_answer(
    raw: bytes,
    version: int,
    requested: Requested,
    enforced: frozenset[str],
    entry_of: Callable[[str], dict[str, Any]],
) -> bytes:
    """The upstream answer `raw` (correlation id and body, no size prefix) with groupshift's
    entries for the enforced settings of each requested broker resource; `raw` itself if the
    answer cannot be read (the client then sees what the broker said)."""
    schema = api_schema(DESCRIBE_CONFIGS, version)
    if schema is None:
        return raw
    try:
        cid, body = decode_response(schema.response_type, raw)
    except Exception:  # an answer kio cannot read is passed on unchanged
        return raw
    results = []
    for r in body.results:
        name = str(r.resource_name)
        if int(r.resource_type) != BROKER_RESOURCE or int(r.error_code) != 0 or name not in requested.keys:
            results.append(r)
            continue
        keys = requested.keys[name]
        cls = _entry_class(r)
        own = {n: _entry(cls, entry_of(n), requested) for n in sorted(enforced) if keys is None or n in keys}
        configs = [own.get(str(c.name), c) for c in r.configs]
        listed = {str(c.name) for c in r.configs}
        configs += [entry for n, entry in own.items() if n not in listed]
        results.append(dataclasses.replace(r, configs=tuple(configs)))
    return encode_response(schema, cid, dataclasses.replace(body, results=tuple(results)))[4:]


def _entry(cls: Any, values: dict[str, Any], requested: Requested) -> Any:
    """One config entry of this response version from embedded mode's entry values."""
    values = {**values, "is_default": values.get("config_source") == DEFAULT_CONFIG}
    if not requested.synonyms:
        values["synonyms"] = []
    if not requested.documentation:
        values["documentation"] = None
    return build(cls, values)


def _entry_class(result: Any) -> Any:
    """The kio class of a result's config entries (from the result class's annotations)."""
    return typing.get_args(typing.get_type_hints(type(result))["configs"])[0]
