"""A small blocking Kafka admin client over the wire, for `groupshift groups`.

Which path does what, and why one wire path rather than an admin library:

- Every request here is built with kio (through `protocol.codec` / `protocol.entity_builder`), a core
  dependency, so `groupshift groups` works right after `pip install groupshift`; confluent-kafka and
  kafka-python are only test extras.
- The admin libraries do not expose what the migration view needs: confluent-kafka's
  `describe_consumer_groups` drops ConsumerGroupDescribe's target assignment, member epochs and
  `member_type` (KIP-1099), and neither library exposes OffsetDelete together with the
  classic `protocol_type`/`protocol_data` of DescribeGroups. Writing those requests ourselves and
  the rest through their admin APIs would mean two clients with two bootstrap paths; one
  negotiated wire path behaves the same against groupshift and against any Kafka 2.x+ broker.
- Versions are negotiated per API with ApiVersions (v0, which every broker answers): each call
  uses the highest version both sides know, down to the oldest one its code handles, so a Kafka
  2.x broker gets e.g. ListGroups v3 (no filters: filtered client-side) and no ConsumerGroupDescribe.

Routing follows Kafka's admin client: group requests go to the group's coordinator
(FindCoordinator key type 0), ListOffsets to each partition's leader (Metadata), ListGroups to every
broker, the rest to any broker.

On a secured cluster every connection (bootstrap and each broker found through Metadata, as
Kafka's admin client does) goes through TLS and the SASL exchange of the `ClientSecurity` made
from `--command-config` (protocol.client_security).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema

from protocol.client import ConnectionClosed, WireClient
from protocol.client_security import ClientSecurity, SaslAuthenticationFailed
from protocol.codec import decode_response, response_type_of
from protocol.entity_builder import build
from protocol.kafka_schemas import request_schema

API_VERSIONS = 18
METADATA = 3
FIND_COORDINATOR = 10
LIST_GROUPS = 16
DESCRIBE_GROUPS = 15
CONSUMER_GROUP_DESCRIBE = 69
STREAMS_GROUP_DESCRIBE = 89
OFFSET_FETCH = 9
OFFSET_COMMIT = 8
OFFSET_DELETE = 47
LIST_OFFSETS = 2
DELETE_GROUPS = 42
DESCRIBE_CONFIGS = 32
INCREMENTAL_ALTER_CONFIGS = 44
DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31

# (lowest version our code handles, highest version it is written for)
_SUPPORTED: dict[int, tuple[int, int]] = {
    METADATA: (1, 12),
    FIND_COORDINATOR: (0, 4),
    LIST_GROUPS: (0, 5),
    DESCRIBE_GROUPS: (0, 5),
    CONSUMER_GROUP_DESCRIBE: (0, 1),
    # v1 (Kafka 4.4: the assignor name, the topology description plugin) is not in the wire library
    STREAMS_GROUP_DESCRIBE: (0, 1),
    OFFSET_FETCH: (2, 8),
    OFFSET_COMMIT: (2, 8),
    OFFSET_DELETE: (0, 0),
    LIST_OFFSETS: (1, 7),
    DELETE_GROUPS: (0, 2),
    DESCRIBE_CONFIGS: (1, 4),
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    # v1 added pattern types (KIP-290); v0 is gone from Kafka 4 (KIP-896)
    DESCRIBE_ACLS: (1, 3),
    CREATE_ACLS: (1, 3),
    DELETE_ACLS: (1, 3),
}

_API_NAMES = {
    METADATA: "Metadata",
    FIND_COORDINATOR: "FindCoordinator",
    LIST_GROUPS: "ListGroups",
    DESCRIBE_GROUPS: "DescribeGroups",
    CONSUMER_GROUP_DESCRIBE: "ConsumerGroupDescribe",
    STREAMS_GROUP_DESCRIBE: "StreamsGroupDescribe",
    OFFSET_FETCH: "OffsetFetch",
    OFFSET_COMMIT: "OffsetCommit",
    OFFSET_DELETE: "OffsetDelete",
    LIST_OFFSETS: "ListOffsets",
    DELETE_GROUPS: "DeleteGroups",
    DESCRIBE_CONFIGS: "DescribeConfigs",
    INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigs",
    DESCRIBE_ACLS: "DescribeAcls",
    CREATE_ACLS: "CreateAcls",
    DELETE_ACLS: "DeleteAcls",
}

GROUP_RESOURCE = 32  # KIP-848 "Dynamic group configs"
BROKER_RESOURCE = 4
# Coordinator errors that go away by asking again (Kafka's admin client retries them too):
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE (e.g. __consumer_offsets not created
# yet on a fresh Kafka), NOT_COORDINATOR (the group moved).
RETRIABLE_COORDINATOR_ERRORS = frozenset({14, 15, 16})
EARLIEST = -2
LATEST = -1
CLIENT_ID = "groupshift-groups"


@dataclass(frozen=True)
class Features:
    """What ApiVersions v3+ says of KIP-584 feature flags: the levels the broker's software
    supports and the cluster-wide finalized levels (a feature at level 0 is not listed);
    `finalized_epoch` -1 when the broker reports none (no KRaft/ZK feature store)."""

    supported: dict[str, tuple[int, int]]
    finalized: dict[str, int]
    finalized_epoch: int


BROKER_RESOURCE_TYPE = 4  # DescribeConfigs resource type of a broker's configs


class WireError(Exception):
    """A broker could not be reached or answered something unusable."""


class KafkaError(Exception):
    """A Kafka error code in a response, with its name (e.g. GROUP_ID_NOT_FOUND)."""

    def __init__(self, code: int, context: str, message: str | None = None) -> None:
        self.code = code
        self.name = error_name(code)
        detail = f": {message}" if message else ""
        super().__init__(f"{context}: {self.name}{detail}")


def error_name(code: int) -> str:
    from kio.schema.errors import ErrorCode

    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


def code_of(value: Any) -> int:
    return int(getattr(value, "value", value))


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class _Connection:
    """A `protocol.client.WireClient` whose failures are `WireError`s, with the versions the
    broker advertised (filled by `AdminWire._open`)."""

    def __init__(self, host: str, port: int, timeout: float, security: ClientSecurity | None = None) -> None:
        self.secured = security is not None and security.protocol != "PLAINTEXT"
        try:
            if security is None:
                self.client = WireClient(port, host, timeout, client_id=CLIENT_ID)
            else:
                self.client = security.connect(host, port, timeout, client_id=CLIENT_ID)
        except SaslAuthenticationFailed as e:
            raise WireError(f"{host}:{port}: SASL authentication failed: {e}") from None
        except ssl.SSLError as e:
            reason = getattr(e, "verify_message", None) or e.reason or e
            raise WireError(f"{host}:{port}: TLS handshake failed: {reason}") from None
        except (ConnectionClosed, ConnectionResetError) as e:  # closed in the TLS or SASL exchange
            raise WireError(f"{host}:{port}: {e}{self._hint()}") from None
        except OSError as e:
            raise WireError(f"cannot connect to {host}:{port}: {e}") from None
        self.versions: dict[int, tuple[int, int]] = {}

    def _hint(self) -> str:
        """What a closed connection most often means when no security was configured."""
        if self.secured:
            return ""
        return " (a TLS or SASL listener? give its client properties with --command-config FILE)"

    def close(self) -> None:
        self.client.close()

    def request(self, request: Any) -> Any:
        client = self.client
        try:
            correlation = client.send(request)
        except OSError as e:
            raise WireError(f"send failed: {e}") from None
        try:
            frame = client.read_frame()
        except OSError as e:
            raise WireError(f"connection lost: {e}") from None
        if frame is None:
            raise WireError(f"the broker closed the connection{self._hint()}")
        got, body = decode_response(response_type_of(request), frame)
        if got != correlation:
            raise WireError(f"correlation id {got}, expected {correlation}")
        return body


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for part in bootstrap.split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ValueError(f"--bootstrap-server expects HOST:PORT[,HOST:PORT...], got {part!r}")
        out.append((host.strip("[]"), int(port)))
    return out


class AdminWire:
    """One connection per broker, opened on first use; `close()` closes them all."""

    def __init__(self, bootstrap: str, timeout: float = 10.0, security: ClientSecurity | None = None) -> None:
        self.timeout = timeout
        self.security = security
        self._bootstrap = parse_bootstrap(bootstrap)
        self._conns: dict[int, _Connection] = {}
        self._nodes: dict[int, Node] = {}
        self._any: _Connection | None = None
        self._coordinators: dict[str, int] = {}

    def __enter__(self) -> AdminWire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for c in self._conns.values():
            c.close()
        if self._any is not None and self._any not in self._conns.values():
            self._any.close()
        self._conns.clear()
        self._any = None

    def reset(self) -> None:
        """Forget connections and coordinators (after a lost connection or a moved group)."""
        self.close()
        self._coordinators.clear()

    # -- connections and versions ---------------------------------------------------------------

    def _open(self, host: str, port: int) -> _Connection:
        conn = _Connection(host, port, self.timeout, self.security)
        resp = conn.request(build(load_request_schema(API_VERSIONS, 0), {}))
        if code_of(resp.error_code) != 0:
            raise KafkaError(code_of(resp.error_code), f"ApiVersions from {host}:{port}")
        conn.versions = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys}
        return conn

    def _any_conn(self) -> _Connection:
        if self._any is None:
            errors = []
            for host, port in self._bootstrap:
                try:
                    self._any = self._open(host, port)
                    break
                except WireError as e:
                    errors.append(str(e))
            else:
                raise WireError("; ".join(errors))
        return self._any

    def _conn(self, node_id: int) -> _Connection:
        if node_id not in self._conns:
            if node_id not in self._nodes:
                self.metadata([])
            node = self._nodes.get(node_id)
            if node is None:
                raise WireError(f"broker {node_id} is not in the cluster metadata")
            self._conns[node_id] = self._open(node.host, node.port)
        return self._conns[node_id]

    def version(self, api_key: int, conn: _Connection | None = None) -> int | None:
        """The version to use for `api_key`, or None if the broker does not serve a usable one."""
        conn = conn or self._any_conn()
        lo, hi = _SUPPORTED[api_key]
        theirs = conn.versions.get(api_key)
        if theirs is None:
            return None
        v = min(hi, theirs[1])
        return v if v >= max(lo, theirs[0]) else None

    def supports(self, api_key: int) -> bool:
        return self.version(api_key) is not None

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """{api key: (min, max)} the bootstrap broker advertises (ApiVersions v0)."""
        return dict(self._any_conn().versions)

    def features(self) -> Features | None:
        """The KIP-584 feature levels (ApiVersions v3+, KIP-511's client software fields
        required) from the first bootstrap broker that answers, on a connection of its own:
        a broker older than 2.4 answers v3 with a v0 body, which is None here (no features)."""
        for host, port in self._bootstrap:
            try:
                conn = _Connection(host, port, self.timeout, self.security)
            except WireError:
                continue
            try:
                resp = conn.request(
                    build(
                        load_request_schema(API_VERSIONS, 3),
                        {"client_software_name": CLIENT_ID, "client_software_version": "1"},
                    )
                )
            except Exception:  # lost, or a v0 error body that does not decode as v3 (kio's errors)
                return None
            finally:
                conn.close()
            if code_of(resp.error_code) != 0:
                return None
            return Features(
                supported={
                    str(f.name): (int(f.min_version), int(f.max_version)) for f in resp.supported_features
                },
                finalized={str(f.name): int(f.max_version_level) for f in resp.finalized_features},
                finalized_epoch=int(resp.finalized_features_epoch),
            )
        return None

    def _call(self, api_key: int, values: Mapping[str, Any], conn: _Connection | None = None) -> Any:
        conn = conn or self._any_conn()
        v = self.version(api_key, conn)
        if v is None:
            name = _API_NAMES.get(api_key, "API")
            raise WireError(
                f"the broker does not serve {name} (API key {api_key}) in a version this tool speaks"
            )
        return conn.request(build(request_schema(api_key, v), dict(values))), v

    # -- ACLs (groupshift acls: DescribeAcls, CreateAcls, DeleteAcls go to any broker) ----------

    def describe_acls(self, acl_filter: Mapping[str, Any]) -> list[Any]:
        """The resources (with their ACLs) matching a DescribeAcls filter; KafkaError on error."""
        resp, _ = self._call(DESCRIBE_ACLS, acl_filter)
        code = code_of(resp.error_code)
        if code != 0:
            raise KafkaError(code, "DescribeAcls", resp.error_message)
        return list(resp.resources)

    def create_acls(self, creations: Sequence[Mapping[str, Any]]) -> list[tuple[int, str | None]]:
        """CreateAcls: per creation, its error code and message (0, None when created)."""
        resp, _ = self._call(CREATE_ACLS, {"creations": [dict(c) for c in creations]})
        return [(code_of(r.error_code), r.error_message) for r in resp.results]

    def delete_acls(self, filters: Sequence[Mapping[str, Any]]) -> list[Any]:
        """DeleteAcls: per filter, its result (error code, the ACLs it deleted)."""
        resp, _ = self._call(DELETE_ACLS, {"filters": [dict(f) for f in filters]})
        return list(resp.filter_results)

    # -- cluster ----------------------------------------------------------------------------------

    def metadata(self, topics: Sequence[str] | None) -> dict[str, dict[int, int]]:
        """{topic: {partition: leader id}} for `topics` (None: all topics); raises on unknown topics."""
        values: dict[str, Any] = {
            "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        resp, _ = self._call(METADATA, values)
        for b in resp.brokers:
            self._nodes[int(b.node_id)] = Node(int(b.node_id), b.host, int(b.port))
        out: dict[str, dict[int, int]] = {}
        for t in resp.topics:
            code = code_of(t.error_code)
            if code != 0:
                raise KafkaError(code, f"topic {t.name!r}")
            out[str(t.name)] = {int(p.partition_index): int(p.leader_id) for p in t.partitions}
        return out

    def node_ids(self) -> list[int]:
        if not self._nodes:
            self.metadata([])
        return sorted(self._nodes)

    def node(self, node_id: int) -> Node:
        if node_id not in self._nodes:
            self.metadata([])
        return self._nodes[node_id]

    def coordinator(self, group: str) -> int:
        if group in self._coordinators:
            return self._coordinators[group]
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return self._find_coordinator(group)
            except KafkaError as e:
                if e.code not in RETRIABLE_COORDINATOR_ERRORS or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _find_coordinator(self, group: str) -> int:
        values = {"key": group, "key_type": 0, "coordinator_keys": [group]}
        resp, v = self._call(FIND_COORDINATOR, values)
        if v >= 4:
            c = resp.coordinators[0]
            code, node_id, host, port = code_of(c.error_code), int(c.node_id), c.host, int(c.port)
            message = c.error_message
        else:
            code, node_id, host, port = code_of(resp.error_code), int(resp.node_id), resp.host, int(resp.port)
            message = getattr(resp, "error_message", None)
        if code != 0:
            raise KafkaError(code, f"FindCoordinator for group {group!r}", message)
        self._nodes.setdefault(node_id, Node(node_id, host, port))
        self._coordinators[group] = node_id
        return node_id

    def _group_call(self, group: str, api_key: int, values: Mapping[str, Any]) -> tuple[Any, int]:
        return self._call(api_key, values, self._conn(self.coordinator(group)))  # type: ignore[no-any-return]

    # -- groups -----------------------------------------------------------------------------------

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[dict[str, Any]]:
        """Every broker's groups. Filters the broker cannot apply (older versions) are applied here
        on what it returns; `group_type` is None when the broker does not say (ListGroups < v5)."""
        states, types = list(states), list(types)
        out: dict[str, dict[str, Any]] = {}
        for node_id in self.node_ids():
            conn = self._conn(node_id)
            resp, v = self._call(LIST_GROUPS, {"states_filter": states, "types_filter": types}, conn)
            code = code_of(resp.error_code)
            if code != 0:
                raise KafkaError(code, f"ListGroups on broker {node_id}")
            for g in resp.groups:
                entry = {
                    "group": str(g.group_id),
                    "protocol_type": g.protocol_type,
                    "state": getattr(g, "group_state", None),
                    "type": getattr(g, "group_type", None),
                }
                if v < 4 and states and entry["state"] not in states:
                    continue
                out[entry["group"]] = entry
        rows = sorted(out.values(), key=lambda e: e["group"])
        if types and any(r["type"] is None for r in rows):
            rows = [r for r in rows if r["type"] is None or r["type"].lower() in {t.lower() for t in types}]
        return rows

    def describe_group(self, group: str) -> Any:
        """DescribeGroups (classic view of any group; Kafka 4 and groupshift describe consumer groups
        there too, members with their embedded protocol metadata)."""
        resp, _ = self._group_call(
            group, DESCRIBE_GROUPS, {"groups": [group], "include_authorized_operations": False}
        )
        return resp.groups[0]

    def consumer_group_describe(self, group: str) -> Any | None:
        """ConsumerGroupDescribe (KIP-848), or None if the coordinator does not serve it."""
        conn = self._conn(self.coordinator(group))
        if self.version(CONSUMER_GROUP_DESCRIBE, conn) is None:
            return None
        resp, v = self._call(
            CONSUMER_GROUP_DESCRIBE, {"group_ids": [group], "include_authorized_operations": False}, conn
        )
        return resp.groups[0], v

    def streams_group_describe(self, group: str, include_topology_description: bool = False) -> Any | None:
        """StreamsGroupDescribe (KIP-1071) of one group, or None if the coordinator does not serve
        it (groupshift before streams groups, Kafka before 4.1 or with streams groups off);
        `include_topology_description` asks v1 for the topology description (KIP-1331)."""
        conn = self._conn(self.coordinator(group))
        if self.version(STREAMS_GROUP_DESCRIBE, conn) is None:
            return None
        values = {
            "group_ids": [group],
            "include_authorized_operations": False,
            "include_topology_description": include_topology_description,
        }
        resp, _ = self._call(STREAMS_GROUP_DESCRIBE, values, conn)  # v1 (Kafka 4.4): AssignorName
        return resp.groups[0]

    def offset_fetch(self, group: str) -> dict[tuple[str, int], tuple[int, int | None, str | None]]:
        """All committed offsets: {(topic, partition): (offset, leader epoch or None, metadata)}."""
        values = {
            "group_id": group,
            "topics": None,
            "groups": [{"group_id": group, "topics": None, "member_id": None, "member_epoch": -1}],
            "require_stable": False,
        }
        resp, v = self._group_call(group, OFFSET_FETCH, values)
        if v >= 8:
            g = resp.groups[0]
            code, topics = code_of(g.error_code), g.topics
        else:
            code, topics = code_of(getattr(resp, "error_code", 0)), resp.topics
        if code != 0:
            raise KafkaError(code, f"OffsetFetch for group {group!r}")
        out: dict[tuple[str, int], tuple[int, int | None, str | None]] = {}
        for t in topics:
            for p in t.partitions:
                pcode = code_of(p.error_code)
                if pcode != 0:
                    raise KafkaError(pcode, f"OffsetFetch {t.name}-{p.partition_index}")
                if int(p.committed_offset) < 0:
                    continue
                epoch = getattr(p, "committed_leader_epoch", -1)
                out[(str(t.name), int(p.partition_index))] = (
                    int(p.committed_offset),
                    None if epoch is None or int(epoch) < 0 else int(epoch),
                    p.metadata,
                )
        return out

    def commit_offsets(
        self, group: str, offsets: Mapping[tuple[str, int], int]
    ) -> dict[tuple[str, int], int]:
        """OffsetCommit as Kafka's admin client alters offsets: generation -1, no member id (only
        accepted while the group is empty). Returns the per-partition error codes."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, part), off in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": part,
                    "committed_offset": off,
                    "committed_leader_epoch": -1,
                    "commit_timestamp": -1,
                    "committed_metadata": "",
                }
            )
        values = {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        resp, _ = self._group_call(group, OFFSET_COMMIT, values)
        return {
            (str(t.name), int(p.partition_index)): code_of(p.error_code)
            for t in resp.topics
            for p in t.partitions
        }

    def delete_offsets(
        self, group: str, partitions: Iterable[tuple[str, int]]
    ) -> tuple[int, dict[tuple[str, int], int]]:
        by_topic: dict[str, list[dict[str, int]]] = {}
        for topic, part in sorted(set(partitions)):
            by_topic.setdefault(topic, []).append({"partition_index": part})
        resp, _ = self._group_call(
            group,
            OFFSET_DELETE,
            {"group_id": group, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]},
        )
        per = {
            (str(t.name), int(p.partition_index)): code_of(p.error_code)
            for t in resp.topics
            for p in t.partitions
        }
        return code_of(resp.error_code), per

    def delete_groups(self, groups: Sequence[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for g in groups:
            try:
                resp, _ = self._group_call(g, DELETE_GROUPS, {"groups_names": [g]})
            except KafkaError as e:
                out[g] = e.code
                continue
            for r in resp.results:
                out[str(r.group_id)] = code_of(r.error_code)
        return out

    # -- offsets of the log -----------------------------------------------------------------------

    def list_offsets(
        self, partitions: Iterable[tuple[str, int]], timestamp: int
    ) -> dict[tuple[str, int], int]:
        """Offsets at `timestamp` (EARLIEST, LATEST or epoch ms) from each partition's leader;
        -1 where the broker has none (a timestamp past the last record)."""
        parts = sorted(set(partitions))
        if not parts:
            return {}
        leaders = self.metadata(sorted({t for t, _ in parts}))
        by_leader: dict[int, dict[str, list[int]]] = {}
        for topic, part in parts:
            leader = leaders.get(topic, {}).get(part)
            if leader is None:
                raise KafkaError(3, f"partition {topic}-{part}")  # UNKNOWN_TOPIC_OR_PARTITION
            by_leader.setdefault(leader, {}).setdefault(topic, []).append(part)
        out: dict[tuple[str, int], int] = {}
        for leader, topics in by_leader.items():
            values = {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": t,
                        "partitions": [
                            {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                            for p in ps
                        ],
                    }
                    for t, ps in topics.items()
                ],
            }
            resp, _ = self._call(LIST_OFFSETS, values, self._conn(leader))
            for t in resp.topics:
                for p in t.partitions:
                    code = code_of(p.error_code)
                    if code != 0:
                        raise KafkaError(code, f"ListOffsets {t.name}-{p.partition_index}")
                    out[(str(t.name), int(p.partition_index))] = int(p.offset)
        return out

    # -- configs ----------------------------------------------------------------------------------

    def describe_configs(self, resource_type: int, name: str) -> dict[str, dict[str, Any]]:
        """{config name: {value, source, read_only}}; an empty dict when the broker lists none.

        A broker's own configs are asked of that broker, as Kafka's admin client does: any other
        broker answers INVALID_REQUEST ("Unexpected broker id")."""
        own_node = resource_type == BROKER_RESOURCE_TYPE and name.isdigit()
        resp, _ = self._call(
            DESCRIBE_CONFIGS,
            {
                "resources": [
                    {"resource_type": resource_type, "resource_name": name, "configuration_keys": None}
                ],
                "include_synonyms": False,
                "include_documentation": False,
            },
            self._conn(int(name)) if own_node else None,
        )
        r = resp.results[0]
        code = code_of(r.error_code)
        if code != 0:
            raise KafkaError(code, f"DescribeConfigs {name!r}", r.error_message)
        return {
            str(c.name): {
                "value": c.value,
                "source": int(getattr(c, "config_source", -1)),
                "read_only": bool(c.read_only),
            }
            for c in r.configs
        }

    def alter_group_configs(self, group: str, sets: Mapping[str, str], deletes: Iterable[str]) -> None:
        """IncrementalAlterConfigs on the GROUP resource: SET (0) and DELETE (1) operations."""
        configs = [{"name": k, "config_operation": 0, "value": v} for k, v in sets.items()]
        configs += [{"name": k, "config_operation": 1, "value": None} for k in deletes]
        resp, _ = self._call(
            INCREMENTAL_ALTER_CONFIGS,
            {
                "resources": [{"resource_type": GROUP_RESOURCE, "resource_name": group, "configs": configs}],
                "validate_only": False,
            },
        )
        r = resp.responses[0]
        code = code_of(r.error_code)
        if code != 0:
            raise KafkaError(code, f"IncrementalAlterConfigs for group {group!r}", r.error_message)
