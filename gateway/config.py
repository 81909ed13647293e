"""Server configuration with Kafka's broker config names.

A Kafka operator already knows `listeners`, `log.dirs`, `num.partitions`,
`auto.create.topics.enable`, `socket.request.max.bytes`, `node.id` and the `group.*` /
`offsets.*` coordinator settings, so groupshift takes exactly those names. A properties file
(`name=value` lines, `#`/`!` comments, as Kafka's `server.properties`), the dedicated CLI flags
and `--set NAME=VALUE` overrides all feed one flat `{name: string}` map, which is validated in one
place: an unknown name or a bad value is refused with an error that names the key.

Group-coordinator names (`group.*`, `offsets.*`, `offset.*`) are routed to
`engine.config.CoordinatorConfig`, which owns their defaults and cross-field bounds.
"""

from __future__ import annotations

import difflib
import os
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from engine.config import INT_MAX, CoordinatorConfig
from gateway.kafka_broker_keys import KAFKA_BROKER_KEYS, KAFKA_VERSIONS, is_kafka_broker_key
from gateway.listeners import Listener, ListenerError, parse_listeners
from gateway.shown_value import MAX_SHOWN_CHARS, shown_value
from gateway.upstream.config import UPSTREAM_KEYS, UpstreamConfig

DEFAULT_PORT = 9092


# Any line of a ConfigError longer than this is cut too, whatever built it (a validator's text).
MAX_ERROR_LINE_CHARS = 1000


def _cut_line(line: str, limit: int = MAX_ERROR_LINE_CHARS) -> str:
    if len(line) <= limit:
        return line
    return f"{line[:limit]}...({len(line)} characters)"


class ConfigError(ValueError):
    """A configuration key is unknown or its value is invalid; the message names the key.

    Every line is at most about `MAX_ERROR_LINE_CHARS` characters: the message goes to a
    terminal and into logs."""

    def __init__(self, message: str) -> None:
        super().__init__("\n".join(_cut_line(line) for line in message.split("\n")))


def _split_host_port(value: str) -> tuple[str, int]:
    text = value.strip()
    if "://" in text:
        scheme, _, text = text.partition("://")
        if scheme.upper() != "PLAINTEXT":
            raise ValueError(f"only PLAINTEXT listeners are supported, got {shown_value(value)}")
    if "," in text:
        raise ValueError(f"exactly one listener is supported, got {shown_value(value)}")
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not port_text.isdigit() or not host:
        raise ValueError(f"expected HOST:PORT, got {shown_value(value)}")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be within [0, 65535], got {port}")
    return host, port


def parse_host_port(value: str, *, key: str) -> tuple[str, int]:
    """`HOST:PORT` (or Kafka's `PLAINTEXT://HOST:PORT`); `[::1]:9092` for IPv6 literals."""
    try:
        return _split_host_port(value)
    except ValueError as e:
        raise ConfigError(f"{key}: {e}") from None


