"""Client images for the docker runtime, built locally from the OS's own packages; nothing pulled.

Layers, each an image tagged by a hash of everything it is made from (its parent's tag, its recipe,
the inputs it copies), so an existing tag means "already built" and a rebuild is skipped:

- `groupshift-matrix/base`: a Debian root made by `debootstrap --variant=minbase` from the suite
  and mirror the host's own apt sources name, imported as a tarball (`docker import`). Debootstrap
  rather than a root assembled from the host's /usr: the host's /usr is several GB of toolchains
  and its Python is not a Debian package, while a minbase root is ~200 MB, reproducible from the
  package archive alone, and has apt, so the layers above are plain `apt-get install`s.
- `groupshift-matrix/python`: base + Debian's python3 and python3-venv (Python 3.11, the
  project's version).
- `groupshift-matrix/py-<library>-<version>`: a virtualenv at /opt/client with that library
  version from PyPI (`pip_requirements`, the same rule as the process runtime).
- `groupshift-matrix/jdk`: base + Debian's openjdk-17-jre-headless.
- `groupshift-matrix/java-<version>`: jdk + that release's Kafka client tools jars (the
  `harness.kafka_dist` cache, copied in; never committed) at /opt/kafka/libs and stderr logging.
- `groupshift-matrix/go-<package>-<version>`: base + the static Go verifiable consumer binary
  (harness.matrix.go_clients) at /opt/client/<package>.

Layers above the base are made by running the recipe in a container of the parent image with host
networking (the registries the host reaches) and committing it; apt's and pip's download caches
are host directories under `~/.cache/groupshift/docker/` mounted into those build containers, so
a rebuild after a recipe change downloads nothing again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.kafka_dist.log4j import TOOL_LOG4J1_STDERR, TOOL_LOG4J2_STDERR
from harness.matrix.docker_engine import engine_home
from harness.matrix.runtime import ClientSpec

#: Bump to rebuild every image (a recipe change that the hashed inputs do not show).
RECIPE_VERSION = "2"
# Builds of one image repository kept besides the newest (see ImageBuilder._drop_stale).
KEEP_OLDER_BUILDS = 3
PYTHON_LIBRARIES = ("kafka-python", "aiokafka", "confluent-kafka")
APT_INSTALL = (
    "set -e; apt-get update -q; "
    "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends {packages}; "
    "rm -rf /var/lib/apt/lists/*"
)
BASE_CHANGES = [
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
]
JAVA_LOGGING = [
    "-Dlog4j2.configurationFile=/opt/kafka/log4j2.properties",
    "-Dlog4j.configuration=file:/opt/kafka/log4j.properties",
]


class ImageBuildError(RuntimeError):
    """A layer's recipe failed; the message has its output's tail."""


def pip_requirements(client: ClientSpec) -> list[str]:
    """`2.0.2` pins exactly, `2.2` or `2.2.x` takes the newest 2.2 release, `newest` the newest,
    `installed` the release this interpreter has (so both runtimes run the same one)."""
    v = client.version
    if v == "installed":
        # the process runtime's `installed` is the runner's own interpreter's copy: pin that release
        try:
            v = importlib.metadata.version(client.library)
        except importlib.metadata.PackageNotFoundError:
            v = "newest"
    if v == "newest":
        req = client.library
    else:
        v = v.removesuffix(".x")
        req = f"{client.library}=={v}" if v.count(".") >= 2 else f"{client.library}=={v}.*"
    reqs = [req]
    if client.library == "aiokafka" and client.version.startswith("0.8"):
        reqs.append("kafka-python==2.0.2")  # what aiokafka 0.8 was written against
    return reqs


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join((RECIPE_VERSION, *parts)).encode()).hexdigest()[:16]


def _tag_part(text: str) -> str:
    return re.sub(r"[^a-z0-9_.-]", "-", text.lower())


def host_debian() -> tuple[str, str]:
    """(suite, mirror) of the host's own apt sources, so the image matches what the host trusts."""
    suite = "bookworm"
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("VERSION_CODENAME="):
                suite = line.split("=", 1)[1].strip('"') or suite
    mirror = os.environ.get("GROUPSHIFT_DEBIAN_MIRROR", "")
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in sources if not mirror else []:
        with contextlib.suppress(OSError):
            for line in path.read_text().splitlines():
                line = line.strip()
                m = re.match(r"URIs:\s*(\S+)", line) or re.match(
                    r"deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+" + suite + r"\s", line
                )
                if m and "security" not in m.group(1):
                    mirror = m.group(1)
                    break
        if mirror:
            break
    if not mirror:
        raise ImageBuildError("no Debian mirror in the host's apt sources; set GROUPSHIFT_DEBIAN_MIRROR")
    return suite, mirror


