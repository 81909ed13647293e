"""The client side of a secured Kafka listener, configured as Kafka's clients are: TLS (SSL,
SASL_SSL) and SASL authentication (SASL_PLAINTEXT, SASL_SSL) from Kafka client properties
(`--command-config FILE`), for groupshift's own wire client and for confluent-kafka.

What a Kafka client does after connecting to a SASL listener (KIP-43, KIP-152): it may send
ApiVersions, then SaslHandshake (v1: the mechanism's tokens travel in SaslAuthenticate requests)
naming its mechanism, then one SaslAuthenticate per token until the exchange completes; any other
request before that makes the broker close the connection. PLAIN (RFC 4616) is one token,
`authzid NUL username NUL password` with an empty authzid, as Kafka's PlainSaslClient sends it.
SCRAM-SHA-256/512 (RFC 5802, KIP-84) is two round trips (client-first, client-final; the server's
final message proves it knows the credentials); the `scramp` library computes the messages.

The properties read are Kafka's client configs (`CommonClientConfigs`, `SslConfigs`,
`SaslConfigs`): `security.protocol`; `ssl.truststore.location/type/password`,
`ssl.truststore.certificates` (PEM text), `ssl.keystore.location/type/password`,
`ssl.key.password`, `ssl.keystore.certificate.chain` / `ssl.keystore.key` (PEM text),
`ssl.endpoint.identification.algorithm` (`https`, the default, checks the broker's name; empty
does not), `ssl.enabled.protocols`; `sasl.mechanism` and `sasl.jaas.config` (PlainLoginModule or
ScramLoginModule with `username` / `password`; OAuthBearerLoginModule with `clientId`,
`clientSecret`, `scope`, together with `sasl.oauthbearer.token.endpoint.url` and the
`sasl.login.*` refresh settings: protocol.oauth_client). Store types are PEM and PKCS12; a JKS
file is refused with the keytool command that converts it (Java's own `JKS` loader reads PKCS12
files too, so a PKCS12 file under the default type `JKS` is read as Kafka would). Other
properties (timeouts, client.id, ...) are a client's own business and ignored, as Kafka's admin
tools log and ignore what they do not use. GSSAPI (Kerberos) is refused with a message naming
Kafka's own tools, which speak it.

groupshift's upstream connections (gateway/upstream/security.py) read the same properties under
the `upstream.` prefix; `from_properties(props, prefix)` names them so in its errors.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.client import WireClient, make_request
from protocol.oauth_client import OAuthSettings, OAuthTokenSource

__all__ = [
    "ClientSecurity",
    "ClientSecurityError",
    "SaslAuthenticationFailed",
    "SaslClient",
    "TlsMaterial",
    "authenticate",
    "read_properties",
]

API_SASL_HANDSHAKE = 17
API_SASL_AUTHENTICATE = 36
SASL_HANDSHAKE_VERSION = 1  # v1: tokens in SaslAuthenticate (v0's raw tokens are gone in Kafka 4)
SASL_AUTHENTICATE_VERSION = 1  # v1 adds the session lifetime (KIP-368); v0-2 in Kafka 2.x-4.x
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}
UNSUPPORTED_MECHANISMS = {"GSSAPI": "Kerberos"}
TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
JKS_MAGIC = b"\xfe\xed\xfe\xed"
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----", re.DOTALL)


class ClientSecurityError(ValueError):
    """Client properties that cannot be used: the message names the property and the value."""


class SaslAuthenticationFailed(ConnectionError):
    """The broker refused the mechanism or the credentials; the message is its answer and
    `error_code` Kafka's error code (58 SASL_AUTHENTICATION_FAILED, 33 UNSUPPORTED_SASL_MECHANISM,
    34 ILLEGAL_SASL_STATE; 0 when the client itself found the answer wrong)."""

    def __init__(self, message: str, error_code: int = 0) -> None:
        super().__init__(message)
        self.error_code = error_code


# --- Java properties files -------------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _logical_lines(text: str) -> list[str]:
    """Lines joined where one ends in an odd number of backslashes (java.util.Properties)."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def parse_properties(text: str) -> dict[str, str]:
    """`java.util.Properties` text: `key=value`, `key: value` or `key value`, `#`/`!` comments,
    backslash continuations and escapes (what Kafka's `--command-config` loads)."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        match = re.match(r"((?:\\.|[^\\=:\s])+)\s*[=:]?\s*(.*)$", line, re.DOTALL)
        if match is None:
            continue
        props[_unescape(match.group(1))] = _unescape(match.group(2))
    return props


def read_properties(path: str | Path) -> dict[str, str]:
    """The properties in file `path`; ClientSecurityError when it cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ClientSecurityError(f"{path}: {reason}") from None
    return parse_properties(text)


