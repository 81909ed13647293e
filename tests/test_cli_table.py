"""The `groupshift` command table (groupshift.cli.COMMANDS): `--version` and `--help` import no
command module, so they stay instant; every row's module builds the parser the table promises.

Module counts come from `python -X importtime` in a subprocess. The interpreter's own start-up
(`site` and the `.pth` files of the environment, e.g. an editable install's import hook) is not
counted: it is the same for every Python program and not groupshift's to change; what is counted
is what `python -m groupshift --version` imports beyond `python -c pass`. Which modules a command
line loads is read from `sys.modules` instead: `-X importtime` does not report a module imported
through `importlib.import_module` (the table's loaders), only what that module imports in turn."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from groupshift.cli import COMMANDS, Command, build_parser, command_named, main

REPO = Path(__file__).resolve().parent.parent
# The project's own top-level packages (docs/architecture.md's layers, the commands, the tests).
PROJECT = ("protocol", "records", "engine", "translation", "gateway", "tools", "harness", "sim", "tests")


def _imported(*args: str) -> list[str]:
    """The modules `python -X importtime ARGS` imports, in order."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and not line.endswith("imported package")
    ]


_LOADED = """
import sys
from groupshift.cli import main
try:
    main(sys.argv[2:])
except SystemExit:
    pass
loaded = sorted(sys.modules)
with open(sys.argv[1], "w") as f:
    f.write("\\n".join(loaded))
"""


def _loaded(tmp_path: Path, *argv: str) -> set[str]:
    """The modules in sys.modules after `groupshift ARGV`, run in a fresh interpreter."""
    out = tmp_path / "modules.txt"
    subprocess.run(
        [sys.executable, "-c", _LOADED, str(out), *argv],
        cwd=REPO,
        capture_output=True,
        timeout=60,
        check=True,
    )
    return set(out.read_text().split())


def _project(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in PROJECT or m.startswith("groupshift.commands"))


@pytest.mark.e2e
def test_version_imports_no_command_module_and_few_modules(tmp_path: Path) -> None:
    startup = set(_imported("-c", "pass"))
    added = [m for m in _imported("-m", "groupshift", "--version") if m not in startup]
    assert len(added) < 40, added
    assert _project(set(added)) == []
    assert _project(_loaded(tmp_path, "--version")) == []


@pytest.mark.e2e
def test_top_level_help_lists_every_command_without_importing_it(tmp_path: Path) -> None:
    assert _project(_loaded(tmp_path, "--help")) == []
    out = subprocess.run(
        [sys.executable, "-m", "groupshift", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    ).stdout
    rows = [line.split(None, 1) for line in out.splitlines() if line.startswith(" " * 4)]
    listed = {name: summary for name, summary in rows}
    assert listed == {c.name: c.summary for c in COMMANDS}


@pytest.mark.e2e
def test_a_named_command_imports_no_other_command_module(tmp_path: Path) -> None:
    modules = {c.name: c.load().__name__ for c in COMMANDS}  # imported here, in the test's process
    imported = _loaded(tmp_path, "records", "dump", "--help")
    assert modules["records"] in imported
    assert sorted(m for name, m in modules.items() if name != "records" and m in imported) == []


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_every_row_module_builds_the_parser_the_table_names(command: Command) -> None:
    parser = build_parser([command.name])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    real = sub.choices[command.name]
    module = command.load().__name__
    assert real.description, f"{module}.add_parser gives no description"
    assert real.get_default("run") is not None, f"{module}.add_parser sets no run"
    helps = {a.dest: a.help for a in sub._choices_actions}
    assert helps == {c.name: c.summary for c in COMMANDS}
    # The other rows are listed only: no module of theirs is needed to build this parser.
    assert all(not sub.choices[c.name]._actions[1:] for c in COMMANDS if c is not command)


@pytest.mark.parametrize("command", [c.name for c in COMMANDS])
def test_every_command_help_exits_0(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: groupshift {command} ")


def test_the_full_parser_has_every_command() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert all(sub.choices[c.name].get_default("run") is not None for c in COMMANDS)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        ([], None),
        (["--version"], None),
        (["-h"], None),
        (["serve", "--listen", "x:1"], "serve"),
        (["--help", "groups"], "groups"),
        (["--", "records", "dump", "p"], "records"),
        (["nosuch", "serve"], None),
    ],
)
def test_command_named_is_the_first_positional(argv: list[str], named: str | None) -> None:
    assert command_named(argv) == named


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2  # no command: the help, status 2
    for argv in (["nosuch"], ["serve", "--nosuch"], ["simulate", "--tolerate-known"]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 2, argv
    assert "invalid choice: 'nosuch'" in capsys.readouterr().err
