"""The matrix: cells and the TOML files that describe them.

A grid file lists blocks of cells; every key of a block is one value or a list of values, and a
block stands for the cross product of its lists:

    name = "mine"
    reference = "kafka-4"          # every groupshift cell gets this twin ("" for none)

    [[cells]]
    clients = ["kafka-python@2.0.2", "java@3.9"]   # LIBRARY@VERSION
    protocols = ["classic"]        # the group protocol the members start with (classic,
                                   # consumer; classic or streams for kafka-streams@VERSION;
                                   # classic for kafka-connect@VERSION)
    assignors = ["range", "cooperative-sticky"]   # the classic members' assignor
    static = [false, true]         # static membership (group.instance.id)
    scenarios = ["rolling-upgrade"]
    policies = ["upgrade", "bidirectional"]       # group.consumer.migration.policy
    backends = ["groupshift", "groupshift-kafka-3.9"]

Combinations that do not apply (a rolling upgrade under the `downgrade` policy, static
membership for a client without KIP-345, cooperative-sticky in aiokafka, the `streams` protocol
for Kafka Streams 3.x, a Kafka Connect cell on Kafka, ...) are dropped when
the grid is expanded; `groupshift matrix list` shows what is left. Built-in grids: `smoke` (CI),
`default`, `full`, `streams-smoke`, `connect-smoke` (harness/matrix/builtin.py).
"""

from __future__ import annotations

import fnmatch
import itertools
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.matrix import clients as cl
from harness.matrix.backends import BACKENDS, POLICIES
from harness.matrix.runtime import ClientSpec

SCENARIOS = (
    "add-remove",
    "static-bounce",
    "offline-migration",
    "rolling-upgrade",
    "rolling-downgrade",
    "flapping",
    "sdk-worker-conversion",
)
LIBRARIES = (
    "kafka-python",
    "aiokafka",
    "confluent-kafka",
    "java",
    "franz-go",
    "sarama",
    cl.STREAMS_LIBRARY,
    cl.CONNECT_LIBRARY,
)
#: What a Kafka Streams cell can run: its instances are dynamic members, and flapping (one
#: instance switching protocol three times) would add nothing the rolls do not show.
STREAMS_SCENARIOS = ("add-remove", "offline-migration", "rolling-upgrade", "rolling-downgrade")
#: What a Kafka Connect cell runs (harness/matrix/connect_scenario.py): three classic workers, one
#: replaced by an SDK worker (the group converts to a connect group), the SDK worker leaving
#: (it converts back). Only this: the consumer scenarios drive consumers, not workers.
CONNECT_SCENARIOS = ("sdk-worker-conversion",)
DIMENSIONS = ("client", "protocol", "assignor", "static", "scenario", "policy", "backend")
_KEYS = {
    "clients": "client",
    "protocols": "protocol",
    "assignors": "assignor",
    "static": "static",
    "scenarios": "scenario",
    "policies": "policy",
    "backends": "backend",
}
DEFAULTS: dict[str, Any] = {
    "protocol": "classic",
    "assignor": "range",
    "static": False,
    "policy": "bidirectional",
    "backend": "groupshift",
}


@dataclass(frozen=True, order=True)
class Cell:
    client: str
    protocol: str
    assignor: str
    static: bool
    scenario: str
    policy: str
    backend: str

    @property
    def id(self) -> str:
        membership = "static" if self.static else "dynamic"
        return "/".join(
            (self.client, self.protocol, self.assignor, membership, self.scenario, self.policy, self.backend)
        )

    @property
    def spec(self) -> ClientSpec:
        return cl.parse_client(self.client)

    def reference(self, backend: str) -> Cell:
        return replace(self, backend=backend)

    def dimensions(self) -> dict[str, Any]:
        return asdict(self)


