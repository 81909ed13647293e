"""protocol.client_security without a broker: Kafka client properties (files, JAAS, stores) read
into an SSL context, SASL credentials and librdkafka settings, and every unusable value refused
with a message naming it. e2e/test_kafka_secured.py connects with them to a real Kafka."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from harness.certificates import PASSWORD, Authority
from protocol.client_security import (
    ClientSecurity,
    ClientSecurityError,
    parse_jaas,
    parse_properties,
    read_properties,
)

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    return Authority(tmp_path_factory.mktemp("certs"), "test")


def test_properties_syntax_as_java_reads_it() -> None:
    text = (
        "# a comment\n! another\n"
        "security.protocol = SASL_SSL\n"
        "sasl.mechanism:SCRAM-SHA-512\n"
        f"sasl.jaas.config={SCRAM} required \\\n"
        '    username="alice" \\\n'
        '    password="p=w\\\\d";\n'
        "client.id my\\ tool\n"
        "unicode=\\u00e9\n"
    )
    props = parse_properties(text)
    assert props["security.protocol"] == "SASL_SSL"
    assert props["sasl.mechanism"] == "SCRAM-SHA-512"
    assert props["sasl.jaas.config"] == f'{SCRAM} required username="alice" password="p=w\\d";'
    assert props["client.id"] == "my tool"
    assert props["unicode"] == "é"


def test_jaas_options_quoted_and_bare() -> None:
    module, options = parse_jaas(f'{PLAIN} required username=alice password="a b;c\\"d";')
    assert module == PLAIN
    assert options == {"username": "alice", "password": 'a b;c"d'}
    for bad in (f"{PLAIN} required username=alice", f"{PLAIN} always username=a;", f"{PLAIN} required user;"):
        with pytest.raises(ClientSecurityError):
            parse_jaas(bad)


def test_sasl_ssl_with_a_pkcs12_truststore(ca: Authority) -> None:
    sec = ClientSecurity.from_properties(
        {
            "security.protocol": "sasl_ssl",  # Kafka upper-cases it
            "ssl.truststore.location": str(ca.p12),
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.password": PASSWORD,
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": f'{SCRAM} required username="alice" password="secret";',
            "request.timeout.ms": "30000",  # a client's own setting: ignored
        }
    )
    assert (sec.protocol, sec.sasl_mechanism, sec.username, sec.password) == (
        "SASL_SSL",
        "SCRAM-SHA-256",
        "alice",
        "secret",
    )
    assert isinstance(sec.ssl_context, ssl.SSLContext) and sec.ssl_context.check_hostname
    assert len(sec.ssl_context.get_ca_certs()) == 1
    rd = sec.librdkafka_config()
    assert rd["security.protocol"] == "sasl_ssl"
    assert rd["sasl.username"] == "alice" and rd["sasl.password"] == "secret"
    assert rd["ssl.ca.pem"].startswith("-----BEGIN CERTIFICATE-----")
    assert "password" not in repr(sec).replace("password=", "")  # the password is not in repr


def test_mutual_tls_from_pkcs12_pem_files_and_pem_strings(ca: Authority) -> None:
    alice = ca.issue("alice", "alice")
    base = {"security.protocol": "SSL", "ssl.truststore.location": str(ca.pem), "ssl.truststore.type": "PEM"}
    variants = [
        {
            "ssl.keystore.location": str(alice.p12),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.password": PASSWORD,
        },
        {"ssl.keystore.location": str(alice.pem), "ssl.keystore.type": "PEM"},
        # no type: Kafka's default JKS, whose Java loader reads PKCS12 files too
        {"ssl.keystore.location": str(alice.p12), "ssl.keystore.password": PASSWORD},
        {
            "ssl.keystore.certificate.chain": alice.cert.read_text(),
            "ssl.keystore.key": alice.key.read_text(),
            "ssl.truststore.certificates": ca.pem.read_text(),
        },
    ]
    for extra in variants:
        sec = ClientSecurity.from_properties(base | extra)
        assert sec.tls is not None and sec.tls.cert_chain_pem and sec.tls.key_pem, extra
        rd = sec.librdkafka_config()
        assert "BEGIN CERTIFICATE" in rd["ssl.certificate.pem"] and "PRIVATE KEY" in rd["ssl.key.pem"]
    off = ClientSecurity.from_properties(base | {"ssl.endpoint.identification.algorithm": ""})
    assert off.ssl_context is not None and not off.ssl_context.check_hostname
    assert off.librdkafka_config()["ssl.endpoint.identification.algorithm"] == "none"


def _refused(props: dict[str, str], match: str) -> None:
    with pytest.raises(ClientSecurityError, match=match):
        ClientSecurity.from_properties(props)


def test_unusable_values_are_named(ca: Authority, tmp_path: Path) -> None:
    jaas = f'{PLAIN} required username="a" password="b";'
    _refused({"security.protocol": "SASL_SSH"}, "security.protocol=SASL_SSH is not one of")
    _refused({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}, "GSSAPI.*Kafka's own tools")
    _refused({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}, "OAUTHBEARER")
    _refused({"security.protocol": "SASL_PLAINTEXT"}, "GSSAPI")  # Kafka's default mechanism
    _refused({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "needs sasl.jaas.config")
    _refused(
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": jaas},
        "ScramLoginModule",
    )
    _refused(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": f"{PLAIN} required;",
        },
        "username",
    )
    _refused(
        {
            "security.protocol": "SSL",
            "ssl.truststore.location": str(ca.p12),
            "ssl.truststore.password": "nope",
        },
        "wrong password",
    )
    jks = tmp_path / "store.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))
    _refused(
        {"security.protocol": "SSL", "ssl.truststore.location": str(jks)}, "JKS.*keytool -importkeystore"
    )
    _refused({"security.protocol": "SSL", "ssl.truststore.location": str(tmp_path / "none")}, "cannot read")
    _refused({"security.protocol": "SSL", "ssl.truststore.type": "BCFKS"}, "BCFKS is not supported")
    _refused({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"}, "ldap")
    _refused({"security.protocol": "SSL", "ssl.enabled.protocols": "SSLv3"}, "SSLv3")
    _refused({"security.protocol": "SSL", "ssl.keystore.key": "x"}, "go together")


def test_files_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ClientSecurityError, match="No such file"):
        read_properties(tmp_path / "missing.properties")
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=KERBEROS\n")
    with pytest.raises(ClientSecurityError, match=f"^{bad}: security.protocol=KERBEROS"):
        ClientSecurity.from_file(bad)
    plain = tmp_path / "plain.properties"
    plain.write_text("bootstrap.servers=x:1\n")
    assert ClientSecurity.from_file(plain) == ClientSecurity("PLAINTEXT")
