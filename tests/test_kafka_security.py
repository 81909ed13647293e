"""harness.kafka_dist.security without a JVM: the broker properties, storage-format arguments and
client properties a secured reference Kafka gets (e2e/test_kafka_secured.py runs them on Kafka)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.kafka_dist.security import AUTHORIZER, KafkaSecurity


def test_sasl_ssl_broker_and_client_properties(tmp_path: Path) -> None:
    sec = KafkaSecurity("sasl_ssl", tmp_path, mechanism="SCRAM-SHA-512")
    broker = sec.broker_properties()
    assert broker["authorizer.class.name"] == AUTHORIZER
    assert broker["allow.everyone.if.no.acl.found"] == "false"
    assert broker["super.users"] == "User:admin;User:broker"
    assert broker["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL"
    assert broker["sasl.mechanism.controller.protocol"] == "PLAIN"
    assert 'user_alice="alice-secret"' in broker["listener.name.sasl_ssl.plain.sasl.jaas.config"]
    assert "ssl.client.auth" not in broker
    args = sec.format_args()
    assert args.count("--add-scram") == 6  # admin, alice, bob x SHA-256, SHA-512
    assert "SCRAM-SHA-512=[name=bob,password=bob-secret]" in args
    client = sec.client_properties("alice")
    assert client["security.protocol"] == "SASL_SSL"
    assert client["sasl.mechanism"] == "SCRAM-SHA-512"
    assert client["sasl.jaas.config"].startswith("org.apache.kafka.common.security.scram.ScramLoginModule")
    assert Path(client["ssl.truststore.location"]).exists()
    plain = sec.write_client_properties("bob", "PLAIN")
    assert plain.name == "bob-plain.properties"
    assert 'PlainLoginModule required username="bob"' in plain.read_text()


def test_ssl_is_mutual_tls_with_a_keystore_per_principal(tmp_path: Path) -> None:
    sec = KafkaSecurity("ssl", tmp_path)
    assert sec.broker_properties()["ssl.client.auth"] == "required"
    assert sec.format_args() == []
    stores = {sec.client_properties(u)["ssl.keystore.location"] for u in ("admin", "alice", "bob")}
    assert len(stores) == 3 and all(Path(s).exists() for s in stores)
    assert "sasl.mechanism" not in sec.client_properties("alice")


def test_sasl_plaintext_needs_no_certificates(tmp_path: Path) -> None:
    sec = KafkaSecurity("sasl_plaintext", tmp_path)
    assert not list(tmp_path.iterdir())
    assert "ssl.truststore.location" not in sec.client_properties("admin")
    assert sec.client_security().sasl_mechanism == "PLAIN"


@pytest.mark.parametrize(("security", "mechanism"), [("kerberos", "PLAIN"), ("ssl", "GSSAPI")])
def test_bad_values_are_named(tmp_path: Path, security: str, mechanism: str) -> None:
    with pytest.raises(ValueError, match="must be one of"):
        KafkaSecurity(security, tmp_path, mechanism=mechanism)
    with pytest.raises(ValueError, match="no principal"):
        KafkaSecurity("sasl_plaintext", tmp_path).client_properties("mallory")
