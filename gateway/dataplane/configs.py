"""Topic and broker configs of the embedded node, stored, validated and described as Kafka does.

Facts (names, types, defaults, documentation, which broker configs are dynamic) come from
`kafka_configs.json`, collected from a real Kafka node by `scripts.gen_kafka_configs`; the
rules below are Kafka's:

  * topic configs (`LogConfig`): a topic's value is its own override (DYNAMIC_TOPIC_CONFIG), else
    the broker config it maps to (`ServerTopicConfigSynonyms`: `retention.ms` <- `log.retention.ms`,
    `log.retention.minutes`, `log.retention.hours`, ...), else the topic default. Values are
    checked as `ConfigDef` parses them (trimmed numbers, case-blind booleans, comma lists) with
    `LogConfig`'s validators, and described in `ConfigDef.convertToString` form;
  * broker configs (`KafkaConfig`, `DynamicBrokerConfig`): a value comes from the per-broker
    dynamic configs (DYNAMIC_BROKER_CONFIG), the cluster-wide dynamic defaults
    (DYNAMIC_DEFAULT_BROKER_CONFIG, resource name ""), the node's own settings
    (STATIC_BROKER_CONFIG) or Kafka's default (DEFAULT_CONFIG), in that order;
  * synonyms (`ConfigHelper.configSynonyms`): every source holding the config or one of its
    broker synonyms, most specific first, starting at the config's own primary broker name;
  * a new node gets the cluster default `min.insync.replicas=1`, as Kafka 4.x's storage format
    writes it (KIP-966), so a fresh groupshift node describes it as a fresh Kafka node does.

Everything set dynamically survives restarts: `configs.json` in the data directory, replaced
atomically on every change.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from gateway.dataplane.durable import write_atomically

CONFIGS_FILE = "configs.json"
_DATA = json.loads((Path(__file__).with_name("kafka_configs.json")).read_text(encoding="utf-8"))
KAFKA_VERSION: str = _DATA["kafka_version"]

# DescribeConfigs config sources (`DescribeConfigsResponse.ConfigSource`).
TOPIC_CONFIG, DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, STATIC_BROKER, DEFAULT_CONFIG = 1, 2, 3, 4, 5
# Config types (`DescribeConfigsResponse.ConfigType`).
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = 1, 2, 3, 4, 5, 6, 7, 8, 9


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: int
    default: str | None
    documentation: str | None
    dynamic: bool = True
    sensitive: bool = False


TOPIC_DEFS: dict[str, ConfigDef] = {
    e["name"]: ConfigDef(e["name"], e["type"], e["default"], e["documentation"]) for e in _DATA["topic"]
}
BROKER_DEFS: dict[str, ConfigDef] = {
    e["name"]: ConfigDef(e["name"], e["type"], e["default"], e["documentation"], e["dynamic"], e["sensitive"])
    for e in _DATA["broker"]
}

_HOURS, _MINUTES = 3_600_000, 60_000
# Topic config -> its broker synonyms in priority order, with the factor turning each into the
# topic's unit (`ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS`).
TOPIC_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", _HOURS)),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOURS)),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", _MINUTES),
        ("log.retention.hours", _HOURS),
    ),
    "max.message.bytes": (("message.max.bytes", 1),),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", 1),),
    "min.insync.replicas": (("min.insync.replicas", 1),),
    "compression.type": (("compression.type", 1),),
    "compression.gzip.level": (("compression.gzip.level", 1),),
    "compression.lz4.level": (("compression.lz4.level", 1),),
    "compression.zstd.level": (("compression.zstd.level", 1),),
    "preallocate": (("log.preallocate", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "local.retention.ms": (("log.local.retention.ms", 1),),
    "local.retention.bytes": (("log.local.retention.bytes", 1),),
    "remote.copy.lag.ms": (("log.remote.copy.lag.ms", 1),),
    "remote.copy.lag.bytes": (("log.remote.copy.lag.bytes", 1),),
    "max.decompressed.message.bytes": (("max.decompressed.message.bytes", 1),),
}
# Broker configs that are synonyms of each other (`DynamicBrokerConfig.brokerConfigSynonyms`).
_BROKER_FAMILIES = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


def broker_synonyms(name: str) -> tuple[str, ...]:
    if name == "log.flush.interval.ms":
        return ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")
    for family in _BROKER_FAMILIES:
        if name in family:
            return family
    return (name,)


# -- parsing and validation (`ConfigDef.parseType` and `LogConfig`'s validators) ---------------


class ConfigValueError(Exception):
    """A value Kafka refuses; `message` is Kafka's wording."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


