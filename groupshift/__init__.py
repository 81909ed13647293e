"""groupshift: a Kafka consumer-group migration and compatibility gateway.

This package holds only the version and the `groupshift` command; the layers are the top-level
packages `protocol`, `records`, `engine`, `translation`, `gateway`, `tools` and `harness`
(see docs/architecture.md).
"""

__version__ = "0.1.0"


def build_kind() -> str:
    """Which build is running: "compiled (mypyc)" when the engine is a C extension (setup.py's
    GROUPSHIFT_COMPILE=1 wheel), else "pure Python"; `--version` says it so benchmark figures
    cannot be attributed to the wrong build. Finds the module without importing it: `--version`
    stays as cheap as it was."""
    from importlib.util import find_spec

    spec = find_spec("engine.shard")
    origin = spec.origin if spec is not None else None
    return "compiled (mypyc)" if origin is not None and not origin.endswith(".py") else "pure Python"
