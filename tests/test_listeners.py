"""Kafka's listener settings (gateway.listeners) and TLS principal mapping (gateway.tls)."""

from __future__ import annotations

import pytest

from gateway.config import ConfigError, build_config, resolve_config
from gateway.listeners import NONROUTABLE_ADVERTISED, parse_listeners
from gateway.tls import ANONYMOUS, PrincipalMapper, TlsConfigError, peer_principal, rfc2253_name


def test_several_named_listeners_with_their_protocols_and_advertised_addresses() -> None:
    config = build_config(
        {
            "listeners": "INTERNAL://127.0.0.1:9092,EXTERNAL://0.0.0.0:9093,CONTROLLER://:9094",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SSL,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "advertised.listeners": "EXTERNAL://kafka.example.com:19093",
            "ssl.keystore.location": "/k.p12",
            "listener.name.external.ssl.keystore.location": "/external.p12",
            "listener.name.external.ssl.client.auth": "required",
            "ssl.keystore.type": "PKCS12",
        }
    )
    internal, external = config.served_listeners
    assert (internal.name, internal.protocol, internal.host, internal.port) == (
        "INTERNAL",
        "PLAINTEXT",
        "127.0.0.1",
        9092,
    )
    assert (internal.advertised_host, internal.advertised_port) == ("127.0.0.1", None)  # its own address
    assert (external.protocol, external.bind_host, external.port) == ("SSL", "0.0.0.0", 9093)
    assert (external.advertised_host, external.advertised_port) == ("kafka.example.com", 19093)
    # The listener's prefixed setting wins over the unprefixed one, key by key.
    assert external.settings == {
        "ssl.keystore.location": "/external.p12",
        "ssl.client.auth": "required",
        "ssl.keystore.type": "PKCS12",
    }
    assert internal.settings == {}
    assert config.listen_address == ("127.0.0.1", 9092)  # the first listener is the main one


def test_a_listener_bound_everywhere_without_an_advertised_address_advertises_the_host_name() -> None:
    (listener,) = parse_listeners("0.0.0.0:9092")
    assert listener.name == "PLAINTEXT" and listener.advertised_host == ""  # the server fills in getfqdn()
    (listener,) = parse_listeners("PLAINTEXT://:9092", advertised="PLAINTEXT://10.0.0.5:9092")
    assert (listener.bind_host, listener.advertised_host, listener.advertised_port) == (
        "0.0.0.0",
        "10.0.0.5",
        9092,
    )


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"listeners": "PLAINTEXT://0.0.0.0:9092", "advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
            NONROUTABLE_ADVERTISED,
        ),
        (
            {"listeners": "PLAINTEXT://h:9092", "advertised.listeners": "OTHER://h:9092"},
            "subset of the ones defined in listeners",
        ),
        (
            {"listeners": "A://h:1,B://h:1", "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT"},
            "different port",
        ),
        (
            {"listeners": "PLAINTEXT://h:1", "listener.security.protocol.map": "PLAINTEXT:TLS"},
            "expected NAME:PROTOCOL",
        ),
        (
            {"listeners": "SASL_SSL://h:1", "ssl.keystore.location": "/k"},
            "GSSAPI' (Kafka's default) is not supported",
        ),
        (
            {"listeners": "SASL_PLAINTEXT://h:1", "sasl.enabled.mechanisms": "PLAIN"},
            "plain.sasl.jaas.config is required",
        ),
        (
            {
                "listeners": "SASL_PLAINTEXT://h:1",
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": 'x required user_a="b"',
            },
            "expected ';' at the end of the login module entry",
        ),
        (
            {"listeners": "EXTERNAL://h:1", "listener.security.protocol.map": "EXTERNAL:SSL"},
            "needs ssl.keystore.location",
        ),
        ({"listeners": "CONTROLLER://h:1", "controller.listener.names": "CONTROLLER"}, "names no listener"),
    ],
)
def test_bad_listener_settings_are_refused(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_config(settings)
    assert message in str(err.value)


def test_the_exact_kafka_message_for_an_advertised_meta_address() -> None:
    assert NONROUTABLE_ADVERTISED == (
        "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address."
    )


def test_ssl_keys_are_used_only_by_tls_listeners() -> None:
    plain = resolve_config({"listeners": "PLAINTEXT://127.0.0.1:9092", "ssl.keystore.location": "/k"})
    assert plain.ignored_kafka_keys == ("ssl.keystore.location",)
    tls = resolve_config(
        {
            "listeners": "SSL://127.0.0.1:9093",
            "ssl.keystore.location": "/k",
            "listener.name.other.ssl.keystore.location": "/o",
        }
    )
    assert tls.ignored_kafka_keys == ("listener.name.other.ssl.keystore.location",)
    assert tls.config.tls_settings == {"ssl.keystore.location": "/k"}


@pytest.mark.parametrize(
    ("rules", "dn", "principal"),
    [
        (None, "CN=alice,OU=eng,O=Example,C=US", "CN=alice,OU=eng,O=Example,C=US"),
        ("DEFAULT", "CN=alice,O=Example", "CN=alice,O=Example"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=svc,OU=ServiceUsers,O=Ex", "svc"),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=bob,OU=People,O=Ex", "CN=bob,OU=People,O=Ex"),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$2/L", "CN=Alice,OU=Eng,O=Ex", "alice@eng"),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$2/U", "CN=Alice,OU=Eng,O=Ex", "ALICE@ENG"),
        ("RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L", "cn=Duke,ou=JavaSoft,o=Sun", "duke"),
        ("RULE:^CN=([^,]*).*$/$1 \\$2/", "CN=a,O=b", "a $2"),  # an escaped $ stays literal
    ],
)
def test_principal_mapping_rules_as_kafka_applies_them(rules: str | None, dn: str, principal: str) -> None:
    assert PrincipalMapper(rules).name(dn) == principal


def test_a_name_no_rule_matches_fails_and_bad_rules_are_refused() -> None:
    from gateway.tls import NoMatchingRule

    with pytest.raises(NoMatchingRule, match="No rules apply to CN=x"):
        PrincipalMapper("RULE:^CN=svc$/svc/").name("CN=x")
    with pytest.raises(TlsConfigError, match="invalid"):
        PrincipalMapper("RULE:^CN=(.*)$/$1/Z")


def test_certificate_subjects_are_written_as_java_writes_them() -> None:
    subject = (
        (("countryName", "US"),),
        (("organizationName", "Example, Inc"),),
        (("organizationalUnitName", "eng"),),
        (("commonName", "alice"),),
    )
    assert rfc2253_name(subject) == "CN=alice,OU=eng,O=Example\\, Inc,C=US"

    class FakeSsl:
        def __init__(self, cert: dict[str, object]) -> None:
            self.cert = cert

        def getpeercert(self) -> dict[str, object]:
            return self.cert

    assert (
        peer_principal(FakeSsl({"subject": subject}), PrincipalMapper())
        == "User:CN=alice,OU=eng,O=Example\\, Inc,C=US"
    )
    assert peer_principal(FakeSsl({}), PrincipalMapper()) == ANONYMOUS  # no client certificate
    assert peer_principal(None, PrincipalMapper()) == ANONYMOUS  # a PLAINTEXT connection
