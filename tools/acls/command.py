"""`groupshift acls --bootstrap-server HOST:PORT (--add | --remove | --list) ...`: Kafka's
`kafka-acls.sh` (AclCommand) in the same words, against groupshift or any Kafka 2.x+ cluster.

The options are AclCommand's: `--allow-principal` / `--deny-principal` (`User:NAME`, repeatable),
`--allow-host` / `--deny-host` (default `*`), `--operation` (repeatable, default `All`), one or
more resources (`--topic`, `--group`, `--cluster`, `--transactional-id`), `--resource-pattern-type`
(`literal` by default; `prefixed`; and for --list/--remove also `any` and `match`), `--principal`
to filter --list, `--force` to remove without the question. As AclCommand does, an operation a
resource type does not have is refused before anything is sent (e.g. `Read` on the cluster), and
--add and --remove print the resource's ACLs afterwards. The requests (KIP-140, KIP-290 pattern
types) go to any broker, over `--command-config`'s security: ACLs are changed by a principal
allowed to ALTER the cluster, normally a super user.

Exit status: 0 done, 1 error (unreachable cluster, a Kafka error such as
CLUSTER_AUTHORIZATION_FAILED or SECURITY_DISABLED when the cluster has no authorizer), 2 bad
arguments or a --command-config file that cannot be used.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from tools.groups.command import COMMAND_CONFIG_HELP, load_command_config, positive_seconds
from tools.groups.output import ERROR, OK, USAGE, error

# Kafka's enum codes (org.apache.kafka.common.resource / acl)
RESOURCE_TYPES = {"ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5}
PATTERN_TYPES = {"ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
PERMISSIONS = {"ANY": 1, "DENY": 2, "ALLOW": 3}
OPERATIONS = {
    "ANY": 1,
    "ALL": 2,
    "READ": 3,
    "WRITE": 4,
    "CREATE": 5,
    "DELETE": 6,
    "ALTER": 7,
    "DESCRIBE": 8,
    "CLUSTER_ACTION": 9,
    "DESCRIBE_CONFIGS": 10,
    "ALTER_CONFIGS": 11,
    "IDEMPOTENT_WRITE": 12,
    "CREATE_TOKENS": 13,
    "DESCRIBE_TOKENS": 14,
    "TWO_PHASE_COMMIT": 15,
}
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name
# The operations each resource type has (AclCommand refuses the others before sending anything).
VALID_OPERATIONS = {
    "TOPIC": {
        "READ",
        "WRITE",
        "CREATE",
        "DESCRIBE",
        "DELETE",
        "ALTER",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
        "ALL",
    },
    "GROUP": {"READ", "DESCRIBE", "DELETE", "ALL"},
    "CLUSTER": {
        "CREATE",
        "CLUSTER_ACTION",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
        "IDEMPOTENT_WRITE",
        "ALTER",
        "DESCRIBE",
        "CREATE_TOKENS",
        "DESCRIBE_TOKENS",
        "ALL",
    },
    "TRANSACTIONAL_ID": {"DESCRIBE", "WRITE", "TWO_PHASE_COMMIT", "ALL"},
}
_NAMES = {code: name for name, code in OPERATIONS.items()}


class AclInputError(ValueError):
    """Arguments AclCommand would refuse; the message says which."""


def operation_code(text: str) -> int:
    """`Read`, `read`, `DescribeConfigs`, `describe_configs` -> Kafka's operation code."""
    wanted = text.replace("_", "").replace("-", "").upper()
    for name, code in OPERATIONS.items():
        if name.replace("_", "") == wanted and name != "ANY":
            return code
    known = ", ".join(n.title().replace("_", "") for n in OPERATIONS if n != "ANY")
    raise AclInputError(f"--operation {text}: not an operation ({known})")


def principal(text: str) -> str:
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise AclInputError(f"principal {text!r} must read TYPE:NAME, e.g. User:alice")
    return text


@dataclass(frozen=True)
class Resource:
    kind: str  # a RESOURCE_TYPES name
    name: str

    def pattern(self, pattern_type: str) -> str:
        return f"ResourcePattern(resourceType={self.kind}, name={self.name}, patternType={pattern_type})"


def resources_of(args: argparse.Namespace) -> list[Resource]:
    out = [Resource("TOPIC", t) for t in args.topic]
    out += [Resource("GROUP", g) for g in args.group]
    out += [Resource("TRANSACTIONAL_ID", t) for t in args.transactional_id]
    if args.cluster:
        out.append(Resource("CLUSTER", CLUSTER_NAME))
    return out


def entries_of(args: argparse.Namespace) -> list[tuple[str, str, int, str]]:
    """(principal, host, operation code, permission) for --add / --remove with principals."""
    operations = [operation_code(o) for o in (args.operation or ["All"])]
    entries = []
    for permission, principals, hosts in (
        ("ALLOW", args.allow_principal, args.allow_host or ["*"]),
        ("DENY", args.deny_principal, args.deny_host or ["*"]),
    ):
        for p in principals:
            for h in hosts:
                entries += [(principal(p), h, op, permission) for op in operations]
    return entries


