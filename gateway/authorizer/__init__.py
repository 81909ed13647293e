"""Authorization with Kafka's ACL model (KIP-801's StandardAuthorizer): the settings, the
durable ACL set, the decision function, the ACL APIs and the per-API checks.

`Authorizer` is what handlers ask: `authorize(ctx, operation, resource type, name)`, each
denial reported to the audit log (`acl.denied`) unless the caller only filters (Kafka's
`logIfDenied = false` for ListGroups, Metadata's all-topics answer, authorized-operations bits).
"""

from __future__ import annotations

from pathlib import Path

from gateway.audit import NO_AUDIT, AuditLog
from gateway.authorizer.model import (
    AclBinding,
    AclOperation,
    Decider,
    ResourceType,
    parse_super_users,
)
from gateway.authorizer.store import AclStore
from gateway.registry import RequestContext

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# Kafka 3.x's ZooKeeper-mode authorizer; Kafka 4.0 removed it (and ZooKeeper), so a 4.x broker
# refuses it as an unknown class. groupshift refuses it with a message saying what to use.
ZOOKEEPER_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


def check_authorizer_class(value: str) -> str:
    """`authorizer.class.name`: empty (no authorization) or Kafka's StandardAuthorizer."""
    name = value.strip()
    if name in ("", STANDARD_AUTHORIZER):
        return name
    if name == ZOOKEEPER_AUTHORIZER:
        raise ValueError(
            f"{ZOOKEEPER_AUTHORIZER} needs ZooKeeper and was removed in Kafka 4.0; "
            f"use {STANDARD_AUTHORIZER} (the ACLs are created again with kafka-acls.sh)"
        )
    raise ValueError(f"only {STANDARD_AUTHORIZER} (or empty: no authorization) is supported")


class Authorizer:
    """The node's authorizer: the ACLs (durable in the data directory) and the settings."""

    def __init__(
        self,
        data_dir: Path,
        *,
        super_users: str | None = None,
        allow_everyone_if_no_acl_found: bool = False,
        audit: AuditLog = NO_AUDIT,
    ) -> None:
        self.store = AclStore(data_dir)
        self.super_users = parse_super_users(super_users)
        self.allow_if_no_acl = allow_everyone_if_no_acl_found
        self.audit = audit
        self.decider = self._decider(self.store.acls)

    def _decider(self, acls: frozenset[AclBinding]) -> Decider:
        return Decider(acls, super_users=self.super_users, allow_if_no_acl=self.allow_if_no_acl)

    @property
    def acls(self) -> frozenset[AclBinding]:
        return self.store.acls

    def replace_acls(self, acls: frozenset[AclBinding]) -> None:
        """Make `acls` durable, then decide with them."""
        self.store.replace(acls)
        self.decider = self._decider(acls)

    def authorize(
        self,
        ctx: RequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        api: str = "",
        log_if_denied: bool = True,
    ) -> bool:
        allowed = self.decider.authorize(ctx.principal, ctx.client_host, operation, resource_type, name)
        if not allowed and log_if_denied:
            self.audit.acl_denied(
                ctx, api=api, resource_type=resource_type.name, resource_name=name, operation=operation.name
            )
        return allowed

    def authorized_operations(self, ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
        return self.decider.authorized_operations(ctx.principal, ctx.client_host, resource_type, name)
