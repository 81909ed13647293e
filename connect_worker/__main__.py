"""`python -m connect_worker`: one Kafka Connect worker of a connect group on the new protocol,
printing one JSON line per event (joining, joined, revoked, lost, assigned, computing, computed,
fatal, closed), each with what the worker then runs; SIGTERM closes it (revoke, leave). A runnable
example of the SDK, and what the e2e test starts.

`--connectors name:tasks,name:tasks` is the configuration this worker has read (Kafka Connect
reads it from the config topic), at `--config-offset`; the assignor uses the newest
configuration any worker has read.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from connect_worker.assignor import (
    ConnectGroupState,
    ConnectorConfig,
    IncrementalCooperativeAssignor,
    TaskId,
    WorkerAssignment,
)
from connect_worker.client import ConnectWorker
from connect_worker.core import ConnectWorkerError
from membership.command_line import run_command, run_until_signalled, say, say_computed
from protocol.client_security import ClientSecurity


def _tasks(tasks: frozenset[TaskId]) -> list[str]:
    return [f"{c}-{t}" for c, t in sorted(tasks)]


def parse_connectors(spec: str) -> dict[str, int]:
    """`name:tasks,name:tasks` (a name alone: one task)."""
    out: dict[str, int] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, count = item.partition(":")
        if not name or (count and not count.isdigit()):
            raise ValueError(f"connector {item!r} is not name[:tasks]")
        out[name] = int(count) if count else 1
    return out


class _Logged(IncrementalCooperativeAssignor):
    """The assignor, saying when it runs."""

    def __init__(self, config: ConnectorConfig, name: str) -> None:
        super().__init__(config)
        self.who = name

    def assign(self, group: ConnectGroupState) -> dict[str, WorkerAssignment]:
        say(
            "computing",
            name=self.who,
            group_epoch=group.group_epoch,
            workers=[w.member_id for w in group.workers],
            held=[{"url": h.url, "remaining_ms": h.remaining_ms, **h.work.as_json()} for h in group.held],
        )
        return super().assign(group)


async def _main(args: argparse.Namespace) -> int:
    security = ClientSecurity.from_file(args.command_config) if args.command_config else None
    name = args.name
    config = ConnectorConfig(args.config_offset, parse_connectors(args.connectors))

    def owned() -> dict[str, list[str]]:
        return worker.owned.as_json()

    def change(event: str) -> Any:
        return lambda cs, ts: say(
            event, name=name, epoch=worker.epoch, connectors=sorted(cs), tasks=_tasks(ts), owned=owned()
        )

    worker = ConnectWorker(
        args.bootstrap,
        args.group,
        args.url or f"http://{name}:8083",
        [_Logged(config, name)],
        config_offset=args.config_offset,
        on_assigned=change("assigned"),
        on_revoked=change("revoked"),
        on_lost=change("lost"),
        on_computed=lambda c: say_computed(name, c),
        on_joined=lambda j: say("joined", name=name, member_id=j.member_id, epoch=j.epoch),
        rebalance_timeout_ms=args.rebalance_timeout_ms,
        security=security,
    )
    return await run_until_signalled(
        worker.start,
        worker.close,
        fatal=ConnectWorkerError,
        name=name,
        joining={"group": args.group, "member_id": worker.member_id},
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m connect_worker", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--bootstrap", required=True, help="host:port[,host:port...]")
    parser.add_argument("--group", required=True)
    parser.add_argument("--connectors", required=True, help="name:tasks[,name:tasks...]")
    parser.add_argument("--config-offset", type=int, default=1)
    parser.add_argument("--name", default="worker", help="this worker's name in the events")
    parser.add_argument("--url", default=None, help="the worker's REST URL (default http://NAME:8083)")
    parser.add_argument("--rebalance-timeout-ms", type=int, default=30_000)
    parser.add_argument("--command-config", default=None, help="Kafka client properties (TLS, SASL)")
    args = parser.parse_args(argv)
    try:
        parse_connectors(args.connectors)
    except ValueError as exc:
        parser.error(str(exc))
    return run_command(lambda: _main(args))


if __name__ == "__main__":
    sys.exit(main())
