"""The rules of `groupshift check`: a verdict per group from its facts (tools.check.facts).

Upgrade (a classic group, when a KIP-848 member joins): the refusals are Kafka 4.x's, in its
order (`GroupMetadataManager.validateOnlineUpgrade`, then `ConsumerGroup.fromClassicGroup` per
member), with its exact messages; groupshift refuses the same (translation.upgrade). A group
READY converts; NOT-READY is refused GROUP_ID_NOT_FOUND with `kafka_message`. The other checks
(eager/cooperative mix, custom client-side assignor names, static members, the server assignor
the members get, regexes under RE2) do not stop the conversion: they come as warnings or notes
with the verdict.

Downgrade to `classic-protocol` (members roll back to classic clients): Kafka's
`validateOnlineDowngradeWithFencedMembers` / `...WithReplacedMember` (policy, size vs
`group.max.size`), `throwIfClassicMemberCannotJoinConsumerGroup` (policy `disabled` refuses every
classic member, KAFKA-20640) and `ClassicGroup.fromConsumerGroup` (the members keep their
partitions, then the classic members' protocol vote picks the client assignor that rebalances).
Downgrade to `kafka-X.Y`: each live record kind of the group against that release's loader rules
(tools.check.loader_rules, each row pinned by a proof test; an unproven row is said so).

A classic Kafka Streams group (protocol `stream`, or Streams consumers under a custom assignor)
does not upgrade to a consumer group but to a KIP-1071 streams group: its verdict lists what
would block converting it online (tools.groups.streams_classic.conversion_blockers: a custom
assignor, members whose Streams metadata does not decode, unsupported or differing
SubscriptionInfo versions, different topologies, an instance's shutdown request), says so
positively when nothing does, and stays NOT-READY because groupshift does not build that online
conversion yet (docs/streams-classic-groups.md).

A KIP-1071 streams group: upgrade has nothing to do (READY); downgrade to `classic-protocol`
follows Kafka 4.4's offline rule: a classic JoinGroup replaces the group only once it is empty
(INCONSISTENT_GROUP_PROTOCOL before), so a group with members NEEDS-ACTION (stop the
instances). groupshift's online conversion back to classic is not judged here yet.

Everything is a pure function of plain data, so that the fleet scanner runs the same rules.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from tools.check.facts import BUILTIN_ASSIGNORS, COOPERATIVE_ASSIGNORS, GroupFacts, RecordKind
from tools.groups import connect_classic
from tools.groups.output import partition_ranges
from tools.groups.streams_classic import conversion_blockers, decode_member, is_streams_classic

if TYPE_CHECKING:
    from tools.groups.capabilities import ServerCapabilities

INT_MAX = 2**31 - 1
UPGRADE_POLICIES = ("bidirectional", "upgrade")
DOWNGRADE_POLICIES = ("bidirectional", "downgrade")
POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")
CLASSIC_TARGET = "classic-protocol"

READY, NOT_READY = "READY", "NOT-READY"
SAFE, NEEDS_ACTION, UNSAFE = "SAFE", "NEEDS-ACTION", "UNSAFE"

Status = Literal["ok", "refused", "warning", "info", "needs-action", "unsafe", "unknown"]

RECORD_NAMES = {
    0: "OffsetCommit",
    1: "OffsetCommit",
    2: "GroupMetadata",
    3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment",
    16: "ConsumerGroupRegularExpression",
}
OFFSET_TYPES = frozenset({0, 1})


@dataclass(frozen=True, slots=True)
class Settings:
    """The coordinator settings the rules depend on, with Kafka 4.x's defaults. `known` names
    the settings the input actually gave (the others are assumed, and the verdict says so)."""

    migration_policy: str = "bidirectional"  # group.consumer.migration.policy
    consumer_max_size: int = INT_MAX  # group.consumer.max.size
    classic_max_size: int = INT_MAX  # group.max.size
    consumer_assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors
    topics: tuple[str, ...] | None = None  # the cluster's topics (for regex meaning), if known
    regexes: tuple[tuple[str, str], ...] = ()  # (group, pattern) the operator says clients use
    known: frozenset[str] = frozenset()

    @classmethod
    def from_configs(
        cls,
        configs: Mapping[str, str | None],
        *,
        topics: tuple[str, ...] | None = None,
        regexes: tuple[tuple[str, str], ...] = (),
    ) -> Settings:
        """From Kafka config names (DescribeConfigs, a properties file, --set); None or missing
        means not known."""
        kw: dict[str, Any] = {}
        known = set()
        if (v := configs.get("group.consumer.migration.policy")) is not None:
            policy = v.strip().lower()
            if policy not in POLICIES:
                raise ValueError(f"group.consumer.migration.policy={v}: not one of {', '.join(POLICIES)}")
            kw["migration_policy"] = policy
            known.add("group.consumer.migration.policy")
        for name, attr in (
            ("group.consumer.max.size", "consumer_max_size"),
            ("group.max.size", "classic_max_size"),
        ):
            if (v := configs.get(name)) is not None:
                if not v.strip().isdigit() or not 1 <= int(v) <= INT_MAX:
                    raise ValueError(f"{name}={v}: not an integer in [1, {INT_MAX}]")
                kw[attr] = int(v)
                known.add(name)
        if (v := configs.get("group.consumer.assignors")) is not None:
            names = tuple(_assignor_name(a) for a in v.split(",") if a.strip())
            if names:
                kw["consumer_assignors"] = names
                known.add("group.consumer.assignors")
        return cls(topics=topics, regexes=regexes, known=frozenset(known), **kw)

    def regexes_of(self, group: str) -> tuple[str, ...]:
        return tuple(p for g, p in self.regexes if g == group)


#: How the text output names a check (`--json` keeps the names, which scripts match on).
CHECK_TITLES = {
    "protocol-type": "protocol type",
    "custom-assignor": "client-side assignor",
    "embedded-protocol": "member subscription",
    "assignor-mix": "eager and cooperative members",
    "static-members": "static members",
    "regex": "regex subscription",
    "partition": "__consumer_offsets partition",
}


def check_title(name: str) -> str:
    """A check's name as the text output prints it: words, and the record checks by record
    type (`record-3` is the ConsumerGroupMetadata records)."""
    kind, _, number = name.partition("-")
    if kind == "record" and number.isdigit():
        return f"{RECORD_NAMES.get(int(number), f'type {number}')} records"
    return CHECK_TITLES.get(name, name)


def _assignor_name(value: str) -> str:
    v = value.strip()
    last = v.rsplit(".", 1)[-1]
    return {"UniformAssignor": "uniform", "RangeAssignor": "range"}.get(last, v)


@dataclass(frozen=True, slots=True)
class Check:
    """One rule's finding: `status` "refused"/"unsafe"/"needs-action" decide the verdict,
    "warning" and "info" come with it."""

    name: str
    status: Status
    reason: str
    fix: str | None = None
    message: str | None = None  # a refusal: the error message Kafka 4.x and groupshift answer
    # the broker setting (name, value) the fix changes, so that `check` can print the complete
    # command that shows the verdict with it (`--set name=value`)
    setting: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    group: str
    verdict: str  # READY / NOT-READY; SAFE / NEEDS-ACTION / UNSAFE
    reason: str  # one line
    fix: str | None  # the exact command or setting
    direction: Literal["upgrade", "downgrade"] = "upgrade"
    target: str | None = None
    cluster: str = ""
    group_type: str = ""
    size: int = 0
    kafka_message: str | None = None  # upgrade NOT-READY: what Kafka 4.x and groupshift answer
    details: tuple[Check, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["type"] = out.pop("group_type")
        return out


# --- upgrade ----------------------------------------------------------------------------------


def _cannot_upgrade(group: str, because: str) -> str:
    return f"Cannot upgrade classic group {group} to consumer group because {because}"


def _assumed(settings: Settings, name: str, value: object) -> str:
    return "" if name in settings.known else f" (assumed: {name} not known from the input, default {value})"


def upgrade_checks(facts: GroupFacts, settings: Settings) -> tuple[list[Check], str | None]:
    """Every upgrade finding in Kafka's order, and the message Kafka would refuse with (None:
    the group converts)."""
    g = facts.group
    checks: list[Check] = []
    message: str | None = None

    def refuse(
        name: str, reason: str, fix: str, kafka_because: str, setting: tuple[str, str] | None = None
    ) -> None:
        nonlocal message
        checks.append(Check(name, "refused", reason, fix, _cannot_upgrade(g, kafka_because), setting))
        if message is None:
            message = _cannot_upgrade(g, kafka_because)

    policy = settings.migration_policy
    if policy not in UPGRADE_POLICIES:
        refuse(
            "policy",
            f"group.consumer.migration.policy is {policy}: online upgrades of non-empty groups are refused",
            "set group.consumer.migration.policy=bidirectional (or upgrade) on the brokers",
            "online upgrade is disabled.",
            ("group.consumer.migration.policy", "bidirectional"),
        )
    else:
        checks.append(
            Check(
                "policy",
                "ok",
                f"group.consumer.migration.policy={policy} allows upgrades"
                + _assumed(settings, "group.consumer.migration.policy", "bidirectional"),
            )
        )
    if facts.protocol_type != "consumer":
        kind = {"connect": "Kafka Connect", "": "no protocol type", None: "no protocol type"}.get(
            facts.protocol_type, "a non-consumer"
        )
        refuse(
            "protocol-type",
            f"protocol type is {facts.protocol_type!r} ({kind}), not 'consumer': "
            "only consumer groups convert",
            "none online: this group cannot become a KIP-848 consumer group; keep it classic "
            "(Connect/Streams/custom protocols have their own paths, e.g. KIP-1071 streams groups)",
            "the group does not use the consumer embedded protocol.",
        )
    if facts.size > settings.consumer_max_size:
        refuse(
            "size",
            f"{facts.size} members exceed group.consumer.max.size={settings.consumer_max_size}",
            f"set group.consumer.max.size>={facts.size} on the brokers, or shrink the group first",
            "the group size exceeds the consumer group maximum size.",
            ("group.consumer.max.size", str(facts.size)),
        )
    else:
        checks.append(
            Check(
                "size",
                "ok",
                f"{facts.size} members within group.consumer.max.size={settings.consumer_max_size}"
                + _assumed(settings, "group.consumer.max.size", INT_MAX),
            )
        )
    if facts.protocol_type == "consumer":
        # ConsumerGroup.fromClassicGroup, member by member: the assignment (its userData first),
        # then the subscription. The first failing member decides Kafka's message.
        for m in facts.members:
            if m.assignment_user_data:
                who = f"member {m.member_id} (client {m.client_id}"
                who += f", {m.software})" if m.software else ")"
                librdkafka = m.software == "librdkafka" and (facts.protocol or "") in COOPERATIVE_ASSIGNORS
                refuse(
                    "custom-assignor",
                    f"{who} has assignment userData from client-side assignor "
                    f"{facts.protocol or '?'}"
                    + (
                        " (librdkafka cooperative-sticky leaders copy sticky userData into assignments, "
                        "KAFKA-18134)"
                        if librdkafka
                        else ": the server cannot take over a custom assignor (KAFKA-18134)"
                    ),
                    "stop every member of the group, then start them with group.protocol=consumer "
                    "(an empty group converts whatever its history; committed offsets are kept)",
                    "an unsupported custom assignor is in use. Please refer to the documentation or "
                    "switch to a default assignor before re-attempting the upgrade.",
                )
            elif m.embedded_error:
                refuse(
                    "embedded-protocol",
                    f"member {m.member_id} (client {m.client_id}): embedded consumer protocol does "
                    f"not parse: {m.embedded_error}",
                    f"restart member {m.member_id} (client {m.client_id}) with a standard Kafka "
                    "consumer client so that it rejoins with a well-formed subscription",
                    "the embedded consumer protocol is malformed.",
                )
    checks.extend(_upgrade_advice(facts, settings))
    return checks, message


def _upgrade_advice(facts: GroupFacts, settings: Settings) -> list[Check]:
    out: list[Check] = []
    # Eager and cooperative members in one group.
    kinds: dict[str, list[str]] = {}
    for m in facts.members:
        if m.protocol == "classic" and m.assignors:
            r = m.rebalance
            if r != "unknown" and (m.assignors_complete or len({*m.assignors}) == 1):
                kinds.setdefault(r, []).append(m.member_id)
    if m_eager := kinds.get("eager"):
        if kinds.get("cooperative") and any(m.assignors_complete for m in facts.members):
            out.append(
                Check(
                    "assignor-mix",
                    "warning",
                    f"{len(m_eager)} member(s) run eager assignors and "
                    f"{len(kinds['cooperative'])} cooperative ones: a classic member that rejoins "
                    "offering no protocol every member supports is refused INCONSISTENT_GROUP_PROTOCOL",
                    "give every member the same partition.assignment.strategy before the upgrade, "
                    "or move members straight to group.protocol=consumer",
                )
            )
        else:
            out.append(
                Check(
                    "assignor-mix",
                    "info",
                    f"classic members run the eager assignor {facts.protocol or '?'}: each revokes all "
                    "its partitions at every rebalance of its own until it runs group.protocol=consumer",
                    None,
                )
            )
    # Client-side assignors the server replaces.
    names = {a for m in facts.members if m.protocol == "classic" for a in m.assignors[:1]}
    custom = sorted(n for n in names if n not in BUILTIN_ASSIGNORS)
    if custom and not any(m.assignment_user_data for m in facts.members):
        out.append(
            Check(
                "custom-assignor",
                "warning",
                f"client-side assignor(s) {', '.join(custom)} are not built in: after the upgrade the "
                "server assignor decides, the custom logic no longer runs",
                "check that the group works with a server assignor (uniform or range) first",
            )
        )
    # Static members.
    static = facts.static_members
    if static:
        out.append(
            Check(
                "static-members",
                "info",
                f"{len(static)} static member(s) (group.instance.id): a consumer-protocol member with the "
                "same instance id replaces the classic one in place and takes its partitions",
                "restart each static member with group.protocol=consumer and the SAME group.instance.id "
                "(a new id leaves the old member holding its partitions until session.timeout.ms)",
            )
        )
    # The server assignor.
    default = settings.consumer_assignors[0] if settings.consumer_assignors else "uniform"
    classic_assignor = facts.protocol or next((m.assignors[0] for m in facts.members if m.assignors), None)
    want = "range" if classic_assignor == "range" else "uniform"
    if classic_assignor is not None:
        if want == default:
            out.append(
                Check(
                    "server-assignor",
                    "info",
                    f"members get the server assignor {default} (the broker default), the KIP-848 "
                    f"counterpart of {classic_assignor}",
                    None,
                )
            )
        elif want in settings.consumer_assignors:
            out.append(
                Check(
                    "server-assignor",
                    "warning",
                    f"the group uses {classic_assignor}, but the broker default server assignor is "
                    f"{default}: partitions are spread differently after the upgrade",
                    f"set group.remote.assignor={want} on the consumer-protocol members",
                )
            )
        else:
            out.append(
                Check(
                    "server-assignor",
                    "warning",
                    f"the group uses {classic_assignor}, whose counterpart {want} is not in "
                    f"group.consumer.assignors={','.join(settings.consumer_assignors)}",
                    f"add {want} to group.consumer.assignors, or accept {default}",
                )
            )
    out.extend(regex_checks(facts, settings))
    return out


def server_check(server: ServerCapabilities) -> Check:
    """The group-independent finding: a server that does not serve KIP-848 makes every group
    NOT-READY, whatever the group (its members would get no partitions, no error)."""
    if server.serves_consumer_protocol is False:
        ways = server.ways_out()
        return Check(
            "server",
            "refused",
            "the server does not serve the KIP-848 consumer protocol: " + server.reason,
            f"{ways[0]}; or {ways[1]}",
        )
    if server.serves_consumer_protocol is None:
        return Check("server", "unknown", "whether the server serves KIP-848 is unknown: " + server.reason)
    return Check("server", "ok", server.reason)


def upgrade_verdict(
    facts: GroupFacts, settings: Settings, server: ServerCapabilities | None = None
) -> Verdict:
    """READY if a KIP-848 member joining now converts the group (or it needs no conversion),
    NOT-READY with Kafka's refusal message otherwise. `server` (a live input's) first: a server
    that does not serve the consumer protocol makes every group NOT-READY."""
    if server is not None:
        found = server_check(server)
        base = _upgrade_verdict(facts, settings)
        details = (found, *base.details)
        if found.status == "refused":
            return replace(base, verdict=NOT_READY, reason=found.reason, fix=found.fix, kafka_message=None,
                           details=details)  # fmt: skip
        return replace(base, details=details)
    return _upgrade_verdict(facts, settings)


def _upgrade_verdict(facts: GroupFacts, settings: Settings) -> Verdict:

    def verdict(verdict: str, reason: str, fix: str | None, checks: list[Check], msg: str | None) -> Verdict:
        return Verdict(
            group=facts.group,
            verdict=verdict,
            reason=reason,
            fix=fix,
            direction="upgrade",
            cluster=facts.cluster,
            group_type=facts.type,
            size=facts.size,
            kafka_message=msg,
            details=tuple(checks),
        )

    if facts.type == "consumer":
        classic = sum(1 for m in facts.members if m.protocol == "classic")
        reason = "already a consumer group" + (
            f" ({classic} classic member(s) left: roll them to group.protocol=consumer)" if classic else ""
        )
        return verdict(READY, reason, None, regex_checks(facts, settings), None)
    if facts.type == "streams":
        reason = "already a streams group (KIP-1071): nothing to upgrade"
        return verdict(READY, reason, None, [], None)
    if facts.type == "empty":
        reason = "empty: the first consumer-protocol member makes it a consumer group, whatever the policy"
        return verdict(READY, reason, None, regex_checks(facts, settings), None)
    if is_streams_classic(facts.protocol_type, facts.protocol, (m.client_id for m in facts.members)):
        return _streams_classic_verdict(facts, verdict)
    if is_connect_classic(facts):
        return _connect_classic_verdict(facts, verdict)
    checks, message = upgrade_checks(facts, settings)
    refused = [c for c in checks if c.status == "refused"]
    if refused:
        # Kafka validates a heartbeat's regex before it looks the group up: a regex refusal is
        # what a member subscribing with it sees first.
        regex = [c for c in refused if c.name == "regex"]
        first = regex[0] if regex else refused[0]
        more = f" (+{len(refused) - 1} more)" if len(refused) > 1 else ""
        return verdict(NOT_READY, first.reason + more, first.fix, checks, first.message or message)
    warnings = [c for c in checks if c.status == "warning"]
    reason = "converts when a group.protocol=consumer member joins"
    if warnings:
        reason += f"; {len(warnings)} warning(s): " + warnings[0].reason
    return verdict(READY, reason, warnings[0].fix if warnings else None, checks, None)


OFFLINE_STREAMS_MIGRATION = (
    "stop every instance, then start them with group.protocol=streams (Kafka Streams 4.2+): the "
    "empty group becomes a streams group keeping its committed offsets"
)


ONLINE_STREAMS_MIGRATION = (
    "roll the instances one at a time to Kafka Streams 4.2+ with group.protocol=streams: the first "
    "one converts the group, the classic instances keep running inside it (groupshift only)"
)


def _streams_classic_verdict(facts: GroupFacts, verdict: Any) -> Verdict:
    """A classic Kafka Streams group: what would block its online conversion to a streams group
    (NOT-READY; the engine refuses the same, translation/streams_conversion_rules.py), or that
    nothing does (READY)."""
    members = [
        decode_member(
            m.member_id, m.client_id, m.client_host, m.instance_id, m.streams_metadata, m.streams_assignment
        )
        for m in facts.members
    ]
    blockers = conversion_blockers(facts.protocol, members)
    checks = [
        Check(
            "protocol-type",
            "info",
            "a Kafka Streams group: it converts to a streams group (KIP-1071), not to a consumer group "
            "(its members' assignments carry Streams' AssignmentInfo, which a consumer group refuses)",
        )
    ]
    checks += [Check(name, "refused", reason, OFFLINE_STREAMS_MIGRATION) for name, reason in blockers]
    if not blockers:
        versions = sorted({m.subscription_version for m in members if m.subscription_version is not None})
        topics = next((m.topics for m in members if m.topics), ())
        checks.append(
            Check(
                "streams-conversion",
                "ok",
                f"nothing blocks converting it to a streams group online: {len(members)} instance "
                f"consumer(s), one topology (topics {', '.join(topics) or '-'}), SubscriptionInfo "
                f"version {', '.join(map(str, versions)) or '-'}",
            )
        )
    checks.append(
        Check(
            "streams-online-conversion",
            "refused" if blockers else "ok",
            "groupshift converts a classic Kafka Streams group online when the first "
            "group.protocol=streams instance joins (Kafka 4.4 refuses it): "
            + ("resolve the blockers first" if blockers else "roll the instances one at a time"),
            OFFLINE_STREAMS_MIGRATION if blockers else None,
        )
    )
    if blockers:
        more = f" (+{len(blockers) - 1} more)" if len(blockers) > 1 else ""
        reason = f"classic Kafka Streams group: {blockers[0][1]}{more}"
        out: Verdict = verdict(NOT_READY, reason, OFFLINE_STREAMS_MIGRATION, checks, None)
        return out
    reason = (
        "classic Kafka Streams group: nothing blocks converting it to a streams group online on "
        "groupshift (on Kafka 4.4: only offline)"
    )
    ready: Verdict = verdict(READY, reason, ONLINE_STREAMS_MIGRATION, checks, None)
    return ready


def is_connect_classic(facts: GroupFacts) -> bool:
    """A classic Kafka Connect cluster's group (its workers' Connect bytes kept by the facts),
    not a connect group on the new protocol (described with protocol type `connect` too)."""
    return facts.protocol_type == "connect" and any(m.connect_metadata is not None for m in facts.members)


KEEP_CONNECT_CLASSIC = (
    "keep the Connect cluster classic: groupshift runs it as Kafka does; converting it to a "
    "connect group when an SDK worker joins is not built yet"
)


def _connect_classic_verdict(facts: GroupFacts, verdict: Any) -> Verdict:
    """A classic Kafka Connect group: what would block converting it to a connect group
    (translation/connect_conversion_rules.py), and that the conversion is not built: NOT-READY
    either way (docs/connect-groups.md)."""
    workers = [
        connect_classic.decode_worker(
            m.member_id, m.client_id, m.client_host, m.instance_id, m.connect_metadata, m.connect_assignment
        )
        for m in facts.members
    ]
    blockers = connect_classic.conversion_blockers(facts.protocol, workers)
    kafka_message = _cannot_upgrade(facts.group, "the group does not use the consumer embedded protocol.")
    checks = [
        # What a consumer-protocol member joining it is answered, on Kafka as on groupshift; the
        # fleet report counts the group under this blocker, as it counts every non-consumer group.
        Check(
            "protocol-type",
            "refused",
            "protocol type is 'connect' (Kafka Connect), not 'consumer': a consumer-protocol member is "
            "refused; the group would convert to a connect group (Connect workers on the new protocol, "
            "a groupshift extension) when an SDK worker joins",
            KEEP_CONNECT_CLASSIC,
            kafka_message,
        )
    ]
    fix = (
        "set connect.protocol=sessioned on every worker and roll them"
        if any(n == "connect-sub-protocol" for n, _ in blockers)
        else None
    )
    checks += [
        Check(name, "refused", reason, fix if name == "connect-sub-protocol" else None)
        for name, reason in blockers
    ]
    if not blockers:
        connectors = sum(len(w.connectors) for w in workers)
        tasks = sum(len(w.tasks) for w in workers)
        checks.append(
            Check(
                "connect-conversion",
                "ok",
                f"nothing in the group blocks converting it to a connect group: {len(workers)} worker(s), "
                f"sub-protocol {facts.protocol}, {connectors} connector(s) and {tasks} task(s) running",
            )
        )
    built = connect_classic.CONVERSION_BUILT
    checks.append(
        Check(
            "connect-online-conversion",
            "ok" if built and not blockers else "refused",
            "groupshift does not convert a classic Kafka Connect group to a connect group yet: an SDK "
            "worker joining it is refused GROUP_ID_NOT_FOUND and the classic workers keep their work"
            if not built
            else "groupshift converts the group online when the first SDK worker joins "
            "(group.connect.enable=true, a migration policy allowing upgrades): the classic workers "
            "keep their work and get Connect's own assignments from the connect group's target"
            if not blockers
            else "groupshift converts a classic Kafka Connect group when an SDK worker joins, once "
            "nothing above blocks it",
            KEEP_CONNECT_CLASSIC if not built else None,
        )
    )
    reasons = [r for _, r in blockers] + ([] if built else ["its conversion to a connect group is not built"])
    if reasons:
        more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
        out: Verdict = verdict(
            NOT_READY,
            f"classic Kafka Connect group (protocol type 'connect'): {reasons[0]}{more}",
            fix or KEEP_CONNECT_CLASSIC,
            checks,
            kafka_message,
        )
        return out
    # READY for an SDK worker; a consumer-protocol member is still refused (kafka_message).
    ready: Verdict = verdict(
        READY, "classic Kafka Connect group: converts when an SDK worker joins", None, checks, kafka_message
    )
    return ready


# --- regexes under RE2 ------------------------------------------------------------------------


def regex_meaning(pattern: str, topics: tuple[str, ...] | None) -> Check | None:
    """How `pattern` changes meaning when the server resolves it (RE2/J, full match) instead of
    a classic client (Java `Pattern` full match; librdkafka and other clients a partial search).
    None when nothing changes."""
    import re

    from engine.consumer.regex import compile_regex
    from engine.errors import CoordinatorError

    try:
        re2_pattern = compile_regex(pattern)
    except CoordinatorError as e:
        try:
            re.compile(pattern)
            java_ok = True
        except re.error:
            java_ok = False
        why = "a lookaround or backreference" if java_ok and _has_perl_only(pattern) else "RE2 syntax"
        return Check(
            "regex",
            "refused",
            f"regex {pattern!r} uses {why} that RE2 rejects: a consumer-protocol member subscribing with "
            f"it is refused INVALID_REGULAR_EXPRESSION ({e.message})",
            "rewrite the pattern without lookarounds/backreferences (RE2 syntax), "
            "or subscribe by topic names",
            e.message,
        )
    try:
        py = re.compile(pattern)
    except re.error:
        return None
    if topics is None:
        if not (pattern.endswith("$") or pattern.endswith(".*")):
            return Check(
                "regex",
                "warning",
                f"regex {pattern!r}: the server matches whole topic names (RE2 full match); a client that "
                "searched for it anywhere in the name (librdkafka, kafka-python) subscribed to more",
                f"use {pattern + '.*'!r} if a prefix match is meant",
            )
        return None
    server = {t for t in topics if re2_pattern.fullmatch(t) is not None}
    full = {t for t in topics if py.fullmatch(t) is not None}
    partial = {t for t in topics if py.search(t) is not None}
    lost = sorted(partial - server)
    if lost:
        return Check(
            "regex",
            "warning",
            f"regex {pattern!r}: the server (RE2, full match) subscribes to {len(server)} topic(s); "
            f"clients that search partially had {len(partial)} (lost: {', '.join(lost[:5])}"
            + (", ..." if len(lost) > 5 else "")
            + ")"
            + ("" if full == server else f"; Java full match had {len(full)}"),
            f"use {pattern + '.*'!r} if a prefix match is meant",
        )
    if full != server:
        return Check(
            "regex",
            "warning",
            f"regex {pattern!r} matches {len(server)} topic(s) under RE2 and {len(full)} under Java's regex",
            "rewrite the pattern in the common subset of RE2 and Java syntax",
        )
    return None


def _has_perl_only(pattern: str) -> bool:
    import re

    return re.search(r"\(\?<?[=!]|\\[1-9]|\(\?P=|\\k<", pattern) is not None


def regex_checks(facts: GroupFacts, settings: Settings) -> list[Check]:
    out = []
    for pattern in sorted(set(facts.regexes) | set(settings.regexes_of(facts.group))):
        c = regex_meaning(pattern, settings.topics)
        if c is not None:
            if facts.type == "consumer" and pattern in facts.regexes and c.status == "refused":
                c = Check(c.name, "warning", c.reason, c.fix, c.message)
            out.append(c)
    return out


# --- downgrade ---------------------------------------------------------------------------------


def downgrade_verdict(
    facts: GroupFacts,
    target: str,
    settings: Settings,
    *,
    peers: Sequence[GroupFacts] = (),
    orphans: Sequence[RecordKind] = (),
) -> Verdict:
    """SAFE, NEEDS-ACTION or UNSAFE for rolling the group back to `target`: "classic-protocol"
    (classic clients) or "kafka-X.Y" (a coordinator release).

    A release loads a `__consumer_offsets` partition whole: a record it cannot load loses every
    group of the partition. For "kafka-X.Y", `peers` are the other groups of the group's
    partition and `orphans` the records there no group can be named for (types we cannot
    decode); either may make this group UNSAFE too."""
    if target == CLASSIC_TARGET:
        return _classic_protocol(facts, settings)
    return _kafka_release(facts, target, peers, orphans)


def _verdict_from(facts: GroupFacts, target: str, checks: list[Check], ok_reason: str) -> Verdict:
    worst = None
    for status, verdict in (("unsafe", UNSAFE), ("needs-action", NEEDS_ACTION)):
        hits = [c for c in checks if c.status == status]
        if hits:
            worst = (verdict, hits)
            break
    base: dict[str, Any] = dict(
        group=facts.group,
        cluster=facts.cluster,
        group_type=facts.type,
        size=facts.size,
        direction="downgrade",
        target=target,
        details=tuple(checks),
    )
    if worst is None:
        return Verdict(verdict=SAFE, reason=ok_reason, fix=None, **base)
    verdict, hits = worst
    more = f" (+{len(hits) - 1} more)" if len(hits) > 1 else ""
    return Verdict(verdict=verdict, reason=hits[0].reason + more, fix=hits[0].fix, **base)


STREAMS_OFFLINE_DOWNGRADE_FIX = (
    "stop every instance of the application (the group empties: each leaves on close, or its "
    "session times out), then start them with group.protocol=classic: the first JoinGroup "
    "replaces the empty streams group with a classic group, committed offsets kept"
)


def _streams_to_classic(facts: GroupFacts) -> Verdict:
    """A streams group back to classic Kafka Streams instances, by Kafka 4.4's offline rule: a
    classic JoinGroup replaces an *empty* streams group (its offsets kept) and is answered
    INCONSISTENT_GROUP_PROTOCOL while the group has members (engine/routing.py, measured on
    Kafka 4.4.0). groupshift's online conversion back is not judged here yet."""
    not_yet = Check(
        "streams-online-conversion",
        "info",
        "online conversion of a streams group back to classic is not judged by this check yet: "
        "the verdict is Kafka 4.4's offline rule",
    )
    if facts.size == 0:
        why = "empty streams group: the first classic JoinGroup replaces it, committed offsets kept"
        return _verdict_from(facts, CLASSIC_TARGET, [Check("streams-empty", "ok", why), not_yet], why)
    refused = Check(
        "streams-empty",
        "needs-action",
        f"a streams group with {facts.size} member(s): a classic Kafka Streams instance joining now is "
        "refused INCONSISTENT_GROUP_PROTOCOL until the group is empty (Kafka 4.4's offline migration)",
        STREAMS_OFFLINE_DOWNGRADE_FIX,
        message="INCONSISTENT_GROUP_PROTOCOL",
    )
    return _verdict_from(facts, CLASSIC_TARGET, [refused, not_yet], refused.reason)