def validate(args: argparse.Namespace) -> None:
    """AclCommand's checks of the arguments, before any connection."""
    verbs = [v for v in ("add", "remove", "list") if getattr(args, v)]
    if len(verbs) != 1:
        raise AclInputError("give exactly one of --add, --remove, --list")
    pattern = args.resource_pattern_type.upper()
    if pattern not in PATTERN_TYPES:
        raise AclInputError(
            f"--resource-pattern-type {args.resource_pattern_type}: literal, prefixed, any or match"
        )
    resources = resources_of(args)
    if args.add and pattern not in ("LITERAL", "PREFIXED"):
        raise AclInputError("--add takes --resource-pattern-type literal or prefixed")
    if (args.add or args.remove) and not resources:
        raise AclInputError("name a resource: --topic, --group, --cluster or --transactional-id")
    if args.add and not (args.allow_principal or args.deny_principal):
        raise AclInputError("--add needs --allow-principal or --deny-principal")
    if (args.allow_host and not args.allow_principal) or (args.deny_host and not args.deny_principal):
        raise AclInputError("--allow-host / --deny-host go with --allow-principal / --deny-principal")
    for p in args.principal:
        principal(p)
    entries = entries_of(args)
    for resource in resources:
        for _, _, op, _ in entries:
            if _NAMES[op] not in VALID_OPERATIONS[resource.kind]:
                valid = ", ".join(sorted(VALID_OPERATIONS[resource.kind]))
                raise AclInputError(f"ResourceType {resource.kind} only supports operations {valid}")


def _acl_line(principal_: str, host: str, operation: int, permission: int | str) -> str:
    perm = permission if isinstance(permission, str) else {v: k for k, v in PERMISSIONS.items()}[permission]
    name = _NAMES.get(operation, operation)
    return f"\t(principal={principal_}, host={host}, operation={name}, permissionType={perm})"


def _print_resources(found: Sequence[Any], out: TextIO) -> None:
    types = {v: k for k, v in RESOURCE_TYPES.items()}
    patterns = {v: k for k, v in PATTERN_TYPES.items()}
    for r in found:
        kind = types.get(int(r.resource_type), str(r.resource_type))
        pattern = Resource(kind, r.resource_name).pattern(
            patterns.get(int(r.pattern_type), str(r.pattern_type))
        )
        print(f"Current ACLs for resource `{pattern}`: ", file=out)
        for a in r.acls:
            print(
                " " + _acl_line(a.principal, a.host, int(a.operation), int(a.permission_type)) + " ", file=out
            )
        print(file=out)


def _filter(resource: Resource | None, pattern: str, principal_: str | None = None) -> dict[str, Any]:
    return {
        "resource_type_filter": RESOURCE_TYPES[resource.kind] if resource else RESOURCE_TYPES["ANY"],
        "resource_name_filter": resource.name if resource else None,
        "pattern_type_filter": PATTERN_TYPES[pattern] if resource else PATTERN_TYPES["ANY"],
        "principal_filter": principal_,
        "host_filter": None,
        "operation": OPERATIONS["ANY"],
        "permission_type": PERMISSIONS["ANY"],
    }


def _list(admin: Any, args: argparse.Namespace, pattern: str, out: TextIO) -> int:
    resources: list[Resource | None] = list(resources_of(args)) or [None]
    principals: list[str | None] = list(args.principal) or [None]
    for resource in resources:
        for p in principals:
            _print_resources(admin.describe_acls(_filter(resource, pattern, p)), out)
    return OK


def _add(admin: Any, args: argparse.Namespace, pattern: str, out: TextIO) -> int:
    entries = entries_of(args)
    status = OK
    for resource in resources_of(args):
        print(f"Adding ACLs for resource `{resource.pattern(pattern)}`: ", file=out)
        for p, h, op, perm in entries:
            print(" " + _acl_line(p, h, op, perm) + " ", file=out)
        print(file=out)
        creations = [
            {
                "resource_type": RESOURCE_TYPES[resource.kind],
                "resource_name": resource.name,
                "resource_pattern_type": PATTERN_TYPES[pattern],
                "principal": p,
                "host": h,
                "operation": op,
                "permission_type": PERMISSIONS[perm],
            }
            for p, h, op, perm in entries
        ]
        for code, message in admin.create_acls(creations):
            if code:
                from tools.groups.wire import error_name

                error(f"CreateAcls: {error_name(code)}" + (f": {message}" if message else ""))
                status = ERROR
        _print_resources(admin.describe_acls(_filter(resource, pattern)), out)
    return status


