"""Kafka's listener settings: `listeners`, `listener.security.protocol.map`,
`advertised.listeners` and the per-listener `listener.name.<name>.` prefix.

Kafka behaviour (`KafkaConfig` / `SocketServerConfigs`, KIP-103 "separation of internal and
external traffic"):

* `listeners` is a comma-separated list of `NAME://HOST:PORT`; an empty host binds every
  interface. Each NAME has a protocol in `listener.security.protocol.map` (default: a listener
  named like a protocol uses it), and names must be distinct.
* `advertised.listeners` names a subset of those listeners with the address clients are told to
  use; a listener it does not name advertises its own `listeners` entry. A broker answers
  Metadata, FindCoordinator and DescribeCluster with the advertised address *of the listener the
  request came in on*, so internal and external clients each get an address they can reach.
* An advertised `0.0.0.0` is refused at start-up ("advertised.listeners cannot use the
  nonroutable meta-address 0.0.0.0. Use a routable IP address.").
* A listener's settings are `listener.name.<name lower case>.<config>`, falling back to the
  unprefixed `<config>` key by key (`ChannelBuilders`' prefix override).
* Listeners named in `controller.listener.names` are the KRaft controller's: groupshift, its own
  controller, serves none of them.

groupshift's own `HOST:PORT` form (`--listen`) is one listener named PLAINTEXT.

Deviation (docs/deviations.md): Kafka advertises the host's canonical name for a listener bound
to every interface without an advertised address, and refuses an explicit `0.0.0.0` there;
groupshift advertises the host's name for both (so `--listen 0.0.0.0:9092` keeps starting), and
refuses `0.0.0.0` only where it is written in `advertised.listeners`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gateway.sasl.jaas import JaasError, parse_jaas
from gateway.sasl.mechanisms import MECHANISMS
from gateway.shown_value import shown_value

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
# Kafka's default `sasl.enabled.mechanisms`; groupshift does not serve GSSAPI (docs/deviations.md).
DEFAULT_SASL_MECHANISMS = "GSSAPI"
# Kafka's default `listener.security.protocol.map`: a listener named like a protocol uses it.
DEFAULT_PROTOCOL_MAP = {p: p for p in PROTOCOLS}
LISTENER_PREFIX = "listener.name."
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})
NONROUTABLE_ADVERTISED = (
    "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address."
)


class ListenerError(ValueError):
    """A listener setting is invalid; the message names the key."""


@dataclass(frozen=True)
class Listener:
    """One served listener: where it binds, what it tells clients, its own settings."""

    name: str
    protocol: str
    host: str
    port: int
    advertised_host: str  # "" when bound to every interface and not advertised: the host's name
    advertised_port: int | None  # None: the port bound (a listener on port 0)
    settings: Mapping[str, str] = field(default_factory=dict)
    """This listener's effective `ssl.*` settings (prefixed value, else the unprefixed one)."""
    sasl: Mapping[str, str] = field(default_factory=dict)
    """A SASL listener's own settings (`listener_sasl_settings`), prefix removed."""

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    @property
    def sasl_mechanisms(self) -> tuple[str, ...]:
        """`sasl.enabled.mechanisms`, in the order given, without repeats."""
        names = self.sasl.get("sasl.enabled.mechanisms", DEFAULT_SASL_MECHANISMS).split(",")
        return tuple(dict.fromkeys(n.strip() for n in names if n.strip()))

    @property
    def uses_tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def prefix(self) -> str:
        return f"{LISTENER_PREFIX}{self.name.lower()}."

    @property
    def bind_host(self) -> str:
        return "0.0.0.0" if self.host == "" else self.host


