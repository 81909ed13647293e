"""Fuzz harnesses for every decoder that reads bytes from outside (issue 11, "The proof").

One module per target; `python -m fuzz TARGET --runs N` runs one (see `fuzz.__main__`):

* `framing`  - the TCP frame parser and in-order responses (`gateway.connection`, `protocol.framing`);
* `requests` - every request decoder a `groupshift serve` gateway serves (`protocol.codec`);
* `embedded` - the embedded consumer protocol (`translation.embedded_protocol`);
* `streams_classic` - Kafka Streams' SubscriptionInfo / AssignmentInfo inside a classic Streams
  group's member metadata and assignments (`translation.streams_classic_protocol`);
* `connect_classic` - a classic Kafka Connect worker's JoinGroup metadata and its leader's
  SyncGroup assignment (`translation.connect_classic_protocol`);
* `records`  - coordinator record keys and values (`records.codec` and `records/*_codec.py`);
* `streams_records` - KIP-1071 streams-group record keys and values, decoded and replayed into a
  live streams group that is then described and heartbeated (`records/streams_group_codec.py`,
  `engine.replay`, `engine/streams/`);
* `connect_records` - groupshift's Connect-group record keys and values (types 10000-10005),
  decoded and replayed into a live connect group that is then described, listed and heartbeated
  (`records/connect_group_codec.py`, `engine.replay`, `engine/connect/`);
* `connect_wire` - the request bodies of the Connect-group extension APIs (32002-32004,
  `protocol.connect_wire` over `protocol.extension_wire`);
* `batches`  - v2 record batches as the coordinator loader and Produce read them
  (`records.batch`);
* `upstream` - the upstream proxy's pre-decode path on client frames (routing, a Produce's
  acks) and the link's response splitter (`gateway.upstream.proxy`, `protocol.framing`);
* `sasl_plain`, `sasl_scram_first`, `sasl_scram_final` - the SASL decoders a client reaches before
  it is authenticated (`gateway.sasl.plain`, `gateway.sasl.scram`);
* `oauthbearer` - SASL/OAUTHBEARER's client initial response: the GS2 header, extensions and
  the JWT behind them (`gateway.sasl.oauthbearer`).

Each module's docstring says what "clean" means for its target: the exceptions the server turns
into a Kafka error or a closed connection. Anything else is a finding. Figures: docs/robustness.md.
"""

from __future__ import annotations

import importlib

from fuzz.common import Target

NAMES = (
    "framing",
    "requests",
    "embedded",
    "streams_classic",
    "connect_classic",
    "records",
    "streams_records",
    "connect_records",
    "connect_wire",
    "batches",
    "upstream",
    "sasl_plain",
    "sasl_scram_first",
    "sasl_scram_final",
    "oauthbearer",
)


def target(name: str) -> Target:
    if name not in NAMES:
        raise KeyError(f"unknown fuzz target {name!r} (one of {', '.join(NAMES)})")
    t: Target = importlib.import_module(f"fuzz.{name}").TARGET
    return t