class ServerConfig(BaseModel):
    """Broker-level settings of one groupshift node (Kafka names as aliases)."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    listeners: str = Field(f"127.0.0.1:{DEFAULT_PORT}", alias="listeners")
    # Kafka's listener settings (gateway.listeners): several named listeners, each with its
    # protocol, the address clients are told, and its own `ssl.*` settings.
    advertised_listeners: str | None = Field(None, alias="advertised.listeners")
    listener_security_protocol_map: str | None = Field(None, alias="listener.security.protocol.map")
    controller_listener_names: str | None = Field(None, alias="controller.listener.names")
    # `ssl.*` and `listener.name.<name>.ssl.*` settings (Kafka names) of the TLS listeners.
    tls_settings: dict[str, str] = Field(default_factory=dict)
    # `sasl.*` and `listener.name.<name>.*` (not `ssl.*`) settings of the SASL listeners
    # (gateway.listeners.listener_sasl_settings), JAAS entries included.
    sasl_settings: dict[str, str] = Field(default_factory=dict, repr=False)
    # SASL (docs/security.md): KIP-368's session bound (0: sessions never expire), Kafka's bound
    # on a SASL token and delay of a failed login's answer; and groupshift's bound on an exchange
    # that never completes (Kafka leaves it to connections.max.idle.ms).
    connections_max_reauth_ms: int = Field(0, alias="connections.max.reauth.ms", ge=0, le=2**63 - 1)
    sasl_server_max_receive_size: int = Field(524288, alias="sasl.server.max.receive.size", ge=1, le=INT_MAX)
    connections_failed_authentication_delay_ms: int = Field(
        100, alias="connections.failed.authentication.delay.ms", ge=0, le=INT_MAX
    )
    sasl_server_authentication_timeout_ms: int = Field(
        10000, alias="sasl.server.authentication.timeout.ms", ge=1, le=INT_MAX
    )
    log_dirs: Path = Field(Path("./groupshift-data"), alias="log.dirs")
    num_partitions: int = Field(1, alias="num.partitions", ge=1, le=INT_MAX)
    auto_create_topics_enable: bool = Field(True, alias="auto.create.topics.enable")
    socket_request_max_bytes: int = Field(104857600, alias="socket.request.max.bytes", ge=1, le=INT_MAX)
    # Memory bounds (docs/robustness.md, Bounds). Kafka's queued.max.request.bytes defaults to -1
    # (unbounded); groupshift bounds the bytes of requests still arriving, server-wide, to one
    # frame of socket.request.max.bytes' default (<= 0: unbounded, as in Kafka).
    queued_max_request_bytes: int = Field(
        104857600, alias="queued.max.request.bytes", ge=-(2**63), le=2**63 - 1
    )
    # groupshift-specific: answer bytes one connection may hold unsent (its client does not read
    # them) before its Fetches read no more data; Kafka holds one answer per connection instead.
    socket_response_buffer_max_bytes: int = Field(
        8388608, alias="socket.response.buffer.max.bytes", ge=1, le=INT_MAX
    )
    log_segment_bytes: int = Field(1073741824, alias="log.segment.bytes", ge=14, le=INT_MAX)
    # groupshift-specific bounds (docs/robustness.md, Bounds): partitions of all topics on the
    # node (creations beyond are refused with POLICY_VIOLATION), and the file descriptors the
    # partition logs may hold at once (0: a quarter of `ulimit -n`; idle logs beyond are closed
    # and reopened on use).
    max_partitions: int = Field(50000, alias="max.partitions", ge=1, le=INT_MAX)
    log_open_files_max: int = Field(0, alias="log.open.files.max", ge=0, le=INT_MAX)
    metrics_listen: str | None = Field(None, alias="metrics.listen")
    # groupshift-specific: per-group series (members by protocol, epoch, lag, ...) for at most
    # `metrics.groups.max` groups, so a fleet of groups cannot blow up a scrape; off with false.
    metrics_groups_enabled: bool = Field(True, alias="metrics.groups.enabled")
    metrics_groups_max: int = Field(500, alias="metrics.groups.max", ge=1, le=INT_MAX)
    node_id: int = Field(0, alias="node.id", ge=0, le=INT_MAX)
    # groupshift-specific: how coordinator logs reach the disk. "batch" (default): one fsync per
    # group commit, and a response waits for it; "none": no fsync (tests, benchmarks).
    coordinator_fsync_policy: Literal["batch", "none"] = Field("batch", alias="coordinator.fsync.policy")
    # The coordinator logs are compacted by the running server (Kafka's log cleaner on
    # __consumer_offsets): when at least coordinator.compaction.min.bytes (groupshift-specific)
    # were written since the last compaction and they are at least this ratio of the log.
    log_cleaner_enable: bool = Field(True, alias="log.cleaner.enable")
    log_cleaner_min_cleanable_ratio: float = Field(0.5, alias="log.cleaner.min.cleanable.ratio", ge=0, le=1)
    log_cleaner_delete_retention_ms: int = Field(86400000, alias="log.cleaner.delete.retention.ms", ge=0)
    coordinator_compaction_min_bytes: int = Field(
        4 * 1024 * 1024, alias="coordinator.compaction.min.bytes", ge=1, le=INT_MAX
    )
    # groupshift-specific: warn (`loop.blocked`, rate-limited) when the event loop, which serves
    # every group, was blocked this long; groupshift_event_loop_lag_seconds shows every lag.
    loop_lag_warn_ms: int = Field(200, alias="loop.lag.warn.ms", ge=1, le=INT_MAX)
    # groupshift-specific (gateway.allocator, docs/robustness.md, Soak): glibc's `M_ARENA_MAX`,
    # set at start before the server's threads allocate (0: glibc's default, 8 per core).
    malloc_arena_max: int = Field(2, alias="malloc.arena.max", ge=0, le=1024)
    # Authorization (gateway.authorizer, docs/security.md): Kafka's StandardAuthorizer by its
    # class name, or empty for none (every request allowed, the default); `super.users` is a
    # semicolon-separated list of principals allowed everything.
    authorizer_class_name: str = Field("", alias="authorizer.class.name")
    super_users: str | None = Field(None, alias="super.users")
    allow_everyone_if_no_acl_found: bool = Field(False, alias="allow.everyone.if.no.acl.found")
    group: CoordinatorConfig = Field(default_factory=lambda: CoordinatorConfig.model_validate({}))
    # Upstream mode (`upstream.*` keys, `serve --upstream`): None serves embedded topics.
    upstream: UpstreamConfig | None = None

    @field_validator("metrics_listen")
    @classmethod
    def _check_metrics_listen(cls, value: str | None) -> str | None:
        if value is not None and value.strip():
            _split_host_port(value)
            return value
        return None

    @field_validator("log_dirs", mode="before")
    @classmethod
    def _one_dir(cls, value: Any) -> Any:
        if isinstance(value, str) and "," in value:
            raise ValueError("exactly one data directory is supported")
        if isinstance(value, str) and not value.strip():
            raise ValueError("the data directory must not be empty")
        return value

    @field_validator("authorizer_class_name")
    @classmethod
    def _check_authorizer(cls, value: str) -> str:
        from gateway.authorizer import check_authorizer_class  # the settings stay importable alone

        return check_authorizer_class(value)

    @field_validator(
        "auto_create_topics_enable", "log_cleaner_enable", "allow_everyone_if_no_acl_found", mode="before"
    )
    @classmethod
    def _kafka_boolean(cls, value: Any) -> Any:
        """Kafka's BOOLEAN configs take `true` or `false` (any case), nothing else."""
        if isinstance(value, str):
            if value.strip().lower() not in ("true", "false"):
                raise ValueError(f"expected true or false, got {shown_value(value)}")
            return value.strip().lower() == "true"
        return value

    @model_validator(mode="after")
    def _distinct_ports(self) -> ServerConfig:
        """The listeners are valid together, and no Kafka listener shares the metrics port."""
        served = self.served_listeners
        if self.metrics_listen is not None:
            m_host, m_port = _split_host_port(self.metrics_listen)
            for listener in served:
                host, port = listener.bind_host, listener.port
                if port != 0 and port == m_port and (host == m_host or "0.0.0.0" in (host, m_host)):
                    raise ValueError(
                        f"metrics.listen={self.metrics_listen} uses the port of listeners={self.listeners}"
                    )
        return self

    @property
    def served_listeners(self) -> tuple[Listener, ...]:
        """The listeners to open, the main one first (`gateway.listeners.parse_listeners`)."""
        return parse_listeners(
            self.listeners,
            advertised=self.advertised_listeners,
            protocol_map=self.listener_security_protocol_map,
            controller_names=self.controller_listener_names,
            settings={**self.tls_settings, **self.sasl_settings},
        )

    @property
    def listen_address(self) -> tuple[str, int]:
        """Where the main (first) listener binds."""
        main = self.served_listeners[0]
        return main.bind_host, main.port

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        if self.metrics_listen is None:
            return None
        return parse_host_port(self.metrics_listen, key="metrics.listen")

    @property
    def data_dir(self) -> Path:
        return self.log_dirs