# --- JAAS ----------------------------------------------------------------------------------------


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """`<LoginModule class> <flag> key="value" ... ;` (one entry, as `sasl.jaas.config` holds):
    the class and its options. ClientSecurityError names what is malformed."""
    tokens = re.findall(r'"((?:\\.|[^"\\])*)"|(;)|(=)|([^\s=;"]+)', text)
    words: list[tuple[str, str]] = []
    for quoted, semi, eq, bare in tokens:
        if semi:
            words.append(("semi", ";"))
        elif eq:
            words.append(("eq", "="))
        elif bare:
            words.append(("word", bare))
        else:
            words.append(("word", re.sub(r"\\(.)", r"\1", quoted)))
    if len(words) < 3 or words[-1][0] != "semi" or words[0][0] != "word" or words[1][0] != "word":
        raise ClientSecurityError(
            'sasl.jaas.config must read `<LoginModule> required username="..." password="...";`'
        )
    module, flag = words[0][1], words[1][1]
    if flag.lower() not in ("required", "requisite", "sufficient", "optional"):  # any case, as Kafka
        raise ClientSecurityError(f"sasl.jaas.config: {flag!r} is not a JAAS flag (required, ...)")
    body = words[2:-1]
    if len(body) % 3 or any(
        (body[i][0], body[i + 1][0], body[i + 2][0]) != ("word", "eq", "word") for i in range(0, len(body), 3)
    ):
        raise ClientSecurityError("sasl.jaas.config: options must be key=value pairs before the final ';'")
    return module, {body[i][1]: body[i + 2][1] for i in range(0, len(body), 3)}


# --- TLS -----------------------------------------------------------------------------------------


def _pem_blocks(text: str, kind: str) -> list[str]:
    """The PEM blocks of `text` whose label ends with `kind` (CERTIFICATE, PRIVATE KEY)."""
    return [m.group(0) for m in _PEM_BLOCK.finditer(text) if m.group(1).endswith(kind)]


def _pkcs12(path: str, password: str | None, what: str) -> tuple[str | None, list[str]]:
    """A PKCS12 store's key (unencrypted PKCS8 PEM, if any) and certificates (PEM)."""
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise ClientSecurityError(
            f"reading the PKCS12 {what} {path} needs the `cryptography` package: "
            "pip install 'groupshift[tls]' (or use PEM files)"
        ) from None
    data = _read_bytes(path, what)
    if data.startswith(JKS_MAGIC):
        raise ClientSecurityError(
            f"ssl.{what}.location: {path} is a JKS {what}, which groupshift does not read; convert it with "
            f"`keytool -importkeystore -srckeystore {path} -destkeystore STORE.p12 "
            "-deststoretype PKCS12` and set the type to PKCS12"
        )
    try:
        loaded = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as exc:
        raise ClientSecurityError(
            f"ssl.{what}.location: cannot open the PKCS12 {what} {path} "
            f"(wrong password in ssl.{what}.password?): {exc}"
        ) from None
    certs = ([loaded.cert] if loaded.cert is not None else []) + list(loaded.additional_certs)
    pems = [c.certificate.public_bytes(serialization.Encoding.PEM).decode() for c in certs]
    key = None
    if loaded.key is not None:
        key = loaded.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
    return key, pems