_INTEGER = re.compile(r"[+-]?[0-9]+")
_BOUNDS = {INT: (-(2**31), 2**31 - 1), SHORT: (-(2**15), 2**15 - 1), LONG: (-(2**63), 2**63 - 1)}
_TYPE_NAMES = {INT: "INT", SHORT: "SHORT", LONG: "LONG", DOUBLE: "DOUBLE"}


def java_double(x: float) -> str:
    """`Double.toString`: plain between 10^-3 and 10^7, else computerized scientific notation."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        s = repr(x)
        return s if "." in s else s + ".0"
    sign, digits, exp = Decimal(repr(x)).as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    exponent = len(digits) + int(exp) - 1
    return f"{'-' if sign else ''}{ds[0]}.{ds[1:] or '0'}E{exponent}"


# `Double.parseDouble`'s grammar (decimal forms; hexadecimal floats are left out).
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")


def parse_value(name: str, ctype: int, raw: str) -> Any:
    """`raw` as Kafka's ConfigDef parses it; raises ConfigValueError with Kafka's message."""
    s = raw.strip()
    if ctype in _BOUNDS:
        if not _INTEGER.fullmatch(s):
            raise ConfigValueError(
                f"Invalid value {raw} for configuration {name}: Not a number of type {_TYPE_NAMES[ctype]}"
            )
        n = int(s)
        lo, hi = _BOUNDS[ctype]
        if not lo <= n <= hi:
            raise ConfigValueError(
                f"Invalid value {raw} for configuration {name}: Not a number of type {_TYPE_NAMES[ctype]}"
            )
        return n
    if ctype == DOUBLE:
        if not _JAVA_DOUBLE.fullmatch(s):
            raise ConfigValueError(
                f"Invalid value {raw} for configuration {name}: Not a number of type DOUBLE"
            )
        return float(s.rstrip("fFdD").replace("Infinity", "inf"))
    if ctype == BOOLEAN:
        if s.lower() in ("true", "false"):
            return s.lower() == "true"
        raise ConfigValueError(
            f"Invalid value {raw} for configuration {name}: Expected value to be either true or false"
        )
    if ctype == LIST:
        return [] if not s else [p.strip() for p in s.split(",")]
    return s if ctype in (STRING, CLASS) else raw


def format_value(ctype: int, value: Any) -> str:
    """`ConfigDef.convertToString`."""
    if ctype == BOOLEAN:
        return "true" if value else "false"
    if ctype == DOUBLE:
        return java_double(float(value))
    if ctype == LIST:
        return ",".join(value)
    return str(value)


def _at_least(lo: int | float) -> Callable[[str, Any], str | None]:
    return lambda _name, v: None if v >= lo else f"Value must be at least {lo}"


def _between(lo: int | float, hi: int | float) -> Callable[[str, Any], str | None]:
    def check(_name: str, v: Any) -> str | None:
        if v < lo:
            return f"Value must be at least {lo}"
        if v > hi:
            return f"Value must be no more than {hi}"
        return None

    return check


def _one_of(*allowed: str) -> Callable[[str, Any], str | None]:
    return lambda _name, v: None if v in allowed else f"String must be one of: {', '.join(allowed)}"


_THROTTLED = re.compile(r"([0-9]+:[0-9]+)?")


def _throttled(name: str, v: list[str]) -> str | None:
    if v == ["*"] or all(_THROTTLED.fullmatch(p.strip()) for p in v):
        return None
    return (
        f"{name} must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


def _gzip_level(_name: str, v: int) -> str | None:
    return None if v == -1 or 1 <= v <= 9 else "Value must be between 1 and 9 or equal to -1"


_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TOPIC_VALIDATORS: dict[str, Callable[[str, Any], str | None]] = {
    "segment.bytes": _at_least(1024 * 1024),
    "segment.ms": _at_least(1),
    "segment.jitter.ms": _at_least(0),
    "segment.index.bytes": _at_least(4),
    "flush.messages": _at_least(1),
    "flush.ms": _at_least(0),
    "retention.ms": _at_least(-1),
    "max.message.bytes": _at_least(0),
    "index.interval.bytes": _at_least(0),
    "delete.retention.ms": _at_least(0),
    "min.compaction.lag.ms": _at_least(0),
    "max.compaction.lag.ms": _at_least(1),
    "file.delete.delay.ms": _at_least(0),
    "min.cleanable.dirty.ratio": _between(0, 1),
    "min.insync.replicas": _at_least(1),
    "compression.type": _one_of(*_COMPRESSION),
    "compression.gzip.level": _gzip_level,
    "compression.lz4.level": _between(1, 17),
    "compression.zstd.level": _between(-131072, 22),
    "message.timestamp.type": _one_of("CreateTime", "LogAppendTime"),
    "message.timestamp.before.max.ms": _at_least(0),
    "message.timestamp.after.max.ms": _at_least(0),
    "leader.replication.throttled.replicas": _throttled,
    "follower.replication.throttled.replicas": _throttled,
    "local.retention.ms": _at_least(-2),
    "local.retention.bytes": _at_least(-2),
    "remote.copy.lag.ms": _at_least(-1),
    "remote.copy.lag.bytes": _at_least(-1),
    "max.decompressed.message.bytes": _at_least(1),
}


def _shown(ctype: int, v: Any) -> str:
    """How Kafka's ConfigException prints a parsed value."""
    if ctype == DOUBLE:
        return java_double(v)
    if ctype == LIST:
        return "[" + ", ".join(v) + "]"
    return str(v)


