"""What stops a classic Kafka Streams group from becoming a KIP-1071 streams group online (issue
31, part 3; docs/streams-classic-groups.md): one set of rules, read by `check upgrade` and the
migration view (tools/groups/streams_classic.py) and by the engine's conversion
(translation/streams_upgrade.py), so that what the operator is told and what the server does
agree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Protocol

from translation.streams_classic_protocol import LATEST_SUPPORTED_VERSION, STREAMS_PROTOCOL_NAME

# The oldest SubscriptionInfo version with task offset sums (KIP-441): what the streams-group
# assignor needs to place tasks on the instance with the most state.
MIN_OFFSET_SUMS_VERSION = 7


class StreamsMemberFacts(Protocol):
    """What the rules read of one classic Streams member (its decoded JoinGroup metadata)."""

    @property
    def member_id(self) -> str: ...
    @property
    def client_id(self) -> str: ...
    @property
    def decode_error(self) -> str | None: ...
    @property
    def subscription_version(self) -> int | None: ...
    @property
    def subscription_error(self) -> int: ...
    @property
    def topics(self) -> tuple[str, ...]: ...


def conversion_blockers(protocol: str | None, members: Sequence[StreamsMemberFacts]) -> list[tuple[str, str]]:
    """(check name, reason) for each thing that would stop the group becoming a streams group
    online with its instances rolled one at a time; empty: nothing does."""
    out: list[tuple[str, str]] = []
    if protocol != STREAMS_PROTOCOL_NAME:
        out.append(
            (
                "streams-assignor",
                f"the group's protocol is {protocol!r}, not {STREAMS_PROTOCOL_NAME!r}: its Streams "
                "instances run a custom partition assignor, whose assignment a streams group "
                "cannot take over",
            )
        )
    for m in members:
        if m.decode_error:
            out.append(
                (
                    "streams-metadata",
                    f"member {m.member_id} (client {m.client_id}): its Streams metadata does not decode: "
                    f"{m.decode_error}",
                )
            )
        elif m.subscription_version is not None and m.subscription_version > LATEST_SUPPORTED_VERSION:
            out.append(
                (
                    "streams-version",
                    f"member {m.member_id} (client {m.client_id}) speaks SubscriptionInfo version "
                    f"{m.subscription_version}, newer than the {LATEST_SUPPORTED_VERSION} groupshift "
                    "reads (Kafka Streams 4.4's latest)",
                )
            )
        elif m.subscription_version is not None and m.subscription_version < MIN_OFFSET_SUMS_VERSION:
            out.append(
                (
                    "streams-version",
                    f"member {m.member_id} (client {m.client_id}) sends SubscriptionInfo version "
                    f"{m.subscription_version} (before task offset sums, version "
                    f"{MIN_OFFSET_SUMS_VERSION}): finish the Kafka Streams upgrade first (remove "
                    "upgrade.from and roll the instances)",
                )
            )
        if m.subscription_error:
            out.append(
                (
                    "streams-error",
                    f"member {m.member_id} (client {m.client_id}) reports error code "
                    f"{m.subscription_error} in its subscription"
                    + (
                        " (SHUTDOWN_REQUESTED: the application is shutting down)"
                        if m.subscription_error == 4
                        else ""
                    ),
                )
            )
    versions = Counter(m.subscription_version for m in members if m.subscription_version is not None)
    if len(versions) > 1:
        seen = ", ".join(f"version {v}: {n} member(s)" for v, n in sorted(versions.items()))
        out.append(
            (
                "streams-versions-differ",
                f"the instances send different SubscriptionInfo versions ({seen}): a Kafka Streams "
                "rolling upgrade (version probing) is in progress; finish it first",
            )
        )
    topics = Counter(m.topics for m in members if not m.decode_error and m.topics)
    if len(topics) > 1:
        kinds = "; ".join(f"{n} member(s): {', '.join(t)}" for t, n in topics.most_common())
        out.append(
            (
                "streams-topology",
                f"the instances subscribe to different topics, so they run different topologies ({kinds}): "
                "a streams group has one topology; roll them to one version of the application first",
            )
        )
    return out
