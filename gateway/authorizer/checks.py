"""What every served API checks before it acts: Kafka 4.x's `KafkaApis` checks, in one table.

`install_checks` wraps each registered handler with its entry of `CHECKS` (api key -> the rule,
in words for docs/security.md, and the function enforcing it). The pattern is Kafka's: a request
about one resource that is not authorized is answered with the request's error response
(`AbstractRequest.getErrorResponse`: GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
...); a request about many resources is split, the authorized part goes to the handler and the
rest is answered with TOPIC/GROUP_AUTHORIZATION_FAILED entries merged into its answer (built by
`gateway.error_response`, which fills identity fields from the request and Kafka's unknown values
elsewhere); filtering reads (ListGroups, Metadata for all topics, OffsetFetch for all topics)
drop what the principal may not DESCRIBE, without an audit event (Kafka's `logIfDenied=false`).
Every other denial is reported as `acl.denied` (gateway.audit).

An API registered without an entry here (one a later layer adds) is refused to everyone but
super users with the request's CLUSTER_AUTHORIZATION_FAILED response, so a new API is never
served unchecked; ApiVersions is never checked (Kafka answers it before authentication too).
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from engine.errors import Errors
from gateway.authorizer import Authorizer
from gateway.authorizer.model import CLUSTER_NAME, AclOperation, ResourceType
from gateway.error_response import error_response
from gateway.groups.apis import then
from gateway.groups.streams_apis import MAY_CREATE_TOPIC
from gateway.registry import NO_RESPONSE, CloseConnection, Handler, HandlerRegistry, RequestContext
from protocol import client_assignment_wire as caw
from protocol import connect_wire as cw
from protocol.codec import response_type_of
from protocol.entity_builder import build

Call = Callable[[Any], Any]
"""The wrapped handler, called with the (possibly narrowed) request."""

R = ResourceType
Op = AclOperation
GROUP_DENIED = int(Errors.GROUP_AUTHORIZATION_FAILED)
TOPIC_DENIED = int(Errors.TOPIC_AUTHORIZATION_FAILED)
CLUSTER_DENIED = int(ErrorCode.cluster_authorization_failed)
TXN_DENIED = int(ErrorCode.transactional_id_authorization_failed)
# Kafka's default messages of these errors (`Errors.message()`), where an answer carries one.
MESSAGES = {
    TOPIC_DENIED: "Topic authorization failed.",
    GROUP_DENIED: "Group authorization failed.",
    CLUSTER_DENIED: "Cluster authorization failed.",
    TXN_DENIED: "Transactional Id authorization failed.",
}
NOT_REQUESTED = -(2**31)


class NamedTopic(Protocol):
    @property
    def name(self) -> str: ...


class Topics(Protocol):
    """The topics a check resolves ids and existence against: the embedded data plane, or
    upstream mode's image of the cluster (`gateway.upstream.forwarded_acls`)."""

    @property
    def auto_create_topics(self) -> bool: ...

    def topic(self, name: str) -> NamedTopic | None: ...

    def topic_by_id(self, topic_id: uuid.UUID) -> NamedTopic | None: ...


@dataclasses.dataclass(slots=True)
class Guard:
    """What a check needs: the authorizer, the topics (ids to names, existence)."""

    authorizer: Authorizer
    plane: Topics

    def ok(self, ctx: RequestContext, op: Op, rtype: R, name: str, api: str, *, log: bool = True) -> bool:
        return self.authorizer.authorize(ctx, op, rtype, name, api=api, log_if_denied=log)

    def cluster(self, ctx: RequestContext, op: Op, api: str, *, log: bool = True) -> bool:
        return self.ok(ctx, op, R.CLUSTER, CLUSTER_NAME, api, log=log)

    def ops(self, ctx: RequestContext, rtype: R, name: str) -> int:
        return self.authorizer.authorized_operations(ctx, rtype, name)


def denied(api_key: int, req: Any, error: int) -> Any:
    """The request's whole error response (Kafka's `getErrorResponse`)."""
    return error_response(api_key, response_type_of(req), req, ErrorCode(error))


def _split(req: Any, field: str, allowed: Callable[[Any], bool]) -> tuple[Any, Any, int]:
    """(the request narrowed to allowed items, the request holding only the others, how many
    were refused)."""
    items = getattr(req, field)
    yes = tuple(i for i in items if allowed(i))
    no = tuple(i for i in items if not allowed(i))
    return dataclasses.replace(req, **{field: yes}), dataclasses.replace(req, **{field: no}), len(no)


def _merge(resp: Any, extra: Any, field: str, *, first: bool) -> Any:
    if resp is NO_RESPONSE or isinstance(resp, (bytes, bytearray, memoryview)):
        return resp
    ours, theirs = tuple(getattr(resp, field)), tuple(getattr(extra, field))
    return dataclasses.replace(resp, **{field: theirs + ours if first else ours + theirs})


def split_and_merge(
    api_key: int,
    req: Any,
    call: Call,
    *,
    request_field: str,
    response_field: str,
    allowed: Callable[[Any], bool],
    error: int,
    first: bool = True,
) -> Any:
    """Send the allowed items to the handler; answer the others with `error` entries. When
    nothing is allowed the handler is not called (Kafka answers from its builder alone)."""
    narrowed, refused, n = _split(req, request_field, allowed)
    if n == 0:
        return call(req)
    extra = denied(api_key, refused, error)
    if hasattr(extra, "error_code"):
        # The errors are the items' (Fetch's top-level error is NONE when every partition is
        # refused: librdkafka would take a top-level error for a failed fetch session).
        extra = dataclasses.replace(extra, error_code=ErrorCode.none)
    if not getattr(narrowed, request_field):
        return extra
    return then(call(narrowed), lambda resp: _merge(resp, extra, response_field, first=first))


# --- the checks, one function per API -------------------------------------------------------------