def _classic_protocol(facts: GroupFacts, settings: Settings) -> Verdict:
    if facts.type == "streams":
        return _streams_to_classic(facts)
    if facts.type != "consumer":
        why = "already a classic group" if facts.type == "classic" else "empty"
        why += ": classic clients join it"
        return _verdict_from(facts, CLASSIC_TARGET, [], why)
    checks: list[Check] = []
    policy = settings.migration_policy
    if facts.size == 0:
        why = "empty consumer group: the first classic member makes it classic"
        checks.append(Check("policy", "ok", why))
        return _verdict_from(facts, CLASSIC_TARGET, checks, checks[0].reason)
    if policy == "disabled":
        checks.append(
            Check(
                "policy",
                "unsafe",
                "group.consumer.migration.policy is disabled: every classic member is refused "
                "INCONSISTENT_GROUP_PROTOCOL while the group is a non-empty consumer group (KAFKA-20640)",
                "set group.consumer.migration.policy=bidirectional (or downgrade) before rolling back",
                setting=("group.consumer.migration.policy", "bidirectional"),
            )
        )
    elif policy not in DOWNGRADE_POLICIES:
        checks.append(
            Check(
                "policy",
                "needs-action",
                f"group.consumer.migration.policy is {policy}: classic members join, but the group stays "
                "a consumer group when its last consumer-protocol member leaves",
                "set group.consumer.migration.policy=bidirectional (or downgrade) before rolling back",
                setting=("group.consumer.migration.policy", "bidirectional"),
            )
        )
    else:
        checks.append(
            Check(
                "policy",
                "ok",
                f"group.consumer.migration.policy={policy} allows downgrades"
                + _assumed(settings, "group.consumer.migration.policy", "bidirectional"),
            )
        )
    if facts.size > settings.classic_max_size:
        checks.append(
            Check(
                "size",
                "needs-action",
                f"{facts.size} members exceed group.max.size={settings.classic_max_size}: the group stays a "
                "consumer group when its last consumer-protocol member leaves",
                f"set group.max.size>={facts.size} on the brokers, or shrink the group first",
                setting=("group.max.size", str(facts.size)),
            )
        )
    else:
        checks.append(
            Check(
                "size",
                "ok",
                f"{facts.size} members within group.max.size={settings.classic_max_size}"
                + _assumed(settings, "group.max.size", INT_MAX),
            )
        )
    static = [m for m in facts.members if m.instance_id and m.protocol == "consumer"]
    if static:
        checks.append(
            Check(
                "static-members",
                "info",
                f"{len(static)} consumer-protocol static member(s): a classic member with the same "
                "group.instance.id replaces each in place; the last such replacement converts the group",
                "restart each static member with group.protocol=classic and the SAME group.instance.id",
            )
        )
    # What each member will be assigned: ClassicGroup.fromConsumerGroup keeps each member's
    # partitions, then the rebalance it triggers runs the client assignor the classic members'
    # protocols elect (each member votes for its first protocol that every member supports).
    classic = [m for m in facts.members if m.protocol == "classic" and m.assignors_complete]
    elected = elect_protocol([m.assignors for m in classic]) if classic else None
    if classic and elected is None:
        checks.append(
            Check(
                "assignor",
                "unsafe",
                "the classic members offer no common assignor: a rolled-back member whose protocols "
                "miss one of them is refused INCONSISTENT_GROUP_PROTOCOL",
                "give every member the same partition.assignment.strategy",
            )
        )
    consumer_members = facts.size - len([m for m in facts.members if m.protocol == "classic"])
    for m in facts.members:
        owned = partition_ranges(m.owned) or "nothing"
        checks.append(
            Check(
                "assignment",
                "info",
                f"member {m.member_id} ({m.protocol}) keeps {owned} at the conversion; then "
                + (
                    f"the client assignor {elected} (elected by the classic members) reassigns"
                    if elected
                    else "the client assignor the rolled-back members elect reassigns"
                ),
            )
        )
    ok = (
        f"converts back to a classic group when the last of its {consumer_members} consumer-protocol "
        "member(s) leaves"
        if consumer_members
        else "converts back to a classic group at the next member change"
    )
    return _verdict_from(facts, CLASSIC_TARGET, checks, ok)


