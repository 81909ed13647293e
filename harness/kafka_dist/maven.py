"""Apache Kafka's jars from Maven Central, resolved once per version into the user's cache.

Kafka publishes its broker (`org.apache.kafka:kafka_2.13`, main class `kafka.Kafka`) and its
command-line tools (`org.apache.kafka:kafka-tools`) as ordinary Maven artifacts, so a reference
Kafka needs no tarball: Maven itself resolves the artifact and its transitive dependencies
(`dependency:copy-dependencies` on a small generated POM) and `~/.m2` keeps what it downloaded.

Layout: `<cache>/<version>/<component>/*.jar` plus `dist.json` (what was asked, how long it
took, how many bytes), where `<cache>` is `$GROUPSHIFT_KAFKA_CACHE`, else
`$XDG_CACHE_HOME/groupshift/kafka`, else `~/.cache/groupshift/kafka`. Components:

- `broker`: `kafka_2.13` and a logging binding, which its POM does not name (the distribution
  tarball adds it): from 4.0 on (log4j2) `log4j-slf4j-impl` + `log4j-core`, before that
  `slf4j-reload4j` (which brings `reload4j`). Without one the broker would log nothing.
- `streams`: `kafka-streams` and `kafka-tools` (a Streams application and its group tool).
- `connect`: `connect-runtime` and `connect-file` (distributed Connect workers running the
  FileStream connectors: harness/kafka_dist/connect.py).
- `clients`: `kafka-tools` (it depends on `kafka-clients`), which holds `VerifiableConsumer`,
  `VerifiableProducer` and, from 3.8 on, `ConsumerGroupCommand`; before 3.8 that command lives
  in `kafka_2.13` (`kafka.admin.ConsumerGroupCommand`), so older clients include the core jar too.

A download goes into a temporary directory that is renamed into place only when complete, under
an exclusive file lock per version and component, so two processes (two pytest sessions, CI's
pre-warm and a test) never see half a directory and never download twice.

Version specs: an exact release ("4.3.1") is used as is; a line ("4", "3.9") resolves to the
newest release of that line whose artifact Maven Central lists for *that component* (the two
artifacts are not always published together: `kafka_2.13` 4.4.0 exists while `kafka-tools` 4.4.0
does not, so "4" can mean 4.4.0 for the broker and 4.3.1 for the clients). The list comes from
Maven's own `maven-metadata.xml`, read by resolving a version range on the artifact's POM, and
is remembered for a week in `lines.json`; if Maven cannot answer, a pinned table of known-good
releases (`PINNED`) is used. A listed release that turns out not to be downloadable is skipped
for the next older one of the line.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from xml.etree import ElementTree

Component = Literal["broker", "clients", "streams", "connect"]

GROUP = "org.apache.kafka"
#: The artifact whose published versions define each component's lines.
LINE_ARTIFACT: dict[str, str] = {
    "broker": "kafka_2.13",
    "clients": "kafka-tools",
    "streams": "kafka-streams",
    "connect": "connect-file",
}
#: Binding for Kafka 4.x (log4j2 behind slf4j 1.7, which Kafka 4 still uses); the version
#: matches Kafka 4.0's own distribution.
LOG4J2_VERSION = "2.24.3"
#: Binding for Kafka 3.x (its distribution's `slf4j-reload4j`; the broker POM does not name it).
RELOAD4J_BINDING_VERSION = "1.7.36"
#: Releases per line per component verified here (started, tools run), used when Maven cannot
#: list versions.
PINNED: dict[str, dict[str, str]] = {
    "broker": {"4": "4.4.0", "4.4": "4.4.0", "3.9": "3.9.2", "3.7": "3.7.2", "2.8": "2.8.2", "2.4": "2.4.1"},
    "clients": {"4": "4.3.1", "4.3": "4.3.1", "3.9": "3.9.2", "3.7": "3.7.2"},
    "streams": {"4": "4.4.0", "4.4": "4.4.0"},
    "connect": {"4": "4.3.1", "4.3": "4.3.1"},
}
#: How long a line's resolution is trusted before Maven is asked again.
LINE_TTL_SECONDS = 7 * 24 * 3600

_RELEASE = re.compile(r"^\d+\.\d+\.\d+$")
_LINE = re.compile(r"^\d+(\.\d+)?$")


class KafkaUnavailable(RuntimeError):
    """Java or Maven is missing, or Maven could not provide the requested Kafka."""

    def __init__(self, message: str, *, tool_missing: bool = False) -> None:
        super().__init__(message)
        self.tool_missing = tool_missing


@dataclass(frozen=True)
class KafkaDist:
    """One resolved component of one Kafka release: a directory of jars."""

    version: str
    component: Component
    lib: Path
    info: dict[str, object] = field(default_factory=dict, compare=False)

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return version_key(self.version)

    @property
    def classpath(self) -> str:
        """A Java wildcard classpath (`dir/*`): every jar of the component."""
        return str(self.lib / "*")

    @property
    def home(self) -> Path:
        return self.lib.parent

    def jars(self) -> list[Path]:
        return sorted(self.lib.glob("*.jar"))

    def jar(self, artifact: str) -> Path:
        """The jar of `artifact` (e.g. "kafka-clients") at this release's version."""
        path = self.lib / f"{artifact}-{self.version}.jar"
        if not path.exists():
            raise FileNotFoundError(f"{artifact} is not part of Kafka {self.version} {self.component}")
        return path

    @property
    def uses_log4j2(self) -> bool:
        return self.version_tuple >= (4,)


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def cache_root() -> Path:
    explicit = os.environ.get("GROUPSHIFT_KAFKA_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "groupshift" / "kafka"


def tools_missing() -> str | None:
    """Why Kafka cannot be run here (no `java` or no `mvn` on PATH), or None."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not on PATH (install a JDK 17+ and Maven to run a reference Kafka)"
    return None


def _require_tools() -> None:
    reason = tools_missing()
    if reason:
        raise KafkaUnavailable(reason, tool_missing=True)


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    locks = cache_root() / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _pom(dependencies: list[tuple[str, str, str, str]]) -> str:
    deps = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version><type>{t}</type></dependency>"
        for g, a, v, t in dependencies
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>groupshift</groupId><artifactId>kafka-dist</artifactId><version>0</version>\n"
        "  <packaging>pom</packaging>\n"
        f"  <dependencies>\n{deps}\n  </dependencies>\n</project>\n"
    )


def _mvn(pom: str, goals: list[str], workdir: Path, timeout: float = 900.0) -> None:
    (workdir / "pom.xml").write_text(pom)
    log = workdir / "mvn.log"
    with open(log, "w") as out:
        try:
            proc = subprocess.run(
                ["mvn", "-B", "-q", "-f", str(workdir / "pom.xml"), *goals],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise KafkaUnavailable(f"mvn {' '.join(goals)} took over {timeout:.0f}s") from exc
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise KafkaUnavailable(f"mvn {' '.join(goals)} failed (exit {proc.returncode}):\n{tail}")


def _artifacts(version: str, component: Component) -> list[tuple[str, str, str, str]]:
    key = version_key(version)
    if component == "broker":
        deps = [(GROUP, "kafka_2.13", version, "jar")]
    elif component == "streams":
        # A Kafka Streams application's jars, plus the tools (kafka-streams-groups.sh's
        # StreamsGroupCommand) to look at its group.
        deps = [(GROUP, "kafka-streams", version, "jar"), (GROUP, "kafka-tools", version, "jar")]
    elif component == "connect":
        # A distributed Kafka Connect worker (`connect-runtime`: ConnectDistributed, its REST
        # server, WorkerCoordinator) and the built-in FileStream connectors (`connect-file`),
        # which need no external system; both on the worker's classpath, as the distribution's
        # libs/ directory puts them.
        # Both of one release: `connect-file` 4.3.1 on a 4.4.0 runtime cannot tell its version
        # (AppInfoParser moved to `common.utils.internals` in 4.4's kafka-clients), and Maven
        # Central has no `connect-file` 4.4.0 (nor `connect-mirror`), so the newest Connect
        # with a built-in connector there is 4.3.1 (PINNED).
        deps = [(GROUP, "connect-runtime", version, "jar"), (GROUP, "connect-file", version, "jar")]
    else:
        deps = [(GROUP, "kafka-tools", version, "jar")]
        if key < (3, 8):
            # Scala 2.13 builds of the core jar exist from 2.4 on; older releases: 2.12
            deps.append((GROUP, "kafka_2.13" if key >= (2, 4) else "kafka_2.12", version, "jar"))
    if key >= (4,):
        deps += [
            ("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J2_VERSION, "jar"),
            ("org.apache.logging.log4j", "log4j-core", LOG4J2_VERSION, "jar"),
        ]
    else:
        deps.append(("org.slf4j", "slf4j-reload4j", RELOAD4J_BINDING_VERSION, "jar"))
    return deps


def _coordinates(artifacts: list[tuple[str, str, str, str]]) -> list[str]:
    return [":".join(a[:3]) for a in artifacts]


def _local_repository() -> Path:
    return Path(os.environ.get("GROUPSHIFT_M2_REPOSITORY", str(Path.home() / ".m2" / "repository")))


def _line_range(line: str) -> str:
    parts = line.split(".")
    if len(parts) == 1:
        return f"[{line}.0.0,{line}.999999]"
    return f"[{line}.0,{line}.999999]"


def _listed_versions(artifact: str, line: str) -> list[str]:
    """Releases of `artifact` in `line`, newest first, from Maven's metadata.

    Resolving a version range makes Maven fetch the artifact's `maven-metadata.xml` into the
    local repository (and the POMs in the range, which are small); the file lists every
    published version.
    """
    with tempfile.TemporaryDirectory(prefix="groupshift-kafka-versions-") as tmp:
        _mvn(
            _pom([(GROUP, artifact, _line_range(line), "pom")]),
            ["-U", "dependency:resolve", "-DexcludeTransitive=true"],
            Path(tmp),
            timeout=600.0,
        )
    versions: set[str] = set()
    folder = _local_repository() / GROUP.replace(".", "/") / artifact
    for meta in folder.glob("maven-metadata-*.xml"):
        root = ElementTree.parse(meta).getroot()
        versions.update(v.text or "" for v in root.iter("version"))
    in_line = [v for v in versions if _RELEASE.match(v) and (v == line or v.startswith(line + "."))]
    return sorted(in_line, key=version_key, reverse=True)


def _lines_file() -> Path:
    return cache_root() / "lines.json"


def _read_lines() -> dict[str, dict[str, dict[str, object]]]:
    try:
        data = json.loads(_lines_file().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_lines(data: dict[str, dict[str, dict[str, object]]]) -> None:
    path = _lines_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


def line_candidates(line: str, component: Component = "broker") -> list[str]:
    """Releases of a line, newest first: from Maven's metadata (remembered for a week), else
    the versions already cached, else the pinned table."""
    refresh = os.environ.get("GROUPSHIFT_KAFKA_REFRESH") == "1"
    with _locked("lines"):
        data = _read_lines()
        entry = data.get(component, {}).get(line)
        if entry and not refresh and time.time() - float(str(entry.get("checked", 0))) < LINE_TTL_SECONDS:
            listed = entry.get("versions")
            if isinstance(listed, list) and listed:
                return [str(v) for v in listed]
        try:
            _require_tools()
            listed = _listed_versions(LINE_ARTIFACT[component], line)
        except KafkaUnavailable:
            listed = []
        if listed:
            data.setdefault(component, {})[line] = {"versions": listed, "checked": time.time()}
            _write_lines(data)
            return listed
    cached = [v for v in cached_versions(component) if v.startswith(line + ".")]
    if cached:
        return cached
    pinned = PINNED[component].get(line)
    if pinned:
        return [pinned]
    raise KafkaUnavailable(f"no Kafka release known for line {line!r} ({component})")


def _load(version: str, component: Component) -> KafkaDist | None:
    lib = cache_root() / version / component
    marker = lib / "dist.json"
    if not marker.exists():
        return None
    try:
        info = json.loads(marker.read_text())
    except ValueError:
        return None
    if not isinstance(info, dict) or info.get("artifacts") != _coordinates(_artifacts(version, component)):
        return None  # made by an older recipe (e.g. without a logging binding): fetch again
    return KafkaDist(version, component, lib, info)


def _download(version: str, component: Component) -> KafkaDist:
    final = cache_root() / version / component
    final.parent.mkdir(parents=True, exist_ok=True)
    with _locked(f"{version}-{component}"):
        done = _load(version, component)
        if done is not None:
            return done
        _require_tools()
        staging = Path(tempfile.mkdtemp(prefix=f".{component}-", dir=final.parent))
        try:
            lib = staging / "lib"
            artifacts = _artifacts(version, component)
            started = time.monotonic()
            _mvn(
                _pom(artifacts),
                ["dependency:copy-dependencies", f"-DoutputDirectory={lib}", "-DincludeScope=runtime"],
                staging,
            )
            jars = sorted(lib.glob("*.jar"))
            info: dict[str, object] = {
                "version": version,
                "component": component,
                "artifacts": _coordinates(artifacts),
                "seconds": round(time.monotonic() - started, 1),
                "bytes": sum(j.stat().st_size for j in jars),
                "jars": len(jars),
                "resolved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            (lib / "dist.json").write_text(json.dumps(info, indent=1))
            if final.exists():  # a leftover without dist.json: incomplete, replace it
                shutil.rmtree(final)
            os.rename(lib, final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    loaded = _load(version, component)
    assert loaded is not None
    return loaded


def resolve_component(spec: str, component: Component) -> KafkaDist:
    """The jars of `component` for a version spec, downloading them once (see module doc)."""
    spec = spec.strip()
    if _RELEASE.match(spec):
        cached = _load(spec, component)
        return cached if cached is not None else _download(spec, component)
    if not _LINE.match(spec):
        raise ValueError(f"bad Kafka version spec {spec!r}: use a release (4.3.1) or a line (4, 3.9)")
    errors: list[str] = []
    for version in line_candidates(spec, component)[:3]:
        cached = _load(version, component)
        if cached is not None:
            return cached
        try:
            return _download(version, component)
        except KafkaUnavailable as exc:
            if exc.tool_missing:
                raise
            errors.append(f"{version}: {exc}")
    raise KafkaUnavailable(f"no release of Kafka {spec} could be resolved:\n" + "\n".join(errors))


def resolve(spec: str) -> KafkaDist:
    """The broker of a Kafka version spec ("4", "3.9", "3.7", "4.3.1")."""
    return resolve_component(spec, "broker")


def cached_versions(component: Component = "broker") -> list[str]:
    """Releases whose `component` is complete in the cache, newest first."""
    root = cache_root()
    if not root.is_dir():
        return []
    found = [d.name for d in root.iterdir() if _RELEASE.match(d.name) and _load(d.name, component)]
    return sorted(found, key=version_key, reverse=True)


def cached_dists() -> list[KafkaDist]:
    out: list[KafkaDist] = []
    for component in ("broker", "clients", "connect"):
        for version in cached_versions(component):
            dist = _load(version, component)
            if dist is not None:
                out.append(dist)
    return sorted(out, key=lambda d: (d.version_tuple, d.component), reverse=True)