def _aliases(model: type[BaseModel]) -> dict[str, str]:
    """Kafka name -> field name, for every field that has an alias."""
    return {f.alias: name for name, f in model.model_fields.items() if f.alias}


SERVER_KEYS = {k: v for k, v in _aliases(ServerConfig).items() if v not in ("group", "upstream")}
# `log.dir` is Kafka's single-directory spelling of `log.dirs`.
SERVER_KEY_SYNONYMS = {"log.dir": "log.dirs"}
GROUP_KEYS = _aliases(CoordinatorConfig)


def _is_tuple_field(model: type[BaseModel], field_name: str) -> bool:
    ann = model.model_fields[field_name].annotation
    origin = typing.get_origin(ann)
    if origin in (typing.Union, types.UnionType):
        return any(typing.get_origin(a) is tuple for a in typing.get_args(ann))
    return origin is tuple


def _coerce_group_value(key: str, value: Any) -> Any:
    """Kafka list configs are comma-separated strings (`group.consumer.assignors=uniform,range`)."""
    if isinstance(value, str) and _is_tuple_field(CoordinatorConfig, GROUP_KEYS[key]):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def _explain(err: ValidationError, keys: Mapping[str, str], origins: Mapping[str, str]) -> str:
    """Turn pydantic's report into one line per bad key, using Kafka's names, each prefixed by
    where the key was set (`server.properties:12: ...`, `--set ...`) when that is known."""
    field_to_key = {field: key for key, field in keys.items()}
    lines = []
    for e in err.errors():
        loc = [str(p) for p in e["loc"]]
        where = loc[0] if loc else ""
        key = where if where in keys else field_to_key.get(where, where)
        custom = e["msg"].startswith("Value error, ")
        msg = _cut_line(e["msg"].removeprefix("Value error, "), 2 * MAX_SHOWN_CHARS)
        if key:
            got = e.get("input")
            shown = "" if custom or isinstance(got, dict) else f" (got {shown_value(got)})"
            lines.append(_at(origins, key) + f"{key}: {msg}{shown}")
        else:
            lines.append(msg)
    return "\n".join(lines)