def check_topic_config(name: str, raw: str | None) -> Any:
    """Validate one topic config as Kafka's controller does; returns the parsed value.

    Raises ConfigValueError (Kafka answers INVALID_CONFIG) with Kafka's message.
    """
    d = TOPIC_DEFS.get(name)
    if d is None:
        raise ConfigValueError(f"Unknown topic config name: {name}")
    if raw is None:
        raise ConfigValueError(f"Null value not supported for topic configs: {name}")
    value = parse_value(name, d.type, raw)
    if name == "cleanup.policy":
        for item in value:
            if item not in ("compact", "delete"):
                raise ConfigValueError(
                    f"Invalid value {item} for configuration {name}: String must be one of: compact, delete"
                )
    elif name == "remote.storage.enable" and value:
        raise ConfigValueError(
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
            "with remote log storage."
        )
    check = TOPIC_VALIDATORS.get(name)
    if check is not None and (problem := check(name, value)) is not None:
        raise ConfigValueError(f"Invalid value {_shown(d.type, value)} for configuration {name}: {problem}")
    return value


def check_topic_configs(configs: Mapping[str, str | None]) -> None:
    for name, raw in configs.items():
        check_topic_config(name, raw)


# -- the store ----------------------------------------------------------------------------------


class ConfigStore:
    """Dynamic topic configs and dynamic broker configs, durable in `configs.json`.

    `static` holds the node's own settings under Kafka's names (STATIC_BROKER_CONFIG).
    """

    def __init__(self, data_dir: Path, node_id: int, static: Mapping[str, str] | None = None) -> None:
        self._path = data_dir / CONFIGS_FILE
        self.node_id = node_id
        self.static: dict[str, str] = dict(static or {})
        self.defaults: dict[str, str] = {
            d.name: d.default for d in BROKER_DEFS.values() if d.default is not None and not d.sensitive
        }
        self.topics: dict[str, dict[str, str]] = {}
        self.broker: dict[str, str] = {}
        self.broker_default: dict[str, str] = {}
        self._max_bytes: dict[str, int] = {}
        # Called after every dynamic broker config change (a keystore update reloads TLS).
        self.on_broker_change: list[Callable[[], None]] = []
        # Checks of a proposed set of dynamic broker configs (the per-broker layer over the
        # cluster default): a message refuses the update (a keystore that does not load).
        self.broker_checks: list[Callable[[Mapping[str, str]], str | None]] = []
        if self._path.exists():
            doc = json.loads(self._path.read_text(encoding="utf-8"))
            self.topics = {k: dict(v) for k, v in doc.get("topics", {}).items()}
            self.broker = dict(doc.get("broker", {}))
            self.broker_default = dict(doc.get("broker_default", {}))
        else:
            self.broker_default = {"min.insync.replicas": "1"}
            self._persist()

    def max_message_bytes(self, topic: str) -> int:
        """The topic's effective `max.message.bytes` (cached: Produce asks on every batch)."""
        limit = self._max_bytes.get(topic)
        if limit is None:
            limit = self._max_bytes[topic] = int(self.topic_value(topic, "max.message.bytes"))
        return limit

    def _persist(self) -> None:
        self._max_bytes.clear()
        doc = {
            "version": 1,
            "topics": {k: self.topics[k] for k in sorted(self.topics)},
            "broker": self.broker,
            "broker_default": self.broker_default,
        }
        write_atomically(self._path, json.dumps(doc, indent=1, sort_keys=False).encode())

    def set_listener(self, listeners: str, advertised: str) -> None:
        """The addresses actually bound and advertised (STATIC_BROKER_CONFIG `listeners`,
        `advertised.listeners`), once the ports are known."""
        self.static["listeners"] = listeners
        self.static["advertised.listeners"] = advertised

    def forget_topics_except(self, names: Iterable[str]) -> None:
        """Drop configs of topics that no longer exist (a crash between the two writes)."""
        keep = set(names)
        if any(t not in keep for t in self.topics):
            self.topics = {k: v for k, v in self.topics.items() if k in keep}
            self._persist()

    def set_topic(self, topic: str, configs: Mapping[str, str]) -> None:
        if configs or topic in self.topics:
            if configs:
                self.topics[topic] = dict(configs)
            else:
                self.topics.pop(topic, None)
            self._persist()

    def set_topics(self, configs_by_topic: Mapping[str, Mapping[str, str]]) -> None:
        """`set_topic` for many new topics with one write of the store (CreateTopics batches)."""
        changed = False
        for topic, configs in configs_by_topic.items():
            if configs:
                self.topics[topic] = dict(configs)
                changed = True
            elif self.topics.pop(topic, None) is not None:
                changed = True
        if changed:
            self._persist()

    def drop_topic(self, topic: str) -> None:
        if self.topics.pop(topic, None) is not None:
            self._persist()

    def set_broker(self, per_broker: bool, configs: Mapping[str, str]) -> None:
        if per_broker:
            self.broker = dict(configs)
        else:
            self.broker_default = dict(configs)
        self._persist()
        for hook in self.on_broker_change:
            hook()

    # -- effective values ---------------------------------------------------------------------

    def _layers(self) -> tuple[tuple[int, Mapping[str, str]], ...]:
        return (
            (DYNAMIC_BROKER, self.broker),
            (DYNAMIC_DEFAULT_BROKER, self.broker_default),
            (STATIC_BROKER, self.static),
            (DEFAULT_CONFIG, self.defaults),
        )

    def broker_value(self, name: str) -> str | None:
        for _source, layer in self._layers():
            if name in layer:
                return layer[name]
        return None

    def synonyms(self, primary: str, names: Iterable[str]) -> list[tuple[str, str | None, int]]:
        """(name, value, source) of every layer holding one of `names`, from `primary` on."""
        names = tuple(names)
        sensitive = (d := BROKER_DEFS.get(primary)) is None or d.sensitive
        out = [
            (n, None if sensitive else layer[n], source)
            for source, layer in self._layers()
            for n in names
            if n in layer
        ]
        while out and out[0][0] != primary:
            out.pop(0)
        return out

    def topic_value(self, topic: str, name: str) -> Any:
        """The parsed value `name` has for `topic` (override, broker synonym or default)."""
        d = TOPIC_DEFS[name]
        raw = self.topics.get(topic, {}).get(name)
        if raw is None:
            for broker_name, factor in TOPIC_SYNONYMS.get(name, ()):
                b = self.broker_value(broker_name)
                if b is not None:
                    try:
                        v = parse_value(name, d.type, b)
                    except ConfigValueError:
                        continue
                    return v * factor if factor != 1 else v
            raw = d.default
        if raw is None:
            return None
        try:
            return parse_value(name, d.type, raw)
        except ConfigValueError:
            return raw

    def topic_entry(self, topic: str, name: str) -> dict[str, Any]:
        """One DescribeConfigs entry for a topic config (`ConfigHelper.createTopicConfigEntry`)."""
        d = TOPIC_DEFS[name]
        value = self.topic_value(topic, name)
        shown = None if value is None else format_value(d.type, value)
        syns: list[tuple[str, str | None, int]] = []
        if name in self.topics.get(topic, {}):
            syns.append((name, shown, TOPIC_CONFIG))
        family = TOPIC_SYNONYMS.get(name)
        if family is not None:
            primary = family[0][0]
            syns.extend(self.synonyms(primary, broker_synonyms(primary)))
        return _entry(name, shown, syns, read_only=False, sensitive=False, ctype=d.type, doc=d.documentation)

    def broker_entry(self, name: str, per_broker: bool) -> dict[str, Any]:
        """One DescribeConfigs entry for a broker config (`ConfigHelper.createBrokerConfigEntry`)."""
        d = BROKER_DEFS.get(name)
        sensitive = d is None or d.sensitive  # a name of unknown type may hold a secret
        syns = self.synonyms(name, broker_synonyms(name))
        if not per_broker:
            syns = [s for s in syns if s[2] == DYNAMIC_DEFAULT_BROKER]
            value = self.broker_default.get(name)
        else:
            value = self.broker_value(name)
        return _entry(
            name,
            None if sensitive else value,
            syns,
            read_only=d is None or not d.dynamic,
            sensitive=sensitive,
            ctype=0 if d is None else d.type,
            doc=None if d is None else d.documentation,
        )

    def broker_names(self, per_broker: bool) -> list[str]:
        if not per_broker:
            return hash_map_order(self.broker_default)
        extra = {n: None for layer in (self.static, self.broker_default, self.broker) for n in layer}
        # Kafka's order for the known names; where it puts names it does not define is not
        # reproduced (they follow).
        return list(BROKER_DEFS) + [n for n in extra if n not in BROKER_DEFS]


