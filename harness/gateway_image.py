"""The gateway image `groupshift/gateway:<hash>`: deploy/image/Dockerfile built on the matrix's
local Python layer, from this checkout, with nothing pulled from an image registry.

`python -m harness.gateway_image build` prints the image's tag (building it unless that tag
exists); `python -m harness.gateway_image context DIR` writes the build context (Dockerfile,
entrypoint.py, wheels/) for a plain `docker build` (docs/deployment.md).

Two steps, both on the engine of harness.matrix.docker_engine and through the layer cache of
harness.matrix.docker_images:

1. **Wheels.** The wheels of groupshift's dependencies (pyproject.toml's `[project].dependencies`)
   are made once per dependency list and kept (`dependency_wheels`); groupshift's own wheel is
   made from a copy of the checkout's packages (the ones `tool.setuptools.packages.find`
   includes, plus pyproject.toml and README.md) at every build. The dependencies' by `pip wheel`
   in a container of the `groupshift-matrix/python` layer with host networking and the matrix's
   pip download cache mounted, so they are for the image's own Python and platform whatever
   interpreter runs this; groupshift's (pure Python, py3-none-any) by this interpreter's pip. A
   copy rather than the checkout itself: setuptools builds in the source tree and would reuse a
   stale `build/` there.
2. **Image.** `docker build` of deploy/image with that layer as PYTHON_IMAGE and `--network none`:
   the Dockerfile installs from wheels/ only, so the build cannot reach a registry of any kind.
   The dependencies' layer comes first and its input bytes are the same from build to build, so
   the engine's build cache reuses it and a changed checkout rebuilds only groupshift's layer.

The tag is a hash of the parent layer's tag, the Dockerfile, the entrypoint and every copied
source file: an unchanged checkout finds its image and builds nothing; older
`groupshift/gateway` tags are removed once a new one is built (as the matrix's layers).
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.matrix.docker_engine import Engine, EngineUnavailable, engine_home, ensure_engine
from harness.matrix.docker_images import ImageBuilder, ImageBuildError, build_network_settings

REPO = Path(__file__).resolve().parent.parent
#: Where a checkout keeps the image's Dockerfile and entrypoint.py (relative to the checkout: the
#: image of `repo` is built from `repo`'s own recipe, also when this module runs from a wheel).
IMAGE_SOURCES = Path("deploy") / "image"
REPOSITORY = "groupshift/gateway"
#: Bump to rebuild the image when something the hash does not cover changes.
RECIPE_VERSION = "1"
#: Seconds for each step (a cold pip cache downloads ~40 MB of wheels).
STEP_TIMEOUT = 1200
#: The files of a checkout besides its packages that its wheel is made from: the build
#: backend pyproject.toml names (`backend-path`) and the setup.py it runs are needed to build
#: the wheel at all, even the pure one.
PROJECT_FILES = ("pyproject.toml", "README.md", "setup.py")
PROJECT_DIRS = ("build_backend",)


def package_files(repo: Path = REPO) -> Iterator[Path]:
    """The files of `repo` that go into groupshift's wheel, relative, in a stable order."""
    for name in PROJECT_FILES:
        if (repo / name).exists():  # pyproject.toml and README.md always; setup.py if the project has one
            yield Path(name)
    for directory in PROJECT_DIRS:
        for path in sorted((repo / directory).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path.relative_to(repo)
    pyproject = tomllib.loads((repo / "pyproject.toml").read_text())
    include: list[str] = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    for top in sorted(p for p in repo.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        if not any(fnmatch.fnmatch(top.name, pattern) for pattern in include):
            continue
        for path in sorted(top.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                yield path.relative_to(repo)


def image_tag(parent: str, repo: Path = REPO) -> str:
    """`groupshift/gateway:<hash of the parent layer, the recipe and the sources>`."""
    h = hashlib.sha256(f"{RECIPE_VERSION}\0{parent}\0".encode())
    for name in ("Dockerfile", "entrypoint.py"):
        h.update(name.encode() + b"\0" + (repo / IMAGE_SOURCES / name).read_bytes() + b"\0")
    for rel in package_files(repo):
        h.update(str(rel).encode() + b"\0" + (repo / rel).read_bytes() + b"\0")
    return f"{REPOSITORY}:{h.hexdigest()[:16]}"


def dependency_requirements(repo: Path = REPO) -> str:
    """pyproject.toml's `[project].dependencies`, one a line: what the dependency wheels are for."""
    pyproject = tomllib.loads((repo / "pyproject.toml").read_text())
    return "".join(f"{line}\n" for line in pyproject["project"]["dependencies"])


def dependency_wheels(builder: ImageBuilder, parent: str, repo: Path = REPO) -> Path:
    """A directory of the wheels of groupshift's dependencies for `parent`'s Python, with the
    requirements.txt they were made from; made once per (parent, requirements) and kept under the
    engine's cache, so the same bytes go into every context and the engine's build cache keeps the
    image's dependency layer while pyproject.toml's dependencies stay the same."""
    requirements = dependency_requirements(repo)
    key = hashlib.sha256(f"{RECIPE_VERSION}\0{parent}\0{requirements}".encode()).hexdigest()[:16]
    root = engine_home() / "cache" / "gateway-wheels"
    target = root / key
    if (target / "requirements.txt").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=root, prefix=".making-"))
    try:
        (scratch / "requirements.txt").write_text(requirements)
        script = (
            "set -e; python3 -m venv /tmp/wheel-builder; "
            "/tmp/wheel-builder/bin/pip wheel --quiet --disable-pip-version-check "
            "--wheel-dir /out -r /out/requirements.txt"
        )
        _run(builder, parent, script, {_pip_cache(): "/root/.cache/pip", scratch: "/out"})
        try:
            scratch.rename(target)
        except OSError:  # another builder made it first: theirs has the same wheels
            shutil.rmtree(scratch)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    for old in root.iterdir():  # the wheels of older dependency lists
        if old.name != key and not old.name.startswith("."):
            shutil.rmtree(old, ignore_errors=True)
    return target


def _pip_cache() -> Path:
    """The matrix's pip download cache (harness.matrix.docker_images mounts the same one)."""
    cache = engine_home() / "cache" / "pip"
    cache.mkdir(parents=True, exist_ok=True)
    return cache


def write_context(builder: ImageBuilder, parent: str, dest: Path, repo: Path = REPO) -> None:
    """Fill `dest` with the build context (step 1): the Dockerfile, entrypoint.py,
    wheels/dependencies/ (dependency_wheels) and wheels/groupshift/ (groupshift's own wheel)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Dockerfile", "entrypoint.py"):
        shutil.copyfile(repo / IMAGE_SOURCES / name, dest / name)
    shutil.copytree(dependency_wheels(builder, parent, repo), dest / "wheels" / "dependencies")
    own = dest / "wheels" / "groupshift"
    own.mkdir(parents=True)
    scratch_root = engine_home() / "build"
    scratch_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch_root, prefix="gateway-src-") as scratch:
        source = Path(scratch) / "src"
        for rel in package_files(repo):
            (source / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(repo / rel, source / rel)
        # groupshift's wheel is pure Python (py3-none-any), the same whichever interpreter makes
        # it: this one's pip makes it, which spares a container and a venv (~15 s) per build.
        pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps"]
        made = subprocess.run(
            [*pip, "--wheel-dir", str(own), str(source)],
            capture_output=True,
            text=True,
            timeout=STEP_TIMEOUT,
            check=False,
        )
        if made.returncode != 0:
            raise ImageBuildError(f"pip wheel of groupshift failed:\n{(made.stdout + made.stderr)[-3000:]}")
    wheels = [w.name for w in own.glob("*.whl")]
    if len(wheels) != 1 or not re.fullmatch(r"groupshift-[^-]+-py3-none-any\.whl", wheels[0]):
        raise ImageBuildError(f"expected one pure-Python groupshift wheel in {own}, found {wheels}")


def _run(builder: ImageBuilder, image: str, script: str, mounts: dict[Path, str]) -> None:
    """Run `script` in a container of `image` with host networking (what the host reaches)."""
    from docker.types import Mount

    environment, trust = build_network_settings()
    binds = [Mount(inside, str(host), type="bind") for host, inside in mounts.items()]
    binds += [Mount(inside, host, type="bind", read_only=True) for host, inside in trust.items()]
    container = builder.docker.containers.run(
        image, ["sh", "-c", script], network_mode="host", detach=True, mounts=binds, environment=environment
    )
    try:
        status = container.wait(timeout=STEP_TIMEOUT)["StatusCode"]
        if status != 0:
            output = container.logs().decode(errors="replace")
            raise ImageBuildError(f"making the gateway's wheels failed (exit {status}):\n{output[-3000:]}")
    finally:
        container.remove(force=True)


def _docker_build(builder: ImageBuilder, parent: str, context: Path, image: str) -> None:
    """Step 2: the legacy builder's API (the engine needs no BuildKit), no network, no pull."""
    log: list[str] = []
    for chunk in builder.docker.api.build(
        path=str(context),
        tag=image,
        buildargs={"PYTHON_IMAGE": parent},
        network_mode="none",
        pull=False,
        rm=True,
        forcerm=True,
        decode=True,
        timeout=STEP_TIMEOUT,
    ):
        if "stream" in chunk:
            log.append(str(chunk["stream"]))
        if "error" in chunk:
            raise ImageBuildError(f"docker build of {image} failed: {chunk['error']}\n{''.join(log)[-3000:]}")
    if not builder.exists(image):
        raise ImageBuildError(f"docker build did not create {image}:\n{''.join(log)[-3000:]}")


def build_gateway_image(builder: ImageBuilder, repo: Path = REPO) -> str:
    """The tag of the gateway image of `repo`, built (with the layers under it) unless it exists;
    `builder.timings` gets the seconds of each image built."""
    parent = builder.python_base()
    image = image_tag(parent, repo)

    def build() -> None:
        scratch_root = engine_home() / "build"
        scratch_root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=scratch_root, prefix="gateway-context-") as context:
            write_context(builder, parent, Path(context), repo)
            _docker_build(builder, parent, Path(context), image)

    return builder.build_once(image, build)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.gateway_image", description=(__doc__ or "").split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("build", help="build groupshift/gateway:<hash> (unless it exists) and print its tag")
    ctx = sub.add_parser("context", help="write the build context (Dockerfile, entrypoint.py, wheels/)")
    ctx.add_argument("dir", type=Path)
    args = parser.parse_args(argv)
    try:
        engine: Engine = ensure_engine()
    except EngineUnavailable as e:
        print(f"python -m harness.gateway_image: no Docker engine: {e}", file=sys.stderr)
        return 1
    client: Any = engine.client()
    try:
        builder = ImageBuilder(client)
        if args.action == "build":
            print(build_gateway_image(builder))
        else:
            if args.dir.exists() and any(args.dir.iterdir()):
                print(f"python -m harness.gateway_image: {args.dir} is not empty", file=sys.stderr)
                return 1
            parent = builder.python_base()
            write_context(builder, parent, args.dir)
            print(f"{args.dir}: build it with --build-arg PYTHON_IMAGE={parent}")
        for image, seconds in builder.timings.items():
            print(f"built {image} in {seconds}s", file=sys.stderr)
        return 0
    except ImageBuildError as e:
        print(f"python -m harness.gateway_image: {e}", file=sys.stderr)
        return 1
    finally:
        client.close()
        engine.close()


if __name__ == "__main__":
    sys.exit(main())