def _at(origins: Mapping[str, str], key: str) -> str:
    origin = origins.get(key) or origins.get(
        next((k for k, v in SERVER_KEY_SYNONYMS.items() if v == key), "")
    )
    return f"{origin}: " if origin else ""


def _suggest(key: str) -> str:
    if len(key) > MAX_SHOWN_CHARS:  # no Kafka name is that long; difflib would take seconds
        return ""
    close = difflib.get_close_matches(key, [*SERVER_KEYS, *GROUP_KEYS, *SERVER_KEY_SYNONYMS], n=1)
    if not close:
        close = difflib.get_close_matches(key, sorted(KAFKA_BROKER_KEYS), n=1, cutoff=0.8)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _tls_keys_used(settings: Mapping[str, Any], server: Mapping[str, Any]) -> frozenset[str]:
    """The `ssl.*` / `listener.name.<n>.ssl.*` keys a served TLS listener reads; any other
    stays an ignored Kafka key (a Kafka file's settings for listeners groupshift does not open)."""
    try:
        served = parse_listeners(
            str(server.get("listeners", f"127.0.0.1:{DEFAULT_PORT}")),
            advertised=server.get("advertised.listeners"),
            protocol_map=server.get("listener.security.protocol.map"),
            controller_names=server.get("controller.listener.names"),
            settings={k: str(v) for k, v in settings.items()},
        )
    except ListenerError:
        return frozenset()  # refused below, with the key named
    tls = [listener for listener in served if listener.uses_tls]
    prefixes = tuple(listener.prefix + "ssl." for listener in tls)
    return frozenset(
        k for k in settings if (tls and k.startswith("ssl.")) or (prefixes and k.startswith(prefixes))
    )


def _sasl_keys_used(settings: Mapping[str, Any], server: Mapping[str, Any]) -> frozenset[str]:
    """The `sasl.*` / `listener.name.<n>.*` (not `ssl.*`) keys a served SASL listener reads."""
    try:
        served = parse_listeners(
            str(server.get("listeners", f"127.0.0.1:{DEFAULT_PORT}")),
            advertised=server.get("advertised.listeners"),
            protocol_map=server.get("listener.security.protocol.map"),
            controller_names=server.get("controller.listener.names"),
            settings={k: str(v) for k, v in settings.items()},
        )
    except ListenerError:
        # Refused below, with the key named; the SASL keys go along so the refusal is about them.
        return frozenset(
            k
            for k in settings
            if (k.startswith("sasl.") and k not in SERVER_KEYS)
            or (k.startswith("listener.name.") and ".ssl." not in k)
        )
    sasl = [listener for listener in served if listener.uses_sasl]
    prefixes = tuple(listener.prefix for listener in sasl)
    return frozenset(
        k
        for k in settings
        if (sasl and k.startswith("sasl.") and k not in SERVER_KEYS)
        or (prefixes and k.startswith(prefixes) and not k.startswith(tuple(p + "ssl." for p in prefixes)))
    )


