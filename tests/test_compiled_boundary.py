"""The boundary of the compiled build (setup.py, GROUPSHIFT_COMPILE=1: mypyc), checked on the
sources so that the pure build's CI sees what would break only compiled.

mypyc makes the classes of the modules it compiles native classes, and Python refuses an
interpreted subclass of one at import ("interpreted classes cannot inherit from compiled"): an
SSL listener's connection class and the upstream proxy's forwarding slot, defined in interpreted
modules as subclasses of gateway/connection.py's classes, failed every TLS connection and every
forwarded request of the compiled build while the pure build passed. The rule: a class defined
outside the compiled modules (product or tests) does not subclass a class of a compiled module;
such a subclass goes into a compiled module (gateway/tls_connection.py) or beside its base
(gateway.connection.CapturingSlot).
"""

from __future__ import annotations

import ast
import os
import re
import runpy
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import setuptools

from tests.test_import_graph import PRODUCT

ROOT = Path(__file__).resolve().parent.parent
SCANNED = (*PRODUCT, "tests")
TOP_LEVEL_CLASS = re.compile(r"^class\s+(\w+)", re.M)
CLASS_BASES = re.compile(r"^[ \t]*class\s+\w+\s*\(([^)]*)\)", re.M)
WORD = re.compile(r"\w+")


def compiled_files() -> list[str]:
    """setup.py's `compiled_modules()`, run without running setup.py (which would build): its
    `NOT_COMPILED` and the function itself, taken from its source."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    wanted = [
        n
        for n in tree.body
        if (isinstance(n, ast.FunctionDef) and n.name == "compiled_modules")
        or (isinstance(n, ast.Assign) and [ast.unparse(t) for t in n.targets] == ["NOT_COMPILED"])
    ]
    assert len(wanted) == 2, "setup.py no longer has NOT_COMPILED and compiled_modules()"
    namespace: dict[str, Any] = {"Path": Path, "os": os, "__file__": str(ROOT / "setup.py")}
    exec(compile(ast.Module(wanted, type_ignores=[]), "setup.py", "exec"), namespace)
    files: list[str] = namespace["compiled_modules"]()
    return files


def module_name(rel: str) -> str:
    name = rel.removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__")


def compiled_classes(files: list[str]) -> dict[str, set[str]]:
    """Compiled module -> the names of the classes it defines at its top level."""
    return {module_name(rel): set(TOP_LEVEL_CLASS.findall((ROOT / rel).read_text())) for rel in files}


def may_subclass(source: str, names: set[str]) -> bool:
    """Whether some class statement of `source` names one of `names` among its bases: the files
    worth parsing (parsing every file of the repository takes seconds on a CI machine)."""
    return any(set(WORD.findall(bases)) & names for bases in CLASS_BASES.findall(source))


def interpreted_subclasses(source: str, where: str, compiled: dict[str, set[str]]) -> list[str]:
    """`Class(Base)` in `source` where Base is a class of a compiled module, imported by name
    (`from m import Base`) or reached through its module (`import m` / `from pkg import m`)."""
    tree = ast.parse(source, where)
    by_name: dict[str, tuple[str, str]] = {}  # local name -> (module, class)
    modules: dict[str, str] = {}  # local name -> compiled module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                local = alias.asname or alias.name
                if alias.name in compiled.get(node.module, ()):
                    by_name[local] = (node.module, alias.name)
                elif f"{node.module}.{alias.name}" in compiled:
                    modules[local] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in compiled:
                    modules[alias.asname or alias.name] = alias.name
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for base in node.bases:
            target = None
            if isinstance(base, ast.Name) and base.id in by_name:
                target = ".".join(by_name[base.id])
            elif isinstance(base, ast.Attribute):
                owner = ast.unparse(base.value)
                module = modules.get(owner, owner)
                if base.attr in compiled.get(module, ()):
                    target = f"{module}.{base.attr}"
            if target is not None:
                found.append(f"{where}: {node.name}({target})")
    return found


def test_no_interpreted_class_subclasses_a_compiled_one() -> None:
    files = compiled_files()
    compiled = compiled_classes(files)
    assert "gateway.connection" in compiled and "KafkaConnection" in compiled["gateway.connection"]
    names = set().union(*compiled.values())
    sources = {
        str(path.relative_to(ROOT)): path.read_text()
        for top in SCANNED
        for path in sorted((ROOT / top).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in files
    }
    offenders = [
        found
        for where, source in sources.items()
        if may_subclass(source, names)
        for found in interpreted_subclasses(source, where, compiled)
    ]
    assert offenders == [], f"interpreted subclasses of compiled classes: {offenders}"


def test_the_scan_sees_a_subclass_in_each_spelling() -> None:
    """What the rule is checked with would see the subclasses it forbids."""
    compiled = compiled_classes(compiled_files())
    probe = (
        "from gateway.connection import KafkaConnection as K, ResponseSlot\n"
        "import gateway.connection\n"
        "from gateway import dispatch\n"
        "class A(K): pass\n"
        "class B(ResponseSlot): pass\n"
        "class C(gateway.connection.KafkaConnection): pass\n"
        "class D(dispatch.Dispatcher): pass\n"
        "class E(object): pass\n"
    )
    assert may_subclass(probe, set().union(*compiled.values()))
    found = interpreted_subclasses(probe, "probe.py", compiled)
    assert [f.split(": ", 1)[1].split("(")[0] for f in found] == ["A", "B", "C", "D"]


def run_setup_py(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, compile_env: str | None) -> dict[str, Any]:
    """The arguments setup.py hands to setuptools' `setup()` for a wheel build, setup() itself
    and mypyc replaced by recorders (run in `tmp_path`: the compiled branch empties build/)."""
    received: dict[str, Any] = {}
    fake_mypyc = types.ModuleType("mypyc.build")
    setattr(fake_mypyc, "mypycify", lambda files, **kwargs: [("compiled", tuple(files))])  # noqa: B010
    monkeypatch.setitem(sys.modules, "mypyc.build", fake_mypyc)
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: received.update(kwargs))
    if compile_env is None:
        monkeypatch.delenv("GROUPSHIFT_COMPILE", raising=False)
    else:
        monkeypatch.setenv("GROUPSHIFT_COMPILE", compile_env)
    monkeypatch.setattr(sys, "argv", ["setup.py", "bdist_wheel"])
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(ROOT / "setup.py"), run_name="__main__")
    return received


def test_the_default_build_has_no_extension(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """README command 1 (`pip install -e .`) must work on a machine without a C compiler (issue 30
    point 1): without GROUPSHIFT_COMPILE=1 setup.py declares no extension module, so setuptools
    never looks for a compiler; GROUPSHIFT_COMPILE=1 does declare them (the recorder sees them)."""
    assert run_setup_py(monkeypatch, tmp_path, None) == {"ext_modules": [], "options": {}}
    assert run_setup_py(monkeypatch, tmp_path, "0")["ext_modules"] == []
    compiled = run_setup_py(monkeypatch, tmp_path, "1")
    assert compiled["ext_modules"] == [("compiled", tuple(compiled_files()))]
    assert "engine/shard.py" in compiled["ext_modules"][0][1]
