"""Where a matrix cell's client processes run: local processes or Docker containers.

The runner drives every client the same way, as a "verifiable consumer/producer" process that
prints JSON lines on stdout in the shape of Kafka's `VerifiableConsumer` (`startup_complete`,
`partitions_assigned`, `partitions_revoked`, `records_consumed`, `offsets_committed`,
`shutdown_complete`, each with a `timestamp` in ms). A `Runtime` only decides *where* such a
process runs; the same cell must give the same verdict in every runtime. Containers use host
networking, so the loopback addresses the runner hands to clients work unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

#: A cell's verdict when it could not run because its client library is not installed in the
#: runner's environment: not a failure of the server, so not red (the reason has the install command).
NOT_RUN = "not run"


class ClientNotInstalled(RuntimeError):
    """The grid asks for a client library as `installed` and the runner's interpreter cannot
    import it (a README install has groupshift only): the cell is not run, and the message says
    how to install it or how to let the matrix build its own virtualenv."""


@dataclass(frozen=True)
class ClientSpec:
    """One client library at one version, e.g. ("confluent-kafka", "2.12.1") or ("java", "3.9.1")."""

    library: str
    version: str

    @property
    def key(self) -> str:
        return f"{self.library}-{self.version}"


class ClientHandle(Protocol):
    """A running client process (or container)."""

    def lines(self) -> Iterator[str]:
        """Its stdout, one JSON event per line, until it exits."""
        ...

    def terminate(self) -> None:
        """Ask it to shut down cleanly (SIGTERM): it leaves the group and prints shutdown_complete."""
        ...

    def kill(self) -> None:
        """SIGKILL: no leave, the coordinator must expire it."""
        ...

    def wait(self, timeout: float) -> int:
        """Its exit code; raises TimeoutError if it is still running after `timeout` seconds."""
        ...


class Runtime(Protocol):
    """A place to run clients."""

    name: str  # "process" or "docker"

    def prepare(self, client: ClientSpec) -> None:
        """Make `client` runnable (cached virtualenv, jars, image); idempotent, safe to call often."""
        ...

    def spawn(self, client: ClientSpec, argv: Sequence[str], env: Mapping[str, str]) -> ClientHandle:
        """Start `argv` (relative to the repository root, which is the working directory) with the
        client's interpreter or classpath already resolved by the runtime."""
        ...

    def close(self) -> None:
        """Stop whatever this runtime started (containers, an engine it started itself)."""
        ...
