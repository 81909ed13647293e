"""What a SASL mechanism's factory is given for one listener, and the factory's type.

Kept apart from the table of mechanisms (`gateway.sasl.mechanisms`) so that a mechanism's own
module (PLAIN, SCRAM, OAUTHBEARER) can name these types while the table imports that module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gateway.sasl.credentials import ScramCredentialStore
from gateway.sasl.jaas import JaasEntry
from gateway.sasl.mechanism import ServerMechanism


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

    @property
    def jaas_key(self) -> str:
        """The setting the JAAS entry comes from (for error messages)."""
        return f"listener.name.{self.listener_name.lower()}.{self.mechanism.lower()}.sasl.jaas.config"


MechanismFactory = Callable[[MechanismSetup], Callable[[], ServerMechanism]]
"""Called once per listener at start-up: validates the setup (a `ValueError` stops the start
with the key named) and returns the per-exchange constructor."""
