"""AlterUserScramCredentials (key 51) and DescribeUserScramCredentials (key 50), KIP-554, served
from the node's own credential store (`gateway.sasl.credentials`), so Kafka's `kafka-configs.sh
--entity-type users --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'` and
`--describe` work against groupshift as against a KRaft cluster.

Who may call them: Kafka requires ALTER (alter) and DESCRIBE (describe) on the CLUSTER resource;
the answers to a refusal are here (every user CLUSTER_AUTHORIZATION_FAILED, or the top-level
error), and the decision is `ScramCredentialApis.authorize`, which the authorizer sets. Without
an authorizer every principal may, as in Kafka without `authorizer.class.name`.

A change is written to disk (in a worker thread, so the event loop never waits for the fsync)
before it is answered or used by a login; changes are serialized, each one planned from the
state the previous one left.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from gateway.registry import HandlerRegistry, RequestContext
from gateway.sasl.credentials import Deletion, ScramCredentialStore, Upsertion
from protocol.codec import response_type_of
from protocol.entity_builder import build

DESCRIBE_KEY = 50
ALTER_KEY = 51

ClusterAuthorizer = Callable[[RequestContext, str], bool]
"""(request context, operation "ALTER" or "DESCRIBE") -> allowed on the CLUSTER resource."""


class ScramCredentialApis:
    def __init__(self, store: ScramCredentialStore) -> None:
        self.store = store
        self.authorize: ClusterAuthorizer | None = None
        """Set by the authorizer; None allows every principal (no `authorizer.class.name`)."""
        self._changes = asyncio.Lock()

    def register(self, registry: HandlerRegistry) -> None:
        registry.register(DESCRIBE_KEY, 0, 0, self.describe)
        registry.register(ALTER_KEY, 0, 0, self.alter)

    def _allowed(self, ctx: RequestContext, operation: str) -> bool:
        return self.authorize is None or self.authorize(ctx, operation)

    def describe(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        if not self._allowed(ctx, "DESCRIBE"):
            return build(
                response_type_of(request),
                {
                    "throttle_time": 0,
                    "error_code": ErrorCode.cluster_authorization_failed,
                    "error_message": None,
                    "results": [],
                },
            )
        names = None if request.users is None else [u.name for u in request.users]
        results = [
            {
                "user": d.user,
                "error_code": d.error_code,
                "error_message": d.error_message,
                "credential_infos": [{"mechanism": m, "iterations": i} for m, i in d.credentials],
            }
            for d in self.store.describe(names)
        ]
        return build(
            response_type_of(request),
            # Kafka's answer carries "" (the field's default), not null, when nothing failed.
            {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": "", "results": results},
        )

    async def alter(self, ctx: RequestContext, header: Any, request: Any) -> Any:
        response_type = response_type_of(request)
        if not self._allowed(ctx, "ALTER"):
            names = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
            return build(
                response_type,
                {
                    "throttle_time": 0,
                    "results": [
                        {
                            "user": n,
                            "error_code": ErrorCode.cluster_authorization_failed,
                            "error_message": None,
                        }
                        for n in names
                    ],
                },
            )
        deletions = [Deletion(d.name, int(d.mechanism)) for d in request.deletions]
        upsertions = [
            Upsertion(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password))
            for u in request.upsertions
        ]
        async with self._changes:
            results, users = self.store.plan(deletions, upsertions)
            if users is not None:
                await asyncio.to_thread(self.store.write, users)
        return build(
            response_type,
            {
                "throttle_time": 0,
                "results": [
                    {"user": r.user, "error_code": r.error_code, "error_message": r.error_message}
                    for r in results
                ],
            },
        )