def split_address(text: str, *, key: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:9092` for an IPv6 literal; an empty host is every interface)."""
    host, sep, port_text = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not port_text.isdigit():
        raise ListenerError(f"{key}: expected HOST:PORT, got {shown_value(text.strip())}")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ListenerError(f"{key}: port must be within [0, 65535], got {port}")
    return host, port


def parse_protocol_map(value: str | None) -> dict[str, str]:
    """`NAME:PROTOCOL,...` over Kafka's default map."""
    protocols = dict(DEFAULT_PROTOCOL_MAP)
    for pair in (value or "").split(","):
        if not pair.strip():
            continue
        name, sep, protocol = pair.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name.strip() or protocol not in PROTOCOLS:
            raise ListenerError(
                f"listener.security.protocol.map: expected NAME:PROTOCOL with a protocol among "
                f"{', '.join(PROTOCOLS)}, got {shown_value(pair.strip())}"
            )
        protocols[name.strip().upper()] = protocol
    return protocols


def _entries(value: str, *, key: str) -> list[tuple[str, str, int]]:
    """(NAME, host, port) of each `NAME://HOST:PORT` entry; `HOST:PORT` alone is PLAINTEXT."""
    out = []
    for entry in (e.strip() for e in value.split(",") if e.strip()):
        if "://" in entry:
            name, _, address = entry.partition("://")
            name = name.strip().upper()
        elif value.count(",") == 0:
            name, address = "PLAINTEXT", entry
        else:
            raise ListenerError(f"{key}: expected NAME://HOST:PORT entries, got {shown_value(entry)}")
        if not name:
            raise ListenerError(f"{key}: expected NAME://HOST:PORT entries, got {shown_value(entry)}")
        host, port = split_address(address, key=key)
        if key == "listeners" and not host and "://" not in entry:
            raise ListenerError(f"{key}: expected HOST:PORT, got {shown_value(entry)}")
        out.append((name, host, port))
    if not out:
        raise ListenerError(f"{key}: at least one listener is required")
    names = [n for n, _, _ in out]
    if len(set(names)) != len(names):
        raise ListenerError(
            f"{key}: each listener must have a different name, got {shown_value(value.strip())}"
        )
    return out


def listener_settings(name: str, settings: Mapping[str, str]) -> dict[str, str]:
    """The `ssl.*` settings of listener `name`: `listener.name.<name>.ssl.X`, else `ssl.X`."""
    prefix = f"{LISTENER_PREFIX}{name.lower()}."
    out = {k: v for k, v in settings.items() if k.startswith("ssl.")}
    out.update({k[len(prefix) :]: v for k, v in settings.items() if k.startswith(prefix + "ssl.")})
    return out


def listener_sasl_settings(name: str, settings: Mapping[str, str]) -> dict[str, str]:
    """The SASL settings of listener `name`: every `listener.name.<name>.X` that is not `ssl.*`
    (`sasl.enabled.mechanisms`, `<mechanism>.sasl.jaas.config`, `connections.max.reauth.ms`,
    `<mechanism>.connections.max.reauth.ms`, `sasl.server.max.receive.size`, a mechanism's own
    keys), over the unprefixed `sasl.*` keys."""
    prefix = f"{LISTENER_PREFIX}{name.lower()}."
    out = {k: v for k, v in settings.items() if k.startswith("sasl.")}
    out.update(
        {
            k[len(prefix) :]: v
            for k, v in settings.items()
            if k.startswith(prefix) and not k.startswith(prefix + "ssl.")
        }
    )
    return out


def _check_sasl(name: str, sasl: Mapping[str, str]) -> None:
    """A SASL listener's mechanisms are served and their JAAS entries parse (PLAIN needs one)."""
    prefix = f"{LISTENER_PREFIX}{name.lower()}."
    names = sasl.get("sasl.enabled.mechanisms", DEFAULT_SASL_MECHANISMS)
    mechanisms = [n.strip() for n in names.split(",") if n.strip()]
    if not mechanisms:
        raise ListenerError(f"{prefix}sasl.enabled.mechanisms: No SASL mechanisms are enabled")
    for mechanism in mechanisms:
        if mechanism not in MECHANISMS:
            default = " (Kafka's default)" if "sasl.enabled.mechanisms" not in sasl else ""
            raise ListenerError(
                f"{prefix}sasl.enabled.mechanisms: SASL mechanism {shown_value(mechanism)}{default} is "
                f"not supported; groupshift serves {', '.join(sorted(MECHANISMS))}"
            )
        key = f"{mechanism.lower()}.sasl.jaas.config"
        text = sasl.get(key)
        if text is None:
            if mechanism == "PLAIN":
                raise ListenerError(
                    f"{prefix}{key} is required: PLAIN users are PlainLoginModule's user_<name> options"
                )
            continue
        try:
            parse_jaas(text)
        except JaasError as e:
            raise ListenerError(f"{prefix}{key}: {e}") from None
    for key in [k for k in sasl if k.endswith("connections.max.reauth.ms")] + [
        "sasl.server.max.receive.size"
    ]:
        if key in sasl:
            value = sasl[key].strip()
            if not value.lstrip("-").isdigit():
                raise ListenerError(f"{prefix}{key}: expected an integer, got {shown_value(value)}")


def parse_listeners(
    listeners: str,
    *,
    advertised: str | None = None,
    protocol_map: str | None = None,
    controller_names: str | None = None,
    settings: Mapping[str, str] | None = None,
) -> tuple[Listener, ...]:
    """The listeners groupshift serves, in `listeners` order (the first is the main one: its port
    is `GatewayServer.port`, upstream mode's per-broker listeners copy its protocol)."""
    protocols = parse_protocol_map(protocol_map)
    controllers = {n.strip().upper() for n in (controller_names or "").split(",") if n.strip()}
    advertised_at: dict[str, tuple[str, int]] = {}
    if advertised is not None and advertised.strip():
        for name, host, port in _entries(advertised, key="advertised.listeners"):
            if name in controllers:
                continue  # the controller's (Kafka's effective broker listeners leave it out)
            if host == "0.0.0.0":
                raise ListenerError(NONROUTABLE_ADVERTISED)
            advertised_at[name] = (host, port)
    served: list[Listener] = []
    bound = _entries(listeners, key="listeners")
    unknown = sorted(set(advertised_at) - {n for n, _, _ in bound})
    if unknown:
        raise ListenerError(
            f"advertised.listeners listener names must be equal to or a subset of the ones defined "
            f"in listeners; {', '.join(unknown)} is not in listeners"
        )
    ports = [p for _, _, p in bound if p != 0]
    if len(set(ports)) != len(ports):
        raise ListenerError(f"listeners: each listener must have a different port, got {listeners.strip()!r}")
    for name, host, port in bound:
        if name in controllers:
            continue
        protocol = protocols.get(name)
        if protocol is None:
            raise ListenerError(
                f"listeners: listener {name} has no protocol in listener.security.protocol.map"
            )
        sasl = listener_sasl_settings(name, settings or {}) if protocol in SASL_PROTOCOLS else {}
        if protocol in SASL_PROTOCOLS:
            _check_sasl(name, sasl)
        own = listener_settings(name, settings or {}) if protocol in TLS_PROTOCOLS else {}
        if protocol in TLS_PROTOCOLS and not own.get("ssl.keystore.location"):
            raise ListenerError(
                f"listeners: listener {name} uses {protocol} and needs ssl.keystore.location "
                f"(or {LISTENER_PREFIX}{name.lower()}.ssl.keystore.location)"
            )
        adv_host, adv_port = advertised_at.get(name, (host, port))
        if name not in advertised_at and host in WILDCARD_HOSTS:
            adv_host = ""
        served.append(
            Listener(
                name=name,
                protocol=protocol,
                host=host,
                port=port,
                advertised_host=adv_host,
                advertised_port=adv_port if name in advertised_at else None,
                settings=own,
                sasl=sasl,
            )
        )
    if not served:
        raise ListenerError(
            f"listeners: {listeners.strip()!r} names no listener groupshift serves "
            "(controller listeners aside)"
        )
    return tuple(served)
