"""What stops a classic Kafka Connect group (distributed workers on JoinGroup/SyncGroup, protocol
type `connect`) from becoming a connect group (groupshift's Connect draft, docs/connect-groups.md)
when an SDK worker joins (issue 32): one set of rules, read by `check upgrade` and the migration
view (tools/groups/connect_classic.py), and by the engine's conversion
(translation/connect_upgrade.py), so that what the operator is told and what the server does
agree. The rules name what blocks it, from the workers' decoded metadata
(translation/connect_classic_protocol.py):

- the sub-protocol `default` (Connect's eager ConnectProtocol v0): its workers stop everything at
  every rebalance and their assignment has no `revoked` field, so a worker cannot be told to stop
  one connector and keep the rest, which the connect group's revoke-before-assign needs; and a
  protocol name Connect does not define;
- a worker whose metadata or assignment does not decode, or that speaks a version above 2 (a
  Connect newer than groupshift reads) or not the group's sub-protocol's version;
- the leader's assignment reporting an error (CONFIG_MISMATCH: the workers are re-reading the
  config topic; wait);
- a connector or task that two workers' allocations both say they run: the connect group would
  take each worker's allocation as what it owns, and give nothing to two workers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from translation.connect_classic_protocol import EAGER, LATEST_VERSION, SUB_PROTOCOL_VERSIONS

# The online conversion of a classic Connect group is built (translation/connect_upgrade.py,
# which reads these rules): an SDK worker's join converts a group none of them blocks.
CONVERSION_BUILT = True


class ConnectWorkerFacts(Protocol):
    """What the rules read of one classic Connect worker (its decoded metadata and assignment)."""

    @property
    def member_id(self) -> str: ...
    @property
    def client_id(self) -> str: ...
    @property
    def decode_error(self) -> str | None: ...
    @property
    def metadata_version(self) -> int | None: ...
    @property
    def assignment_error(self) -> int: ...
    @property
    def running(self) -> tuple[str, ...]: ...  # connectors and tasks (`name-N`) it runs


def conversion_blockers(protocol: str | None, workers: Sequence[ConnectWorkerFacts]) -> list[tuple[str, str]]:
    """(check name, reason) for each thing that stops the group becoming a connect group online;
    empty: nothing in the group does."""
    out: list[tuple[str, str]] = []
    if protocol == EAGER:
        out.append(
            (
                "connect-sub-protocol",
                "the workers run Connect's eager protocol (`default`, connect.protocol=eager): they stop "
                "every connector and task at each rebalance and their assignments carry no revoked list, "
                "so the connect group cannot revoke some work while the rest keeps running; set "
                "connect.protocol=sessioned (or compatible) on every worker and roll them first",
            )
        )
    elif protocol not in SUB_PROTOCOL_VERSIONS:
        out.append(
            (
                "connect-sub-protocol",
                f"the group's protocol is {protocol!r}, none of Connect's sub-protocols "
                f"({', '.join(SUB_PROTOCOL_VERSIONS)})",
            )
        )
    expected = SUB_PROTOCOL_VERSIONS.get(protocol or "")
    for w in workers:
        who = f"member {w.member_id} (client {w.client_id})"
        if w.decode_error:
            out.append(("connect-metadata", f"{who}: its Connect metadata does not decode: {w.decode_error}"))
            continue
        if w.metadata_version is not None and w.metadata_version > LATEST_VERSION:
            out.append(
                (
                    "connect-version",
                    f"{who} sends Connect protocol version {w.metadata_version}, newer than the "
                    f"{LATEST_VERSION} groupshift reads",
                )
            )
        elif w.metadata_version is not None and expected is not None and w.metadata_version != expected:
            out.append(
                (
                    "connect-version",
                    f"{who} sends version {w.metadata_version} metadata for sub-protocol {protocol} "
                    f"(Connect writes {expected})",
                )
            )
        if w.assignment_error:
            out.append(
                (
                    "connect-assignment-error",
                    f"{who}: the leader's assignment reports error {w.assignment_error}"
                    + (
                        " (CONFIG_MISMATCH: the workers are re-reading the config topic)"
                        if w.assignment_error == 1
                        else ""
                    )
                    + "; wait for a clean rebalance",
                )
            )
    holders: dict[str, list[str]] = {}
    for w in workers:
        for item in dict.fromkeys(w.running):
            holders.setdefault(item, []).append(w.member_id)
    for item, ids in sorted(holders.items()):
        if len(ids) > 1:
            out.append(
                (
                    "connect-overlap",
                    f"{item} is run by {len(ids)} workers at once ({', '.join(ids)}): the connect group "
                    "gives a connector or task to one worker only",
                )
            )
    return out