def group_read(api_key: int, api: str) -> Callable[[Guard, RequestContext, Any, Call], Any]:
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup: READ on the group, else the request's
    GROUP_AUTHORIZATION_FAILED response."""

    def check(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
        if g.ok(ctx, Op.READ, R.GROUP, req.group_id, api):
            return call(req)
        resp = denied(api_key, req, GROUP_DENIED)
        if api_key == 13 and hasattr(resp, "members"):  # LeaveGroup's error response has no members
            resp = dataclasses.replace(resp, members=())
        return resp

    return check


def client_assignment_read(api: str, response: Any) -> Check:
    """ConsumerGroupPrepareAssignment / InstallAssignment (groupshift's extension APIs): READ on
    the group, as KIP-848 specified them, else GROUP_AUTHORIZATION_FAILED."""

    def check(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
        if not g.ok(ctx, Op.READ, R.GROUP, req.group_id, api):
            return response(error_code=GROUP_DENIED)
        return call(req)

    return check


def consumer_group_heartbeat(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """READ on the group; then every subscribed topic name must be DESCRIBE-able, else
    TOPIC_AUTHORIZATION_FAILED (no message, as Kafka 4.4). A regex subscription is resolved by
    the engine against the topics the member may DESCRIBE (`topic_filter` on the request
    context)."""
    api = "ConsumerGroupHeartbeat"
    if not g.ok(ctx, Op.READ, R.GROUP, req.group_id, api):
        return _cgh_refused(req, GROUP_DENIED)
    names = req.subscribed_topic_names
    if names:
        refused = sorted({n for n in names if not g.ok(ctx, Op.DESCRIBE, R.TOPIC, n, api)})
        if refused:
            return _cgh_refused(req, TOPIC_DENIED)
    if "authorizer.topic_filter" not in ctx.attributes:
        ctx.attributes["authorizer.topic_filter"] = lambda topic: g.ok(
            ctx, Op.DESCRIBE, R.TOPIC, topic, api, log=False
        )
        # engine contexts made by earlier requests on this connection lack the filter
        ctx.attributes.pop("groups.ctx", None)
    return call(req)


def _cgh_refused(req: Any, error: int) -> Any:
    """Kafka 4.4's answer: the error alone (no message; member epoch 0, the field's default)."""
    return dataclasses.replace(denied(68, req, error), error_message=None, member_epoch=0)


def streams_group_heartbeat(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """Kafka 4.4 `KafkaApis.handleStreamsGroupHeartbeat`: READ on the group; a joining member's
    topology needs DESCRIBE on every topic it names (sources, repartition and changelog topics),
    else TOPIC_AUTHORIZATION_FAILED; creating missing internal topics needs CREATE on the CLUSTER
    or on the topic, which the handler asks through the request context."""
    api = "StreamsGroupHeartbeat"
    if not g.ok(ctx, Op.READ, R.GROUP, req.group_id, api):
        return dataclasses.replace(denied(88, req, GROUP_DENIED), error_message=None)
    topology = req.topology
    if topology is not None:
        names: set[str] = set()
        for sub in topology.subtopologies:
            names.update(sub.source_topics)
            names.update(sub.repartition_sink_topics)
            names.update(i.name for i in sub.repartition_source_topics)
            names.update(i.name for i in sub.state_changelog_topics)
        refused = sorted(n for n in names if not g.ok(ctx, Op.DESCRIBE, R.TOPIC, n, api))
        if refused:
            return dataclasses.replace(
                denied(88, req, TOPIC_DENIED),
                error_message=f"Unauthorized to DESCRIBE on topics {', '.join(refused)}.",
            )
    if MAY_CREATE_TOPIC not in ctx.attributes:
        ctx.attributes[MAY_CREATE_TOPIC] = lambda topic: (
            g.ok(ctx, Op.CREATE, R.CLUSTER, CLUSTER_NAME, api, log=False)
            or g.ok(ctx, Op.CREATE, R.TOPIC, topic, api)
        )
    return call(req)


def _described_groups(
    api_key: int, api: str, ids_field: str
) -> Callable[[Guard, RequestContext, Any, Call], Any]:
    """DescribeGroups, ConsumerGroupDescribe: DESCRIBE per group (the others answered with
    GROUP_AUTHORIZATION_FAILED first); the KIP-430 bits of the principal when asked.
    ConsumerGroupDescribe also needs DESCRIBE on every topic in its members' assignments and
    target assignments: otherwise Kafka 4.x answers the group TOPIC_AUTHORIZATION_FAILED, without
    members."""

    def check(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
        ids = tuple(getattr(req, ids_field))
        refused = [i for i in ids if not g.ok(ctx, Op.DESCRIBE, R.GROUP, i, api)]
        allowed = tuple(i for i in ids if i not in refused)
        include = getattr(req, "include_authorized_operations", False)

        def finish(resp: Any) -> Any:
            groups = list(resp.groups)
            if include:
                groups = [
                    dataclasses.replace(grp, authorized_operations=g.ops(ctx, R.GROUP, grp.group_id))
                    if not grp.error_code
                    else grp
                    for grp in groups
                ]
            if api_key == 69:
                groups = [_hide_undescribed_topics(g, ctx, grp, api) for grp in groups]
            if refused:
                extra = denied(api_key, dataclasses.replace(req, **{ids_field: tuple(refused)}), GROUP_DENIED)
                groups = [*_blank_groups(extra.groups), *groups]
            return dataclasses.replace(resp, groups=tuple(groups))

        return then(call(dataclasses.replace(req, **{ids_field: allowed})), finish)

    return check


TOPICS_HIDDEN = "The group has described topic(s) that the client is not authorized to describe."


def _hide_undescribed_topics(g: Guard, ctx: RequestContext, grp: Any, api: str) -> Any:
    if grp.error_code:
        return grp
    names: set[str] = set()
    for m in grp.members:  # assigned and target topics (not the subscribed names), as Kafka
        for assignment in (m.assignment, m.target_assignment):
            names.update(tp.topic_name for tp in assignment.topic_partitions)
    if all(g.ok(ctx, Op.DESCRIBE, R.TOPIC, n, api, log=False) for n in names):
        return grp
    (blank,) = _blank_groups([grp])
    return dataclasses.replace(
        blank,
        error_code=ErrorCode(TOPIC_DENIED),
        error_message=TOPICS_HIDDEN,
        members=(),
        group_state="",
        assignor_name="",
    )


def _blank_groups(groups: Iterable[Any]) -> list[Any]:
    out = []
    for grp in groups:
        changes: dict[str, Any] = {}
        if hasattr(grp, "authorized_operations"):
            changes["authorized_operations"] = NOT_REQUESTED
        if hasattr(grp, "error_message"):
            changes["error_message"] = None
        for epoch in ("group_epoch", "assignment_epoch"):  # ConsumerGroupDescribe's defaults
            if hasattr(grp, epoch):
                changes[epoch] = 0
        out.append(dataclasses.replace(grp, **changes))
    return out


def list_groups(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """DESCRIBE on the cluster lists every group; else only the groups the principal may
    DESCRIBE (no error, no audit event)."""
    if g.cluster(ctx, Op.DESCRIBE, "ListGroups", log=False):
        return call(req)

    def finish(resp: Any) -> Any:
        groups = tuple(x for x in resp.groups if g.ok(ctx, Op.DESCRIBE, R.GROUP, x.group_id, "", log=False))
        return dataclasses.replace(resp, groups=groups)

    return then(call(req), finish)


def delete_groups(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """DELETE per group; the others answered GROUP_AUTHORIZATION_FAILED after the results."""
    return split_and_merge(
        42,
        req,
        call,
        request_field="groups_names",
        response_field="results",
        allowed=lambda name: g.ok(ctx, Op.DELETE, R.GROUP, name, "DeleteGroups"),
        error=GROUP_DENIED,
        first=False,
    )


def find_coordinator(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """DESCRIBE on the group (key type 0) or the transactional id (1), per key; refused keys
    answered with GROUP/TRANSACTIONAL_ID_AUTHORIZATION_FAILED and no node."""
    api = "FindCoordinator"
    key_type = getattr(req, "key_type", 0)
    rtype, error = (R.GROUP, GROUP_DENIED) if key_type == 0 else (R.TRANSACTIONAL_ID, TXN_DENIED)
    if key_type not in (0, 1):
        return call(req)
    if req.__version__ < 4:
        if g.ok(ctx, Op.DESCRIBE, rtype, req.key, api):
            return call(req)
        resp = denied(10, req, error)
        changes: dict[str, Any] = {}
        if hasattr(resp, "error_message"):
            changes["error_message"] = MESSAGES[error]
        return dataclasses.replace(resp, **changes) if changes else resp
    narrowed, refused, n = _split(req, "coordinator_keys", lambda k: g.ok(ctx, Op.DESCRIBE, rtype, k, api))
    if n == 0:
        return call(req)
    extra = denied(10, refused, error)
    # Kafka 4.4 answers a refused key of a batched lookup with an empty message.
    extra = dataclasses.replace(
        extra, coordinators=tuple(dataclasses.replace(c, error_message="") for c in extra.coordinators)
    )
    if not narrowed.coordinator_keys:
        return extra
    return then(call(narrowed), lambda resp: _merge(resp, extra, "coordinators", first=False))


def _existing_topic(g: Guard, name: str) -> bool:
    return g.plane.topic(name) is not None


def offset_commit(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """READ on the group (else every partition GROUP_AUTHORIZATION_FAILED), then READ per
    topic (TOPIC_AUTHORIZATION_FAILED per partition of a refused topic)."""
    api = "OffsetCommit"
    if not g.ok(ctx, Op.READ, R.GROUP, req.group_id, api):
        return denied(8, req, GROUP_DENIED)
    return split_and_merge(
        8,
        req,
        call,
        request_field="topics",
        response_field="topics",
        allowed=lambda t: g.ok(ctx, Op.READ, R.TOPIC, t.name, api),
        error=TOPIC_DENIED,
    )


def txn_offset_commit(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """Kafka `handleTxnOffsetCommitRequest`: WRITE on the transactional id (else every partition
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (GROUP_AUTHORIZATION_FAILED),
    then READ per topic (TOPIC_AUTHORIZATION_FAILED per partition of a refused topic)."""
    api = "TxnOffsetCommit"
    if not g.ok(ctx, Op.WRITE, R.TRANSACTIONAL_ID, req.transactional_id, api):
        return denied(28, req, TXN_DENIED)
    if not g.ok(ctx, Op.READ, R.GROUP, req.group_id, api):
        return denied(28, req, GROUP_DENIED)
    return split_and_merge(
        28,
        req,
        call,
        request_field="topics",
        response_field="topics",
        allowed=lambda t: g.ok(ctx, Op.READ, R.TOPIC, t.name, api),
        error=TOPIC_DENIED,
    )


def offset_delete(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """DELETE on the group, then READ per topic."""
    api = "OffsetDelete"
    if not g.ok(ctx, Op.DELETE, R.GROUP, req.group_id, api):
        return dataclasses.replace(denied(47, req, GROUP_DENIED), topics=())
    narrowed, refused, n = _split(req, "topics", lambda t: g.ok(ctx, Op.READ, R.TOPIC, t.name, api))
    if n == 0:
        return call(req)
    extra = denied(47, refused, TOPIC_DENIED)
    extra = dataclasses.replace(extra, error_code=ErrorCode(0))
    if not narrowed.topics:
        return extra
    return then(call(narrowed), lambda resp: _merge(resp, extra, "topics", first=True))


def _fetch_group(g: Guard, ctx: RequestContext, group: Any, api: str) -> tuple[Any, list[Any]] | None:
    """One OffsetFetch group: None when the group is refused, else (the group narrowed to the
    DESCRIBE-able topics, the refused topics)."""
    if not g.ok(ctx, Op.DESCRIBE, R.GROUP, group.group_id, api):
        return None
    if group.topics is None:
        return group, []
    refused = [t for t in group.topics if not g.ok(ctx, Op.DESCRIBE, R.TOPIC, t.name, api)]
    return dataclasses.replace(group, topics=tuple(t for t in group.topics if t not in refused)), refused


def _refused_topics(resp_topic_type: type, part_type: type, refused: list[Any], version: int) -> list[Any]:
    out = []
    for t in refused:
        parts = []
        for p in t.partition_indexes:
            values: dict[str, Any] = {
                "partition_index": p,
                "committed_offset": -1,
                "metadata": "",
                "error_code": ErrorCode(TOPIC_DENIED),
            }
            if any(f.name == "committed_leader_epoch" for f in dataclasses.fields(part_type)):
                values["committed_leader_epoch"] = -1
            parts.append(part_type(**values))
        out.append(resp_topic_type(name=t.name, partitions=tuple(parts)))
    return out


def _types_of(rtype: type, path: list[str]) -> type:
    """The entity class reached through array fields `path` of `rtype` (kio schemas)."""
    import typing

    cls: Any = rtype
    for name in path:
        f = next(f for f in dataclasses.fields(cls) if f.name == name)
        args = [a for a in typing.get_args(f.type) if dataclasses.is_dataclass(a)]
        inner = typing.get_args(args[0]) if not args else ()
        cls = args[0] if args else inner[0]
    return cls  # type: ignore[no-any-return]


def offset_fetch(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """DESCRIBE on each group (else the group's GROUP_AUTHORIZATION_FAILED); named topics the
    principal may not DESCRIBE answered TOPIC_AUTHORIZATION_FAILED (offset -1); for all
    topics (null), those topics are left out of the answer."""
    api = "OffsetFetch"
    version = req.__version__
    rtype = response_type_of(req)

    def drop_hidden(topics: Iterable[Any]) -> tuple[Any, ...]:
        return tuple(t for t in topics if g.ok(ctx, Op.DESCRIBE, R.TOPIC, t.name, api, log=False))

    if version < 8:
        one = _fetch_group(g, ctx, req, api)
        if one is None:
            return denied(9, req, GROUP_DENIED)
        narrowed, refused = one
        all_topics = req.topics is None
        topic_t = _types_of(rtype, ["topics"])
        part_t = _types_of(topic_t, ["partitions"])

        def finish(resp: Any) -> Any:
            if getattr(resp, "error_code", 0):
                return resp
            topics = drop_hidden(resp.topics) if all_topics else tuple(resp.topics)
            return dataclasses.replace(
                resp, topics=topics + tuple(_refused_topics(topic_t, part_t, refused, version))
            )

        if not all_topics and not narrowed.topics and refused:
            return _fetch_refused_only(rtype, refused, topic_t, part_t, version)
        return then(call(narrowed), finish)
    groups = list(req.groups)
    decisions = [_fetch_group(g, ctx, grp, api) for grp in groups]
    asked = tuple(d[0] for d in decisions if d is not None)
    group_t = _types_of(rtype, ["groups"])
    topic_t = _types_of(group_t, ["topics"])
    part_t = _types_of(topic_t, ["partitions"])

    def finish_all(resp: Any) -> Any:
        answered = {grp.group_id: grp for grp in resp.groups}
        out = []
        for grp, d in zip(groups, decisions, strict=True):
            if d is None:
                out.append(_group_entry(group_t, grp.group_id, GROUP_DENIED))
                continue
            got = answered.get(grp.group_id)
            if got is None:
                continue
            if got.error_code:
                out.append(got)
                continue
            topics = drop_hidden(got.topics) if grp.topics is None else tuple(got.topics)
            out.append(
                dataclasses.replace(
                    got, topics=topics + tuple(_refused_topics(topic_t, part_t, d[1], version))
                )
            )
        return dataclasses.replace(resp, groups=tuple(out))

    if not asked:
        return finish_all(dataclasses.replace(denied(9, req, 0), groups=()))
    return then(call(dataclasses.replace(req, groups=asked)), finish_all)


def _group_entry(group_t: type, group_id: str, error: int) -> Any:
    return group_t(group_id=group_id, topics=(), error_code=ErrorCode(error))


def _fetch_refused_only(rtype: type, refused: list[Any], topic_t: type, part_t: type, version: int) -> Any:
    values: dict[str, Any] = {"topics": tuple(_refused_topics(topic_t, part_t, refused, version))}
    names = {f.name for f in dataclasses.fields(rtype)}
    if "throttle_time" in names:
        import datetime

        values["throttle_time"] = datetime.timedelta(0)
    if "error_code" in names:
        values["error_code"] = ErrorCode(0)
    return rtype(**values)


def describe_configs_like(
    api_key: int, api: str, op: Op
) -> Callable[[Guard, RequestContext, Any, Call], Any]:
    """DescribeConfigs (DESCRIBE_CONFIGS), AlterConfigs and IncrementalAlterConfigs
    (ALTER_CONFIGS): per resource, on the CLUSTER for a broker (or broker logger), on the
    topic, on the group; refused resources answered CLUSTER/TOPIC/GROUP_AUTHORIZATION_FAILED."""
    response_field = "results" if api_key == 32 else "responses"
    kinds = {
        2: (R.TOPIC, TOPIC_DENIED),
        4: (R.CLUSTER, CLUSTER_DENIED),
        8: (R.CLUSTER, CLUSTER_DENIED),
        32: (R.GROUP, GROUP_DENIED),
    }

    def allowed(g: Guard, ctx: RequestContext, res: Any) -> bool:
        rtype, _ = kinds.get(res.resource_type, (R.CLUSTER, CLUSTER_DENIED))
        name = CLUSTER_NAME if rtype == R.CLUSTER else res.resource_name
        return g.ok(ctx, op, rtype, name, api)

    def check(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
        refused = [r for r in req.resources if not allowed(g, ctx, r)]
        if not refused:
            return call(req)
        extras = []
        for r in refused:
            _, error = kinds.get(r.resource_type, (R.CLUSTER, CLUSTER_DENIED))
            extra = denied(api_key, dataclasses.replace(req, resources=(r,)), error)
            entry = getattr(extra, response_field)[0]
            if hasattr(entry, "error_message"):
                entry = dataclasses.replace(entry, error_message=MESSAGES[error])
            extras.append(entry)
        keep = tuple(r for r in req.resources if r not in refused)
        if not keep:
            resp = denied(api_key, dataclasses.replace(req, resources=()), 0)
            return dataclasses.replace(resp, **{response_field: tuple(extras)})
        return then(
            call(dataclasses.replace(req, resources=keep)),
            lambda resp: dataclasses.replace(
                resp, **{response_field: tuple(extras) + tuple(getattr(resp, response_field))}
            ),
        )

    return check


def metadata(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """DESCRIBE per topic: for all topics, the others are left out; named ones are answered
    TOPIC_AUTHORIZATION_FAILED. A topic that would be auto-created also needs CREATE on the
    cluster or the topic (else TOPIC_AUTHORIZATION_FAILED, nothing created). The KIP-430 bits
    (topic and cluster) are the principal's."""
    api = "Metadata"
    version = req.__version__
    all_topics = req.topics is None or (version == 0 and not req.topics)
    refused: list[str] = []
    if not all_topics:
        auto = getattr(req, "allow_auto_topic_creation", True) and g.plane.auto_create_topics
        may_create_all = auto and g.cluster(ctx, Op.CREATE, api, log=False)

        def keep(t: Any) -> bool:
            if t.name is None:
                return True
            if not g.ok(ctx, Op.DESCRIBE, R.TOPIC, t.name, api):
                refused.append(t.name)
                return False
            if (
                auto
                and not may_create_all
                and not _existing_topic(g, t.name)
                and not g.ok(ctx, Op.CREATE, R.TOPIC, t.name, api)
            ):
                refused.append(t.name)
                return False
            return True

        kept = tuple(t for t in req.topics if keep(t))
        if refused:
            req = dataclasses.replace(req, topics=kept)
    include_topic_ops = getattr(req, "include_topic_authorized_operations", False)
    include_cluster_ops = getattr(req, "include_cluster_authorized_operations", False)

    def finish(resp: Any) -> Any:
        topics = []
        for t in resp.topics:
            if (
                t.name is not None
                and all_topics
                and not g.ok(ctx, Op.DESCRIBE, R.TOPIC, t.name, api, log=False)
            ):
                continue
            if t.name is not None and not all_topics and not g.ok(ctx, Op.DESCRIBE, R.TOPIC, t.name, api):
                # asked by topic id (v12+): the topic is not shown, its id answered refused
                t = dataclasses.replace(
                    t, error_code=ErrorCode(TOPIC_DENIED), name=None, partitions=(), is_internal=False
                )
            if include_topic_ops and not t.error_code and t.name is not None:
                t = dataclasses.replace(t, topic_authorized_operations=g.ops(ctx, R.TOPIC, t.name))
            topics.append(t)
        if refused:
            extra = denied(3, dataclasses.replace(req, topics=()), 0)
            entry_t = _types_of(type(resp), ["topics"])
            blank = {f.name: f for f in dataclasses.fields(entry_t)}
            denied_entries = []
            for name in dict.fromkeys(refused):
                values: dict[str, Any] = {
                    "error_code": ErrorCode(TOPIC_DENIED),
                    "name": name,
                    "is_internal": False,
                    "partitions": (),
                }
                if "topic_id" in blank:
                    values["topic_id"] = uuid.UUID(int=0)
                if "topic_authorized_operations" in blank:
                    values["topic_authorized_operations"] = NOT_REQUESTED
                denied_entries.append(entry_t(**{k: v for k, v in values.items() if k in blank}))
            del extra
            topics = topics + denied_entries  # Kafka: the authorized topics first
        changes: dict[str, Any] = {"topics": tuple(topics)}
        if include_cluster_ops and hasattr(resp, "cluster_authorized_operations"):
            changes["cluster_authorized_operations"] = g.ops(ctx, R.CLUSTER, CLUSTER_NAME)
        return dataclasses.replace(resp, **changes)

    return then(call(req), finish)


def describe_cluster(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """No check (Kafka answers every principal); the cluster's KIP-430 bits are the principal's."""
    if not getattr(req, "include_cluster_authorized_operations", False):
        return call(req)
    return then(
        call(req),
        lambda resp: dataclasses.replace(
            resp, cluster_authorized_operations=g.ops(ctx, R.CLUSTER, CLUSTER_NAME)
        ),
    )


def _by_topic(
    api_key: int,
    api: str,
    op: Op,
    request_field: str,
    response_field: str,
    name_of: Callable[[Guard, Any], str | None],
    *,
    first: bool = False,
) -> Callable[[Guard, RequestContext, Any, Call], Any]:
    """`op` per topic; refused topics' partitions answered TOPIC_AUTHORIZATION_FAILED after the
    others (before them with `first`), as Kafka merges its answers."""

    def check(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
        def allowed(t: Any) -> bool:
            name = name_of(g, t)
            return name is None or g.ok(ctx, op, R.TOPIC, name, api)

        return split_and_merge(
            api_key,
            req,
            call,
            request_field=request_field,
            response_field=response_field,
            allowed=allowed,
            error=TOPIC_DENIED,
            first=first,
        )

    return check


def _name(g: Guard, t: Any) -> str | None:
    return t.name  # type: ignore[no-any-return]


def _fetch_name(g: Guard, t: Any) -> str | None:
    """A topic entry's name: its `topic` or `name`, else the name of its topic id (None for an
    unknown id, which the handler answers UNKNOWN_TOPIC_ID)."""
    for field in ("topic", "name"):
        if getattr(t, field, None) is not None:
            return getattr(t, field)  # type: ignore[no-any-return]
    found = g.plane.topic_by_id(t.topic_id) if getattr(t, "topic_id", None) is not None else None
    return None if found is None else found.name


def delete_topics(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """DELETE per topic: v1-v5 name topics as strings (`topic_names`), v6 as entries with a
    name or a topic id (resolved here, so a topic cannot be deleted by id unchecked)."""
    api = "DeleteTopics"
    field = "topics" if hasattr(req, "topics") else "topic_names"

    def allowed(t: Any) -> bool:
        name = t if isinstance(t, str) else _fetch_name(g, t)
        return name is None or g.ok(ctx, Op.DELETE, R.TOPIC, name, api)

    return split_and_merge(
        20, req, call, request_field=field, response_field="responses", allowed=allowed, error=TOPIC_DENIED
    )


def produce(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """WRITE per topic (TOPIC_AUTHORIZATION_FAILED per partition); a transactional producer
    also needs WRITE on its transactional id. With acks=0 a refusal closes the connection, as
    Kafka closes it for any acks=0 error."""
    api = "Produce"
    txn = getattr(req, "transactional_id", None)
    if txn is not None and not g.ok(ctx, Op.WRITE, R.TRANSACTIONAL_ID, txn, api):
        if req.acks == 0:
            raise CloseConnection("authorization.failed", api=api)
        return denied(0, req, TXN_DENIED)
    if req.acks == 0 and any(
        (name := _fetch_name(g, t)) is not None and not g.ok(ctx, Op.WRITE, R.TOPIC, name, api)
        for t in req.topic_data
    ):
        raise CloseConnection("authorization.failed", api=api)
    return _by_topic(0, api, Op.WRITE, "topic_data", "responses", _fetch_name)(g, ctx, req, call)


def create_topics(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """CREATE on the cluster, or else per topic (TOPIC_AUTHORIZATION_FAILED)."""
    api = "CreateTopics"
    if g.cluster(ctx, Op.CREATE, api, log=False):
        return call(req)
    narrowed, refused, n = _split(req, "topics", lambda t: g.ok(ctx, Op.CREATE, R.TOPIC, t.name, api))
    if n == 0:
        return call(req)
    extra = denied(19, refused, TOPIC_DENIED)
    # Kafka's `ApiError(TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")`
    extra = dataclasses.replace(
        extra,
        topics=tuple(dataclasses.replace(t, error_message="Authorization failed.") for t in extra.topics),
    )
    if not narrowed.topics:
        return extra
    return then(call(narrowed), lambda resp: _merge(resp, extra, "topics", first=False))


def init_producer_id(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """WRITE on the transactional id; without one (idempotence), IDEMPOTENT_WRITE on the
    cluster or an ALLOW WRITE on some topic pattern (Kafka's `authorizeByResourceType`)."""
    api = "InitProducerId"
    if req.transactional_id is not None:
        if g.ok(ctx, Op.WRITE, R.TRANSACTIONAL_ID, req.transactional_id, api):
            return call(req)
        return denied(22, req, TXN_DENIED)
    if g.cluster(ctx, Op.IDEMPOTENT_WRITE, api, log=False) or g.authorizer.decider.authorize_by_resource_type(
        ctx.principal, ctx.client_host, Op.WRITE, R.TOPIC
    ):
        return call(req)
    g.cluster(ctx, Op.IDEMPOTENT_WRITE, api)
    return denied(22, req, CLUSTER_DENIED)


def cluster_only(api_key: int, api: str, op: Op) -> Callable[[Guard, RequestContext, Any, Call], Any]:
    def check(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
        if g.cluster(ctx, op, api):
            return call(req)
        return denied(api_key, req, CLUSTER_DENIED)

    return check


def unchecked(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    return call(req)


def fetch(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """A follower's Fetch (replica id >= 0) needs CLUSTER_ACTION on the cluster, else every
    partition is answered TOPIC_AUTHORIZATION_FAILED; a consumer's needs READ per topic, the
    refused topics' partitions answered first, as Kafka puts its erroneous partitions first."""
    api = "Fetch"
    state = getattr(req, "replica_state", None)
    replica = int(state.replica_id) if state is not None else int(getattr(req, "replica_id", -1))
    if replica >= 0:
        if g.cluster(ctx, Op.CLUSTER_ACTION, api):
            return call(req)
        return denied(1, req, TOPIC_DENIED)
    return _by_topic(1, api, Op.READ, "topics", "responses", _fetch_name, first=True)(g, ctx, req, call)


def _topic(g: Guard, t: Any) -> str | None:
    return t.topic  # type: ignore[no-any-return]


def offset_for_leader_epoch(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """CLUSTER_ACTION on the cluster (a replica) lets every topic through unlogged; else
    DESCRIBE per topic (KIP-320's consumer check), refused topics' partitions answered
    TOPIC_AUTHORIZATION_FAILED after the others."""
    api = "OffsetForLeaderEpoch"
    if g.cluster(ctx, Op.CLUSTER_ACTION, api, log=False):
        return call(req)
    return _by_topic(23, api, Op.DESCRIBE, "topics", "topics", _topic)(g, ctx, req, call)


def describe_producers(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """READ per topic; a refused topic's partitions answered TOPIC_AUTHORIZATION_FAILED with
    Kafka's message, every topic in the request's order (Kafka answers topic by topic)."""
    api = "DescribeProducers"
    refused = {t.name for t in req.topics if not g.ok(ctx, Op.READ, R.TOPIC, t.name, api)}
    if not refused:
        return call(req)
    extra = denied(
        61, dataclasses.replace(req, topics=tuple(t for t in req.topics if t.name in refused)), TOPIC_DENIED
    )
    extra_topics = [
        dataclasses.replace(
            t,
            partitions=tuple(
                dataclasses.replace(p, error_message=MESSAGES[TOPIC_DENIED]) for p in t.partitions
            ),
        )
        for t in extra.topics
    ]
    kept = tuple(t for t in req.topics if t.name not in refused)

    def in_request_order(resp: Any) -> Any:
        answers: dict[str, list[Any]] = {}
        for t in [*resp.topics, *extra_topics]:
            answers.setdefault(t.name, []).append(t)
        ordered = [answers[t.name].pop(0) for t in req.topics if answers.get(t.name)]
        return dataclasses.replace(resp, topics=tuple(ordered))

    if not kept:
        return in_request_order(dataclasses.replace(extra, topics=()))
    return then(call(dataclasses.replace(req, topics=kept)), in_request_order)


def describe_transactions(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """DESCRIBE per transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); each
    state's topics narrowed to those the principal may DESCRIBE; in the request's order."""
    api = "DescribeTransactions"
    ids = tuple(req.transactional_ids)
    refused = {i for i in ids if not g.ok(ctx, Op.DESCRIBE, R.TRANSACTIONAL_ID, i, api)}
    kept = tuple(i for i in ids if i not in refused)
    extra = {
        s.transactional_id: s
        for s in denied(
            65, dataclasses.replace(req, transactional_ids=tuple(refused)), TXN_DENIED
        ).transaction_states
    }

    def finish(resp: Any) -> Any:
        answered = {s.transactional_id: s for s in resp.transaction_states}
        out = []
        for i in ids:
            st = extra.get(i) or answered.get(i)
            if st is None:
                continue
            topics = tuple(t for t in st.topics if g.ok(ctx, Op.DESCRIBE, R.TOPIC, t.topic, api))
            out.append(dataclasses.replace(st, topics=topics))
        return dataclasses.replace(resp, transaction_states=tuple(out))

    if not kept:
        return finish(dataclasses.replace(denied(65, dataclasses.replace(req, transactional_ids=()), 0)))
    return then(call(dataclasses.replace(req, transactional_ids=kept)), finish)


def list_transactions(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """Only the transactional ids the principal may DESCRIBE are listed."""

    def finish(resp: Any) -> Any:
        states = tuple(
            s
            for s in resp.transaction_states
            if g.ok(ctx, Op.DESCRIBE, R.TRANSACTIONAL_ID, s.transactional_id, "ListTransactions")
        )
        return dataclasses.replace(resp, transaction_states=states)

    return then(call(req), finish)


def add_partitions_to_txn(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """A client's request (v0-3): WRITE on the transactional id (else every partition
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE per topic: with any topic refused nothing
    is added, refused partitions answered TOPIC_AUTHORIZATION_FAILED and the others
    OPERATION_NOT_ATTEMPTED. A broker's batch (v4+) needs CLUSTER_ACTION on the cluster."""
    api = "AddPartitionsToTxn"
    rtype = response_type_of(req)
    if req.__version__ >= 4:
        if g.cluster(ctx, Op.CLUSTER_ACTION, api):
            return call(req)
        return build(rtype, {"throttle_time": 0, "error_code": CLUSTER_DENIED, "results_by_transaction": []})
    txn = req.v3_and_below_transactional_id
    topics = req.v3_and_below_topics

    def answer(code_of: Callable[[str], int]) -> Any:
        return build(
            rtype,
            {
                "throttle_time": 0,
                "results_by_topic_v3_and_below": [
                    {
                        "name": t.name,
                        "results_by_partition": [
                            {"partition_index": p, "partition_error_code": code_of(t.name)}
                            for p in t.partitions
                        ],
                    }
                    for t in topics
                ],
            },
        )

    if not g.ok(ctx, Op.WRITE, R.TRANSACTIONAL_ID, txn, api):
        return answer(lambda _: TXN_DENIED)
    refused = {t.name for t in topics if not g.ok(ctx, Op.WRITE, R.TOPIC, t.name, api)}
    if not refused:
        return call(req)
    not_attempted = int(ErrorCode.operation_not_attempted)
    return answer(lambda name: TOPIC_DENIED if name in refused else not_attempted)


def end_txn(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """WRITE on the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
    if g.ok(ctx, Op.WRITE, R.TRANSACTIONAL_ID, req.transactional_id, "EndTxn"):
        return call(req)
    return denied(26, req, TXN_DENIED)


def add_offsets_to_txn(g: Guard, ctx: RequestContext, req: Any, call: Call) -> Any:
    """WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ
    on the group (else GROUP_AUTHORIZATION_FAILED)."""
    api = "AddOffsetsToTxn"
    if not g.ok(ctx, Op.WRITE, R.TRANSACTIONAL_ID, req.transactional_id, api):
        return denied(25, req, TXN_DENIED)
    if not g.ok(ctx, Op.READ, R.GROUP, req.group_id, api):
        return denied(25, req, GROUP_DENIED)
    return call(req)


Check = Callable[[Guard, RequestContext, Any, Call], Any]

CHECKS: dict[int, tuple[str, Check]] = {
    18: ("ApiVersions: none", unchecked),
    17: ("SaslHandshake: none (consumed by the authenticator, ILLEGAL_SASL_STATE after it)", unchecked),
    36: ("SaslAuthenticate: none (consumed by the authenticator, ILLEGAL_SASL_STATE after it)", unchecked),
    50: ("DescribeUserScramCredentials: DESCRIBE on the CLUSTER (in the handler)", unchecked),
    51: ("AlterUserScramCredentials: ALTER on the CLUSTER (in the handler)", unchecked),
    48: (
        "DescribeClientQuotas: DESCRIBE_CONFIGS on the CLUSTER",
        cluster_only(48, "DescribeClientQuotas", Op.DESCRIBE_CONFIGS),
    ),
    29: ("DescribeAcls: DESCRIBE on the CLUSTER (in the handler)", unchecked),
    30: ("CreateAcls: ALTER on the CLUSTER (in the handler)", unchecked),
    31: ("DeleteAcls: ALTER on the CLUSTER (in the handler)", unchecked),
    11: ("JoinGroup: READ on the GROUP", group_read(11, "JoinGroup")),
    14: ("SyncGroup: READ on the GROUP", group_read(14, "SyncGroup")),
    12: ("Heartbeat: READ on the GROUP", group_read(12, "Heartbeat")),
    13: ("LeaveGroup: READ on the GROUP", group_read(13, "LeaveGroup")),
    68: (
        "ConsumerGroupHeartbeat: READ on the GROUP; DESCRIBE on every subscribed TOPIC "
        "(else TOPIC_AUTHORIZATION_FAILED); a regex resolves only to DESCRIBE-able topics",
        consumer_group_heartbeat,
    ),
    69: (
        "ConsumerGroupDescribe: DESCRIBE per GROUP, and DESCRIBE on its members' assigned TOPICs (else "
        "TOPIC_AUTHORIZATION_FAILED, no members); authorized operations of the GROUP",
        _described_groups(69, "ConsumerGroupDescribe", "group_ids"),
    ),
    88: (
        "StreamsGroupHeartbeat: READ on the GROUP; DESCRIBE on every TOPIC of a joining member's "
        "topology (else TOPIC_AUTHORIZATION_FAILED); CREATE on the CLUSTER or the TOPIC to create a "
        "missing internal topic (else a MISSING_INTERNAL_TOPICS status)",
        streams_group_heartbeat,
    ),
    89: (
        "StreamsGroupDescribe: DESCRIBE per GROUP; authorized operations of the GROUP",
        _described_groups(89, "StreamsGroupDescribe", "group_ids"),
    ),
    93: (
        "StreamsGroupTopologyDescriptionUpdate: READ on the GROUP",
        group_read(93, "StreamsGroupTopologyDescriptionUpdate"),
    ),
    15: (
        "DescribeGroups: DESCRIBE per GROUP; authorized operations of the GROUP",
        _described_groups(15, "DescribeGroups", "groups"),
    ),
    16: ("ListGroups: DESCRIBE on the CLUSTER, else only GROUPs with DESCRIBE", list_groups),
    42: ("DeleteGroups: DELETE per GROUP", delete_groups),
    10: (
        "FindCoordinator: DESCRIBE on the GROUP / TRANSACTIONAL_ID per key",
        find_coordinator,
    ),
    8: ("OffsetCommit: READ on the GROUP, READ per TOPIC", offset_commit),
    9: (
        "OffsetFetch: DESCRIBE per GROUP, DESCRIBE per TOPIC (all topics: filtered)",
        offset_fetch,
    ),
    47: ("OffsetDelete: DELETE on the GROUP, READ per TOPIC", offset_delete),
    28: (
        "TxnOffsetCommit: WRITE on the TRANSACTIONAL_ID, READ on the GROUP, READ per TOPIC",
        txn_offset_commit,
    ),
    3: (
        "Metadata: DESCRIBE per TOPIC (all topics: filtered); auto-creation needs CREATE on "
        "the CLUSTER or the TOPIC; authorized operations of TOPIC and CLUSTER",
        metadata,
    ),
    0: ("Produce: WRITE per TOPIC; WRITE on the TRANSACTIONAL_ID", produce),
    1: ("Fetch: READ per TOPIC (a follower's: CLUSTER_ACTION on the CLUSTER)", fetch),
    2: (
        "ListOffsets: DESCRIBE per TOPIC",
        _by_topic(2, "ListOffsets", Op.DESCRIBE, "topics", "topics", _name),
    ),
    19: ("CreateTopics: CREATE on the CLUSTER, else CREATE per TOPIC", create_topics),
    20: ("DeleteTopics: DELETE per TOPIC (named or by id)", delete_topics),
    37: (
        "CreatePartitions: ALTER per TOPIC",
        _by_topic(37, "CreatePartitions", Op.ALTER, "topics", "results", _name),
    ),
    21: (
        "DeleteRecords: DELETE per TOPIC",
        _by_topic(21, "DeleteRecords", Op.DELETE, "topics", "topics", _name),
    ),
    22: (
        "InitProducerId: WRITE on the TRANSACTIONAL_ID, else IDEMPOTENT_WRITE on the CLUSTER "
        "or WRITE on some TOPIC pattern (Kafka's authorizeByResourceType)",
        init_producer_id,
    ),
    32: (
        "DescribeConfigs: DESCRIBE_CONFIGS on the CLUSTER (broker), TOPIC or GROUP",
        describe_configs_like(32, "DescribeConfigs", Op.DESCRIBE_CONFIGS),
    ),
    33: (
        "AlterConfigs: ALTER_CONFIGS on the CLUSTER (broker), TOPIC or GROUP",
        describe_configs_like(33, "AlterConfigs", Op.ALTER_CONFIGS),
    ),
    44: (
        "IncrementalAlterConfigs: ALTER_CONFIGS on the CLUSTER (broker), TOPIC or GROUP",
        describe_configs_like(44, "IncrementalAlterConfigs", Op.ALTER_CONFIGS),
    ),
    60: ("DescribeCluster: none; authorized operations of the CLUSTER", describe_cluster),
    # Served only in upstream mode, where they are forwarded (gateway.upstream.forwarded_acls),
    # or terminated there (TxnOffsetCommit).
    23: (
        "OffsetForLeaderEpoch: CLUSTER_ACTION on the CLUSTER, else DESCRIBE per TOPIC",
        offset_for_leader_epoch,
    ),
    24: (
        "AddPartitionsToTxn: WRITE on the TRANSACTIONAL_ID and WRITE per TOPIC (v4+: CLUSTER_ACTION)",
        add_partitions_to_txn,
    ),
    25: ("AddOffsetsToTxn: WRITE on the TRANSACTIONAL_ID, READ on the GROUP", add_offsets_to_txn),
    26: ("EndTxn: WRITE on the TRANSACTIONAL_ID", end_txn),
    35: ("DescribeLogDirs: DESCRIBE on the CLUSTER", cluster_only(35, "DescribeLogDirs", Op.DESCRIBE)),
    43: ("ElectLeaders: ALTER on the CLUSTER", cluster_only(43, "ElectLeaders", Op.ALTER)),
    45: (
        "AlterPartitionReassignments: ALTER on the CLUSTER",
        cluster_only(45, "AlterPartitionReassignments", Op.ALTER),
    ),
    46: (
        "ListPartitionReassignments: DESCRIBE on the CLUSTER",
        cluster_only(46, "ListPartitionReassignments", Op.DESCRIBE),
    ),
    49: (
        "AlterClientQuotas: ALTER_CONFIGS on the CLUSTER",
        cluster_only(49, "AlterClientQuotas", Op.ALTER_CONFIGS),
    ),
    57: ("UpdateFeatures: ALTER on the CLUSTER", cluster_only(57, "UpdateFeatures", Op.ALTER)),
    61: ("DescribeProducers: READ per TOPIC", describe_producers),
    65: (
        "DescribeTransactions: DESCRIBE per TRANSACTIONAL_ID; only DESCRIBE-able TOPICs shown",
        describe_transactions,
    ),
    66: ("ListTransactions: only TRANSACTIONAL_IDs with DESCRIBE listed", list_transactions),
    caw.PREPARE_ASSIGNMENT_KEY: (
        "ConsumerGroupPrepareAssignment: READ on the GROUP (groupshift extension, "
        "docs/client-side-assignors.md)",
        client_assignment_read("ConsumerGroupPrepareAssignment", caw.PrepareAssignmentResponse),
    ),
    caw.INSTALL_ASSIGNMENT_KEY: (
        "ConsumerGroupInstallAssignment: READ on the GROUP (groupshift extension, "
        "docs/client-side-assignors.md)",
        client_assignment_read("ConsumerGroupInstallAssignment", caw.InstallAssignmentResponse),
    ),
    cw.CONNECT_HEARTBEAT_KEY: (
        "ConnectGroupHeartbeat: READ on the GROUP (groupshift extension, docs/connect-groups.md)",
        client_assignment_read("ConnectGroupHeartbeat", cw.ConnectHeartbeatResponse),
    ),
    cw.CONNECT_PREPARE_KEY: (
        "ConnectGroupPrepareAssignment: READ on the GROUP (groupshift extension, docs/connect-groups.md)",
        client_assignment_read("ConnectGroupPrepareAssignment", cw.ConnectPrepareResponse),
    ),
    cw.CONNECT_INSTALL_KEY: (
        "ConnectGroupInstallAssignment: READ on the GROUP (groupshift extension, docs/connect-groups.md)",
        client_assignment_read("ConnectGroupInstallAssignment", cw.ConnectInstallResponse),
    ),
}


def _invoke(fn: Handler, ctx: RequestContext, header: Any, req: Any) -> Any:
    result = fn(ctx, header, req)
    if asyncio.iscoroutine(result):
        return asyncio.ensure_future(result)
    return result


def wrap(guard: Guard, api_key: int, fn: Handler, enabled: Callable[[], bool] | None = None) -> Handler:
    """`fn` behind its check (or, with no entry, behind CLUSTER_AUTHORIZATION_FAILED). An API
    switched off (`enabled`, e.g. ConsumerGroupHeartbeat without the consumer protocol) goes
    straight to its handler: Kafka answers UNSUPPORTED_VERSION before it authorizes."""
    entry = CHECKS.get(api_key)
    check: Check = entry[1] if entry else cluster_only(api_key, f"Api{api_key}", Op.ALL)
    if check is unchecked:
        return fn

    def checked(ctx: RequestContext, header: Any, req: Any) -> Any:
        if enabled is not None and not enabled():
            return _invoke(fn, ctx, header, req)
        return check(guard, ctx, req, lambda r: _invoke(fn, ctx, header, r))

    return checked


def install_checks(registry: HandlerRegistry, authorizer: Authorizer, plane: Topics) -> None:
    """Put every registered API behind its check."""
    guard = Guard(authorizer, plane)
    for api_key in list(registry):
        spec = registry.get(api_key)
        assert spec is not None
        registry.register(
            api_key,
            spec.min_version,
            spec.max_version,
            wrap(guard, api_key, spec.fn, spec.enabled),
            enabled=spec.enabled,
            replace=True,
        )
