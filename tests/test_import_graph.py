"""The layering of docs/architecture.md, checked on the source: protocol < records < engine <
translation < gateway < sim (the simulator drives them all) < tools < harness (< groupshift, the
command line), imports only go downward, and no module imports itself back through any chain.

Every import counts, wherever it is written: at the top, under `if TYPE_CHECKING:`, or inside a
function. A cycle hidden behind TYPE_CHECKING still means two modules that cannot be read or
changed one without the other, and a local import still runs."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("protocol", "records", "engine", "translation", "gateway", "sim", "tools", "harness", "groupshift")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            out[_module_name(path)] = path
    return out


def _imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `module` imports, anywhere in its source."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            names = [base]
            names += [f"{base}.{a.name}" for a in node.names]  # `from pkg import submodule`
        for name in names:
            # The longest project module that the name is or lies in.
            parts = name.split(".")
            while parts and ".".join(parts) not in known:
                parts.pop()
            if parts:
                target = ".".join(parts)
                if target != module:
                    found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {m: _imports(m, p, known) for m, p in known.items()}


def _layer(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def test_imports_only_go_down_the_layers() -> None:
    graph = _graph()
    upward = sorted(
        f"{m} imports {t}" for m, targets in graph.items() for t in targets if _layer(t) > _layer(m)
    )
    assert upward == [], "imports against the layering:\n" + "\n".join(upward)


def test_there_is_no_import_cycle() -> None:
    graph = _graph()
    # Tarjan's strongly connected components: any component of more than one module is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert cycles == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_checker_sees_type_checking_and_local_imports(tmp_path: Path) -> None:
    """The walk must find imports that only run under TYPE_CHECKING or inside a function (the
    kinds that hid the cycles this test exists for)."""
    known = {"engine.a": ROOT, "engine.b": ROOT, "engine.c": ROOT}
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from engine.b import X\n"
        "def f() -> None:\n    from engine import c\n"
    )
    probe = tmp_path / "a.py"
    probe.write_text(source)
    assert _imports("engine.a", probe, known) == {"engine.b", "engine.c"}