def _read_bytes(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ClientSecurityError(f"ssl.{what}.location: cannot read {path}: {exc.strerror or exc}") from None


def _store_type(props: Mapping[str, str], name: str, location: str | None) -> str:
    """PEM or PKCS12. Kafka's default type is JKS, whose Java loader also reads PKCS12 files;
    a location under JKS (or no type) is read by what the file holds."""
    kind = props.get(f"ssl.{name}.type", "JKS").strip().upper()
    if kind in ("PEM", "PKCS12"):
        return kind
    if kind != "JKS":
        raise ClientSecurityError(
            f"ssl.{name}.type={kind} is not supported (PEM, PKCS12, or JKS files in PKCS12)"
        )
    if location is not None and _read_bytes(location, name).lstrip().startswith(b"-----BEGIN"):
        return "PEM"
    return "PKCS12"


@dataclass(frozen=True)
class TlsMaterial:
    """What a TLS client needs, as PEM text: the CAs it trusts (None: the system's), its own
    certificate chain and key (mutual TLS), and whether it checks the broker's host name."""

    ca_pem: str | None = None
    cert_chain_pem: str | None = None
    key_pem: str | None = None
    key_password: str | None = None
    check_hostname: bool = True
    minimum_version: ssl.TLSVersion | None = None
    maximum_version: ssl.TLSVersion | None = None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TlsMaterial:
        for name in ("truststore", "keystore"):
            _store_type(props, name, None)  # an unknown type is refused even without a location
        ca_pem = props.get("ssl.truststore.certificates")
        location = props.get("ssl.truststore.location")
        if ca_pem is None and location:
            if _store_type(props, "truststore", location) == "PEM":
                ca_pem = _read_bytes(location, "truststore").decode(errors="replace")
            else:
                _, certs = _pkcs12(location, props.get("ssl.truststore.password"), "truststore")
                ca_pem = "".join(certs)
        if ca_pem is not None and not _pem_blocks(ca_pem, "CERTIFICATE"):
            raise ClientSecurityError(
                f"ssl.truststore.location: {location or 'ssl.truststore.certificates'} holds no certificate"
            )
        key_password = props.get("ssl.key.password")
        chain = props.get("ssl.keystore.certificate.chain")
        key = props.get("ssl.keystore.key")
        location = props.get("ssl.keystore.location")
        if (chain is None) != (key is None):
            raise ClientSecurityError("ssl.keystore.certificate.chain and ssl.keystore.key go together")
        if chain is None and location:
            if _store_type(props, "keystore", location) == "PEM":
                text = _read_bytes(location, "keystore").decode(errors="replace")
                chain = "".join(_pem_blocks(text, "CERTIFICATE"))
                key = "".join(_pem_blocks(text, "PRIVATE KEY"))
            else:
                password = props.get("ssl.keystore.password")
                key, certs = _pkcs12(location, password, "keystore")
                chain = "".join(certs)
                key_password = None  # decrypted above
        if chain is not None and (
            not _pem_blocks(chain, "CERTIFICATE") or not key or "PRIVATE KEY" not in key
        ):
            raise ClientSecurityError(
                f"ssl.keystore.location: {location or 'ssl.keystore.key'} needs a private key "
                "and its certificate"
            )
        algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
        if algorithm not in ("https", ""):
            raise ClientSecurityError(
                f"ssl.endpoint.identification.algorithm={algorithm} is not supported "
                "(https, or empty for none)"
            )
        versions: list[ssl.TLSVersion] = []
        for name in filter(None, (v.strip() for v in props.get("ssl.enabled.protocols", "").split(","))):
            if name not in TLS_VERSIONS:
                raise ClientSecurityError(
                    f"ssl.enabled.protocols: {name} is not supported (TLSv1.2, TLSv1.3)"
                )
            versions.append(TLS_VERSIONS[name])
        return cls(
            ca_pem=ca_pem,
            cert_chain_pem=chain,
            key_pem=key,
            key_password=key_password,
            check_hostname=algorithm == "https",
            minimum_version=min(versions) if versions else None,
            maximum_version=max(versions) if versions else None,
        )

    def ssl_context(self) -> ssl.SSLContext:
        """A client SSLContext: the trusted CAs, host-name checking, the client certificate.
        A truststore replaces the system's CAs, as it replaces the JVM's for a Kafka client."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, check_hostname
        if self.ca_pem is None:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        else:
            try:
                context.load_verify_locations(cadata=self.ca_pem)
            except ssl.SSLError as exc:
                raise ClientSecurityError(
                    f"ssl.truststore.location: its certificates cannot be used: {exc}"
                ) from None
        context.check_hostname = self.check_hostname
        if self.minimum_version is not None:
            context.minimum_version = self.minimum_version
        if self.maximum_version is not None:
            context.maximum_version = self.maximum_version
        if self.cert_chain_pem is not None and self.key_pem is not None:
            # The ssl module loads a key only from a file: a private directory, removed at once.
            with tempfile.TemporaryDirectory(prefix="groupshift-tls-") as tmp:
                key_file = Path(tmp) / "client.pem"
                fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as out:
                    out.write(self.key_pem + "\n" + self.cert_chain_pem)
                try:
                    context.load_cert_chain(key_file, password=self.key_password)
                except ssl.SSLError as exc:
                    raise ClientSecurityError(
                        "ssl.keystore.location: its key and certificate cannot be used "
                        f"(wrong ssl.key.password?): {exc}"
                    ) from None
        return context

    def librdkafka_config(self) -> dict[str, str]:
        """The same material in librdkafka's names (confluent-kafka), as PEM text."""
        config: dict[str, str] = {
            "ssl.endpoint.identification.algorithm": "https" if self.check_hostname else "none"
        }
        if self.ca_pem is not None:
            config["ssl.ca.pem"] = self.ca_pem
        if self.cert_chain_pem is not None and self.key_pem is not None:
            config["ssl.certificate.pem"] = self.cert_chain_pem
            config["ssl.key.pem"] = self.key_pem
            if self.key_password:
                config["ssl.key.password"] = self.key_password
        return config


# --- SASL ----------------------------------------------------------------------------------------


def _plain_token(username: str, password: str) -> bytes:
    return b"\x00" + username.encode() + b"\x00" + password.encode()


class SaslClient:
    """One SASL exchange, sans-IO: `first()` is the first SaslAuthenticate token, `step(server)`
    the next one for the broker's answer, or None once the exchange is complete (the broker's
    last answer verified). Shared by the blocking WireClient and groupshift's upstream links.

    OAUTHBEARER (RFC 7628, KIP-255): the client's initial response `n,,\x01auth=Bearer
    TOKEN\x01\x01`; a broker that refuses the token answers a JSON error challenge, the client
    replies `\x01` and the broker then fails the exchange (SASL_AUTHENTICATION_FAILED)."""

    def __init__(self, mechanism: str, username: str, password: str, token: str | None = None) -> None:
        if mechanism not in SASL_MECHANISMS:
            raise ClientSecurityError(f"unsupported SASL mechanism {mechanism!r}")
        self.mechanism = mechanism
        self.username = username
        self._password = password
        self._token = token
        self._scram: Any = None
        self._steps = 0
        self.oauth_challenge: str | None = None

    def first(self) -> bytes:
        if self.mechanism == "PLAIN":
            return _plain_token(self.username, self._password)
        if self.mechanism == "OAUTHBEARER":
            return f"n,,\x01auth=Bearer {self._token or ''}\x01\x01".encode()
        # SCRAM: scramp escapes the user name and checks the server's nonce, salt, iteration
        # count (4096 to 10^7) and final signature; Kafka answers a wrong password at client-final.
        from scramp import ScramClient

        self._scram = ScramClient([self.mechanism], self.username, self._password)
        return str(self._scram.get_client_first()).encode()

    def step(self, server: bytes) -> bytes | None:
        self._steps += 1
        if self.mechanism == "PLAIN":
            return None
        if self.mechanism == "OAUTHBEARER":
            if not server or self.oauth_challenge is not None:
                return None
            self.oauth_challenge = server.decode(errors="replace")[:500]
            return b"\x01"
        from scramp import ScramException

        try:
            if self._steps == 1:
                self._scram.set_server_first(server.decode())
                return str(self._scram.get_client_final()).encode()
            self._scram.set_server_final(server.decode())
        except (UnicodeDecodeError, ScramException) as exc:
            raise SaslAuthenticationFailed(
                f"{self.mechanism}: the broker's answer does not verify: {exc}"
            ) from None
        return None


def _sasl_authenticate(client: WireClient, token: bytes) -> tuple[bytes, int]:
    """One SaslAuthenticate round trip: the server's token and the session lifetime in ms."""
    answer = client.request(make_request(API_SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION, auth_bytes=token))
    if answer.error_code != 0:
        raise SaslAuthenticationFailed(
            answer.error_message or f"SASL error code {answer.error_code}", answer.error_code
        )
    return bytes(answer.auth_bytes), int(answer.session_lifetime.total_seconds() * 1000)


def handshake_refusal(mechanism: str, offered: Sequence[str]) -> str:
    return (
        f"the broker does not enable SASL mechanism {mechanism} on this listener "
        f"(it offers: {', '.join(offered) or 'none'})"
    )


def authenticate(
    client: WireClient, mechanism: str, username: str, password: str, token: str | None = None
) -> int:
    """Run the SASL exchange on a fresh connection; the session lifetime the broker granted in
    ms (0: no limit, KIP-368). Raises SaslAuthenticationFailed with the broker's answer."""
    sasl = SaslClient(mechanism, username, password, token)
    handshake = client.request(make_request(API_SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, mechanism=mechanism))
    if handshake.error_code != 0:
        raise SaslAuthenticationFailed(
            handshake_refusal(mechanism, handshake.mechanisms), handshake.error_code
        )
    out: bytes | None = sasl.first()
    lifetime = 0
    while out is not None:
        server, lifetime = _sasl_authenticate(client, out)
        out = sasl.step(server)
    return lifetime


# --- the whole -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientSecurity:
    """How to reach one listener: Kafka's `security.protocol` and what it needs (an SSL context
    for SSL / SASL_SSL; mechanism and credentials for SASL_*). `tls` keeps the material the
    context was made of, for `librdkafka_config`; `tokens` is OAUTHBEARER's token source."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: TlsMaterial | None = field(default=None, repr=False)
    tokens: OAuthTokenSource | None = field(default=None, repr=False)

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def principal_text(self) -> str:
        """Who authenticates, for messages: `user 'alice'` or `client 'id'` (OAUTHBEARER)."""
        if self.sasl_mechanism == "OAUTHBEARER" and self.tokens is not None:
            return f"client {self.tokens.settings.client_id!r}"
        return f"user {self.username!r}"

    @classmethod
    def from_properties(cls, props: Mapping[str, str], prefix: str = "") -> ClientSecurity:
        """From Kafka client properties; ClientSecurityError names the first unusable one,
        with `prefix` before every setting it names (`upstream.` for groupshift's upstream)."""
        try:
            return cls._from_properties(props)
        except ClientSecurityError as exc:
            if not prefix:
                raise
            raise ClientSecurityError(prefixed_settings(str(exc), prefix)) from None

    @classmethod
    def _from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ClientSecurityError(
                f"security.protocol={protocol} is not one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        tls = TlsMaterial.from_properties(props) if protocol in ("SSL", "SASL_SSL") else None
        context = tls.ssl_context() if tls is not None else None
        if not protocol.startswith("SASL_"):
            return cls(protocol, context, tls=tls)
        mechanism = props.get("sasl.mechanism", "GSSAPI").strip().upper()  # Kafka's default
        if mechanism in UNSUPPORTED_MECHANISMS:
            raise ClientSecurityError(
                f"sasl.mechanism={mechanism} ({UNSUPPORTED_MECHANISMS[mechanism]}) is not supported by "
                f"groupshift ({', '.join(SASL_MECHANISMS)}); Kafka's own tools speak it: "
                "`groupshift kafka tool kafka-consumer-groups --command-config FILE ...`"
            )
        if mechanism not in SASL_MECHANISMS:
            raise ClientSecurityError(
                f"sasl.mechanism={mechanism} is not one of {', '.join(SASL_MECHANISMS)}"
            )
        jaas = props.get("sasl.jaas.config")
        if not jaas:
            needs = "clientId and clientSecret" if mechanism == "OAUTHBEARER" else "username and password"
            raise ClientSecurityError(f"sasl.mechanism={mechanism} needs sasl.jaas.config with {needs}")
        module, options = parse_jaas(jaas)
        if module != LOGIN_MODULES[mechanism]:
            raise ClientSecurityError(
                f"sasl.jaas.config names {module}; "
                f"sasl.mechanism={mechanism} needs {LOGIN_MODULES[mechanism]}"
            )
        if mechanism == "OAUTHBEARER":
            try:
                settings = OAuthSettings.from_properties(props, options)
            except ValueError as exc:
                raise ClientSecurityError(str(exc)) from None
            return cls(protocol, context, mechanism, None, None, tls, OAuthTokenSource(settings))
        if "username" not in options or "password" not in options:
            raise ClientSecurityError('sasl.jaas.config needs username="..." and password="..."')
        return cls(protocol, context, mechanism, options["username"], options["password"], tls)

    def sasl_client(self) -> SaslClient:
        """A fresh exchange for one connection (blocking for OAUTHBEARER when the token is due
        a refresh: asyncio callers run this in an executor)."""
        token = self.tokens.token().value if self.tokens is not None else None
        return SaslClient(self.sasl_mechanism or "PLAIN", self.username or "", self.password or "", token)

    @classmethod
    def from_file(cls, path: str | Path) -> ClientSecurity:
        """From a Kafka client properties file (`--command-config`); errors name the file."""
        props = read_properties(path)
        try:
            return cls.from_properties(props)
        except ClientSecurityError as exc:
            raise ClientSecurityError(f"{path}: {exc}") from None

    def connect(
        self, host: str, port: int, timeout: float = 5.0, *, client_id: str | None = "groupshift-wire"
    ) -> WireClient:
        """A WireClient on `host:port`, TLS handshake and SASL exchange done."""
        client = WireClient(port, host, timeout, client_id=client_id, ssl_context=self.ssl_context)
        if self.uses_sasl:
            try:
                token = self.tokens.token().value if self.tokens is not None else None
                authenticate(
                    client, self.sasl_mechanism or "PLAIN", self.username or "", self.password or "", token
                )
            except BaseException:
                client.close()
                raise
        return client

    def librdkafka_config(self) -> dict[str, str]:
        """The same settings in librdkafka's names, for a confluent-kafka client's config."""
        config = {"security.protocol": self.protocol.lower()}
        if self.tls is not None:
            config |= self.tls.librdkafka_config()
        if self.uses_sasl and self.sasl_mechanism == "OAUTHBEARER":
            config["sasl.mechanism"] = "OAUTHBEARER"  # the token comes from an `oauth_cb`
        elif self.uses_sasl:
            config |= {
                "sasl.mechanism": self.sasl_mechanism or "PLAIN",
                "sasl.username": self.username or "",
                "sasl.password": self.password or "",
            }
        return config


def prefixed_settings(message: str, prefix: str) -> str:
    """`message` with `prefix` before every Kafka client setting it names (`ssl.*`, `sasl.*`,
    `security.protocol`), so an error about `upstream.ssl.truststore.location` says so."""
    return re.sub(
        r"(?<![\w.])((?:ssl|sasl)\.[a-z]|security\.protocol)", lambda m: prefix + m.group(1), message
    )
