"""Topic ids for an upstream cluster whose Metadata carries none (KIP-516, as KIP-848 uses them).

KIP-848 names the partitions of an assignment by topic id (ConsumerGroupHeartbeat's
`Assignment.TopicPartitions.TopicId`), and a KIP-848 client resolves those ids through Metadata
(v10+ carries `TopicId`; v12+ can be asked by id). Kafka assigns topic ids from 2.8 on; a Kafka
before 2.8 serves Metadata only up to v9 (no id at all), and some Kafka-compatible backends answer
v10+ with the zero UUID. Behind such a cluster a KIP-848 member would be assigned partitions of
ids it can never resolve, and sit with no assignment and no error.

groupshift gives such a topic an id of its own and carries it consistently:

* the id is derived, not stored: a name-based UUID (RFC 9562 version 5) of the upstream's
  cluster id and the topic name, so every restart and every scale-out node in front of the same
  cluster computes the same id with no coordination. A topic's upstream id is used as is
  whenever it is not zero. Kafka's clients treat the zero UUID as "no id"; a derived id is never
  zero, and like Kafka's `Uuid.randomUuid` never one whose base64 form starts with "-".
* A topic deleted and created again under the same name gets the *same* id: such a cluster shows
  nothing on the wire that tells the two apart (no id, no creation time in Metadata), and a
  derived id cannot remember. Members then keep the partitions of the new topic as classic
  members do, where Kafka's id change would revoke and re-assign them (docs/deviations.md).
* the engine's `MetadataImage` (the assignors, ConsumerGroupHeartbeat and ConsumerGroupDescribe)
  holds the same ids (`gateway.upstream.cluster`);
* Metadata is translated (`MetadataTranslation`): a client may use any version groupshift can
  decode even when the upstream's maximum is lower (v9 for Kafka 2.4); the request goes upstream
  at the highest version both know, topics a client names by id are named by their names, and
  the answer comes back at the client's version with every missing id filled in;
* forwarded APIs that name topics by id in their requests are advertised only up to the last
  version that names them by name (`ID_FROM`: Fetch v13, Produce v13, DeleteTopics v6), and
  DescribeTopicPartitions (ids in its answer) not at all, so a client never has to send an id
  the upstream does not know. Kafka's clients fall
  back to those versions and to Metadata on their own; a request above those versions
  (negotiated before the cluster showed its first topic without an id) closes the connection,
  as any version not advertised does (`names_topics_by_id`).

OffsetCommit/OffsetFetch v10 (topic ids) are not served by groupshift in either mode, so they
need nothing here.
"""

from __future__ import annotations

import base64
import dataclasses
import uuid
from collections.abc import Callable
from typing import Any

import structlog
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode

from protocol.codec import DecodeFailure, api_schema, decode, decode_response, encode_request
from protocol.entity_builder import build

log = structlog.get_logger("upstream")

PRODUCE, FETCH, METADATA, DELETE_TOPICS, DESCRIBE_TOPIC_PARTITIONS = 0, 1, 3, 20, 75
#: Metadata carries topic ids from this version on (KIP-516).
METADATA_IDS_FROM = 10
#: The first request version of each forwarded API that names topics by id only or optionally.
ID_FROM: dict[int, int] = {FETCH: 13, PRODUCE: 13, DELETE_TOPICS: 6}
#: Forwarded APIs whose answers carry ids and which are not advertised behind such a cluster.
HIDDEN = frozenset({DESCRIBE_TOPIC_PARTITIONS})
#: The namespace of groupshift's derived topic ids (a fixed, random UUID: never change it, every
#: id derived so far and every group assignment naming one depends on it).
NAMESPACE = uuid.UUID("6b1f0c52-58c4-4f0e-9a57-3c0c6f3f64d1")
ZERO = uuid.UUID(int=0)


def missing(topic_id: uuid.UUID | None) -> bool:
    """Kafka's "no topic id": absent (Metadata before v10) or the zero UUID."""
    return topic_id is None or topic_id.int == 0


def derived_topic_id(cluster_id: str | None, name: str) -> uuid.UUID:
    """groupshift's id of a topic the upstream gives none: the same for the same cluster id and
    name, on every node and after every restart (see the module docstring)."""
    seed = f"{cluster_id or ''}/{name}"
    attempt = 0
    while True:
        tid = uuid.uuid5(NAMESPACE, seed if attempt == 0 else f"{seed}/{attempt}")
        if not base64.urlsafe_b64encode(tid.bytes).startswith(b"-"):
            return tid
        attempt += 1


def topic_id_of(cluster_id: str | None, name: str, upstream_id: uuid.UUID | None) -> uuid.UUID:
    """The id clients and the engine see: the upstream's, or groupshift's when it has none."""
    if upstream_id is None or upstream_id.int == 0:
        return derived_topic_id(cluster_id, name)
    return upstream_id