@dataclass(frozen=True)
class LoadedConfig:
    """A validated configuration and the Kafka broker keys it accepted without using them."""

    config: ServerConfig
    ignored_kafka_keys: tuple[str, ...] = ()


def resolve_config(settings: Mapping[str, Any], origins: Mapping[str, str] | None = None) -> LoadedConfig:
    """Validate a flat map of Kafka-named settings into a `ServerConfig`.

    A key groupshift does not use but a Kafka broker knows (`gateway.kafka_broker_keys`) is
    accepted and returned in `ignored_kafka_keys`, so that a Kafka `server.properties` can be
    given as is; any other unknown key is refused. `origins` (key -> `FILE:LINE` or the flag)
    prefixes each error. Raises `ConfigError` naming every unknown key or invalid value.
    """
    origins = origins or {}
    server: dict[str, Any] = {}
    group: dict[str, Any] = {}
    upstream: dict[str, Any] = {}
    unknown = []
    ignored = []
    for raw_key, value in settings.items():
        key = SERVER_KEY_SYNONYMS.get(raw_key, raw_key)
        if key in SERVER_KEYS:
            server[key] = value
        elif key in GROUP_KEYS:
            group[key] = _coerce_group_value(key, value)
        elif key in UPSTREAM_KEYS:
            upstream[key] = value
        elif is_kafka_broker_key(raw_key):
            ignored.append(raw_key)
        else:
            unknown.append(raw_key)
    if unknown:
        raise ConfigError(
            "\n".join(
                _at(origins, k) + f"unknown configuration key {shown_value(k)}: neither groupshift nor "
                f"a Kafka broker (Kafka {', '.join(KAFKA_VERSIONS)}) knows it{_suggest(k)}"
                for k in unknown
            )
        )
    tls_keys = _tls_keys_used(settings, server)
    sasl_keys = _sasl_keys_used(settings, server)
    ignored = [k for k in ignored if k not in tls_keys and k not in sasl_keys]
    _check_listeners(server, {k: str(settings[k]) for k in tls_keys | sasl_keys}, origins)
    try:
        coordinator = CoordinatorConfig.model_validate(group)
    except ValidationError as e:
        raise ConfigError(_explain(e, GROUP_KEYS, origins)) from None
    upstream_config = None
    if upstream:
        if "upstream.bootstrap.servers" not in upstream:
            raise ConfigError("upstream.bootstrap.servers is required when any upstream.* key is set")
        try:
            upstream_config = UpstreamConfig.model_validate(upstream)
        except ValidationError as e:
            raise ConfigError(_explain(e, UPSTREAM_KEYS, origins)) from None
    try:
        config = ServerConfig.model_validate(
            {
                **server,
                "tls_settings": {k: str(settings[k]) for k in sorted(tls_keys)},
                "sasl_settings": {k: str(settings[k]) for k in sorted(sasl_keys)},
                "group": coordinator,
                "upstream": upstream_config,
            }
        )
    except ValidationError as e:
        raise ConfigError(_explain(e, SERVER_KEYS, origins)) from None
    if upstream_config is not None and upstream_config.identity == "passthrough":
        _check_passthrough(config)
    return LoadedConfig(config, tuple(sorted(ignored)))


