"""The SASL mechanisms groupshift serves: name -> factory (Kafka's `SaslServerFactory` lookup by
mechanism name, with the listener's `<mechanism>.sasl.jaas.config` and callback handler).

A factory is called once per listener at start-up with what the mechanism may need (the
listener's SASL settings, its parsed JAAS entry, the SCRAM credential store); it validates them
(a `ValueError` stops the start-up with the key named) and returns the per-exchange constructor.
OAUTHBEARER is added to `MECHANISMS` by `gateway.sasl.oauthbearer`'s `register`. GSSAPI
(Kerberos) is not served (docs/deviations.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gateway.sasl.credentials import ScramCredentialStore
from gateway.sasl.jaas import PLAIN_LOGIN_MODULE, JaasEntry
from gateway.sasl.mechanism import ServerMechanism
from gateway.sasl.plain import PlainServer
from gateway.sasl.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramServer


@dataclass(frozen=True)
class MechanismSetup:
    """What a mechanism's factory gets for one listener."""

    listener_name: str
    mechanism: str
    settings: Mapping[str, str]
    """The listener's SASL settings, `listener.name.<l>.` prefix removed (prefixed wins)."""
    jaas: JaasEntry | None
    """The listener's `<mechanism lower>.sasl.jaas.config` entry, if given."""
    scram: ScramCredentialStore | None


MechanismFactory = Callable[[MechanismSetup], Callable[[], ServerMechanism]]


def jaas_key(setup: MechanismSetup) -> str:
    return f"listener.name.{setup.listener_name.lower()}.{setup.mechanism.lower()}.sasl.jaas.config"


def plain_factory(setup: MechanismSetup) -> Callable[[], ServerMechanism]:
    """PLAIN's users are PlainLoginModule's `user_<name>` options (Kafka requires the entry)."""
    if setup.jaas is None:
        raise ValueError(
            f"{jaas_key(setup)} is required for PLAIN (PlainLoginModule with user_<name> options)"
        )
    if setup.jaas.login_module != PLAIN_LOGIN_MODULE:
        raise ValueError(f"{jaas_key(setup)}: PLAIN users need {PLAIN_LOGIN_MODULE}")
    users = setup.jaas.users()
    return lambda: PlainServer(users)


def scram_factory(setup: MechanismSetup) -> Callable[[], ServerMechanism]:
    store = setup.scram
    if store is None:
        raise ValueError(f"{setup.mechanism} needs the SCRAM credential store")
    name = setup.mechanism
    return lambda: ScramServer(name, store.lookup)


MECHANISMS: dict[str, MechanismFactory] = {
    "PLAIN": plain_factory,
    SCRAM_SHA_256: scram_factory,
    SCRAM_SHA_512: scram_factory,
}
"""Mechanism name (as Kafka spells it in `sasl.enabled.mechanisms`) -> factory."""


def register_mechanism(name: str, factory: MechanismFactory) -> None:
    """Serve `name` on SASL listeners that enable it (OAUTHBEARER registers here)."""
    MECHANISMS[name] = factory
