"""Certificates made at run time, never committed: a CA, server certificates for 127.0.0.1 /
localhost, client certificates (good, expired, or from a CA the peer does not trust), as PEM files
and PKCS12 keystores and truststores, with the `cryptography` package (the `tls` extra).

The TLS tests use it (e2e/tls_certs.py re-exports it), and so does `groupshift kafka start
--security ...` (harness.kafka_dist.security), whose brokers need one certificate that is both a
server's and a client's (inter-broker and controller connections over mutual TLS): `issue(...,
server=True, client=True)`. PKCS12 files are what Java's keystore loader reads (Kafka's
`ssl.keystore.type=PKCS12`), encrypted with PASSWORD."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PASSWORD = "changeit"


@dataclass(frozen=True)
class Issued:
    """One certificate and its key: `pem` holds key then chain (a PEM keystore), `cert` the
    certificate alone, `key` the key alone, `p12` a PKCS12 keystore with PASSWORD."""

    cert: Path
    key: Path
    pem: Path
    p12: Path
    serial: int


def _name(cn: str, ou: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Example")]
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


class Authority:
    """A CA that writes what it issues under `directory`."""

    def __init__(self, directory: Path, name: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.name = _name(f"{name} CA")
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(self.key, hashes.SHA256())
        )
        self.pem = directory / f"{name}-ca.pem"
        self.pem.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        self.p12 = directory / f"{name}-truststore.p12"
        self.p12.write_bytes(
            pkcs12.serialize_java_truststore(
                [pkcs12.PKCS12Certificate(self.cert, b"ca")],
                serialization.BestAvailableEncryption(PASSWORD.encode()),
            )
        )

    def issue(
        self,
        file_name: str,
        cn: str,
        *,
        ou: str | None = None,
        server: bool = False,
        client: bool | None = None,
        expired: bool = False,
    ) -> Issued:
        """A certificate for `cn` signed by this CA. `server`: for 127.0.0.1 / localhost (a SAN)
        with the serverAuth usage; `client` (default: not `server`) adds the clientAuth usage,
        which Java's trust manager requires of a certificate a client presents."""
        if client is None:
            client = not server
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        start, end = (
            (now - datetime.timedelta(days=10), now - datetime.timedelta(days=1))
            if expired
            else (now - datetime.timedelta(days=1), now + datetime.timedelta(days=30))
        )
        serial = x509.random_serial_number()
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, ou))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(serial)
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    ([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])
                    + ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
                ),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        cert = builder.sign(self.key, hashes.SHA256())
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        d = self.directory
        (d / f"{file_name}.crt").write_bytes(cert_pem)
        (d / f"{file_name}.key").write_bytes(key_pem)
        (d / f"{file_name}.pem").write_bytes(key_pem + cert_pem)
        (d / f"{file_name}.p12").write_bytes(
            pkcs12.serialize_key_and_certificates(
                file_name.encode(), key, cert, None, serialization.BestAvailableEncryption(PASSWORD.encode())
            )
        )
        return Issued(
            d / f"{file_name}.crt",
            d / f"{file_name}.key",
            d / f"{file_name}.pem",
            d / f"{file_name}.p12",
            serial,
        )