def applicable(cell: Cell) -> str | None:
    """None if the cell makes sense, else why not."""
    try:
        c = cell.spec
    except ValueError as e:
        return str(e)
    if c.library not in LIBRARIES:
        return f"unknown client library {c.library!r}"
    if cell.scenario not in SCENARIOS:
        return f"unknown scenario {cell.scenario!r}"
    if cell.policy not in POLICIES:
        return f"unknown migration policy {cell.policy!r}"
    if cell.protocol not in ("classic", "consumer", "streams"):
        return f"unknown group protocol {cell.protocol!r}"
    if not (cell.backend in BACKENDS or cell.backend.startswith(("kafka-", "groupshift-kafka-"))):
        return f"unknown backend {cell.backend!r}"
    if (c.library == cl.CONNECT_LIBRARY) != (cell.scenario in CONNECT_SCENARIOS):
        if c.library == cl.CONNECT_LIBRARY:
            return f"no Kafka Connect {cell.scenario} scenario (only {', '.join(CONNECT_SCENARIOS)})"
        return f"{cell.scenario} is a Kafka Connect scenario (clients kafka-connect@VERSION)"
    if c.library == cl.CONNECT_LIBRARY:
        return _connect_applicable(cell)
    new = cl.new_protocol(c)
    if cell.protocol not in ("classic", new):
        return f"{cell.client} members speak classic or {new}, not {cell.protocol}"
    if c.library == cl.STREAMS_LIBRARY and cell.scenario not in STREAMS_SCENARIOS:
        return f"no Kafka Streams {cell.scenario} scenario (static members and flapping are not driven)"
    if not cell.static and cl.requires_static(c):
        return f"{cell.client}'s VerifiableConsumer requires --group-instance-id (static members only)"
    if cell.static and not cl.supports_static(c):
        if c.library == cl.STREAMS_LIBRARY:
            return "the matrix runs Kafka Streams instances without static membership"
        return f"{cell.client} has no static membership"
    if cell.scenario == "static-bounce" and not cell.static:
        return "a static-member bounce needs static membership"
    single = cell.scenario in ("add-remove", "static-bounce")
    if single and cell.protocol == new and not cl.speaks(c, new):
        return f"{cell.client} does not speak the {new} protocol"
    if cell.scenario == "rolling-upgrade":
        if cell.protocol != "classic":
            return "a rolling upgrade starts from the classic protocol"
        if cell.policy not in ("upgrade", "bidirectional"):
            return "online upgrades need the upgrade or bidirectional policy"
    if cell.scenario == "rolling-downgrade":
        if cell.protocol != new:
            return f"a rolling downgrade starts from the {new} protocol"
        if cell.policy not in ("downgrade", "bidirectional"):
            return "online downgrades need the downgrade or bidirectional policy"
    if cell.scenario == "flapping" and cell.policy != "bidirectional":
        return "flapping needs the bidirectional policy"
    if c.library == cl.STREAMS_LIBRARY:
        if cell.assignor != "streams":
            return "Kafka Streams assigns its own tasks (assignor = streams)"
        return None
    uses_classic = not (single and cell.protocol == "consumer")
    if uses_classic and cell.assignor not in cl.classic_assignors(c):
        return f"{cell.client} has no classic assignor {cell.assignor!r}"
    if not uses_classic and cell.assignor != "server":
        return "consumer-protocol members use the server's assignor (assignor = server)"
    return None


def _connect_applicable(cell: Cell) -> str | None:
    """A Kafka Connect cell: the classic workers start the group, only on groupshift (Kafka has
    no connect groups: its reference twin would only refuse the SDK worker's unknown API), and
    both conversions need the bidirectional policy."""
    if cell.protocol != "classic":
        return "a Kafka Connect cluster starts as classic workers (protocol = classic)"
    if cell.assignor != "sessioned":
        return "Kafka Connect workers assign with their own leader (assignor = sessioned)"
    if cell.static:
        return "Kafka Connect workers have no static membership"
    if cell.policy != "bidirectional":
        return "the SDK worker's conversion and the conversion back need the bidirectional policy"
    if not cell.backend.startswith("groupshift"):
        return "Kafka has no connect groups (the SDK worker's ConnectGroupHeartbeat is groupshift's)"
    if cell.backend != "groupshift":
        return "Kafka Connect cells run on groupshift embedded only (not verified in front of Kafka)"
    return None


