"""Kafka's ACL model and the decision function of its `StandardAuthorizer` (KIP-801).

The codes are Kafka's wire codes (`ResourceType`, `PatternType`, `AclOperation`,
`AclPermissionType` in org.apache.kafka.common), so requests and the durable store carry them as
they are. The decision follows `StandardAuthorizerData.authorize`:

* a principal named in `super.users` is allowed everything;
* otherwise the ACLs of the resource's type whose pattern covers the resource name are
  considered: LITERAL with the same name, the LITERAL wildcard `*`, PREFIXED whose name
  starts the resource name;
* of those, an ACL applies when its principal is the client's (or `User:*`), its host is the
  client's address (or `*`) and its operation is the one asked, ALL, or (ALLOW ACLs only) one
  that implies it: READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
  DESCRIBE_CONFIGS;
* an applying DENY wins; else an applying ALLOW allows; else, when some ACL covers the
  resource (whoever it is for), the answer is DENIED; and only when no ACL covers it at all,
  `allow.everyone.if.no.acl.found` decides (default false).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"
# Decisions a `Decider` remembers (principal, host, operation, resource); cleared when reached.
DECISIONS_CACHED = 65_536


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class PermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def enum_of(kind: type[enum.IntEnum], code: int) -> enum.IntEnum:
    """Kafka's `fromCode`: a code it does not know is UNKNOWN."""
    try:
        return kind(code)
    except ValueError:
        return kind(0)


_IMPLIES_DESCRIBE = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
)
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})

# `AclEntry.supportedOperations`: what KIP-430's authorized-operations bits range over.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        AclOperation.READ,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry, as Kafka's `AclBinding`."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType

    def covers(self, resource_type: ResourceType, name: str) -> bool:
        """This ACL's pattern covers the (literal) resource `name`."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name == name or self.resource_name == WILDCARD
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.resource_name)

    def applies(self, principal: str, host: str, operation: AclOperation) -> bool:
        """`StandardAuthorizerData.findResult` without the resource check: this ACL speaks
        about `principal` on `host` doing `operation`."""
        if self.principal != principal and self.principal != WILDCARD_PRINCIPAL:
            return False
        if self.host != WILDCARD and self.host != host:
            return False
        if self.operation == AclOperation.ALL:
            return True
        if self.permission == PermissionType.ALLOW:
            if operation == AclOperation.DESCRIBE:
                return self.operation in _IMPLIES_DESCRIBE
            if operation == AclOperation.DESCRIBE_CONFIGS:
                return self.operation in _IMPLIES_DESCRIBE_CONFIGS
        return self.operation == operation


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's `AclBindingFilter` (DescribeAcls, DeleteAcls): None matches any value."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: PermissionType

    def matches(self, acl: AclBinding) -> bool:
        """`ResourcePatternFilter.matches` and `AccessControlEntryFilter.matches`."""
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != acl.pattern_type:
            return False
        if self.resource_name is not None:
            if pt in (PatternType.ANY, acl.pattern_type):
                if self.resource_name != acl.resource_name:
                    return False
            elif acl.pattern_type == PatternType.LITERAL:
                if self.resource_name != acl.resource_name and acl.resource_name != WILDCARD:
                    return False
            elif not self.resource_name.startswith(acl.resource_name):
                return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission == PermissionType.ANY or self.permission == acl.permission


def parse_super_users(value: str | None) -> frozenset[str]:
    """`super.users`: principals separated by semicolons (`User:alice;User:bob`)."""
    if not value:
        return frozenset()
    return frozenset(p.strip() for p in value.split(";") if p.strip())


class Decider:
    """The decision function over one set of ACLs (`StandardAuthorizerData`).

    ACLs are indexed by resource type; each decision scans the ACLs of that type whose pattern
    covers the name. Kafka keeps them in a sorted set walked by reverse name; the set of ACLs
    considered, and so the answer, is the same.
    """

    def __init__(
        self,
        acls: Iterable[AclBinding],
        *,
        super_users: frozenset[str] = frozenset(),
        allow_if_no_acl: bool = False,
    ) -> None:
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._by_type: dict[ResourceType, list[AclBinding]] = {}
        # (type, name) -> the ACLs whose pattern is that name: LITERAL ones (`*` included) and
        # PREFIXED ones apart, so a decision looks up the name and each of its prefixes.
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        for acl in acls:
            self._by_type.setdefault(acl.resource_type, []).append(acl)
            index = self._literal if acl.pattern_type == PatternType.LITERAL else self._prefixed
            index.setdefault((acl.resource_type, acl.resource_name), []).append(acl)
        # Decisions are remembered until the ACLs change (a new Decider): a member heartbeating
        # several times a second asks the same question each time. Bounded: cleared when full.
        self._decisions: dict[tuple[str, str, AclOperation, ResourceType, str], bool] = {}

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        key = (principal, host, operation, resource_type, name)
        known = self._decisions.get(key)
        if known is not None:
            return known
        if len(self._decisions) >= DECISIONS_CACHED:
            self._decisions.clear()
        decision = self._decide(principal, host, operation, resource_type, name)
        self._decisions[key] = decision
        return decision

    def _decide(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        covered = False
        allowed = False
        for acl in self._covering(resource_type, name):
            covered = True
            if not acl.applies(principal, host, operation):
                continue
            if acl.permission == PermissionType.DENY:
                return False
            allowed = True
        if allowed:
            return True
        return not covered and self.allow_if_no_acl

    def _covering(self, resource_type: ResourceType, name: str) -> Iterator[AclBinding]:
        """The ACLs whose pattern covers `name`: LITERAL `name` and `*`, PREFIXED prefixes."""
        yield from self._literal.get((resource_type, name), ())
        if name != WILDCARD:
            yield from self._literal.get((resource_type, WILDCARD), ())
        for end in range(len(name) + 1):
            yield from self._prefixed.get((resource_type, name[:end]), ())

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Kafka's `Authorizer.authorizeByResourceType` (KIP-679, an idempotent producer's WRITE
        on "any topic"): allowed when some ALLOW ACL of that type for the principal and the
        operation (or ALL) is not cancelled by a DENY: a LITERAL `*` DENY cancels every one;
        a LITERAL DENY cancels the LITERAL ALLOW of its name; a PREFIXED DENY cancels the ALLOWs
        whose names it prefixes."""
        if principal in self.super_users:
            return True
        allows: list[AclBinding] = []
        denies: list[AclBinding] = []
        acls = self._by_type.get(resource_type, [])
        for acl in acls:
            if acl.principal not in (principal, WILDCARD_PRINCIPAL) or acl.host not in (host, WILDCARD):
                continue
            if acl.operation not in (operation, AclOperation.ALL):
                continue
            (denies if acl.permission == PermissionType.DENY else allows).append(acl)
        if any(d.pattern_type == PatternType.LITERAL and d.resource_name == WILDCARD for d in denies):
            return False

        def cancelled(a: AclBinding) -> bool:
            for d in denies:
                if d.pattern_type == PatternType.PREFIXED and a.resource_name.startswith(d.resource_name):
                    return True
                if (
                    d.pattern_type == PatternType.LITERAL
                    and a.pattern_type == PatternType.LITERAL
                    and d.resource_name == a.resource_name
                ):
                    return True
            return False

        if any(not cancelled(a) for a in allows):
            return True
        return not acls and self.allow_if_no_acl

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bitfield: bit `op` set for each supported operation allowed on the resource."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits
