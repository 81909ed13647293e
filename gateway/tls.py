"""TLS on SSL listeners, with Kafka's `ssl.*` broker settings, and the principal of a client.

Kafka behaviour (`SslFactory`, `DefaultSslEngineFactory`, `SslPrincipalMapper`, KIP-371):

* `ssl.keystore.type` / `ssl.truststore.type`: PKCS12 and PEM are read here (PEM: a file with
  the private key and the certificate chain; a truststore file of CA certificates). JKS needs a
  Java keystore reader; pyjks, the only Python one, has had no release since 2020, so JKS is
  refused with the `keytool` line that converts it (docs/deviations.md).
* `ssl.keystore.password` opens a PKCS12 keystore; `ssl.key.password` decrypts the key (it
  defaults to the keystore password, as in Kafka).
* `ssl.client.auth`: `none`, `requested` (a certificate is asked for and verified if sent) or
  `required` (mutual TLS: no certificate, no connection).
* `ssl.enabled.protocols` (default `TLSv1.2,TLSv1.3`) bounds the protocol versions;
  `ssl.cipher.suites` (default: the library's) lists the TLS 1.2 suites allowed, by OpenSSL or
  IANA name (`TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`), as Kafka takes IANA names.
* The principal of a TLS client is `User:` + `ssl.principal.mapping.rules` applied to its
  certificate's subject in RFC 2253 form (`CN=alice,OU=eng,O=Example`); `DEFAULT` keeps the whole
  name; `RULE:pattern/replacement/[LU]` rules are tried in order, the first whose pattern matches
  the whole name wins, and a name no rule matches fails the authentication (the connection is
  closed). A client with no certificate is `User:ANONYMOUS`, as every PLAINTEXT client.
* A keystore or truststore update without a restart (KIP-226 dynamic
  `listener.name.X.ssl.keystore.*` / `ssl.truststore.*`): a new context is built from the new
  stores and new connections get it; connections already open keep theirs (gateway.server).
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ANONYMOUS = "User:ANONYMOUS"
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_TLS_VERSIONS = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
# The settings whose dynamic update reloads a listener's keystore (KIP-226).
RELOADED_KEYS = (
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.password",
)


class TlsConfigError(ValueError):
    """A listener's `ssl.*` settings cannot make a TLS context; the message names the key."""


# -- principal mapping (SslPrincipalMapper) ------------------------------------------------------

_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_RULE_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


@dataclass(frozen=True)
class MappingRule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        """Kafka's `Rule.apply`: the pattern must match the whole name; the result is Java's
        `dn.replaceAll(pattern, replacement)` (re.sub has the same empty-match rule)."""
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        out = self.pattern.sub(lambda m: _java_replacement(self.replacement, m), dn)
        if self.case == "L":
            return out.lower()
        if self.case == "U":
            return out.upper()
        return out


def _java_replacement(replacement: str, m: re.Match[str]) -> str:
    """Java's `Matcher.appendReplacement` text: `\\x` is a literal x, `$n` group n; with
    Kafka's rule for a number beyond the groups (digits are dropped until it names one, else it
    stays literal text)."""
    groups = m.re.groups
    out = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
            continue
        ref = _BACK_REFERENCE.match(replacement, i) if c == "$" else None
        if ref is None:
            out.append(c)
            i += 1
            continue
        digits = ref.group(1)
        n = int(digits)
        while n > groups and n >= 10:
            n //= 10
            digits = digits[:-1]
        if n > groups or (digits.startswith("0") and n != 0):
            out.append("$" + digits)
        else:
            out.append(m.group(n) or "")
        i += 1 + len(digits)
    return "".join(out)


class NoMatchingRule(Exception):
    """No `ssl.principal.mapping.rules` rule applies to a certificate's subject."""


