"""groupshift: a Kafka consumer-group migration and compatibility gateway.

This package holds only the version and the `groupshift` command; the layers are the top-level
packages `protocol`, `records`, `engine`, `translation`, `gateway`, `tools` and `harness`
(see docs/architecture.md).
"""

__version__ = "0.1.0"


def build_kind() -> str:
    """Which build is running: "compiled (mypyc)" when the engine is a C extension (setup.py's
    GROUPSHIFT_COMPILE=1 wheel), else "pure Python"; `--version` says it so benchmark figures
    cannot be attributed to the wrong build. Looks for the extension without importing anything: `--version`
    stays as cheap as it was."""
    import os
    from importlib.machinery import EXTENSION_SUFFIXES
    from importlib.util import find_spec

    spec = find_spec("engine")  # a top-level name: found, not imported
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        if any(os.path.exists(os.path.join(location, "shard" + suffix)) for suffix in EXTENSION_SUFFIXES):
            return "compiled (mypyc)"
    return "pure Python"
