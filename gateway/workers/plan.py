"""Where each worker of `serve --workers N` listens and keeps its files (docs/workers.md).

Kafka gives every broker its own listener and node id; the workers do the same on one host:
worker i is node `node.id + i` on the configured host at the configured port + i, so a client
that bootstraps at the configured address (worker 0) learns the others from Metadata. Worker 0
uses the data directory as it is (topics, partitions, `meta.properties`, the coordinator logs);
worker i > 0 keeps its own small state in `<data dir>/workers/<i>` (its `.lock`, which is also
the lock of the shards it owns, and its per-group configs) and opens the coordinator logs of
its shards in the shared `<data dir>/coordinator`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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
    listeners: str, advertised: str | None, port: int, *, authorizer: bool, upstream: bool
) -> str | None:
    """Why these settings cannot run several workers (None: they can). This slice supports one
    PLAINTEXT listener at a fixed port, no advertised addresses and no authorizer: a worker
    forwards the data plane's requests to worker 0 on a plain connection of its own."""
    if upstream:
        return (
            "--workers > 1 is for embedded mode; upstream mode scales out with "
            "upstream.coordinator.storage=kafka (docs/scale-out.md)"
        )
    if "," in listeners or ("://" in listeners and not listeners.upper().startswith("PLAINTEXT://")):
        return f"--workers > 1 needs one PLAINTEXT listener (listeners={listeners})"
    if advertised:
        return "--workers > 1 does not support advertised.listeners yet"
    if port == 0:
        return "--workers > 1 needs a fixed port (worker i listens on the port + i), not 0"
    if authorizer:
        return "--workers > 1 does not support authorizer.class.name yet"
    return None