def elect_protocol(offers: list[tuple[str, ...]]) -> str | None:
    """Kafka's `ClassicGroup.selectProtocol`: among the protocols every member supports, each
    member votes for its most preferred one; the most voted wins (ties: the first candidate)."""
    if not offers:
        return None
    common = set(offers[0]).intersection(*map(set, offers[1:]))
    if not common:
        return None
    votes: Counter[str] = Counter(next(p for p in o if p in common) for o in offers)
    best = max(votes.values())
    return next(p for o in offers for p in o if votes.get(p) == best)


def inferred_record_kinds(facts: GroupFacts) -> tuple[RecordKind, ...]:
    """The record kinds a group's state takes in a Kafka 4.x log, when the input did not read the
    log itself (a live read): what the coordinator writes for it."""
    out: list[RecordKind] = []
    if facts.offsets:
        # Kafka 4.x writes OffsetCommitValue v4 (v1 with an expire timestamp); read the log
        # itself (--data-dir, --log-dir) for the versions really there
        out.append(RecordKind(1, 4, len(facts.offsets)))
    if facts.type == "classic":
        out.append(RecordKind(2, 3, 1))
    elif facts.type == "consumer":
        n = facts.size
        out += [RecordKind(3, 0, 1), RecordKind(5, 0, n), RecordKind(6, 0, 1), RecordKind(7, 0, n)]
        out.append(RecordKind(8, 0, n))
        if facts.regexes:
            out.append(RecordKind(16, 0, len(facts.regexes)))
    elif facts.type == "streams":  # metadata, members, target metadata and members, current, topology
        n = facts.size
        out += [RecordKind(17, 0, 1), RecordKind(19, 0, n), RecordKind(20, 0, 1), RecordKind(21, 0, n)]
        out += [RecordKind(22, 0, n), RecordKind(23, 0, 1)]
    return tuple(out)


