"""Upstream mode's `gateway` identity: every forwarded request authorized with groupshift's ACLs.

In `upstream.identity=gateway` (issue 29) groupshift authenticates clients on its own listeners
and talks to the cluster with its own credential, so the cluster's ACLs see one principal,
groupshift's. What a client may do with the data plane is therefore decided here, with exactly
the rules Kafka 4.x's `KafkaApis` applies when it serves the same APIs itself: each forwarded
request goes through its entry of `gateway.authorizer.checks.CHECKS` (the table the APIs
groupshift answers itself use), whose `call` is "forward this (possibly narrowed) request".

* A request about several resources is split as Kafka answers it: the authorized part is
  re-encoded and forwarded, the refused part answered TOPIC_AUTHORIZATION_FAILED (or the
  request's own refusal) and merged into the upstream's answer in Kafka's order; Metadata
  leaves out what the principal may not DESCRIBE; a refusal of a Produce with acks=0 closes
  the connection, as Kafka closes it.
* A request that is wholly authorized is forwarded as the client's own bytes and its answer
  passed on as the broker's, undecoded, whenever the check needs nothing of the answer (Produce,
  Fetch, ListOffsets, ...), so an authorized data plane costs one request decode, no response
  decode.
* Denials are `acl.denied` audit events, like those of the terminated APIs.
* Forwarded APIs with no entry in CHECKS are not advertised in ApiVersions and are refused as
  `gateway.authorizer.checks.wrap` refuses them (CLUSTER_AUTHORIZATION_FAILED to all but super
  users); every advertised version is one kio can decode (a check has to read the request).
* The security APIs (ACLs, SCRAM credentials) are groupshift's own, terminated: they manage the
  identities and ACLs groupshift enforces, not the cluster's.

Metadata's auto-creation rule needs the cluster's `auto.create.topics.enable`: read from a
broker's configuration (DescribeConfigs) each time the upstream brokers change; when groupshift's
own credential may not read it, auto-creation is assumed on (a principal without CREATE is then
refused a missing topic, never given one).

Without `authorizer.class.name` none of this exists: the proxy forwards raw frames as before,
and no request or answer is decoded (Kafka without an authorizer allows every principal).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from gateway.authorizer import Authorizer
from gateway.authorizer.checks import CHECKS, Check, Guard, NamedTopic, cluster_only
from gateway.authorizer.model import AclOperation
from gateway.connection import CapturingSlot, KafkaConnection, ResponseSlot
from gateway.registry import NO_RESPONSE, CloseConnection
from protocol.codec import DecodeFailure, api_schema, decode, decode_response, encode_request, encode_response

if TYPE_CHECKING:
    from gateway.upstream.cluster import UpstreamCluster

Forward = Callable[[KafkaConnection, bytes, ResponseSlot, int, int, int], None]
"""The proxy's forwarding path: (connection, frame, slot, api key, version, correlation id)."""
Terminate = Callable[[KafkaConnection, bytes, ResponseSlot], None]
"""The dispatcher: groupshift answers the frame itself."""

log = structlog.get_logger("upstream")

METADATA = 3
DESCRIBE_CONFIGS = 32
BROKER_RESOURCE = 4
AUTO_CREATE = "auto.create.topics.enable"
# Answered by groupshift itself in gateway mode with an authorizer: DescribeAcls, CreateAcls,
# DeleteAcls, DescribeUserScramCredentials, AlterUserScramCredentials.
SECURITY_APIS = frozenset({29, 30, 31, 50, 51})


