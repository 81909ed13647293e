"""The gateway image's entrypoint: `groupshift serve` with its settings taken from the environment.

Containers and Kubernetes Deployments configure a process through its environment (a pod's IP, a
Service's name, a Secret), not through a file baked into the image, so each variable
`GROUPSHIFT_SET_<NAME>=<value>` becomes one `--set <name>=<value>`: the setting's Kafka name in
upper case with each `.` written `_`, as Confluent's Kafka images spell broker settings in the
environment (`__` stands for a literal `_`, `___` for `-`). For example
`GROUPSHIFT_SET_ADVERTISED_LISTENERS=PLAINTEXT://gw.example.com:19092` is
`--set advertised.listeners=PLAINTEXT://gw.example.com:19092`. A dedicated prefix, rather than
every `GROUPSHIFT_*` variable, keeps the variables groupshift reads for itself (`GROUPSHIFT_DEBUG`)
out of the settings.

Variables are applied in name order, then the container's arguments (`docker run IMAGE --set
num.partitions=6 ...`) after them, so an argument wins over a variable (`--set`: the later wins).
Every value is validated by `serve` as any other `--set`: a bad one stops the container with
`serve`'s one-line error and exit status 2. The process is replaced by `groupshift serve`
(exec), so it is PID 1 and gets the engine's SIGTERM directly (a clean shutdown).

Standard library only: it runs before anything else and is imported by the unit tests from a
checkout (tests/test_deploy_image.py).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence

PREFIX = "GROUPSHIFT_SET_"
_UNDERSCORES = {1: ".", 2: "_", 3: "-"}


class SettingNameError(ValueError):
    """A `GROUPSHIFT_SET_` variable whose name cannot be turned into a setting name."""


def setting_name(variable: str) -> str:
    """`GROUPSHIFT_SET_ADVERTISED_LISTENERS` -> `advertised.listeners` (Confluent's spelling)."""
    body = variable[len(PREFIX) :]
    if not body or not re.fullmatch(r"[A-Za-z0-9_]+", body) or body.startswith("_") or body.endswith("_"):
        raise SettingNameError(f"{variable}: not a setting name after {PREFIX}")

    def underscores(m: re.Match[str]) -> str:
        run = len(m.group(0))
        if run not in _UNDERSCORES:
            raise SettingNameError(
                f"{variable}: {run} underscores in a row mean nothing (1: '.', 2: '_', 3: '-')"
            )
        return _UNDERSCORES[run]

    return re.sub(r"_+", underscores, body).lower()


def serve_arguments(environ: Mapping[str, str], argv: Sequence[str]) -> list[str]:
    """The arguments of `groupshift serve`: one `--set` per GROUPSHIFT_SET_ variable, then argv."""
    args = ["serve"]
    for variable in sorted(environ):
        if variable.startswith(PREFIX):
            args += ["--set", f"{setting_name(variable)}={environ[variable]}"]
    return [*args, *argv]


def main() -> None:
    try:
        args = serve_arguments(os.environ, sys.argv[1:])
    except SettingNameError as e:
        print(f"groupshift image: error: {e}", file=sys.stderr)
        sys.exit(2)
    groupshift = os.path.join(os.path.dirname(sys.executable), "groupshift")
    os.execv(groupshift, [groupshift, *args])


if __name__ == "__main__":
    main()