def _kind_name(k: RecordKind, exact: bool) -> str:
    version = "tombstone" if k.value_version is None else f"v{k.value_version}"
    name = f"{RECORD_NAMES.get(k.record_type, f'type {k.record_type}')} {version}"
    return name if exact else name + " (inferred)"


def _kinds_of(facts: GroupFacts) -> tuple[tuple[RecordKind, ...], bool]:
    if facts.log_record_kinds:
        return facts.log_record_kinds, True
    if facts.record_kinds:
        return facts.record_kinds, facts.record_kinds_exact
    return inferred_record_kinds(facts), False


def _kafka_release(
    facts: GroupFacts, target: str, peers: Sequence[GroupFacts], orphans: Sequence[RecordKind]
) -> Verdict:
    from tools.check import loader_rules

    if target not in loader_rules.KAFKA_TARGETS:
        raise ValueError(
            f"unknown downgrade target {target!r}; known: {CLASSIC_TARGET}, "
            + ", ".join(loader_rules.KAFKA_TARGETS)
        )
    kinds, exact = _kinds_of(facts)
    live_types = {k.record_type for k in facts.record_kinds} if facts.live else set()
    checks: list[Check] = []
    rewrite = f"groupshift records rewrite --for-downgrade {target}"
    for k in kinds:
        name = _kind_name(k, exact)
        try:
            rule = loader_rules.outcome(target, k.record_type, k.value_version)
        except KeyError:
            checks.append(
                Check(
                    f"record-{k.record_type}",
                    "needs-action",
                    f"{target}: no rule for {name} ({k.count} record(s)); whether it loads is not known",
                    rewrite,
                )
            )
            continue
        proven = "" if rule.proven else " [rule not proven by a test]"
        note = f" ({rule.note})" if rule.note else ""
        if rule.outcome == "fatal":
            checks.append(
                Check(
                    f"record-{k.record_type}",
                    "unsafe",
                    f"{target} fails to load the partition on {name}{note}{proven}",
                    rewrite,
                )
            )
        elif rule.outcome == "skipped":
            lost = "offsets" if k.record_type in OFFSET_TYPES else "state"
            if k.value_version is None or (exact and k.record_type not in live_types):
                # a tombstone, or values superseded since: skipping them loses nothing
                checks.append(Check(f"record-{k.record_type}", "info", f"{target} skips {name}{proven}"))
                continue
            checks.append(
                Check(
                    f"record-{k.record_type}",
                    "needs-action",
                    f"{target} skips {name}: the group's {lost} would be lost{note}{proven}",
                    rewrite,
                )
            )
        else:
            checks.append(
                Check(f"record-{k.record_type}", "info" if proven else "ok", f"{target} reads {name}{proven}")
            )
    where = f"__consumer_offsets-{facts.partition}" if facts.partition is not None else "its partition"
    others: list[tuple[str, RecordKind, bool]] = []
    for p in peers:
        if p.group != facts.group:
            pk, pexact = _kinds_of(p)
            others.extend((p.group, k, pexact) for k in pk)
    others.extend(("", k, True) for k in orphans)
    for owner, k, kexact in others:
        try:
            rule = loader_rules.outcome(target, k.record_type, k.value_version)
        except KeyError:
            continue
        if rule.outcome == "fatal":
            whose = f"group {owner}'s" if owner else "an undecodable"
            checks.append(
                Check(
                    "partition",
                    "unsafe",
                    f"{target} fails to load {where} on {whose} {_kind_name(k, kexact)}: every group "
                    "of the partition is lost with it",
                    rewrite,
                )
            )
            break
    unproven = any("not proven" in c.reason for c in checks)
    ok = f"{target} loads every record of the group" + (" (some rules not proven yet)" if unproven else "")
    if not kinds:
        ok = "no records"
    return _verdict_from(facts, target, checks, ok)