class PrincipalMapper:
    """`ssl.principal.mapping.rules` (Kafka's SslPrincipalMapper), parsed once per listener."""

    def __init__(self, rules: str | None = None) -> None:
        text = "DEFAULT" if rules is None else rules
        self.rules: list[MappingRule] = []
        for m in _RULE_SPLITTER.finditer(text.strip()):
            rule = m.group(1)
            parsed = _RULE_PARSER.match(rule)
            if parsed is None or parsed.end() != len(rule):
                rest = rule if parsed is None else rule[parsed.end() :]
                raise TlsConfigError(
                    f"ssl.principal.mapping.rules: invalid rule {rule!r}, unmatched {rest!r}"
                )
            if parsed.group(1) is not None:
                self.rules.append(MappingRule(None))
            elif parsed.group(2) is not None:
                try:
                    pattern = re.compile(parsed.group(2))
                except re.error as e:
                    raise TlsConfigError(
                        f"ssl.principal.mapping.rules: invalid pattern in {rule!r}: {e}"
                    ) from None
                self.rules.append(MappingRule(pattern, parsed.group(3), parsed.group(4)))
            elif parsed.group(5):
                raise TlsConfigError(f"ssl.principal.mapping.rules: invalid rule {rule!r}")
            if m.end() >= len(text.strip()):
                break

    def name(self, dn: str) -> str:
        for rule in self.rules:
            out = rule.apply(dn)
            if out is not None:
                return out
        raise NoMatchingRule(f"No rules apply to {dn}")


_DN_ESCAPED = re.compile(r'([,+"\\<>;=])')
_SHORT_NAMES = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def rfc2253_name(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """A certificate subject as `ssl.SSLSocket.getpeercert()` gives it (RDNs in certificate
    order), as Java's `X500Principal.getName()` writes it: the last RDN first, `CN=a,OU=b,O=c`."""
    rdns = []
    for rdn in reversed(subject):
        parts = []
        for attr, value in rdn:
            text = _DN_ESCAPED.sub(r"\\\1", value)
            if text.startswith((" ", "#")):
                text = "\\" + text
            if text.endswith(" ") and not text.endswith("\\ "):
                text = text[:-1] + "\\ "
            parts.append(f"{_SHORT_NAMES.get(attr, attr)}={text}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


def peer_principal(ssl_object: Any, mapper: PrincipalMapper) -> str:
    """`User:<mapped subject>` of a verified client certificate, `User:ANONYMOUS` without one.
    Raises `NoMatchingRule` when no mapping rule applies (Kafka fails the authentication)."""
    cert = ssl_object.getpeercert() if ssl_object is not None else None
    if not cert or "subject" not in cert:
        return ANONYMOUS
    return "User:" + mapper.name(rfc2253_name(cert["subject"]))


# -- contexts ----------------------------------------------------------------------------------


def _split_list(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _store_type(settings: Mapping[str, str], key: str) -> str:
    kind = settings.get(key, "JKS").strip().upper()
    if kind == "JKS":
        location = settings.get(key.replace(".type", ".location"), "STORE.jks")
        raise TlsConfigError(
            f"{key}=JKS is not supported (no maintained Python JKS reader): set {key}=PKCS12 after "
            f"`keytool -importkeystore -srckeystore {location} -destkeystore store.p12 "
            f"-deststoretype PKCS12`, or {key}=PEM"
        )
    if kind not in ("PKCS12", "PEM"):
        raise TlsConfigError(f"{key}: expected PKCS12 or PEM, got {kind!r}")
    return kind


def _read(path_text: str, key: str) -> bytes:
    try:
        return Path(path_text).read_bytes()
    except OSError as e:
        raise TlsConfigError(f"{key}: cannot read {path_text}: {e.strerror or e}") from None


def _pkcs12(data: bytes, password: str | None, key: str) -> tuple[Any, Any, list[Any]]:
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:  # pragma: no cover - optional: `pip install groupshift[tls]`
        raise TlsConfigError(
            f"{key}: reading PKCS12 needs the `cryptography` package (pip install 'groupshift[tls]')"
        ) from None
    try:
        k, cert, extra = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError as e:
        raise TlsConfigError(f"{key}: cannot open the PKCS12 store (wrong password?): {e}") from None
    return k, cert, list(extra)


def _load_keystore(ctx: ssl.SSLContext, settings: Mapping[str, str]) -> None:
    location = settings.get("ssl.keystore.location")
    if not location:
        raise TlsConfigError("ssl.keystore.location is required on an SSL listener")
    kind = _store_type(settings, "ssl.keystore.type")
    store_password = settings.get("ssl.keystore.password")
    key_password = settings.get("ssl.key.password", store_password)
    if kind == "PEM":
        _read(location, "ssl.keystore.location")  # a clear error before OpenSSL's
        try:
            ctx.load_cert_chain(location, password=key_password or None)
        except ssl.SSLError as e:
            raise TlsConfigError(
                f"ssl.keystore.location: {location} is not a PEM private key and certificate chain "
                f"(or ssl.key.password is wrong): {e.reason or e}"
            ) from None
        return
    from cryptography.hazmat.primitives import serialization

    private_key, cert, chain = _pkcs12(
        _read(location, "ssl.keystore.location"), store_password, "ssl.keystore.location"
    )
    if private_key is None or cert is None:
        raise TlsConfigError(f"ssl.keystore.location: {location} holds no private key and certificate")
    pem = private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ) + b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [cert, *chain])
    # OpenSSL loads a chain from a file only: a private file, removed as soon as it is read.
    fd, path = tempfile.mkstemp(prefix="groupshift-keystore-", suffix=".pem")
    try:
        os.write(fd, pem)
        os.close(fd)
        ctx.load_cert_chain(path)
    finally:
        os.unlink(path)


def _load_truststore(ctx: ssl.SSLContext, settings: Mapping[str, str]) -> None:
    location = settings.get("ssl.truststore.location")
    if not location:
        if ctx.verify_mode != ssl.CERT_NONE:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return
    kind = _store_type(settings, "ssl.truststore.type")
    data = _read(location, "ssl.truststore.location")
    if kind == "PEM":
        try:
            ctx.load_verify_locations(cadata=data.decode("ascii"))
        except (ssl.SSLError, UnicodeDecodeError) as e:
            raise TlsConfigError(
                f"ssl.truststore.location: {location} holds no PEM certificate: {e}"
            ) from None
        return
    from cryptography.hazmat.primitives import serialization

    _, cert, extra = _pkcs12(data, settings.get("ssl.truststore.password"), "ssl.truststore.location")
    certs = [c for c in [cert, *extra] if c is not None]
    if not certs:
        raise TlsConfigError(f"ssl.truststore.location: {location} holds no certificate")
    ctx.load_verify_locations(
        cadata="".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)
    )