def build_network_settings() -> tuple[dict[str, str], dict[str, str]]:
    """Environment and read-only mounts that let a build container reach what the host reaches.

    The host may sit behind a proxy or a TLS-inspecting egress whose CA only its own trust store
    holds: the host's proxy and pip settings are passed through, and its CA bundle is mounted
    (never copied into an image) as pip's and OpenSSL's bundle; a host wheel directory named
    by PIP_FIND_LINKS is mounted too. Returns (environment, {host path: path inside}).
    """
    env: dict[str, str] = {}
    mounts: dict[str, str] = {}
    for key in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "PIP_TRUSTED_HOST",
    ):
        for name in (key, key.lower()):
            if name in os.environ:
                env[name] = os.environ[name]
    bundle = next(
        (
            os.environ[k]
            for k in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
            if os.environ.get(k) and Path(os.environ[k]).is_file()
        ),
        "/etc/ssl/certs/ca-certificates.crt",
    )
    if Path(bundle).is_file():
        # a directory mount (a copy of the bundle): file mounts over image files are refused
        trust = engine_home() / "cache" / "host-ca"
        trust.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(bundle, trust / "ca.crt")
        mounts[str(trust)] = "/run/groupshift-host-ca"
        env.update(PIP_CERT="/run/groupshift-host-ca/ca.crt", SSL_CERT_FILE="/run/groupshift-host-ca/ca.crt")
    links = os.environ.get("PIP_FIND_LINKS", "")
    if links.startswith("/") and Path(links).is_dir():
        mounts[links] = links
        env["PIP_FIND_LINKS"] = links
    return env, mounts


@contextlib.contextmanager
def _file_lock(name: str) -> Iterator[None]:
    locks = engine_home() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