def _remove(admin: Any, args: argparse.Namespace, pattern: str, out: TextIO, ask: TextIO) -> int:
    entries = entries_of(args)
    status = OK
    for resource in resources_of(args):
        what = "ACLs" if entries else "all ACLs"
        if not args.force:
            print(
                f"Are you sure you want to remove {what} for resource `{resource.pattern(pattern)}`? (y/n)",
                file=out,
            )
            if ask.readline().strip().lower() not in ("y", "yes"):
                continue
        base = _filter(resource, pattern)
        filters = [
            base
            | {"principal_filter": p, "host_filter": h, "operation": op, "permission_type": PERMISSIONS[perm]}
            for p, h, op, perm in entries
        ] or [base]
        print(f"Removing {what} for resource `{resource.pattern(pattern)}`: ", file=out)
        from tools.groups.wire import code_of, error_name

        for result in admin.delete_acls(filters):
            code = code_of(result.error_code)
            if code:
                error(
                    f"DeleteAcls: {error_name(code)}"
                    + (f": {result.error_message}" if result.error_message else "")
                )
                status = ERROR
        print(file=out)
        _print_resources(admin.describe_acls(_filter(resource, pattern)), out)
    return status


def run_acls(args: argparse.Namespace, out: TextIO = sys.stdout, ask: TextIO = sys.stdin) -> int:
    from tools.groups.wire import AdminWire, KafkaError, WireError

    if args.bootstrap_server is None:
        args.acls_parser.error("the following arguments are required: --bootstrap-server")
    try:
        validate(args)
    except AclInputError as e:
        error(str(e))
        return USAGE
    try:
        security = load_command_config(args.command_config)
    except ValueError as e:
        error(f"--command-config {e}")
        return USAGE
    pattern = args.resource_pattern_type.upper()
    try:
        with AdminWire(args.bootstrap_server, timeout=args.timeout, security=security) as admin:
            if args.list:
                return _list(admin, args, pattern, out)
            if args.add:
                return _add(admin, args, pattern, out)
            return _remove(admin, args, pattern, out, ask)
    except ValueError as e:  # bad --bootstrap-server
        error(str(e))
        return USAGE
    except KafkaError as e:
        error(str(e))
        return ERROR
    except WireError as e:
        error(f"{args.bootstrap_server}: {e}")
        return ERROR


def add_parser(sub: Any, summary: str) -> argparse.ArgumentParser:
    """The `acls` parser; `summary` is its line in `groupshift --help` (groupshift.cli.COMMANDS)."""
    p: argparse.ArgumentParser = sub.add_parser(
        "acls",
        help=summary,
        description=(
            "kafka-acls.sh in the same words (--add, --remove, --list), for groupshift and any "
            "Kafka cluster with an authorizer (docs/security.md)."
        ),
        epilog="exit status: 0 done, 1 error (unreachable, a Kafka error), 2 bad arguments",
    )
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="broker(s) to connect to (required)")
    p.add_argument("--command-config", metavar="FILE", help=COMMAND_CONFIG_HELP)
    p.add_argument(
        "--timeout", type=positive_seconds, default=10.0, metavar="S", help="socket timeout (default 10)"
    )
    verbs = p.add_argument_group("action (one)")
    verbs.add_argument("--add", action="store_true", help="add ACLs (CreateAcls)")
    verbs.add_argument("--remove", action="store_true", help="remove ACLs (DeleteAcls)")
    verbs.add_argument("--list", action="store_true", help="list ACLs (DescribeAcls)")
    res = p.add_argument_group("resources")
    res.add_argument("--topic", action="append", default=[], metavar="TOPIC", help="a topic (repeatable)")
    res.add_argument(
        "--group", action="append", default=[], metavar="GROUP", help="a consumer group (repeatable)"
    )
    res.add_argument("--cluster", action="store_true", help="the cluster")
    res.add_argument(
        "--transactional-id",
        action="append",
        default=[],
        metavar="ID",
        help="a transactional id (repeatable)",
    )
    res.add_argument(
        "--resource-pattern-type",
        default="literal",
        metavar="TYPE",
        help="literal (default) or prefixed; for --list and --remove also any or match",
    )
    acl = p.add_argument_group("ACL entries")
    acl.add_argument(
        "--allow-principal",
        action="append",
        default=[],
        metavar="TYPE:NAME",
        help="a principal the ACLs allow, e.g. User:alice (repeatable)",
    )
    acl.add_argument(
        "--deny-principal", action="append", default=[], metavar="TYPE:NAME", help="DENY entries for"
    )
    acl.add_argument("--allow-host", action="append", default=[], metavar="HOST", help="default *")
    acl.add_argument("--deny-host", action="append", default=[], metavar="HOST", help="default *")
    acl.add_argument(
        "--operation",
        action="append",
        default=[],
        metavar="OP",
        help="Read, Write, Describe, ... (default All)",
    )
    p.add_argument(
        "--principal", action="append", default=[], metavar="TYPE:NAME", help="--list: only this principal's"
    )
    p.add_argument("--force", action="store_true", help="--remove without asking")
    p.set_defaults(run=run_acls, acls_parser=p)
    return p
