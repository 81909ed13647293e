"""Every command `groupshift check` prints as a fix runs as printed, against the same live
server (issue "Tools that never lie and never destroy", point 5).

A live `groupshift serve` whose `group.consumer.migration.policy` refuses upgrades holds a
classic group (one member that joined and synced over the wire): `check upgrade` says NOT-READY
with the policy as the reason and prints, on a `$ ` line, the what-if check with the policy that
allows it. That command is run as a person would run it (a shell's splitting, `python -m
groupshift` for the console script): it must answer READY, exit 0. The output wraps to the
terminal width given by COLUMNS, reason and fix on lines of their own.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

from e2e.conftest import Gateways
from e2e.harness import REPO
from e2e.migration import FAST_GROUP_SETTINGS
from e2e.test_check_server import classic_group


def groupshift(argv: list[str], columns: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run(
        [sys.executable, "-m", "groupshift", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_the_printed_fix_of_a_live_server_runs_and_comes_back_ready(gateways: Gateways) -> None:
    gw = gateways.start("check-fix", sets=[*FAST_GROUP_SETTINGS, "group.consumer.migration.policy=downgrade"])
    group = classic_group(gw.bootstrap)
    r = groupshift(["check", "upgrade", "--bootstrap-server", gw.bootstrap, group], columns=72)
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = r.stdout.splitlines()
    assert f"{group}: NOT-READY" in lines
    assert any(line.startswith("  reason: group.consumer.migration.policy is downgrade") for line in lines)
    assert any(line.startswith("  fix: set group.consumer.migration.policy=bidirectional") for line in lines)
    wide = [x for x in lines if len(x) > 72 and not x.lstrip().startswith("$ ") and len(x.split()) > 1]
    assert not wide, wide
    commands = [shlex.split(x.strip()[2:]) for x in lines if x.strip().startswith("$ ")]
    assert commands == [
        ["groupshift", "check", "upgrade", "--bootstrap-server", gw.bootstrap, group, "--set",
         "group.consumer.migration.policy=bidirectional"]
    ]  # fmt: skip
    for command in commands:
        ran = groupshift(command[1:])
        assert ran.returncode == 0, (command, ran.stdout, ran.stderr)
        assert f"{group}: READY" in ran.stdout.splitlines(), ran.stdout
