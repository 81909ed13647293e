"""The `gateway` identity's per-principal credential map (issue 29, point 2): which upstream SASL
credential carries a given client's forwarded traffic.

In `upstream.identity=gateway` groupshift authenticates clients itself (its listeners, its
users) and, by default, talks to the cluster as itself: the cluster's ACLs, quotas and audit
see one principal. `upstream.identity.credentials.file` names a JSON file mapping groupshift
principals to upstream credentials, so that, for example, alice's Produce and Fetch reach the
cluster on links that authenticated as alice there, and the cluster's own ACLs, quotas and audit
apply to her as well as groupshift's:

    {
      "User:alice": {"sasl.mechanism": "SCRAM-SHA-512",
                     "sasl.jaas.config": "...ScramLoginModule required username=\\"alice\\" ..."},
      "User:bob":   {"username": "bob-upstream", "password": "..."}
    }

An entry holds Kafka's client SASL settings, unprefixed (`sasl.mechanism`, default
`upstream.sasl.mechanism`; `sasl.jaas.config`, or `username` and `password` for PLAIN and SCRAM;
for OAUTHBEARER the `sasl.oauthbearer.*` / `sasl.login.*` settings, inherited from `upstream.`
where not given). The transport is groupshift's (`upstream.security.protocol`, which must be
SASL_PLAINTEXT or SASL_SSL, and `upstream.ssl.*`): an entry naming `ssl.*` or
`security.protocol` is refused. JSON rather than a properties file because principals hold a
colon, which a properties key would need escaped.

Principals not in the map use groupshift's own credential, or, with
`upstream.identity.credentials.required=true`, have no upstream at all (their connection is
closed at their first forwarded request, `upstream.identity_unmapped`). Links are pooled per
credential and never handed to another principal (gateway.upstream.proxy). Secrets are never
logged: errors name the file, the principal and the setting, never a value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from gateway.upstream.security import UpstreamSecurity
from protocol.client_security import LOGIN_MODULES, ClientSecurity, ClientSecurityError

FILE_SETTING = "upstream.identity.credentials.file"
REQUIRED_SETTING = "upstream.identity.credentials.required"
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
# What an entry may say besides Kafka's sasl.* settings: the short form of a PLAIN/SCRAM login.
SHORT_KEYS = frozenset({"username", "password"})


class CredentialsError(ValueError):
    """The credentials file cannot be used; the message names the setting and the principal."""


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _entry_properties(principal: str, entry: object, base: Mapping[str, str]) -> dict[str, str]:
    """Kafka client properties for one principal: groupshift's transport, the entry's SASL."""
    where = f"{FILE_SETTING}: {principal!r}"
    if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
        raise CredentialsError(f"{where}: expected an object of string settings")
    for key in entry:
        if not (key.startswith("sasl.") or key in SHORT_KEYS):
            raise CredentialsError(
                f"{where}: {key} cannot be set per principal (only sasl.* settings, or username and "
                "password; the transport is upstream.security.protocol and upstream.ssl.*)"
            )
    props = {k: v for k, v in base.items() if not k.startswith("sasl.")}
    # OAUTHBEARER's endpoint and login timings are inherited; the credential itself is not.
    props |= {
        k: v for k, v in base.items() if k.startswith(("sasl.oauthbearer.", "sasl.login.")) and k not in entry
    }
    mechanism = str(entry.get("sasl.mechanism") or base.get("sasl.mechanism") or "PLAIN").strip().upper()
    props["sasl.mechanism"] = mechanism
    props |= {k: v for k, v in entry.items() if k.startswith("sasl.") and k != "sasl.mechanism"}
    if "username" in entry or "password" in entry:
        if "sasl.jaas.config" in entry:
            raise CredentialsError(f"{where}: give sasl.jaas.config or username and password, not both")
        if "username" not in entry or "password" not in entry:
            raise CredentialsError(f"{where}: username and password go together")
        module = LOGIN_MODULES.get(mechanism)
        if module is None or mechanism == "OAUTHBEARER":
            raise CredentialsError(f"{where}: username and password need PLAIN or SCRAM, not {mechanism}")
        props["sasl.jaas.config"] = (
            f"{module} required username={_quote(entry['username'])} password={_quote(entry['password'])};"
        )
    elif "sasl.jaas.config" not in entry:
        raise CredentialsError(f"{where}: needs sasl.jaas.config, or username and password")
    return props


def parse_credentials(text: str, base: Mapping[str, str]) -> dict[str, ClientSecurity]:
    """The map in `text` (JSON) as one ClientSecurity per principal. `base` is groupshift's own
    upstream client properties (`security.protocol`, `ssl.*`, `sasl.*`)."""
    protocol = base.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in SASL_PROTOCOLS:
        raise CredentialsError(
            f"{FILE_SETTING} needs upstream.security.protocol SASL_PLAINTEXT or SASL_SSL "
            f"(a per-principal credential is a SASL login), not {protocol}"
        )
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CredentialsError(f"{FILE_SETTING}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise CredentialsError(f"{FILE_SETTING}: expected an object mapping principals to credentials")
    shared: ClientSecurity | None = None
    out: dict[str, ClientSecurity] = {}
    for principal, entry in data.items():
        kind, colon, name = principal.partition(":")
        if not colon or not kind or not name:
            raise CredentialsError(
                f"{FILE_SETTING}: {principal!r} is not a principal (TYPE:NAME, e.g. User:alice)"
            )
        props = _entry_properties(principal, entry, base)
        try:
            if shared is None:
                client = shared = ClientSecurity.from_properties(props)
            else:  # one SSL context for the whole map: the transport is the same
                client = ClientSecurity.from_properties({**props, "security.protocol": "SASL_PLAINTEXT"})
                client = replace(
                    client, protocol=shared.protocol, ssl_context=shared.ssl_context, tls=shared.tls
                )
        except ClientSecurityError as exc:
            raise CredentialsError(f"{FILE_SETTING}: {principal!r}: {exc}") from None
        out[principal] = client
    return out


def load_credentials(path: str, base: Mapping[str, str]) -> dict[str, ClientSecurity]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CredentialsError(f"{FILE_SETTING}: cannot read {path}: {exc.strerror or exc}") from None
    return parse_credentials(text, base)


@dataclass(frozen=True, slots=True)
class UpstreamIdentity:
    """The credential a client's links use: `key` names the link pool ("" for groupshift's own
    credential, else the principal), never the secret."""

    key: str
    security: UpstreamSecurity


class PrincipalCredentials:
    """The loaded map, as the proxy uses it to lease links."""

    def __init__(
        self, own: UpstreamSecurity, mapped: Mapping[str, ClientSecurity], *, required: bool = False
    ) -> None:
        self.own = UpstreamIdentity("", own)
        self.required = required
        self._mapped = {
            p: UpstreamIdentity(p, UpstreamSecurity(c, label=f"{FILE_SETTING} ({p})"))
            for p, c in mapped.items()
        }

    @property
    def principals(self) -> list[str]:
        return sorted(self._mapped)

    def __len__(self) -> int:
        return len(self._mapped)

    def identity_of(self, principal: str) -> UpstreamIdentity | None:
        """The credential `principal`'s forwarded traffic uses; None when it has none (not in
        the map while the map is required)."""
        found = self._mapped.get(principal)
        if found is not None:
            return found
        return None if self.required else self.own

    def start(self) -> None:
        for identity in self._mapped.values():
            identity.security.start()

    def close(self) -> None:
        for identity in self._mapped.values():
            identity.security.close()