# Kafka takes IANA suite names (JSSE's); OpenSSL's cipher list wants its own. The TLS 1.2
# suites a current JVM enables by default; other names go to OpenSSL as written.
_IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
}


def _openssl_ciphers(names: Iterable[str]) -> str:
    return ":".join(_IANA_TO_OPENSSL.get(n, n) for n in names)


def server_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS context of one SSL listener from its effective `ssl.*` settings."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    auth = settings.get("ssl.client.auth", "none").strip().lower()
    if auth not in CLIENT_AUTH:
        raise TlsConfigError(f"ssl.client.auth: expected none, requested or required, got {auth!r}")
    ctx.verify_mode = CLIENT_AUTH[auth]
    versions = _split_list(settings.get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3"))
    bad = [v for v in versions if v not in _TLS_VERSIONS]
    if bad or not versions:
        raise TlsConfigError(
            f"ssl.enabled.protocols: supported are TLSv1.2 and TLSv1.3, got {', '.join(bad) or 'none'}"
        )
    ctx.minimum_version = min((_TLS_VERSIONS[v] for v in versions), key=lambda v: v.value)
    ctx.maximum_version = max((_TLS_VERSIONS[v] for v in versions), key=lambda v: v.value)
    suites = _split_list(settings.get("ssl.cipher.suites"))
    if suites:
        tls12 = [s for s in suites if not s.startswith("TLS_AES_") and not s.startswith("TLS_CHACHA20_")]
        try:
            if tls12:
                ctx.set_ciphers(_openssl_ciphers(tls12))
        except ssl.SSLError:
            raise TlsConfigError(f"ssl.cipher.suites: no usable suite in {', '.join(suites)}") from None
    _load_keystore(ctx, settings)
    _load_truststore(ctx, settings)
    PrincipalMapper(settings.get("ssl.principal.mapping.rules"))  # refused at start, not per client
    return ctx