@dataclass
class Grid:
    name: str
    cells: list[Cell]
    dropped: list[tuple[Cell, str]]
    reference: str
    universe: list[Cell] = field(default_factory=list)  # the cells before --only

    def __post_init__(self) -> None:
        if not self.universe:
            self.universe = list(self.cells)

    def only(self, terms: str | None) -> Grid:
        if not terms:
            return self
        return replace(self, cells=[c for c in self.cells if matches(c, terms)], universe=self.universe)


def matches(cell: Cell, terms: str) -> bool:
    """`--only`: comma-separated terms, all must match; `key=glob` matches one dimension
    (client, protocol, assignor, static, scenario, policy, backend), a bare glob the cell id;
    a term starting with `!` must not match."""
    dims = {k: str(v).lower() for k, v in cell.dimensions().items()}
    for term in (t.strip() for t in terms.split(",")):
        negate = term.startswith("!")
        term = term.removeprefix("!")
        if not term:
            continue
        key, eq, pattern = term.partition("=")
        if eq:
            if key not in dims:
                raise ValueError(f"--only: no dimension {key!r} (one of {', '.join(DIMENSIONS)})")
            hit = fnmatch.fnmatch(dims[key], pattern.lower())
        else:
            hit = fnmatch.fnmatch(cell.id.lower(), f"*{term.lower()}*")
        if hit == negate:
            return False
    return True


def _values(block: Mapping[str, Any], key: str, dim: str) -> list[Any]:
    v = block.get(key, block.get(dim, DEFAULTS.get(dim)))
    if v is None:
        raise ValueError(f"a [[cells]] block needs {key!r}")
    return list(v) if isinstance(v, list) else [v]


def expand(data: Mapping[str, Any], name: str) -> Grid:
    unknown = set(data) - {"name", "reference", "cells", "description"}
    if unknown:
        raise ValueError(f"grid {name}: unknown keys {sorted(unknown)}")
    reference = str(data.get("reference", "kafka-4"))
    cells: list[Cell] = []
    dropped: list[tuple[Cell, str]] = []
    seen: set[Cell] = set()
    for block in data.get("cells", []):
        bad = set(block) - set(_KEYS) - set(_KEYS.values())
        if bad:
            raise ValueError(f"grid {name}: unknown keys in [[cells]]: {sorted(bad)}")
        lists = [_values(block, key, dim) for key, dim in _KEYS.items()]
        for combo in itertools.product(*lists):
            c = Cell(*(str(v) if not isinstance(v, bool) else v for v in combo))  # type: ignore[arg-type]
            if c.protocol == "consumer" and c.scenario in ("add-remove", "static-bounce"):
                c = replace(c, assignor="server")
            if c.client.startswith(f"{cl.STREAMS_LIBRARY}@"):
                c = replace(c, assignor="streams")  # no choice: one cell whatever the block lists
            if c.client.startswith(f"{cl.CONNECT_LIBRARY}@"):
                c = replace(c, assignor="sessioned")
            twins = [c]
            if reference and c.backend.startswith("groupshift"):
                twins.append(c.reference(reference))
            for cell in twins:
                if cell in seen:
                    continue
                seen.add(cell)
                why = applicable(cell)
                if why is None:
                    cells.append(cell)
                else:
                    dropped.append((cell, why))
    return Grid(str(data.get("name", name)), cells, dropped, reference)


def load_grid(name_or_path: str) -> Grid:
    from harness.matrix.builtin import GRIDS

    if name_or_path in GRIDS:
        return expand(tomllib.loads(GRIDS[name_or_path]), name_or_path)
    path = Path(name_or_path)
    if not path.exists():
        raise ValueError(f"no built-in grid or file {name_or_path!r} (built-in: {', '.join(GRIDS)})")
    with open(path, "rb") as f:
        return expand(tomllib.load(f), path.stem)


def client_specs(cells: Iterable[Cell]) -> list[ClientSpec]:
    """Every client a run needs, partners included, in first-use order."""
    out: list[ClientSpec] = []
    for cell in cells:
        for spec in (cell.spec, cl.partner(cell.spec)):
            if spec not in out:
                out.append(spec)
    return out
