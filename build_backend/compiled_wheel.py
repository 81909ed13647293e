"""The build backend: setuptools', plus mypyc's build requirements when GROUPSHIFT_COMPILE=1.

pyproject.toml's `requires` is one static list for every build, and the default build must not
pull mypy (nor need a compiler). Asking for mypy and the type information mypyc reads (the runtime
dependencies: pydantic's mypy plugin, structlog's annotations) only for the compiled build keeps
`pip install .` as it was. See setup.py.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (the PEP 517 hooks we do not change)

# What mypyc needs besides setuptools: mypy itself (the major version the sources are checked with
# in CI) and, because mypy follows the compiled modules' imports, the project's runtime dependencies.
MYPYC = "mypy>=2.0,<3"


def _runtime_dependencies() -> list[str]:
    with (Path(__file__).parent.parent / "pyproject.toml").open("rb") as f:
        dependencies: list[str] = tomllib.load(f)["project"]["dependencies"]
    return dependencies


def get_requires_for_build_wheel(config_settings: dict[str, object] | None = None) -> list[str]:
    if os.environ.get("GROUPSHIFT_COMPILE") == "1":
        # Not setuptools' hook: it runs setup.py, which imports mypyc, not installed yet.
        return ["wheel", MYPYC, *_runtime_dependencies()]
    requires: list[str] = _setuptools.get_requires_for_build_wheel(config_settings)
    return requires
