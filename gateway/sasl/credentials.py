"""SCRAM credentials, kept durably in the data directory (Kafka's `ScramControlManager` and the
`UserScramCredentialRecord`s of its metadata log).

AlterUserScramCredentials carries, per user and mechanism, the salt, the iteration count and
the salted password the client computed (`kafka-configs.sh --add-config
'SCRAM-SHA-256=[iterations=8192,password=...]'` salts on the client side). As Kafka's controller
does, the salted password is turned into the stored key and server key at once and only those
are kept, with the salt and iterations the client chose: the file never holds the password nor
anything that logs in without it (RFC 5802's point of storing StoredKey).

The file (`scram-credentials.json`) is replaced atomically (temp file, fsync, rename, directory
fsync: `gateway.dataplane.durable`), so after a crash it holds the state before or after a
change, never a mix; a change is applied in memory only once it is on disk. It is read before
any listener opens; a damaged file stops the start-up with an error that names it, as a damaged
`topics.json` does, rather than silently losing every user.

The request rules are Kafka's: iterations within [4096, 16384] ("Too few iterations" / "Too many
iterations", UNACCEPTABLE_CREDENTIAL), an empty user name refused, an unknown mechanism
UNSUPPORTED_SASL_MECHANISM, one user altered twice in a request DUPLICATE_RESOURCE, a deletion of
a credential that does not exist RESOURCE_NOT_FOUND; results list deletions, then upsertions,
then errors. Describe answers every user (none named) or the named ones, a user named twice
DUPLICATE_RESOURCE, a user without credentials RESOURCE_NOT_FOUND.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from gateway.dataplane.durable import write_atomically
from gateway.sasl.scram import (
    HASHES,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    credential_from_salted_password,
)

CREDENTIALS_FILE = "scram-credentials.json"
FORMAT_VERSION = 1
# Kafka's `org.apache.kafka.clients.admin.ScramMechanism` type ids (0 is UNKNOWN).
MECHANISM_TYPES: dict[int, str] = {1: SCRAM_SHA_256, 2: SCRAM_SHA_512}
TYPE_OF = {name: t for t, name in MECHANISM_TYPES.items()}

TWICE = "A user credential cannot be altered twice in the same request"
DELETE_MISSING = "Attempt to delete a user credential that does not exist"
DESCRIBE_TWICE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist: "


class CredentialsFileError(ValueError):
    """The credentials file cannot be read; the message names it."""


@dataclass(frozen=True, slots=True)
class Deletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class UserResult:
    user: str
    error_code: ErrorCode
    error_message: str | None


@dataclass(frozen=True, slots=True)
class DescribedUser:
    user: str
    error_code: ErrorCode
    error_message: str | None  # "" for a user described (Kafka's default), as Kafka answers
    credentials: tuple[tuple[int, int], ...]  # (mechanism type, iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class ScramCredentialStore:
    """user -> mechanism -> credential, mirrored in `<data dir>/scram-credentials.json`."""

    def __init__(self, path: Path, users: dict[str, dict[str, ScramCredential]]) -> None:
        self.path = path
        self._users = users
        self._write_lock = threading.Lock()  # one file replacement at a time

    @classmethod
    def load(cls, data_dir: Path) -> ScramCredentialStore:
        """The stored credentials (none if the file does not exist yet)."""
        path = data_dir / CREDENTIALS_FILE
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return cls(path, {})
        except OSError as e:
            raise CredentialsFileError(f"cannot read {path}: {e.strerror or e}") from None
        try:
            return cls(path, cls._decode(raw))
        except (ValueError, KeyError, TypeError, binascii.Error) as e:
            raise CredentialsFileError(
                f"{path} is damaged ({str(e)[:200]}): restore it from a backup, or move it away "
                "to start with no SCRAM users (they must then be created again)"
            ) from None

    @staticmethod
    def _decode(raw: bytes) -> dict[str, dict[str, ScramCredential]]:
        doc = json.loads(raw.decode("utf-8"))
        if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
            raise ValueError(f"expected an object with version {FORMAT_VERSION}")
        users: dict[str, dict[str, ScramCredential]] = {}
        for user, mechanisms in doc["users"].items():
            if not isinstance(user, str) or not user or not isinstance(mechanisms, dict):
                raise ValueError("bad user entry")
            entry: dict[str, ScramCredential] = {}
            for mechanism, c in mechanisms.items():
                if mechanism not in HASHES or not isinstance(c, dict):
                    raise ValueError(f"unknown mechanism {str(mechanism)[:40]!r}")
                iterations = c["iterations"]
                if not isinstance(iterations, int) or isinstance(iterations, bool):
                    raise ValueError("iterations must be an integer")
                entry[mechanism] = ScramCredential(
                    salt=base64.b64decode(c["salt"], validate=True),
                    stored_key=base64.b64decode(c["stored_key"], validate=True),
                    server_key=base64.b64decode(c["server_key"], validate=True),
                    iterations=iterations,
                )
            if entry:
                users[user] = entry
        return users

    def _encode(self, users: dict[str, dict[str, ScramCredential]]) -> bytes:
        doc: dict[str, Any] = {
            "version": FORMAT_VERSION,
            "users": {
                user: {
                    mechanism: {
                        "salt": _b64(c.salt),
                        "stored_key": _b64(c.stored_key),
                        "server_key": _b64(c.server_key),
                        "iterations": c.iterations,
                    }
                    for mechanism, c in sorted(mechanisms.items())
                }
                for user, mechanisms in sorted(users.items())
            },
        }
        return json.dumps(doc, indent=1).encode()

    # -- reads --------------------------------------------------------------------------------

    def lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> list[str]:
        return sorted(self._users)

    def describe(self, names: Sequence[str] | None) -> list[DescribedUser]:
        """DescribeUserScramCredentials' results (Kafka's `ScramImage.describe`)."""
        wanted: dict[str, bool] = {}  # user -> named twice
        if not names:
            wanted = dict.fromkeys(self._users, False)
        else:
            for name in names:
                wanted[name] = name in wanted
        out = []
        for user, twice in wanted.items():
            if twice:
                out.append(DescribedUser(user, ErrorCode.duplicate_resource, DESCRIBE_TWICE + user, ()))
                continue
            mechanisms = self._users.get(user, {})
            if not mechanisms:
                out.append(DescribedUser(user, ErrorCode.resource_not_found, DESCRIBE_MISSING + user, ()))
                continue
            infos = tuple(
                (TYPE_OF[m], c.iterations) for m, c in sorted(mechanisms.items(), key=lambda i: TYPE_OF[i[0]])
            )
            out.append(DescribedUser(user, ErrorCode.none, "", infos))
        return out

    # -- changes ------------------------------------------------------------------------------

    def _validate(self, name: str, mechanism: int) -> tuple[ErrorCode, str | None] | None:
        if not name:
            return ErrorCode.unacceptable_credential, "Username must not be empty"
        if mechanism not in MECHANISM_TYPES:
            return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
        return None

    def plan(
        self, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
    ) -> tuple[list[UserResult], dict[str, dict[str, ScramCredential]] | None]:
        """The results of an AlterUserScramCredentials request (Kafka's `alterCredentials`) and
        the user map after it (None when nothing changes)."""
        errors: dict[str, tuple[ErrorCode, str | None]] = {}
        to_delete: dict[str, Deletion] = {}
        to_upsert: dict[str, Upsertion] = {}
        for d in deletions:
            if d.name in errors:
                continue
            if to_delete.pop(d.name, None) is not None:
                errors[d.name] = (ErrorCode.duplicate_resource, TWICE)
                continue
            problem = self._validate(d.name, d.mechanism)
            if problem is None and self.lookup(MECHANISM_TYPES[d.mechanism], d.name) is None:
                problem = (ErrorCode.resource_not_found, DELETE_MISSING)
            if problem is not None:
                errors[d.name] = problem
            else:
                to_delete[d.name] = d
        for u in upsertions:
            if u.name in errors:
                continue
            if to_delete.pop(u.name, None) is not None or to_upsert.pop(u.name, None) is not None:
                errors[u.name] = (ErrorCode.duplicate_resource, TWICE)
                continue
            problem = self._validate(u.name, u.mechanism)
            if problem is None and u.iterations < MIN_ITERATIONS:
                problem = (ErrorCode.unacceptable_credential, "Too few iterations")
            elif problem is None and u.iterations > MAX_ITERATIONS:
                problem = (ErrorCode.unacceptable_credential, "Too many iterations")
            if problem is not None:
                errors[u.name] = problem
            else:
                to_upsert[u.name] = u
        for u in list(to_upsert.values()):
            if not u.salted_password:
                # Kafka's controller cannot derive keys from an empty salted password (HMAC
                # with an empty key throws): UNKNOWN_SERVER_ERROR, no message.
                del to_upsert[u.name]
                errors[u.name] = (ErrorCode.unknown_server_error, None)
        results = [UserResult(d.name, ErrorCode.none, None) for d in to_delete.values()]
        results += [UserResult(u.name, ErrorCode.none, None) for u in to_upsert.values()]
        results += [UserResult(name, code, message) for name, (code, message) in errors.items()]
        if not to_delete and not to_upsert:
            return results, None
        users = {user: dict(mechanisms) for user, mechanisms in self._users.items()}
        for d in to_delete.values():
            users[d.name].pop(MECHANISM_TYPES[d.mechanism], None)
            if not users[d.name]:
                del users[d.name]
        for u in to_upsert.values():
            mechanism = MECHANISM_TYPES[u.mechanism]
            users.setdefault(u.name, {})[mechanism] = credential_from_salted_password(
                mechanism, u.salt, u.salted_password, u.iterations
            )
        return results, users

    def adopt(self, other: ScramCredentialStore) -> None:
        """Take `other`'s users as current, without writing (a worker of `serve --workers N`
        following worker 0's file, gateway.workers.forwarding)."""
        self._users = other._users

    def write(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        """Make `users` durable, then current (may run in a worker thread)."""
        data = self._encode(users)
        with self._write_lock:
            write_atomically(self.path, data)
            self._users = users