def java_string_hash(s: str) -> int:
    """`String.hashCode` (UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    for unit in s.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h


def hash_map_order(names: Iterable[str]) -> list[str]:
    """The iteration order of a `java.util.HashMap` of these keys (a table of 16 buckets that
    doubles past 3/4 load, bucket = spread hash & (size - 1), insertion order within a bucket):
    the order Kafka lists configs in DescribeConfigs. `kafka_configs.json` keeps Kafka's order,
    which this reproduces, and the dynamic broker defaults (a map of their own)."""
    keys = list(names)
    size = 16
    while len(keys) > size * 3 // 4:
        size *= 2

    def bucket(k: str) -> int:
        h = java_string_hash(k)
        return (h ^ (h >> 16)) & (size - 1)

    return sorted(keys, key=bucket)  # stable: a bucket keeps insertion order


def _entry(
    name: str,
    value: str | None,
    syns: list[tuple[str, str | None, int]],
    *,
    read_only: bool,
    sensitive: bool,
    ctype: int,
    doc: str | None,
) -> dict[str, Any]:
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "is_default": not syns or syns[0][2] == DEFAULT_CONFIG,
        "config_source": syns[0][2] if syns else DEFAULT_CONFIG,
        "is_sensitive": sensitive,
        "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in syns],
        "config_type": ctype,
        "documentation": doc,
    }


def _setting_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


def static_broker_configs(settings: Mapping[str, Any], data_dir: Path, listener: str) -> dict[str, str]:
    """The node's own settings under Kafka's names (STATIC_BROKER_CONFIG in DescribeConfigs).

    `settings` are groupshift's settings by Kafka name; only names Kafka's broker knows are
    kept, and only where they were given or differ from Kafka's default (Kafka lists the
    settings of its properties file). `log.dirs` and `listeners` are written as Kafka would.
    """
    out = {"broker.id": "", "node.id": "", "log.dirs": str(data_dir.resolve())}
    for name, value in settings.items():
        if name in BROKER_DEFS and value is not None and name not in ("log.dirs", "listeners"):
            text = _setting_text(value)
            if text != BROKER_DEFS[name].default:
                out[name] = text
    out["node.id"] = out["broker.id"] = _setting_text(settings.get("node.id", 0))
    out["listeners"] = out["advertised.listeners"] = (
        listener if "://" in listener else f"PLAINTEXT://{listener}"
    )
    out["process.roles"] = "broker,controller"  # one node that is its own cluster
    out["offsets.topic.replication.factor"] = "1"  # and keeps one copy of the group logs
    return out


def broker_value_error(name: str, raw: str | None) -> tuple[ErrorCode, str] | None:
    """Kafka's answer to setting broker config `name` dynamically, or None if it is accepted."""
    d = BROKER_DEFS.get(name)
    if d is None:
        return None  # Kafka stores unknown names (custom configs) as they are
    if raw is None:
        return ErrorCode.invalid_request, f"Null value not supported for : {name}"
    try:
        parse_value(name, d.type, raw)
    except ConfigValueError as e:
        return ErrorCode.invalid_request, e.message
    return None
