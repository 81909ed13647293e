"""The optional compiled build (issue 30 point 1): `GROUPSHIFT_COMPILE=1 pip install .`.

Without GROUPSHIFT_COMPILE (README command 1, CI, the image) this adds nothing to pyproject.toml's
build: a pure-Python wheel or editable install that needs no C compiler. With it, mypyc compiles
the coordinator's hot path into C extensions inside the wheel, the same sources, type-checked with
the same `mypy --strict` settings (pyproject's [tool.mypy]). Whole packages are compiled together
because the gain comes from native calls and native attribute access between compiled classes: a
few compiled modules calling interpreted ones measured no faster end to end (docs/benchmarks.md).

Never build this in place (`build_ext --inplace`): a compiled module next to its .py shadows the
source, and an editable install would then run stale code. `scripts/compiled_tests.sh` builds the
wheel into its own virtual environment.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from setuptools import setup

# Interpreted even in the compiled build, with the reason mypyc refuses them or gains nothing:
NOT_COMPILED = {
    # a pydantic model: mypyc's C for pydantic's generated class does not build, and settings
    # are read once at start, not per request
    "engine/config.py",
    # IntEnum members used as ints throughout: mypyc's int conversion of them does not build; the
    # codes are constants, looked up not computed
    "engine/errors.py",
    # MetadataImage keeps weak references to older images (its delta cache): mypyc's native classes
    # take none (`cannot create weak reference`) without mypy_extensions at run time
    "engine/metadata.py",
}


def compiled_modules() -> list[str]:
    """The files mypyc compiles: the engine package, and the gateway's request path around it."""
    root = Path(__file__).parent
    files = sorted(str(p.relative_to(root)) for p in (root / "engine").rglob("*.py"))
    files += [
        "gateway/connection.py",
        "gateway/dispatch.py",
        # compiled because it subclasses gateway/connection.py's KafkaConnection: in a mypyc
        # build an interpreted class cannot subclass a compiled one (tests/test_compiled_boundary.py)
        "gateway/tls_connection.py",
        *sorted(str(p.relative_to(root)) for p in (root / "gateway" / "groups").glob("*.py")),
        # the same, for its subclass of gateway/groups/streams_apis.py's StreamsApis
        "gateway/upstream/streams_topics.py",
        "protocol/codec.py",
        # the hand-written readers of steady heartbeats the dispatcher calls per request
        "protocol/heartbeat_wire.py",
    ]
    extra = os.environ.get("GROUPSHIFT_COMPILE_ONLY")  # a subset, to find what mypyc refuses
    if extra:
        files = [f for f in files if any(f.startswith(prefix) for prefix in extra.split(","))]
    return [f for f in files if f not in NOT_COMPILED]


COMPILED_BUILD = "build/mypyc"
ext_modules = []
options: dict[str, dict[str, str]] = {}
# Not for the metadata step (`dist_info`), which pip runs before the build: mypyc would run twice.
if os.environ.get("GROUPSHIFT_COMPILE") == "1" and not {"dist_info", "egg_info"} & set(sys.argv):
    from mypyc.build import mypycify

    # Its own build directory, emptied first: setuptools copies whatever build/lib holds into the
    # wheel, so a module compiled by an earlier build and left interpreted since (or a pure build
    # after a compiled one) would otherwise ship a stale extension that shadows its .py.
    shutil.rmtree(COMPILED_BUILD, ignore_errors=True)
    ext_modules = mypycify(
        compiled_modules(),
        opt_level=os.environ.get("GROUPSHIFT_OPT_LEVEL", "3"),
        target_dir=f"{COMPILED_BUILD}/c",
    )
    options = {"build": {"build_base": COMPILED_BUILD}}

setup(ext_modules=ext_modules, options=options)
