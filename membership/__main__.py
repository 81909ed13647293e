"""`python -m membership`: the leader-election example, one process per candidate.

Each process joins `--group` with its `--name` as identity and prints one JSON line per event on
stdout (`joined`, `elected`, `following`, `demoted`, `fatal`), flushed at once, so a test or an
operator sees who leads. SIGTERM or SIGINT closes the member (a dynamic member leaves the group,
so the others elect a new leader at once instead of after the session timeout).

    python -m membership --bootstrap 127.0.0.1:9092 --group election --name a
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from membership.command_line import run_command, run_until_signalled
from membership.core import MembershipError
from membership.leader_election import LeaderElection, Leadership
from protocol.client_security import ClientSecurity


def _say(event: str, **fields: object) -> None:
    print(json.dumps({"event": event, "at": time.time(), **fields}), flush=True)


async def _main(args: argparse.Namespace) -> int:
    security = ClientSecurity.from_file(args.command_config) if args.command_config else None

    def elected(leadership: Leadership) -> None:
        _say("elected", name=args.name, generation=leadership.generation, member_id=leadership.member_id)

    def following(leadership: Leadership) -> None:
        if not leadership.is_leader:
            _say(
                "following",
                name=args.name,
                generation=leadership.generation,
                leader=leadership.leader_identity.decode(errors="replace"),
            )

    def demoted(reason: str) -> None:
        _say("demoted", name=args.name, reason=reason)

    election = LeaderElection(
        args.bootstrap,
        args.group,
        args.name.encode(),
        on_elected=elected,
        on_demoted=demoted,
        on_leader=following,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        rebalance_timeout_ms=args.rebalance_timeout_ms,
        group_instance_id=args.group_instance_id,
        security=security,
    )
    return await run_until_signalled(
        election.membership.start,
        election.close,
        fatal=MembershipError,
        name=args.name,
        joining={"group": args.group},
        say=_say,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m membership", description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True, help="host:port[,host:port...]")
    parser.add_argument("--group", required=True)
    parser.add_argument("--name", required=True, help="this candidate's identity")
    parser.add_argument("--session-timeout-ms", type=int, default=10_000)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=1_000)
    parser.add_argument("--rebalance-timeout-ms", type=int, default=10_000)
    parser.add_argument("--group-instance-id", default=None, help="static membership (KIP-345)")
    parser.add_argument("--command-config", default=None, help="Kafka client properties (TLS, SASL)")
    args = parser.parse_args(argv)
    return run_command(lambda: _main(args))


if __name__ == "__main__":
    sys.exit(main())