class ImageBuilder:
    """Builds (or finds) the image of each client; `timings` records seconds per image built."""

    def __init__(self, client: Any) -> None:
        self.docker = client
        self.home = engine_home()
        self.timings: dict[str, float] = {}
        self._lock = threading.Lock()

    # -- plumbing ---------------------------------------------------------------------------

    def exists(self, image: str) -> bool:
        import docker.errors

        try:
            self.docker.images.get(image)
            return True
        except docker.errors.ImageNotFound:
            return False

    def _once(self, image: str, build: Any) -> str:
        """Run `build()` unless `image` exists; one builder at a time per image, across processes."""
        if self.exists(image):
            return image
        with _file_lock(_tag_part(image.replace("/", "_").replace(":", "_"))):
            if not self.exists(image):
                import time

                t0 = time.monotonic()
                build()
                with self._lock:
                    self.timings[image] = round(time.monotonic() - t0, 1)
                self._drop_stale(image)
        return image

    def build_once(self, image: str, build: Any) -> str:
        """`_once` for an image whose recipe lives elsewhere (harness.gateway_image): the same
        existence check, cross-process lock, timing and removal of the repository's older tags."""
        return self._once(image, build)

    def _drop_stale(self, image: str) -> None:
        """Remove the older tags of `image`'s repository: older builds of the same layer, beyond
        the `KEEP_OLDER_BUILDS` newest. Those are kept because several checkouts of the project
        (git worktrees, a CI clone beside a working copy) build different tags of one repository
        on one engine, and each would otherwise evict the others' images and rebuild its own on
        every run. An old image still under a newer one (or used by a container) is refused by
        the engine and kept."""
        import docker.errors

        repository = image.rsplit(":", 1)[0]
        older = [old for old in self.docker.images.list(name=repository) if image not in old.tags]
        older.sort(key=lambda old: str(old.attrs.get("Created", "")), reverse=True)
        for old in older[KEEP_OLDER_BUILDS:]:
            for tag in old.tags:
                with contextlib.suppress(docker.errors.APIError):
                    self.docker.images.remove(tag, noprune=False)

    def _run_and_commit(
        self, parent: str, script: str, image: str, mounts: dict[str, str] | None = None
    ) -> None:
        repository, tag = image.rsplit(":", 1)
        from docker.types import Mount

        # HostConfig mounts only: `volumes=` would also declare each target a VOLUME in the
        # container's config, which the commit would carry into the image.
        binds = [Mount(inside, host, type="bind") for host, inside in (mounts or {}).items()]
        for host in mounts or {}:
            Path(host).mkdir(parents=True, exist_ok=True)
        environment, trust = build_network_settings()
        binds += [Mount(inside, host, type="bind", read_only=True) for host, inside in trust.items()]
        container = self.docker.containers.run(
            parent,
            ["sh", "-c", script],
            network_mode="host",
            detach=True,
            mounts=binds,
            environment=environment,
        )
        try:
            status = container.wait(timeout=1800)["StatusCode"]
            if status != 0:
                output = container.logs().decode(errors="replace")
                raise ImageBuildError(f"building {image} failed (exit {status}):\n{output[-3000:]}")
            container.commit(repository=repository, tag=tag, changes=BASE_CHANGES)
        finally:
            container.remove(force=True)

    def _copy_and_commit(
        self, parent: str, files: dict[str, bytes | Path], image: str, modes: dict[str, int]
    ) -> None:
        """`files` maps a path in the image to bytes or a host file/directory to copy there."""
        repository, tag = image.rsplit(":", 1)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for inside, source in files.items():
                arcname = inside.lstrip("/")
                if isinstance(source, Path):
                    tar.add(source, arcname=arcname)
                else:
                    info = tarfile.TarInfo(arcname)
                    info.size = len(source)
                    info.mode = modes.get(inside, 0o644)
                    tar.addfile(info, io.BytesIO(source))
        container = self.docker.containers.create(parent, ["true"])
        try:
            container.put_archive("/", buf.getvalue())
            container.commit(repository=repository, tag=tag, changes=BASE_CHANGES)
        finally:
            container.remove(force=True)

    def _apt_layer(self, parent: str, name: str, packages: str) -> str:
        image = f"groupshift-matrix/{name}:{_digest(parent, packages)}"
        apt_cache = str(self.home / "cache" / "apt-archives")
        return self._once(
            image,
            lambda: self._run_and_commit(
                parent, APT_INSTALL.format(packages=packages), image, {apt_cache: "/var/cache/apt/archives"}
            ),
        )

    # -- layers -----------------------------------------------------------------------------

    def base(self) -> str:
        suite, mirror = host_debian()
        image = f"groupshift-matrix/base:{_digest('debootstrap', 'minbase', suite, mirror)}"
        return self._once(image, lambda: self._debootstrap(image, suite, mirror))

    def _debootstrap(self, image: str, suite: str, mirror: str) -> None:
        if shutil.which("debootstrap") is None:
            if os.geteuid() != 0:
                raise ImageBuildError("debootstrap is not installed and installing it needs root")
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "debootstrap"]
            if subprocess.run(cmd, capture_output=True, env=env, timeout=600, check=False).returncode != 0:
                subprocess.run(
                    ["apt-get", "update", "-q"], capture_output=True, env=env, timeout=600, check=False
                )
                subprocess.run(cmd, capture_output=True, env=env, timeout=600, check=True)
        cache = self.home / "cache" / "debootstrap"
        cache.mkdir(parents=True, exist_ok=True)
        build = self.home / "build"
        build.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=build, prefix="base-") as scratch:
            root = Path(scratch) / "root"
            proc = subprocess.run(
                ["debootstrap", "--variant=minbase", f"--cache-dir={cache}", suite, str(root), mirror],
                capture_output=True,
                text=True,
                timeout=1800,
                check=False,
            )
            if proc.returncode != 0:
                log = root / "debootstrap" / "debootstrap.log"
                detail = log.read_text(errors="replace")[-2000:] if log.exists() else proc.stderr[-2000:]
                raise ImageBuildError(f"debootstrap {suite} failed:\n{proc.stdout[-1000:]}\n{detail}")
            tarball = Path(scratch) / "root.tar"
            subprocess.run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(tarball), "."], check=True)
            repository, tag = image.rsplit(":", 1)
            with open(tarball, "rb") as f:
                self.docker.api.import_image_from_data(
                    f, repository=repository, tag=tag, changes=BASE_CHANGES
                )
            if not self.exists(image):
                raise ImageBuildError(f"docker import of the {suite} root did not create {image}")

    def python_base(self) -> str:
        return self._apt_layer(self.base(), "python", "python3 python3-venv")

    def jdk_base(self) -> str:
        return self._apt_layer(self.base(), "jdk", "openjdk-17-jre-headless")

    def python_client(self, client: ClientSpec) -> str:
        parent = self.python_base()
        reqs = pip_requirements(client)
        image = f"groupshift-matrix/py-{_tag_part(client.key)}:{_digest(parent, *reqs)}"
        quoted = " ".join(f"'{r}'" for r in reqs)
        script = (
            "set -e; python3 -m venv /opt/client; "
            f"/opt/client/bin/pip install -q --disable-pip-version-check {quoted}"
        )
        pip_cache = str(self.home / "cache" / "pip")
        return self._once(
            image, lambda: self._run_and_commit(parent, script, image, {pip_cache: "/root/.cache/pip"})
        )

    def java_client(self, client: ClientSpec) -> tuple[str, Any]:
        """The image and the host-side `JavaClients` (for the tool's main class) of a release."""
        from harness.kafka_dist.java_clients import java_clients

        clients = java_clients(client.version)
        parent = self.jdk_base()
        jars = clients.dist.jars()
        inputs = [f"{j.name}:{j.stat().st_size}" for j in jars]
        digest = _digest(parent, TOOL_LOG4J2_STDERR, *inputs)
        image = f"groupshift-matrix/java-{_tag_part(clients.version)}:{digest}"
        files: dict[str, bytes | Path] = {f"/opt/kafka/libs/{j.name}": j for j in jars}
        files["/opt/kafka/log4j2.properties"] = TOOL_LOG4J2_STDERR.encode()
        files["/opt/kafka/log4j.properties"] = TOOL_LOG4J1_STDERR.encode()
        self._once(image, lambda: self._copy_and_commit(parent, files, image, {}))
        return image, clients

    def go_client(self, client: ClientSpec) -> tuple[str, str]:
        """The image and the binary's path inside it."""
        from harness.matrix.go_clients import go_client_binary

        binary = go_client_binary(client)
        parent = self.base()
        package = binary.name.split("-")[0]
        image = f"groupshift-matrix/go-{_tag_part(client.key)}:{_digest(parent, binary.name)}"
        inside = f"/opt/client/{package}"
        self._once(
            image,
            lambda: self._copy_and_commit(parent, {inside: binary.read_bytes()}, image, {inside: 0o755}),
        )
        return image, inside
