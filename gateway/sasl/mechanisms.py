"""The SASL mechanisms groupshift serves: name -> factory (Kafka's `SaslServerFactory` lookup by
mechanism name, with the listener's `<mechanism>.sasl.jaas.config` and callback handler).

A factory (`gateway.sasl.setup.MechanismFactory`) is called once per listener at start-up with
what the mechanism may need (the listener's SASL settings, its parsed JAAS entry, the SCRAM
credential store); it validates them and returns the per-exchange constructor. The table is
read when the settings are validated (a mechanism not in it is refused in
`sasl.enabled.mechanisms`), so a mechanism is added here, as an entry whose factory its own
module defines (OAUTHBEARER: `gateway.sasl.oauthbearer`, importing only `gateway.sasl.setup`
and `gateway.sasl.mechanism`). GSSAPI (Kerberos) is not served (docs/deviations.md).
"""

from __future__ import annotations

from collections.abc import Callable

from gateway.sasl.jaas import PLAIN_LOGIN_MODULE
from gateway.sasl.mechanism import ServerMechanism
from gateway.sasl.oauthbearer import MECHANISM as OAUTHBEARER
from gateway.sasl.oauthbearer import oauthbearer_factory
from gateway.sasl.plain import PlainServer
from gateway.sasl.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramServer
from gateway.sasl.setup import MechanismFactory, MechanismSetup


def plain_factory(setup: MechanismSetup) -> Callable[[], ServerMechanism]:
    """PLAIN's users are PlainLoginModule's `user_<name>` options (Kafka requires the entry)."""
    if setup.jaas is None:
        raise ValueError(
            f"{setup.jaas_key} is required for PLAIN (PlainLoginModule with user_<name> options)"
        )
    if setup.jaas.login_module != PLAIN_LOGIN_MODULE:
        raise ValueError(f"{setup.jaas_key}: PLAIN users need {PLAIN_LOGIN_MODULE}")
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
    OAUTHBEARER: oauthbearer_factory,
}
"""Mechanism name (as Kafka spells it in `sasl.enabled.mechanisms`) -> factory."""
