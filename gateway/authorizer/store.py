"""The durable ACL set of one node: `acls.json` in the data directory.

Kafka keeps ACLs as records in the KRaft metadata log (`AccessControlEntryRecord`,
`RemoveAccessControlEntryRecord`) and a broker authorizes nothing before it has replayed them
(`AuthorizerNotReadyException`). groupshift keeps the whole set in one small file, rewritten
atomically on each change (`write_atomically`: temp file, fsync, rename, directory fsync), so a
crash or SIGKILL leaves either the old set or the new one. The file is read when the server is
built, before any listener opens. ACL sets are small (Kafka bounds one request's changes to
`MAX_RECORDS_PER_USER_OP` = 10,000); a rewrite per change costs one fsync, paid only by the
rare CreateAcls/DeleteAcls.

The file is JSON: `{"version": 1, "crc32": C, "acls": [[type, name, pattern, principal, host,
operation, permission], ...]}` with Kafka's codes, where C is the CRC-32 of the `acls` array's
canonical JSON. A file that does not parse, has another version, a wrong checksum or an
invalid entry stops the start-up with a message naming it (like a damaged `meta.properties`):
starting with no ACLs would silently open, or close, everything.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gateway.authorizer.model import (
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from gateway.dataplane.datadir import DataDirError
from gateway.dataplane.durable import write_atomically

ACLS_FILE = "acls.json"
FORMAT_VERSION = 1


def _canonical(acls: Iterable[AclBinding]) -> str:
    rows = [
        [
            int(a.resource_type),
            a.resource_name,
            int(a.pattern_type),
            a.principal,
            a.host,
            int(a.operation),
            int(a.permission),
        ]
        for a in sorted(acls)
    ]
    return json.dumps(rows, separators=(",", ":"), ensure_ascii=False)


def _damaged(path: Path, problem: str) -> DataDirError:
    return DataDirError(
        f"{path} is damaged ({problem}): it holds this node's ACLs; restore it from a backup, or "
        "move it away and create the ACLs again (without it every resource would be open or "
        "closed by allow.everyone.if.no.acl.found alone)"
    )


def _binding(row: Any) -> AclBinding:
    if not isinstance(row, list) or len(row) != 7:
        raise ValueError("an entry is not a list of 7 values")
    rtype, name, ptype, principal, host, op, perm = row
    if not all(isinstance(v, str) for v in (name, principal, host)):
        raise ValueError("an entry's name, principal or host is not a string")
    acl = AclBinding(
        ResourceType(rtype), name, PatternType(ptype), principal, host, AclOperation(op), PermissionType(perm)
    )
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED) or acl.resource_type in (
        ResourceType.ANY,
        ResourceType.UNKNOWN,
    ):
        raise ValueError("an entry has a pattern or resource type an ACL cannot have")
    return acl


class AclStore:
    """The ACL set and its file; `replace` makes a new set durable before it is used."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / ACLS_FILE
        self.acls: frozenset[AclBinding] = self._load()

    def _load(self) -> frozenset[AclBinding]:
        if not self.path.exists():
            return frozenset()
        try:
            doc = json.loads(self.path.read_bytes())
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise _damaged(self.path, f"cannot be read: {getattr(e, 'strerror', None) or e}") from None
        if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
            raise _damaged(self.path, f"not an ACL file of version {FORMAT_VERSION}")
        rows = doc.get("acls")
        if not isinstance(rows, list):
            raise _damaged(self.path, "no acls list")
        try:
            acls = frozenset(_binding(row) for row in rows)
        except (TypeError, ValueError) as e:
            raise _damaged(self.path, str(e)) from None
        if zlib.crc32(_canonical(acls).encode()) != doc.get("crc32"):
            raise _damaged(self.path, "checksum mismatch")
        return acls

    def replace(self, acls: frozenset[AclBinding]) -> None:
        """Write `acls` durably, then keep them (an OSError leaves the old set in force)."""
        body = _canonical(acls)
        data = json.dumps(
            {"version": FORMAT_VERSION, "crc32": zlib.crc32(body.encode()), "acls": json.loads(body)},
            indent=None,
            ensure_ascii=False,
        )
        write_atomically(self.path, data.encode())
        self.acls = acls
