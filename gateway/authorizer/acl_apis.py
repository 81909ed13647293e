"""CreateAcls (30), DescribeAcls (29) and DeleteAcls (31), as Kafka's `AclApis` and the
controller's `AclControlManager` answer them.

* Without an authorizer: DescribeAcls answers SECURITY_DISABLED "No Authorizer is configured on
  the broker", CreateAcls and DeleteAcls SECURITY_DISABLED "No Authorizer is configured." for
  every item.
* DescribeAcls needs DESCRIBE on the CLUSTER, CreateAcls and DeleteAcls ALTER on the CLUSTER;
  otherwise every item (or the response) carries CLUSTER_AUTHORIZATION_FAILED.
* A request naming an UNKNOWN code (any code Kafka does not know) fails to parse in Kafka
  (`normalizeAndValidate`), which closes the connection; so does groupshift.
* CreateAcls refuses, per binding, with INVALID_REQUEST and Kafka 4.4's message: a CLUSTER name
  other than `kafka-cluster`, an empty name, a principal without `TYPE:`, an empty host. A
  binding Kafka cannot even build (resource type ANY, pattern type ANY/MATCH, operation or
  permission ANY) fails the whole request with UNKNOWN_SERVER_ERROR. Creating an ACL that
  exists succeeds and changes nothing.
* DescribeAcls groups the matching ACLs by resource pattern; DeleteAcls answers per filter the
  ACLs it removed. A change is durable before it is answered (`AclStore`).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from engine.errors import Errors
from gateway.authorizer import Authorizer
from gateway.authorizer.model import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
    enum_of,
)
from gateway.registry import CloseConnection, HandlerRegistry, RequestContext
from protocol.codec import response_type_of
from protocol.entity_builder import build

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
MAX_ACLS_PER_OPERATION = 10_000  # Kafka's AclControlManager MAX_RECORDS_PER_USER_OP

_NO_AUTHORIZER = "No Authorizer is configured."


def _filter(req: Any, version: int) -> AclFilter:
    """An `AclBindingFilter` from a DescribeAcls request or a DeleteAcls filter; connection
    closed for what Kafka fails to parse."""
    rtype = enum_of(ResourceType, req.resource_type_filter)
    ptype = enum_of(PatternType, req.pattern_type_filter)
    op = enum_of(AclOperation, req.operation)
    perm = enum_of(PermissionType, req.permission_type)
    if 0 in (rtype, ptype, op, perm):
        raise CloseConnection("request.malformed", error="ACL filter with UNKNOWN elements")
    return AclFilter(
        ResourceType(rtype),
        req.resource_name_filter,
        PatternType(ptype),
        req.principal_filter,
        req.host_filter,
        AclOperation(op),
        PermissionType(perm),
    )


def _unbuildable(c: Any) -> bool:
    """A binding Kafka's `ResourcePattern` / `AccessControlEntry` constructors refuse."""
    return (
        ResourceType(c.resource_type) == ResourceType.ANY
        or PatternType(c.resource_pattern_type) in (PatternType.ANY, PatternType.MATCH)
        or AclOperation(c.operation) == AclOperation.ANY
        or PermissionType(c.permission_type) == PermissionType.ANY
    )


def _creation_error(c: Any) -> str | None:
    """Why a CreateAcls binding is refused (Kafka's INVALID_REQUEST message), or None."""
    if ResourceType(c.resource_type) == ResourceType.CLUSTER and c.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not c.resource_name:
        return "Invalid empty resource name"
    if ":" not in c.principal:
        return (
            f"Could not parse principal from `{c.principal}` (no colon is present separating the "
            "principal type from the principal name)"
        )
    if not c.host:
        return "Host pattern cannot be null or empty"
    return None