def advertised_range(api_key: int, lo: int, hi: int) -> tuple[int, int] | None:
    """A forwarded API's advertised versions behind a cluster without topic ids (None: not
    advertised): capped below the first version that names topics by id."""
    if api_key in HIDDEN:
        return None
    first = ID_FROM.get(api_key)
    if first is not None:
        hi = min(hi, first - 1)
    return (lo, hi) if lo <= hi else None


def names_topics_by_id(api_key: int, version: int) -> bool:
    """Whether a forwarded request of this version may name topics by id (or is an API hidden
    behind such a cluster). A client that negotiated its versions before the cluster showed a
    topic without an id (a backend answering zero UUIDs that had no topics yet) may still send
    one: its connection is closed, as for any version not advertised, and it negotiates anew."""
    return api_key in HIDDEN or version >= ID_FROM.get(api_key, 1 << 15)


def _plain(value: Any) -> Any:
    """A decoded kio entity as nested mappings, for `build` at another version."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True, slots=True)
class MetadataTranslation:
    """One Metadata request as sent upstream, and what its answer needs on the way back."""

    client_version: int
    upstream_version: int
    #: Topics the client named by an id groupshift does not know: answered UNKNOWN_TOPIC_ID.
    unknown_ids: tuple[uuid.UUID, ...] = ()

    @classmethod
    def of_request(
        cls,
        frame: bytes,
        version: int,
        upstream_max: int,
        name_of: Callable[[uuid.UUID], str | None],
    ) -> tuple[bytes, MetadataTranslation] | None:
        """The request frame to send upstream (without a size prefix) and its translation; None
        when the frame cannot be decoded (it is forwarded as it came, and refused as before)."""
        schema = api_schema(METADATA, version)
        if schema is None:
            return None
        try:
            header, req = decode(schema, frame)
        except DecodeFailure:
            return None
        target = min(version, upstream_max)
        topics: list[dict[str, Any]] | None = None
        unknown: list[uuid.UUID] = []
        if req.topics is not None:
            topics = []
            for t in req.topics:
                name = getattr(t, "name", None)
                tid = getattr(t, "topic_id", None)
                if name is None and tid is not None and tid.int != 0:
                    name = name_of(tid)
                    if name is None:
                        unknown.append(tid)
                        continue
                if name is not None:
                    topics.append({"name": name, "topic_id": ZERO})
        values: dict[str, Any] = {"topics": topics}
        values["allow_auto_topic_creation"] = getattr(req, "allow_auto_topic_creation", True)
        for flag in ("include_cluster_authorized_operations", "include_topic_authorized_operations"):
            values[flag] = getattr(req, flag, False)
        try:
            request = build(load_request_schema(METADATA, target), values)
            cid, client = header.correlation_id, header.client_id
            out = encode_request(request, correlation_id=cid, client_id=client)[4:]
        except (TypeError, ValueError) as e:  # a client's values kio would not write back
            log.info("upstream.metadata_not_translated", api_version=version, error=str(e))
            return None
        return out, cls(version, target, tuple(unknown))

    def response(self, raw: bytes, cluster_id: str | None) -> Any:
        """The upstream's answer (without its size prefix) decoded and rebuilt at the client's
        version, every topic with its id (the upstream's, else groupshift's)."""
        _, body = decode_response(load_response_schema(METADATA, self.upstream_version), raw)
        return fill_ids(body, self.client_version, cluster_id, self.unknown_ids)


def fill_ids(body: Any, version: int, cluster_id: str | None, unknown_ids: tuple[uuid.UUID, ...] = ()) -> Any:
    """A decoded Metadata answer at `version` with no topic lacking an id: the same object when
    nothing changes (same version, ids present, no unknown id to answer). `cluster_id`: the one
    the cluster's own refresh saw, which the engine's ids are derived from (the answer's own
    when None)."""
    cluster_id = cluster_id or getattr(body, "cluster_id", None)
    lacking = version >= METADATA_IDS_FROM and any(
        t.name is not None and missing(getattr(t, "topic_id", None)) for t in body.topics
    )
    if body.__version__ == version and not unknown_ids and not lacking:
        return body
    values = _plain(body)
    for t in values["topics"]:
        if t.get("name") is not None and t.get("error_code", 0) == 0:
            t["topic_id"] = topic_id_of(cluster_id, t["name"], t.get("topic_id"))
        else:
            t.setdefault("topic_id", ZERO)
        t.setdefault("topic_authorized_operations", -(2**31))
    for tid in unknown_ids:
        values["topics"].append(
            {
                "error_code": ErrorCode.unknown_topic_id,
                "name": None,
                "topic_id": tid,
                "is_internal": False,
                "partitions": [],
                "topic_authorized_operations": -(2**31),
            }
        )
    values.setdefault("error_code", 0)
    values.setdefault("cluster_authorized_operations", -(2**31))
    return build(load_response_schema(METADATA, version), values)
