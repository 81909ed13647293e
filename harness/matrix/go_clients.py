"""The Go verifiable consumers of `groupshift matrix`: built from source with `go build`, cached.

Go fleets mostly run franz-go (github.com/twmb/franz-go), whose client speaks KIP-848's
`ConsumerGroupHeartbeat` (opted into with `kgo.ServerSideBalancer()`, Kafka 4.0+ brokers), so it is
a client family of its own next to Java's KafkaConsumer and librdkafka; Sarama (github.com/IBM/sarama)
is the other Go client fleets run (classic protocol only: it has no KIP-848 consumer). Their
verifiable consumers (harness/matrix/clients/go/franzgo and .../sarama, sharing package vc) print the
JSON-lines events of Kafka's `VerifiableConsumer` and take the flags of both VerifiableConsumer and
harness/matrix/clients/verifiable_consumer.py.

Binaries are never committed: `go_client_binary(spec)` builds one into
`~/.cache/groupshift/matrix/go/` (or `$GROUPSHIFT_MATRIX_CACHE/go/`) named by a hash of the
sources, go.mod/go.sum, the requested library version and the Go toolchain, so an edit rebuilds
and an unchanged tree never does. The version go.mod pins is in `GO_LIBRARIES` (`pinned` names
it); another version is built from a scratch copy of the module after `go get` of that version (only the Go
module proxy is used), and fails with go's own message if that release lacks an API the client
uses. Static (`CGO_ENABLED=0`), so the same file runs in a container of any base.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from harness.matrix.runtime import ClientSpec

GO_SOURCES = Path(__file__).resolve().parent / "clients" / "go"
#: library name (the matrix's `library` dimension) -> the main package under GO_SOURCES, the Go
#: module whose version `ClientSpec.version` names, and the version go.mod pins.
GO_LIBRARIES: dict[str, tuple[str, str, str]] = {
    "franz-go": ("franzgo", "github.com/twmb/franz-go", "1.22.2"),
    "sarama": ("sarama", "github.com/IBM/sarama", "1.61.1"),
}
#: Versions that mean "what go.mod pins".
PINNED = ("pinned", "installed", "newest")


class GoUnavailable(RuntimeError):
    """No Go toolchain, or the build failed; the message says which and why."""


def go_cache_dir() -> Path:
    base = os.environ.get("GROUPSHIFT_MATRIX_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "groupshift" / "matrix") / "go"


def go_tool() -> str:
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if go is None:
        raise GoUnavailable("no `go` on PATH (Go 1.26+ builds the Go verifiable consumers)")
    return go


def go_version(go: str) -> str:
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, timeout=60, check=False)
    return out.stdout.strip()


def _go_env() -> dict[str, str]:
    # GOTOOLCHAIN=local: never download a toolchain; GOFLAGS=-mod=mod: go.sum may gain entries
    # for a non-pinned version in the scratch copy.
    return {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}


def source_digest(package: str) -> str:
    """Hash of what the binary is built from (go.mod, go.sum and the package's .go files)."""
    h = hashlib.sha256()
    packages = (package, "vc")  # vc: the shared command line and events
    files = [GO_SOURCES / "go.mod", GO_SOURCES / "go.sum"]
    files += [f for p in packages for f in sorted((GO_SOURCES / p).glob("*.go"))]
    for f in files:
        h.update(f.relative_to(GO_SOURCES).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def go_client_binary(spec: ClientSpec) -> Path:
    """The built verifiable consumer for `spec` (e.g. ClientSpec("franz-go", "1.22.2")).

    Builds it on first use (about a minute on a cold Go module cache, a few seconds warm); safe
    to call from concurrent runners (an exclusive file lock; the binary is renamed into place).
    """
    if spec.library not in GO_LIBRARIES:
        raise ValueError(f"no Go verifiable consumer for {spec.library!r} (known: {sorted(GO_LIBRARIES)})")
    package, module, pinned = GO_LIBRARIES[spec.library]
    version = pinned if spec.version in PINNED else spec.version.removeprefix("v")
    go = go_tool()
    key = hashlib.sha256(f"{source_digest(package)} {module}@{version} {go_version(go)}".encode()).hexdigest()
    out_dir = go_cache_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    binary = out_dir / f"{package}-{version}-{key[:16]}"
    if binary.exists():
        return binary
    with open(out_dir / f"{package}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.exists():
            return binary
        with tempfile.TemporaryDirectory(prefix="groupshift-go-") as scratch:
            src = GO_SOURCES
            if version != pinned:
                src = Path(scratch) / "src"
                shutil.copytree(GO_SOURCES, src)
                _run(go, ["get", f"{module}@v{version}"], src)
            partial = Path(scratch) / "binary"
            _run(go, ["build", "-trimpath", "-o", str(partial), f"./{package}"], src)
            shutil.move(str(partial), str(binary))
        for stale in out_dir.glob(f"{package}-*"):  # older builds of this client
            if stale != binary and not stale.name.endswith(".lock"):
                stale.unlink(missing_ok=True)
    return binary


def go_argv(argv: Sequence[str]) -> list[str]:
    """The Go client's arguments from the runner's command line for a Python client.

    The runner may hand every non-Java client the command line of
    harness/matrix/clients/verifiable_consumer.py (a script path, then flags): the Go clients take
    the same flags, so a leading script path is dropped and the rest passed through.
    """
    args = list(argv)
    if args and args[0].endswith(".py"):
        args = args[1:]
    return args


def go_command(spec: ClientSpec, argv: Sequence[str]) -> list[str]:
    """What the process runtime runs for a Go client: the built binary and its arguments."""
    return [str(go_client_binary(spec)), *go_argv(argv)]


def _run(go: str, args: list[str], cwd: Path) -> None:
    proc = subprocess.run(
        [go, *args], cwd=cwd, env=_go_env(), capture_output=True, text=True, timeout=900, check=False
    )
    if proc.returncode != 0:
        raise GoUnavailable(f"go {' '.join(args)} failed in {cwd}:\n{proc.stderr[-3000:]}")