class AclApis:
    def __init__(self, authorizer: Authorizer | None) -> None:
        self.authorizer = authorizer

    def register(self, registry: HandlerRegistry) -> None:
        registry.register(DESCRIBE_ACLS, 1, 3, self.describe_acls)
        registry.register(CREATE_ACLS, 1, 3, self.create_acls)
        registry.register(DELETE_ACLS, 1, 3, self.delete_acls)

    def _cluster(self, ctx: RequestContext, op: AclOperation, api: str) -> bool:
        assert self.authorizer is not None
        return self.authorizer.authorize(ctx, op, ResourceType.CLUSTER, CLUSTER_NAME, api=api)

    def describe_acls(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        rtype = response_type_of(req)
        acl_filter = _filter(req, req.__version__)

        def answer(code: int, message: str | None, resources: list[dict[str, Any]]) -> Any:
            return build(
                rtype,
                {"throttle_time": 0, "error_code": code, "error_message": message, "resources": resources},
            )

        if self.authorizer is not None and not self._cluster(ctx, AclOperation.DESCRIBE, "DescribeAcls"):
            return answer(int(ErrorCode.cluster_authorization_failed), _cluster_denied("DescribeAcls"), [])
        if self.authorizer is None:
            return answer(int(ErrorCode.security_disabled), "No Authorizer is configured on the broker", [])
        grouped: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
        for acl in sorted(self.authorizer.acls):
            if acl_filter.matches(acl):
                grouped.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
                    {
                        "principal": acl.principal,
                        "host": acl.host,
                        "operation": int(acl.operation),
                        "permission_type": int(acl.permission),
                    }
                )
        return answer(
            0,
            "",
            [
                {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": entries}
                for (t, n, p), entries in grouped.items()
            ],
        )

    def create_acls(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        rtype = response_type_of(req)
        for c in req.creations:
            if 0 in (
                enum_of(ResourceType, c.resource_type),
                enum_of(PatternType, c.resource_pattern_type),
                enum_of(AclOperation, c.operation),
                enum_of(PermissionType, c.permission_type),
            ):
                raise CloseConnection("request.malformed", error="CreatableAcls contain unknown elements")

        def answer(results: list[tuple[int, str | None]]) -> Any:
            return build(
                rtype,
                {
                    "throttle_time": 0,
                    "results": [{"error_code": code, "error_message": msg} for code, msg in results],
                },
            )

        n = len(req.creations)
        if self.authorizer is None:
            return answer([(int(ErrorCode.security_disabled), _NO_AUTHORIZER)] * n)
        if not self._cluster(ctx, AclOperation.ALTER, "CreateAcls"):
            return answer([(int(ErrorCode.cluster_authorization_failed), _cluster_denied("CreateAcls"))] * n)
        if n > MAX_ACLS_PER_OPERATION:
            message = f"Cannot create more than {MAX_ACLS_PER_OPERATION} acls in a single create operation."
            return answer([(int(ErrorCode.policy_violation), message)] * n)
        if any(_unbuildable(c) for c in req.creations):
            # Kafka builds every `AclBinding` before it checks any: a resource type ANY, a
            # pattern type ANY/MATCH, an operation or permission ANY throw in the binding's
            # constructor, and the whole request fails with UNKNOWN_SERVER_ERROR (no message).
            return answer([(int(ErrorCode.unknown_server_error), None)] * n)
        results: list[tuple[int, str | None]] = []
        acls = set(self.authorizer.acls)
        for c in req.creations:
            problem = _creation_error(c)
            if problem is not None:
                results.append((int(Errors.INVALID_REQUEST), problem))
                continue
            acls.add(
                AclBinding(
                    ResourceType(c.resource_type),
                    c.resource_name,
                    PatternType(c.resource_pattern_type),
                    c.principal,
                    c.host,
                    AclOperation(c.operation),
                    PermissionType(c.permission_type),
                )
            )
            results.append((0, ""))
        new = frozenset(acls)
        if new != self.authorizer.acls:
            self.authorizer.replace_acls(new)
        return answer(results)

    def delete_acls(self, ctx: RequestContext, header: Any, req: Any) -> Any:
        rtype = response_type_of(req)
        filters = [_filter(f, req.__version__) for f in req.filters]

        def answer(results: list[dict[str, Any]]) -> Any:
            return build(rtype, {"throttle_time": 0, "filter_results": results})

        if self.authorizer is None:
            return answer(
                [
                    {
                        "error_code": int(ErrorCode.security_disabled),
                        "error_message": _NO_AUTHORIZER,
                        "matching_acls": [],
                    }
                ]
                * len(filters)
            )
        if not self._cluster(ctx, AclOperation.ALTER, "DeleteAcls"):
            denied = {
                "error_code": int(ErrorCode.cluster_authorization_failed),
                "error_message": _cluster_denied("DeleteAcls"),
                "matching_acls": [],
            }
            return answer([denied] * len(filters))
        # Every filter sees the ACLs as they were (Kafka's controller matches each filter
        # against its unchanged set): an ACL two filters match is listed by both.
        before = self.authorizer.acls
        acls = set(before)
        results = []
        for f in filters:
            matched = sorted(a for a in before if f.matches(a))
            acls.difference_update(matched)
            results.append(
                {
                    "error_code": 0,
                    "error_message": None,
                    "matching_acls": [
                        {
                            "error_code": 0,
                            "error_message": None,
                            "resource_type": int(a.resource_type),
                            "resource_name": a.resource_name,
                            "pattern_type": int(a.pattern_type),
                            "principal": a.principal,
                            "host": a.host,
                            "operation": int(a.operation),
                            "permission_type": int(a.permission),
                        }
                        for a in matched
                    ],
                }
            )
        new = frozenset(acls)
        if new != self.authorizer.acls:
            self.authorizer.replace_acls(new)
        return answer(results)


def _cluster_denied(api: str) -> str:
    """Kafka's `ClusterAuthorizationException` message names the request object; groupshift
    names the API (docs/deviations.md)."""
    return f"Request {api} is not authorized."
