"""The differential harness: one scripted wire scenario, run against a real Apache Kafka node and
against groupshift with the same settings, the two transcripts normalised and compared field by
field.

A scenario is a function `scenario(s: Session) -> None` that speaks the Kafka protocol through
`s.call(api_key, version, **fields)`; every answer goes into the session's transcript after
normalisation:

- member ids a server generated become `<member:N>` in order of first appearance (so a scenario
  may reuse the raw id it got back, and both transcripts still line up);
- topic ids (UUIDs) become `<topic:NAME>` once the session has seen the topic's name;
- throttle times, cluster ids, node ids, hosts, ports and timestamps are dropped, since they
  legitimately differ between two servers;
- kio's wire types become plain values (error codes as Kafka's error names, durations as ms).

Both backends run the scenario at the same time (one thread each) with the same group ids and
topic names; `compare` then reports every path where the two transcripts disagree. A difference
either gets fixed in groupshift, or becomes a row in docs/deviations.md and an entry in the
scenario's `known` map (path -> reason), which `compare` checks is still a difference: a known
deviation that Kafka stops showing fails the test too, so the table cannot go stale.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from protocol.client import WireClient, make_request
from protocol.client_security import ClientSecurity

# Fields that legitimately differ between two servers; dropped wherever they occur.
DROPPED = frozenset(
    {
        "throttle_time",
        "cluster_id",
        "controller_id",
        "node_id",
        "host",
        "port",
        "rack",
        "leader_id",
        "leader_epoch",
        "commit_timestamp",
        "timestamp",
        "log_append_time",
        "log_start_offset",
        "cluster_authorized_operations",
        "endpoints",
        "brokers",
        "supported_features",
        "finalized_features",
        "finalized_features_epoch",
        "zk_migration_ready",
    }
)

# Fields holding a member id the server generated.
MEMBER_ID_FIELDS = frozenset({"member_id", "leader", "leader_id_member"})

_UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def plain(value: Any) -> Any:
    """kio entities and wire types as plain JSON-like values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return value


@dataclass
class Normaliser:
    """Maps one server's generated identifiers to stable placeholders."""

    members: dict[str, str] = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)

    def learn_topic(self, topic_id: Any, name: str) -> None:
        tid = str(topic_id)
        if tid != "00000000-0000-0000-0000-000000000000":
            self.topic_ids[tid] = f"<topic:{name}>"

    def member(self, member_id: str) -> str:
        if not member_id:
            return member_id
        if member_id not in self.members:
            self.members[member_id] = f"<member:{len(self.members) + 1}>"
        return self.members[member_id]

    def __call__(self, value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: self(v, k) for k, v in value.items() if k not in DROPPED}
        if isinstance(value, list):
            return [self(v, key) for v in value]
        if isinstance(value, str):
            if key in MEMBER_ID_FIELDS or value in self.members:
                return self.member(value)
            if _UUID_RE.match(value):
                return self.topic_ids.get(value, value)
            if key == "error_message":  # messages name members ("Member X is not a member ...")
                for raw, placeholder in self.members.items():
                    value = value.replace(raw, placeholder)
        return value


@dataclass
class Exchange:
    label: str
    response: Any


class Session:
    """One backend's side of a scenario: calls, and the normalised transcript of answers."""

    def __init__(
        self,
        backend: str,
        bootstrap: str,
        names: Mapping[str, str],
        identities: Mapping[str, ClientSecurity] | None = None,
    ) -> None:
        """`identities`: on a secured listener, how each identity a scenario speaks as (`use`)
        connects (TLS, then a SASL login: protocol.client_security); the one named "default"
        makes the first connection. Without one, a plaintext connection."""
        self.backend = backend
        host, port = bootstrap.rsplit(":", 1)
        self.host = host
        self.port = int(port)
        self.identities = dict(identities or {})
        self.clients: dict[str, WireClient] = {}
        self.client = self.connect("default")
        self.clients["default"] = self.client
        self.names = dict(names)
        self.norm = Normaliser()
        self.transcript: list[Exchange] = []

    def connect(self, identity: str = "default") -> WireClient:
        """A new connection as `identity`, logged in if the listener is secured."""
        security = self.identities.get(identity)
        if security is None:
            return WireClient(self.port, host=self.host, timeout=30.0)
        return security.connect(self.host, self.port, timeout=30.0)

    def use(self, identity: str) -> WireClient:
        """Speak as `identity` from now on (one connection per identity, kept)."""
        if identity not in self.clients:
            self.clients[identity] = self.connect(identity)
        self.client = self.clients[identity]
        return self.client

    def close(self) -> None:
        for c in self.clients.values():
            c.close()

    # -- names shared by both backends -------------------------------------------------------

    def group(self, name: str = "g") -> str:
        return self.names.setdefault(f"group:{name}", f"{name}-{self.names['run']}")

    def topic(self, name: str = "t") -> str:
        return self.names.setdefault(f"topic:{name}", f"{name}-{self.names['run']}")

    # -- calls --------------------------------------------------------------------------------

    def raw(self, api_key: int, version: int, **fields: Any) -> Any:
        """Send a request and return the decoded response, recording nothing."""
        return self.client.request(make_request(api_key, version, **fields))

    def call(self, api_key: int, version: int, label: str | None = None, **fields: Any) -> Any:
        """Send a request, record its normalised answer, return the raw decoded response."""
        response = self.raw(api_key, version, **fields)
        as_plain = plain(response)
        self._learn(as_plain)
        self.transcript.append(Exchange(label or f"api{api_key}v{version}", self.norm(as_plain)))
        return response

    def note(self, label: str, value: Any) -> None:
        """Record a derived value (e.g. a sorted assignment) in the transcript."""
        as_plain = plain(value)
        self._learn(as_plain)
        self.transcript.append(Exchange(label, self.norm(as_plain)))

    def _learn(self, value: Any) -> None:
        """Learn topic ids from any answer that pairs a name with an id."""
        if isinstance(value, dict):
            name = value.get("name") if "name" in value else value.get("topic")
            tid = value.get("topic_id")
            if isinstance(name, str) and tid is not None:
                self.norm.learn_topic(tid, name)
            for v in value.values():
                self._learn(v)
        elif isinstance(value, list):
            for v in value:
                self._learn(v)

    # -- set-up helpers (not recorded) --------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 3, timeout: float = 30.0) -> str:
        """Create a topic and wait until every partition has a leader; returns its id."""
        self.raw(
            19,
            5,
            topics=[
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            timeout=30000,
            validate_only=False,
        )
        deadline = time.monotonic() + timeout
        while True:
            md = plain(
                self.raw(
                    3,
                    12,
                    topics=[{"name": name, "topic_id": uuid.UUID(int=0)}],
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
            )
            (t,) = md["topics"]
            if (
                t["error_code"] == "none"
                and len(t["partitions"]) == partitions
                and all(p["leader_id"] >= 0 for p in t["partitions"])
            ):
                self.norm.learn_topic(t["topic_id"], name)
                return str(t["topic_id"])
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.backend}: topic {name} not ready: {t}")
            time.sleep(0.1)

    def topic_id(self, name: str) -> uuid.UUID:
        for tid, placeholder in self.norm.topic_ids.items():
            if placeholder == f"<topic:{name}>":
                return uuid.UUID(tid)
        raise KeyError(name)

    def wait_coordinator(self, group: str, timeout: float = 30.0) -> None:
        """FindCoordinator until the group's coordinator is available (Kafka creates
        `__consumer_offsets` on the first lookup and answers COORDINATOR_NOT_AVAILABLE meanwhile)."""
        deadline = time.monotonic() + timeout
        while True:
            r = plain(self.raw(10, 4, key_type=0, coordinator_keys=[group]))
            (c,) = r["coordinators"]
            if c["error_code"] == "none":
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.backend}: no coordinator for {group}: {c}")
            time.sleep(0.2)


