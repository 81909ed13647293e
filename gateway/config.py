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

import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from engine.config import CoordinatorConfig
from gateway.upstream.config import UPSTREAM_KEYS, UpstreamConfig

DEFAULT_PORT = 9092


class ConfigError(ValueError):
    """A configuration key is unknown or its value is invalid; the message names the key."""


def _split_host_port(value: str) -> tuple[str, int]:
    text = value.strip()
    if "://" in text:
        scheme, _, text = text.partition("://")
        if scheme.upper() != "PLAINTEXT":
            raise ValueError(f"only PLAINTEXT listeners are supported, got {value!r}")
    if "," in text:
        raise ValueError(f"exactly one listener is supported, got {value!r}")
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not port_text.isdigit() or not host:
        raise ValueError(f"expected HOST:PORT, got {value!r}")
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
    log_dirs: Path = Field(Path("./groupshift-data"), alias="log.dirs")
    num_partitions: int = Field(1, alias="num.partitions", ge=1)
    auto_create_topics_enable: bool = Field(True, alias="auto.create.topics.enable")
    socket_request_max_bytes: int = Field(104857600, alias="socket.request.max.bytes", ge=1)
    log_segment_bytes: int = Field(1073741824, alias="log.segment.bytes", ge=14)
    metrics_listen: str | None = Field(None, alias="metrics.listen")
    node_id: int = Field(0, alias="node.id", ge=0)
    # groupshift-specific: how coordinator logs reach the disk. "batch" (default): one fsync per
    # group commit, and a response waits for it; "none": no fsync (tests, benchmarks).
    coordinator_fsync_policy: Literal["batch", "none"] = Field("batch", alias="coordinator.fsync.policy")
    group: CoordinatorConfig = Field(default_factory=lambda: CoordinatorConfig.model_validate({}))
    # Upstream mode (`upstream.*` keys, `serve --upstream`): None serves embedded topics.
    upstream: UpstreamConfig | None = None

    @field_validator("listeners")
    @classmethod
    def _check_listener(cls, value: str) -> str:
        _split_host_port(value)
        return value

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
        return value

    @property
    def listen_address(self) -> tuple[str, int]:
        return parse_host_port(self.listeners, key="listeners")

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


def _explain(err: ValidationError, keys: Mapping[str, str]) -> str:
    """Turn pydantic's report into one line per bad key, using Kafka's names."""
    field_to_key = {field: key for key, field in keys.items()}
    lines = []
    for e in err.errors():
        loc = [str(p) for p in e["loc"]]
        where = loc[0] if loc else ""
        key = where if where in keys else field_to_key.get(where, where)
        custom = e["msg"].startswith("Value error, ")
        msg = e["msg"].removeprefix("Value error, ")
        if key:
            got = e.get("input")
            shown = "" if custom or isinstance(got, dict) else f" (got {got!r})"
            lines.append(f"{key}: {msg}{shown}")
        else:
            lines.append(msg)
    return "; ".join(lines)


def build_config(settings: Mapping[str, Any]) -> ServerConfig:
    """Validate a flat map of Kafka-named settings into a `ServerConfig`.

    Raises `ConfigError` naming every unknown key or invalid value.
    """
    server: dict[str, Any] = {}
    group: dict[str, Any] = {}
    upstream: dict[str, Any] = {}
    unknown = []
    for raw_key, value in settings.items():
        key = SERVER_KEY_SYNONYMS.get(raw_key, raw_key)
        if key in SERVER_KEYS:
            server[key] = value
        elif key in GROUP_KEYS:
            group[key] = _coerce_group_value(key, value)
        elif key in UPSTREAM_KEYS:
            upstream[key] = value
        else:
            unknown.append(raw_key)
    if unknown:
        raise ConfigError("unknown configuration key(s): " + ", ".join(sorted(unknown)))
    try:
        coordinator = CoordinatorConfig.model_validate(group)
    except ValidationError as e:
        raise ConfigError(_explain(e, GROUP_KEYS)) from None
    upstream_config = None
    if upstream:
        if "upstream.bootstrap.servers" not in upstream:
            raise ConfigError("upstream.bootstrap.servers is required when any upstream.* key is set")
        try:
            upstream_config = UpstreamConfig.model_validate(upstream)
        except ValidationError as e:
            raise ConfigError(_explain(e, UPSTREAM_KEYS)) from None
    try:
        return ServerConfig.model_validate({**server, "group": coordinator, "upstream": upstream_config})
    except ValidationError as e:
        raise ConfigError(_explain(e, SERVER_KEYS)) from None


def parse_properties(text: str, *, source: str = "<config>") -> dict[str, str]:
    """Java-properties style `name=value` (or `name: value`) lines; `#`/`!` start comments.

    Line continuations and escapes are not supported: Kafka broker configs never need them.
    """
    out: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        seps = [i for i in (line.find("="), line.find(":")) if i > 0]
        if not seps:
            raise ConfigError(f"{source}:{lineno}: expected NAME=VALUE, got {raw.strip()!r}")
        i = min(seps)
        out[line[:i].strip()] = line[i + 1 :].strip()
    return out


def parse_set_options(items: Iterable[str]) -> dict[str, str]:
    """`--set NAME=VALUE` options, in order (a later one wins)."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--set expects NAME=VALUE, got {item!r}")
        out[name.strip()] = value.strip()
    return out


def load_config(
    *,
    config_file: str | Path | None = None,
    overrides: Mapping[str, str] | None = None,
    sets: Iterable[str] = (),
) -> ServerConfig:
    """File first, then dedicated CLI flags (`overrides`), then `--set` items."""
    settings: dict[str, str] = {}
    if config_file is not None:
        path = Path(config_file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"cannot read config file {path}: {e.strerror or e}") from None
        settings.update(parse_properties(text, source=str(path)))
    settings.update(overrides or {})
    settings.update(parse_set_options(sets))
    return build_config(settings)
