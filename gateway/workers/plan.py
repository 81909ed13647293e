"""Where each worker of `serve --workers N` listens and keeps its files (docs/workers.md).

Kafka gives every broker its own listener and node id; the workers do the same on one host:
worker i is node `node.id + i` on the configured host at the configured port + i (and each
further listener at its own port + i), so a client that bootstraps at the configured address
(worker 0) learns the others from Metadata. Worker 0 uses the data directory as it is (topics,
partitions, `meta.properties`, the coordinator logs); worker i > 0 keeps its own small state
in `<data dir>/workers/<i>` (its `.lock`, which is also the lock of the shards it owns, and its
per-group configs) and opens the coordinator logs of its shards in the shared
`<data dir>/coordinator`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gateway.listeners import Listener

WORKERS_DIR = "workers"


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    index: int
    count: int
    host: str
    base_port: int
    base_node_id: int
    shared_dir: Path

    def port_of(self, index: int) -> int:
        return self.base_port + index

    def node_of(self, index: int) -> int:
        return self.base_node_id + index

    @property
    def node_id(self) -> int:
        return self.node_of(self.index)

    @property
    def data_dir(self) -> Path:
        """This worker's own data directory (worker 0: the configured one)."""
        return self.shared_dir if self.index == 0 else self.shared_dir / WORKERS_DIR / str(self.index)

    def owner_of_shard(self, shard: int) -> int:
        """The worker that owns coordinator shard `shard`: static, shard mod N."""
        return shard % self.count

    def owns(self, shard: int) -> bool:
        return self.owner_of_shard(shard) == self.index


def refusal(
    listeners: Sequence[Listener], advertised: str | None, *, authorizer: bool, upstream: bool
) -> str | None:
    """Why these settings cannot run several workers (None: they can). Every listener needs a
    fixed port (worker i listens on each one's port + i, and tells clients its peers' addresses
    from that rule), the first one PLAINTEXT (a worker forwards the data plane's requests to
    worker 0's first listener on a plain connection of its own), no advertised addresses and no
    authorizer (the forwarded requests carry no client identity)."""
    if upstream:
        return (
            "--workers > 1 is for embedded mode; upstream mode scales out with "
            "upstream.coordinator.storage=kafka (docs/scale-out.md)"
        )
    if not listeners or listeners[0].protocol != "PLAINTEXT":
        names = ",".join(f"{lst.name}({lst.protocol})" for lst in listeners)
        return f"--workers > 1 needs a PLAINTEXT listener first (listeners: {names})"
    if advertised:
        return "--workers > 1 does not support advertised.listeners yet"
    for lst in listeners:
        if lst.port == 0:
            return (
                "--workers > 1 needs a fixed port for every listener (worker i listens on "
                f"each port + i), not 0 (listener {lst.name})"
            )
    if authorizer:
        return "--workers > 1 does not support authorizer.class.name yet"
    return None


def worker_listeners(listeners: Sequence[Listener], index: int) -> str:
    """The `listeners` setting of worker `index`: every listener at its port + index."""
    return ",".join(f"{lst.name}://{_host_port(lst.host, lst.port + index)}" for lst in listeners)


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