class UpstreamTopics:
    """The cluster's topics as the checks read them (`gateway.authorizer.checks.Topics`):
    names and ids from the last upstream metadata, auto-creation from the brokers' config."""

    def __init__(self, cluster: UpstreamCluster) -> None:
        self.cluster = cluster
        self.auto_create_topics = True

    def topic(self, name: str) -> NamedTopic | None:
        return self.cluster.image.topic(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> NamedTopic | None:
        return self.cluster.image.topic_by_id(topic_id)

    async def read_auto_create(self, brokers: Any) -> None:
        """`auto.create.topics.enable` of one broker (KRaft clusters set it cluster-wide)."""
        if not brokers:
            return
        node = min(brokers)
        try:
            resp = await self.cluster.call(
                node,
                DESCRIBE_CONFIGS,
                self.cluster.version_for(DESCRIBE_CONFIGS, 4),
                {
                    "resources": [
                        {
                            "resource_type": BROKER_RESOURCE,
                            "resource_name": str(node),
                            "configuration_keys": [AUTO_CREATE],
                        }
                    ],
                    "include_synonyms": False,
                    "include_documentation": False,
                },
            )
        except Exception as e:  # unreachable or undecodable: keep the safe assumption
            log.warning("upstream.auto_create_unknown", error=repr(e))
            return
        for result in resp.results:
            if result.error_code:
                log.warning("upstream.auto_create_unknown", error_code=int(result.error_code))
                continue
            for entry in result.configs:
                if entry.name == AUTO_CREATE and entry.value is not None:
                    self.auto_create_topics = entry.value.strip().lower() == "true"


class ForwardedAcls:
    """The authorization step in front of the proxy's forwarding path."""

    def __init__(
        self, cluster: UpstreamCluster, authorizer: Authorizer, forward: Forward, terminate: Terminate
    ) -> None:
        self.forward_frame = forward
        self.terminate = terminate
        self.topics = UpstreamTopics(cluster)
        self.guard = Guard(authorizer, self.topics)
        cluster.on_brokers.append(self.topics.read_auto_create)

    @staticmethod
    def checked(api_key: int) -> bool:
        """Whether a forwarded API has Kafka's rule here (others are neither advertised nor
        served to anyone but super users)."""
        return api_key in CHECKS

    def forward(
        self, conn: KafkaConnection, frame: bytes, slot: ResponseSlot, api_key: int, version: int, cid: int
    ) -> None:
        """Authorize one forwarded request frame, then forward what may go upstream."""
        if api_key in SECURITY_APIS:
            self.terminate(conn, frame, slot)  # groupshift's own ACL and SCRAM APIs
            return
        schema = api_schema(api_key, version)
        if schema is None:
            conn.close("api.version_unsupported", api_key=api_key, api_version=version)
            return
        try:
            header, request = decode(schema, frame)
        except DecodeFailure as e:
            log.warning(
                "request.rejected",
                connection_id=conn.connection_id,
                reason="request.malformed",
                api_key=api_key,
                api_version=version,
                error=str(e),
            )
            conn.close("request.malformed", api_key=api_key)
            return
        entry = CHECKS.get(api_key)
        check: Check = entry[1] if entry else cluster_only(api_key, f"Api{api_key}", AclOperation.ALL)
        loop = asyncio.get_running_loop()
        passthrough: list[asyncio.Future[Any]] = []  # the future whose raw answer may go as it is

        def call(narrowed: Any) -> Any:
            answer: asyncio.Future[Any] = loop.create_future()
            whole = narrowed is request
            sent = (
                frame
                if whole
                else encode_request(narrowed, correlation_id=cid, client_id=header.client_id)[4:]
            )

            def arrived(data: bytes | None) -> None:
                if answer.done():
                    return
                if data is None:
                    answer.set_result(NO_RESPONSE)
                elif whole and passthrough and passthrough[0] is answer:
                    answer.set_result(data)
                else:
                    try:
                        answer.set_result(decode_response(schema.response_type, data[4:])[1])
                    except Exception as e:
                        answer.set_exception(e)

            self.forward_frame(conn, sent, CapturingSlot(conn, arrived), api_key, version, cid)
            return answer

        ctx = conn.ctx
        if header.client_id:
            ctx.client_id = header.client_id
        try:
            result = check(self.guard, ctx, request, call)
        except CloseConnection as e:
            log.warning("request.rejected", connection_id=conn.connection_id, reason=e.reason, **e.fields)
            conn.close(e.reason, **e.fields)
            return
        if isinstance(result, asyncio.Future):
            passthrough.append(result)
            slot.task = result
            result.add_done_callback(lambda f: self._deliver(conn, slot, schema, cid, f))
            return
        self._complete(conn, slot, schema, cid, result)

    def _deliver(
        self, conn: KafkaConnection, slot: ResponseSlot, schema: Any, cid: int, done: asyncio.Future[Any]
    ) -> None:
        if done.cancelled() or slot.done or conn.closing:
            return
        error = done.exception()
        if error is not None:
            log.error("upstream.authorized_answer_failed", api_key=schema.api_key, error=repr(error))
            conn.close("upstream.rewrite_failed", api_key=schema.api_key)
            return
        self._complete(conn, slot, schema, cid, done.result())

    @staticmethod
    def _complete(conn: KafkaConnection, slot: ResponseSlot, schema: Any, cid: int, response: Any) -> None:
        if response is NO_RESPONSE:
            slot.complete(None)
        elif isinstance(response, bytes):
            slot.complete(response)  # the upstream's own answer frame, already the client's
        else:
            slot.complete(encode_response(schema, cid, response))