Scenario = Callable[[Session], None]


@dataclass
class Outcome:
    kafka: list[Exchange]
    groupshift: list[Exchange]
    errors: dict[str, BaseException]


def run_both(
    scenario: Scenario,
    kafka_bootstrap: str,
    groupshift_bootstrap: str,
    identities: Mapping[str, ClientSecurity] | None = None,
) -> Outcome:
    """Run `scenario` against both backends at once, with the same names (and, on secured
    listeners, the same client identities: the same users logging in the same way)."""
    names = {"run": uuid.uuid4().hex[:10]}
    sessions = {
        "kafka": Session("kafka", kafka_bootstrap, names, identities),
        "groupshift": Session("groupshift", groupshift_bootstrap, names, identities),
    }
    return run_sessions(scenario, sessions)


def run_sessions(scenario: Scenario, sessions: Mapping[str, Session]) -> Outcome:
    """Run `scenario` on the `kafka` and `groupshift` sessions at once, one thread each, and
    close them; an exception of either side is kept for the comparison to report."""
    errors: dict[str, BaseException] = {}

    def drive(name: str) -> None:
        try:
            scenario(sessions[name])
        except BaseException as e:  # reported with the comparison
            errors[name] = e

    threads = [threading.Thread(target=drive, args=(n,), daemon=True) for n in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    for s in sessions.values():
        s.close()
    return Outcome(sessions["kafka"].transcript, sessions["groupshift"].transcript, errors)


def _walk(a: Any, b: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            yield from _walk(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _walk(x, y, f"{path}[{i}]")
    elif a != b:
        yield path, a, b


def differences(outcome: Outcome) -> dict[str, tuple[Any, Any]]:
    """Every path (`label#index.field...`) where the two transcripts disagree."""
    diffs: dict[str, tuple[Any, Any]] = {}
    k, g = outcome.kafka, outcome.groupshift
    for i in range(max(len(k), len(g))):
        ke = k[i] if i < len(k) else Exchange("<missing>", "<missing>")
        ge = g[i] if i < len(g) else Exchange("<missing>", "<missing>")
        label = ke.label if ke.label == ge.label else f"{ke.label}|{ge.label}"
        for path, a, b in _walk(ke.response, ge.response, f"{label}#{i}"):
            diffs[path] = (a, b)
    return diffs


def compare(outcome: Outcome, known: Mapping[str, str] | None = None) -> None:
    """Fail with a readable report unless the transcripts agree everywhere but on `known`
    paths (regular expressions, each with the reason), each of which must still differ."""
    if outcome.errors:
        raise AssertionError(
            "scenario raised: "
            + "; ".join(f"{b}: {type(e).__name__}: {e}" for b, e in outcome.errors.items())
        )
    known = dict(known or {})
    diffs = differences(outcome)
    unexplained = {p: d for p, d in diffs.items() if not any(re.search(k, p) for k in known)}
    stale = [k for k in known if not any(re.search(k, p) for p in diffs)]
    lines = []
    for path, (a, b) in unexplained.items():
        lines.append(f"  {path}: kafka={a!r} groupshift={b!r}")
    for k in stale:
        lines.append(f"  known deviation {k!r} ({known[k]}) no longer differs")
    if lines:
        raise AssertionError("kafka and groupshift disagree:\n" + "\n".join(lines))