def _check_passthrough(config: ServerConfig) -> None:
    """`upstream.identity=passthrough`: the cluster authenticates and authorizes, so groupshift's
    listeners must not (a SASL listener would consume the login it has to relay; groupshift's
    own ACLs would be a second source of truth)."""
    if config.authorizer_class_name:
        raise ConfigError(
            "authorizer.class.name cannot be set with upstream.identity=passthrough: the cluster's ACLs "
            "decide (probed per client, docs/security.md)"
        )
    sasl = [listener.name for listener in config.served_listeners if listener.uses_sasl]
    if sasl:
        raise ConfigError(
            f"listeners {', '.join(sasl)}: SASL listeners cannot serve upstream.identity=passthrough, which "
            "relays each client's SASL login to the cluster; use SSL or PLAINTEXT listeners"
        )


def _check_listeners(server: Mapping[str, Any], tls: Mapping[str, str], origins: Mapping[str, str]) -> None:
    """Refuse bad listener settings with a `ConfigError` that says where the key was set."""
    try:
        parse_listeners(
            str(server.get("listeners", f"127.0.0.1:{DEFAULT_PORT}")),
            advertised=server.get("advertised.listeners"),
            protocol_map=server.get("listener.security.protocol.map"),
            controller_names=server.get("controller.listener.names"),
            settings=tls,
        )
    except ListenerError as e:
        key = str(e).split(" ", 1)[0].rstrip(":")
        raise ConfigError(_at(origins, key if key in SERVER_KEYS else "listeners") + str(e)) from None


def build_config(settings: Mapping[str, Any]) -> ServerConfig:
    """`resolve_config` without the report of ignored Kafka keys."""
    return resolve_config(settings).config


def parse_properties_lines(text: str, *, source: str = "<config>") -> dict[str, tuple[str, int]]:
    """Java-properties style `name=value` (or `name: value`) lines; `#`/`!` start comments.
    Each name maps to its value and its line number (the last one wins, as in Java).

    Line continuations and escapes are not supported: Kafka broker configs never need them.
    """
    out: dict[str, tuple[str, int]] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        seps = [i for i in (line.find("="), line.find(":")) if i > 0]
        if not seps:
            raise ConfigError(f"{source}:{lineno}: expected NAME=VALUE, got {shown_value(raw.strip())}")
        i = min(seps)
        out[line[:i].strip()] = (line[i + 1 :].strip(), lineno)
    return out


def parse_properties(text: str, *, source: str = "<config>") -> dict[str, str]:
    """`parse_properties_lines` without the line numbers."""
    return {k: v for k, (v, _) in parse_properties_lines(text, source=source).items()}


