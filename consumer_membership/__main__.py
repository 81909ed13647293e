"""`python -m consumer_membership`: one consumer-group member with a client-side assignor, printing
one JSON line per event (joining, joined, assigned, revoked, computing, computed, fatal, closed); SIGTERM
closes it (revoke, leave). A runnable example of the client, and what the e2e tests start.

`--assignor sticky[:MIN:MAX:VERSION]` (the version range this member reads and the version of
its metadata), `sticky-rack[:...]` (rack-aware) or `cooperative-sticky`. Two switches exist for
demonstrations and tests of the coordinator's rules: `--fail-file F` makes the assignor raise
while F exists (the group keeps its target), `--hang-file F` makes it block the member while F
exists (no heartbeat, no install: the coordinator's rebalance timeout fences it).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from consumer_membership.assignor import Assignor, AssignorError, GroupAssignment, GroupState
from consumer_membership.client import ConsumerMembership
from consumer_membership.cooperative_sticky import CooperativeStickyAdapter
from consumer_membership.core import ConsumerMembershipError, TopicPartition
from consumer_membership.sticky import StickyAssignor
from membership.command_line import run_command, run_until_signalled, say, say_computed
from protocol.client_security import ClientSecurity


def _partitions(ps: frozenset[TopicPartition]) -> list[list[Any]]:
    return sorted([str(t), p] for t, p in ps)


class _Switched(Assignor):
    """The chosen assignor behind the example's fault switches."""

    def __init__(self, inner: Assignor, name: str, fail_file: str | None, hang_file: str | None) -> None:
        self.inner = inner
        self.who = name
        self.fail_file = fail_file
        self.hang_file = hang_file
        self.name = inner.name
        self.minimum_version = inner.minimum_version
        self.maximum_version = inner.maximum_version
        self.metadata_version = inner.metadata_version
        self.uses_partition_racks = inner.uses_partition_racks

    def metadata(self) -> bytes:
        return self.inner.metadata()

    def assign(self, group: GroupState) -> GroupAssignment:
        say(
            "computing",
            name=self.who,
            group_epoch=group.group_epoch,
            members=[m.member_id for m in group.members],
        )
        while self.hang_file and os.path.exists(self.hang_file):
            time.sleep(0.1)  # blocks the member's loop on purpose: it stops heartbeating
        if self.fail_file and os.path.exists(self.fail_file):
            raise AssignorError("failing on purpose (--fail-file)", 7)
        return self.inner.assign(group)


def _assignor(spec: str) -> Assignor:
    kind, _, versions = spec.partition(":")
    if kind == "cooperative-sticky":
        return CooperativeStickyAdapter()
    if kind not in ("sticky", "sticky-rack"):
        raise SystemExit(f"unknown assignor {spec!r}")
    lo, hi, version = (int(v) for v in versions.split(":")) if versions else (0, 0, 0)
    return StickyAssignor(
        rack_aware=kind == "sticky-rack", minimum_version=lo, maximum_version=hi, metadata_version=version
    )


async def _main(args: argparse.Namespace) -> int:
    security = ClientSecurity.from_file(args.command_config) if args.command_config else None
    name = args.name
    member = ConsumerMembership(
        args.bootstrap,
        args.group,
        args.topic,
        [_Switched(_assignor(args.assignor), name, args.fail_file, args.hang_file)],
        on_assigned=lambda ps: say(
            "assigned", name=name, epoch=member.epoch, added=_partitions(ps), owned=_partitions(member.owned)
        ),
        on_revoked=lambda ps, lost: say("revoked", name=name, lost=lost, partitions=_partitions(ps)),
        on_computed=lambda c: say_computed(name, c),
        on_joined=lambda j: say("joined", name=name, member_id=j.member_id, epoch=j.epoch),
        rebalance_timeout_ms=args.rebalance_timeout_ms,
        rack_id=args.rack,
        security=security,
    )
    return await run_until_signalled(
        member.start,
        member.close,
        fatal=ConsumerMembershipError,
        name=name,
        joining={"group": args.group, "member_id": member.member_id},
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m consumer_membership", description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True, help="host:port[,host:port...]")
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", action="append", required=True, help="a subscribed topic (repeat)")
    parser.add_argument("--name", required=True, help="this member's name in the events")
    parser.add_argument(
        "--assignor", default="sticky", help="sticky[:MIN:MAX:VERSION], sticky-rack[...], cooperative-sticky"
    )
    parser.add_argument("--rack", default=None, help="client.rack")
    parser.add_argument("--rebalance-timeout-ms", type=int, default=30_000)
    parser.add_argument("--fail-file", default=None)
    parser.add_argument("--hang-file", default=None)
    parser.add_argument("--command-config", default=None, help="Kafka client properties (TLS, SASL)")
    args = parser.parse_args(argv)
    return run_command(lambda: _main(args))


if __name__ == "__main__":
    sys.exit(main())