def parse_set_options(items: Iterable[str]) -> dict[str, str]:
    """`--set NAME=VALUE` options, in order (a later one wins)."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--set expects NAME=VALUE, got {shown_value(item)}")
        out[name.strip()] = value.strip()
    return out


def load_settings(
    *,
    config_file: str | Path | None = None,
    overrides: Mapping[str, str] | None = None,
    override_origins: Mapping[str, str] | None = None,
    sets: Iterable[str] = (),
) -> LoadedConfig:
    """File first, then dedicated CLI flags (`overrides`), then `--set` items; errors name the
    file and line, the flag (`override_origins`: key -> flag) or the `--set` item."""
    settings: dict[str, str] = {}
    origins: dict[str, str] = {}
    if config_file is not None:
        path = Path(config_file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"cannot read config file {path}: {e.strerror or e}") from None
        except UnicodeDecodeError as e:
            raise ConfigError(f"cannot read config file {path}: not UTF-8 text ({e.reason})") from None
        for key, (value, lineno) in parse_properties_lines(text, source=str(path)).items():
            settings[key] = value
            origins[key] = f"{path}:{lineno}"
    for key, value in (overrides or {}).items():
        settings[key] = value
        origins[key] = (override_origins or {}).get(key, "")
    if "listeners" in (overrides or {}) and "advertised.listeners" not in (overrides or {}):
        # A flag (`--listen`) replaced the file's listeners: the file's advertised addresses
        # were for those, not for this one (`--set advertised.listeners=...` still applies).
        settings.pop("advertised.listeners", None)
        origins.pop("advertised.listeners", None)
    for key, value in parse_set_options(sets).items():
        settings[key] = value
        origins[key] = f"--set {key}"
    return resolve_config(settings, {k: v for k, v in origins.items() if v})


def load_config(
    *,
    config_file: str | Path | None = None,
    overrides: Mapping[str, str] | None = None,
    sets: Iterable[str] = (),
) -> ServerConfig:
    """`load_settings` without the report of ignored Kafka keys."""
    return load_settings(config_file=config_file, overrides=overrides, sets=sets).config


# What a Kafka broker's log directory holds and a groupshift data directory never does.
_KAFKA_LOG_DIR_MARKERS = (
    "recovery-point-offset-checkpoint",
    "replication-offset-checkpoint",
    "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint",
    "bootstrap.checkpoint",
    "__cluster_metadata-0",
)
# `.lock` is the running server's (gateway.dataplane.datadir): a crash before meta.properties
# was written leaves it in an otherwise new directory.
_IGNORED_ENTRIES = frozenset({"lost+found", ".lock"})
COORDINATOR_DIR = "coordinator"
OFFSETS_LOG_PREFIX = "__consumer_offsets-"


def is_groupshift_data_dir(path: Path) -> bool:
    """A directory groupshift created: its `meta.properties`, and none of a Kafka broker's
    checkpoint files (Kafka's log directories have a `meta.properties` too)."""
    return (path / "meta.properties").is_file() and not any(
        (path / marker).exists() for marker in _KAFKA_LOG_DIR_MARKERS
    )


def check_data_dir_is_ours(
    config: ServerConfig, *, allow_foreign: bool = False, flag: str = "--force-data-dir"
) -> None:
    """Refuse, reading only, a data directory that is a file or a non-empty directory
    groupshift did not create (it renames aside partition-like directories no topic of its own
    owns and writes its files there, so pointed at a Kafka log dir or a home directory it would
    rearrange things), unless `allow_foreign`. It runs before the directory's `.lock` is taken,
    so a refused directory is left exactly as it was (nothing is created in it)."""
    path = Path(config.data_dir)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"data directory {path} (log.dirs / --data-dir) is a file, not a directory")
    if not path.is_dir():
        return
    try:
        entries = [e for e in os.listdir(path) if e not in _IGNORED_ENTRIES]
    except OSError as e:
        raise ConfigError(f"data directory {path} cannot be read: {e.strerror or e}") from None
    ours = [e for e in ("topics.json", COORDINATOR_DIR) if e in entries]
    if ours and not (path / "meta.properties").exists() and not allow_foreign:
        raise ConfigError(
            f"{path / 'meta.properties'} is missing, but data directory {path} holds groupshift's "
            f"{' and '.join(ours)}: it holds the node's cluster.id; restore it from a backup, or "
            f"pass {flag} to start with a new cluster.id"
        )
    if entries and not is_groupshift_data_dir(path) and not allow_foreign:
        shown = ", ".join(sorted(entries)[:5]) + (", ..." if len(entries) > 5 else "")
        raise ConfigError(
            f"data directory {path} is not empty and is not a groupshift data directory "
            f"(it holds {shown}); groupshift renames aside partition directories it does not own, "
            f"so give it an empty or new directory, or pass {flag} to use this one anyway"
        )


def check_data_dir(
    config: ServerConfig, *, allow_foreign: bool = False, flag: str = "--force-data-dir"
) -> None:
    """`check_data_dir_is_ours`, then refuse a data directory whose coordinator log count
    differs from `offsets.topic.num.partitions` (groups would be looked up in the wrong shard;
    Kafka likewise never changes the partition count of `__consumer_offsets` once created).
    `serve` runs this part with the directory's `.lock` held, so that it never reads a
    directory another server is still creating."""
    check_data_dir_is_ours(config, allow_foreign=allow_foreign, flag=flag)
    path = Path(config.data_dir)
    coordinator = path / COORDINATOR_DIR
    if coordinator.is_dir():
        shards = [e for e in os.listdir(coordinator) if e.startswith(OFFSETS_LOG_PREFIX)]
        want = config.group.offsets_topic_num_partitions
        if shards and len(shards) != want:
            raise ConfigError(
                f"offsets.topic.num.partitions={want} but data directory {path} holds "
                f"{len(shards)} coordinator logs: groups are placed by this count, so it cannot "
                f"change once set (as Kafka's __consumer_offsets partition count); "
                f"set offsets.topic.num.partitions={len(shards)}"
            )
