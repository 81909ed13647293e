"""The package layering, checked on the source of every package of the repository.

Product packages, bottom to top (a module may import its own package and any package below it):

    protocol < membership < records < engine < translation < consumer_membership < connect_worker
             < gateway < sim
             < tools < harness < groupshift

`protocol` is the wire codec and imports nothing of ours; `membership` is the public
classic-group membership client, on the wire layer alone (the scale-out fleet in `gateway` runs
on it); `consumer_membership` is the public KIP-848 consumer-group membership client with
client-side assignors, above `translation` because its `cooperative-sticky` adapter reads classic
members' subscriptions with `translation.embedded_protocol`; `connect_worker` (the Connect worker
SDK for connect groups on the new protocol) sits beside it: a client on the wire layer and the
membership driver alone, importing nothing else of ours (neither of the two imports the other);
`sim` (the simulator) drives the gateway; `tools` are the operator tools; `harness` puts real
Kafka (and Tansu, the client matrix, a headless browser) in the loop and may use the tools;
`groupshift` is the command line over all of it. Whether `sim` exists yet or not, the rules read the same.

Non-product packages: `tests` (with tests/plugins), `e2e`, `bench`, `fuzz`, `scripts`. The rules:

- product imports only go down the product layers;
- product never imports tests, e2e, bench, fuzz or scripts (what ships must not need the checkout);
- tools never import harness (an operator tool must not drag in a JVM launcher);
- scripts, bench and fuzz import only product and their own package, except the few documented
  edges of `ALLOWED_NON_PRODUCT_EDGES`; tests and e2e may import anything, they test it all;
- no module imports itself back through any chain, among all the scanned modules;
- every product package, and scripts, bench and fuzz, is type-checked by `mypy --strict`.

Every import counts, wherever it is written: at the top, under `if TYPE_CHECKING:`, or inside a
function (a cycle hidden behind TYPE_CHECKING still means two modules that cannot be read or
changed one without the other, and a local import still runs), and so do `importlib.import_module`,
`__import__` and `runpy.run_module` called with a literal name. Product code may not call them
with a name computed at run time: such an import could reach anything, and no check would see it.
"""

from __future__ import annotations

import ast
import functools
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = (
    "protocol",
    "membership",
    "records",
    "engine",
    "translation",
    "consumer_membership",
    "connect_worker",
    "gateway",
    "sim",
    "tools",
    "harness",
    "groupshift",
)
NON_PRODUCT = ("tests", "e2e", "bench", "fuzz", "scripts")
# Non-product packages that may import only product (and themselves).
PRODUCT_ONLY_USERS = ("scripts", "bench", "fuzz")

# Non-product imports of test code that are allowed on purpose. Each edge listed must exist (see
# test_every_listed_edge_still_exists), so the list can only shrink.
ALLOWED_NON_PRODUCT_EDGES = frozenset(
    {
        # The benchmarks start real `groupshift serve` processes and Kafka clusters the way the e2e
        # suite does, with its GatewayProcess, wire client and scenario drivers, so that a figure
        # and a pass/fail verdict come from the same code.
        ("bench.crash_campaign", "e2e"),
        ("bench.crash_campaign", "e2e.harness"),
        ("bench.gateway", "e2e.harness"),
        ("bench.migration", "e2e.harness"),
        ("bench.scale_out", "e2e.harness"),
        # bench.secure_listeners starts groupshift with secured listeners beside a secured Kafka.
        ("bench.secure_listeners", "e2e.harness"),
        ("bench.scale_out", "e2e.scaleout"),
        ("bench.soak", "e2e.harness"),
        ("bench.upstream", "e2e.harness"),
        # bench.versus_kafka runs the e2e migration scenarios with Java consumers on both sides.
        ("bench.versus_kafka", "e2e.conftest"),
        ("bench.versus_kafka", "e2e.harness"),
        ("bench.versus_kafka", "e2e.java"),
        ("bench.versus_kafka", "e2e.migration"),
        ("bench.versus_kafka", "e2e.realclients"),
        # The records fuzzer draws its batches from the property tests' Hypothesis strategies.
        ("fuzz.records", "tests.record_strategies"),
        # The streams records fuzzer seeds from the codec tests' samples (every field of every type)
        # and replays into the word count those tests use.
        ("fuzz.streams_records", "tests.streams_record_samples"),
    }
)

# Violations tolerated for a while, each with the reason; they must still exist (see
# test_every_listed_edge_still_exists), so the set only shrinks. Empty since the redesign removed
# the last two (scripts.gen_kafka_configs -> e2e.wire, groupshift.cli -> tests.chaos).
KNOWN_VIOLATIONS_TO_BE_REMOVED: frozenset[tuple[str, str]] = frozenset()

Edge = tuple[str, str]
Graph = Mapping[str, Iterable[str]]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    """Every .py file of every package, product and not (a package not there yet, such as `sim`
    before it is created, has none)."""
    out: dict[str, Path] = {}
    for package in (*PRODUCT, *NON_PRODUCT):
        if (ROOT / package).is_dir():
            for path in sorted((ROOT / package).rglob("*.py")):
                out[_module_name(path)] = path
    return out


@dataclass(frozen=True)
class Found:
    """What one module's source imports: the project modules it names, and the dynamic imports
    whose name is not a literal (line: source text)."""

    imports: frozenset[str]
    unnamed: tuple[str, ...]


# Calls that import a module by its dotted name: importlib.import_module(name, package=None),
# __import__(name, globals, locals, fromlist, level), runpy.run_module(name).
_DYNAMIC = {"import_module", "__import__", "run_module"}


def _dynamic_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id if func.id in _DYNAMIC else None
    if isinstance(func, ast.Attribute) and func.attr in _DYNAMIC:
        return func.attr
    return None


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _resolve(relative: str, package: list[str]) -> str:
    """`..x.y` seen from `package` (the importing module's package, as a list of names)."""
    level = len(relative) - len(relative.lstrip("."))
    base = package[: len(package) - (level - 1)]
    rest = relative[level:]
    return ".".join([*base, rest] if rest else base)


def scan(module: str, source: str, known: Iterable[str], *, is_package: bool = False) -> Found:
    """The project modules (among `known`) that `module` imports, anywhere in `source`."""
    known = set(known)
    tree = ast.parse(source)
    package = module.split(".") if is_package else module.split(".")[:-1]
    names: list[str] = []
    unnamed: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (
                _resolve("." * node.level + (node.module or ""), package) if node.level else node.module or ""
            )
            names.append(base)
            names += [f"{base}.{a.name}" for a in node.names]  # `from pkg import submodule`
        elif isinstance(node, ast.Call) and (kind := _dynamic_name(node)) is not None:
            name = _literal(_argument(node, 0, "name" if kind != "run_module" else "mod_name"))
            if name is None:
                unnamed.append(f"{node.lineno}: {ast.unparse(node)}")
                continue
            if name.startswith("."):  # import_module(".x", package="pkg")
                anchor = _literal(_argument(node, 1, "package"))
                if anchor is None:
                    unnamed.append(f"{node.lineno}: {ast.unparse(node)}")
                    continue
                name = _resolve(name, anchor.split("."))
            names.append(name)
            fromlist = _argument(node, 3, "fromlist") if kind == "__import__" else None
            if isinstance(fromlist, ast.List | ast.Tuple):
                names += [f"{name}.{n}" for e in fromlist.elts if (n := _literal(e)) is not None]
    found: set[str] = set()
    for name in names:
        # The longest project module that the name is or lies in.
        parts = name.split(".")
        while parts and ".".join(parts) not in known:
            parts.pop()
        if parts and (target := ".".join(parts)) != module:
            found.add(target)
    return Found(frozenset(found), tuple(unnamed))


@functools.cache
def _scan_all() -> Mapping[str, Found]:
    """Scanned once per session: every rule reads the same graph."""
    known = _modules()
    return {m: scan(m, p.read_text(), known, is_package=p.name == "__init__.py") for m, p in known.items()}


def _graph(found: Mapping[str, Found]) -> dict[str, set[str]]:
    return {m: set(f.imports) for m, f in found.items()}


def _package(module: str) -> str:
    return module.split(".")[0]


def _edges(graph: Graph) -> list[Edge]:
    return sorted((m, t) for m, targets in graph.items() for t in targets)


def upward_imports(graph: Graph) -> list[Edge]:
    """Product modules importing a product package above their own."""
    return [
        (m, t)
        for m, t in _edges(graph)
        if _package(m) in PRODUCT
        and _package(t) in PRODUCT
        and PRODUCT.index(_package(t)) > PRODUCT.index(_package(m))
    ]


def product_imports_of_non_product(graph: Graph) -> list[Edge]:
    """Product modules importing tests, e2e, bench, fuzz or scripts."""
    return [(m, t) for m, t in _edges(graph) if _package(m) in PRODUCT and _package(t) in NON_PRODUCT]


def tools_imports_of_harness(graph: Graph) -> list[Edge]:
    return [(m, t) for m, t in _edges(graph) if _package(m) == "tools" and _package(t) == "harness"]


def non_product_overreach(graph: Graph) -> list[Edge]:
    """scripts, bench or fuzz modules importing a non-product package other than their own."""
    return [
        (m, t)
        for m, t in _edges(graph)
        if _package(m) in PRODUCT_ONLY_USERS
        and _package(t) in NON_PRODUCT
        and _package(t) != _package(m)
        and (m, t) not in ALLOWED_NON_PRODUCT_EDGES
    ]


def import_cycles(graph: Graph) -> list[list[str]]:
    """Tarjan's strongly connected components: any component of more than one module is a cycle."""
    targets = {m: sorted(t for t in ts if t in graph) for m, ts in graph.items()}
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
        for w in targets[v]:
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

    for v in sorted(targets):
        if v not in index:
            visit(v)
    return cycles


def _report(title: str, edges: list[Edge]) -> str:
    return f"{title}:\n" + "\n".join(f"{m} imports {t}" for m, t in edges)


SIBLING_CLIENT_IMPORTS = {"connect_worker": frozenset({"protocol", "membership", "connect_worker"})}
"""Client packages that may import only these product packages, whatever the layering allows
(a client of a coordinator must not drag in the server, nor a sibling client)."""


def sibling_client_overreach(graph: Graph) -> list[Edge]:
    return [
        (m, t)
        for m, t in _edges(graph)
        if _package(m) in SIBLING_CLIENT_IMPORTS
        and _package(t) in PRODUCT
        and _package(t) not in SIBLING_CLIENT_IMPORTS[_package(m)]
    ]


def _new(edges: list[Edge]) -> list[Edge]:
    return [e for e in edges if e not in KNOWN_VIOLATIONS_TO_BE_REMOVED]


def test_product_imports_only_go_down_the_layers() -> None:
    upward = _new(upward_imports(_graph(_scan_all())))
    assert upward == [], _report("imports against the layering " + " < ".join(PRODUCT), upward)


def test_product_never_imports_tests_e2e_bench_fuzz_or_scripts() -> None:
    bad = _new(product_imports_of_non_product(_graph(_scan_all())))
    assert bad == [], _report("product code importing non-product code", bad)


def test_tools_never_import_harness() -> None:
    bad = _new(tools_imports_of_harness(_graph(_scan_all())))
    assert bad == [], _report("operator tools importing the Kafka-in-the-loop harness", bad)


def test_connect_worker_imports_only_the_wire_and_the_membership_driver() -> None:
    bad = _new(sibling_client_overreach(_graph(_scan_all())))
    assert bad == [], _report("a client package importing more than the wire and the driver", bad)


def test_scripts_bench_and_fuzz_import_only_product() -> None:
    bad = _new(non_product_overreach(_graph(_scan_all())))
    assert bad == [], _report("scripts/bench/fuzz importing test code (not in the allow-list)", bad)


def test_there_is_no_import_cycle() -> None:
    cycles = import_cycles(_graph(_scan_all()))
    assert cycles == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_product_imports_nothing_by_a_computed_name() -> None:
    unnamed = [
        f"{m}:{line}" for m, f in sorted(_scan_all().items()) if _package(m) in PRODUCT for line in f.unnamed
    ]
    assert unnamed == [], "dynamic imports no check can follow:\n" + "\n".join(unnamed)


def test_every_listed_edge_still_exists() -> None:
    """The allow-list and the known violations only shrink: an edge that is gone must leave them."""
    edges = set(_edges(_graph(_scan_all())))
    gone = sorted((ALLOWED_NON_PRODUCT_EDGES | KNOWN_VIOLATIONS_TO_BE_REMOVED) - edges)
    assert gone == [], _report("listed edges that no longer exist (remove them from the lists)", gone)


def test_mypy_strict_checks_every_product_package() -> None:
    """pyproject's `[tool.mypy] files` names every product package there is (a new one, such as
    `sim`, must join the strict check when it is created), and scripts, bench and fuzz."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["strict"] is True
    wanted = [p for p in (*PRODUCT, *PRODUCT_ONLY_USERS) if (ROOT / p).is_dir()]
    assert sorted(set(wanted) - set(config["files"])) == []


# -- self-tests: the walker sees every kind of import, and each rule reports its violation --------

KNOWN = ("engine", "engine.a", "engine.b", "engine.c", "engine.d", "engine.e", "engine.f", "tests.chaos")


def test_the_walker_sees_type_checking_local_and_relative_imports() -> None:
    """The kinds that hid the cycles this test exists for: imports that only run under
    TYPE_CHECKING or inside a function; and relative ones."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from engine.b import X\n"
        "def f() -> None:\n    from engine import c\n"
        "from . import d\n"
        "from .e import Y\n"
    )
    found = scan("engine.a", source, KNOWN).imports
    assert found == {"engine.b", "engine", "engine.c", "engine.d", "engine.e"}


def test_the_walker_sees_importlib_dunder_import_and_runpy() -> None:
    source = (
        "import importlib, runpy\n"
        "from importlib import import_module\n"
        "def f() -> None:\n"
        "    importlib.import_module('tests.chaos')\n"
        "    import_module('.b', package='engine')\n"
        "    __import__('engine', fromlist=['c'])\n"
        "    runpy.run_module('engine.d')\n"
        "    importlib.import_module(name='engine.e')\n"
    )
    found = scan("engine.a", source, KNOWN)
    assert found.imports == {"tests.chaos", "engine.b", "engine", "engine.c", "engine.d", "engine.e"}
    assert found.unnamed == ()


def test_the_walker_reports_imports_by_a_computed_name() -> None:
    source = (
        "import importlib\n"
        "def f(name: str) -> None:\n"
        "    importlib.import_module(f'engine.{name}')\n"
        "    __import__(name)\n"
        "    importlib.import_module('.x', package=name)\n"
    )
    found = scan("engine.a", source, KNOWN)
    assert found.imports == frozenset()
    assert [u.split(":")[0] for u in found.unnamed] == ["3", "4", "5"]


def test_each_rule_reports_its_violation() -> None:
    assert upward_imports({"engine.a": {"gateway.b", "records.c"}}) == [("engine.a", "gateway.b")]
    assert upward_imports({"sim.a": {"gateway.b"}, "gateway.b": {"sim.a"}}) == [("gateway.b", "sim.a")]
    assert upward_imports({"harness.a": {"tools.b"}}) == []  # harness may use the tools
    product = {
        "groupshift.cli": {"tests.chaos", "harness.headless"},
        "tools.x": {"e2e.wire", "bench.a", "fuzz.b", "scripts.c"},
    }
    assert product_imports_of_non_product(product) == [
        ("groupshift.cli", "tests.chaos"),
        ("tools.x", "bench.a"),
        ("tools.x", "e2e.wire"),
        ("tools.x", "fuzz.b"),
        ("tools.x", "scripts.c"),
    ]
    assert tools_imports_of_harness({"tools.a": {"harness.kafka_dist", "gateway.b"}}) == [
        ("tools.a", "harness.kafka_dist")
    ]
    assert sibling_client_overreach(
        {"connect_worker.a": {"membership.driver", "consumer_membership.core", "engine.x", "protocol.y"}}
    ) == [("connect_worker.a", "consumer_membership.core"), ("connect_worker.a", "engine.x")]
    non_product = {
        "scripts.gen": {"e2e.wire", "harness.matrix", "scripts.other"},
        "bench.a": {"tests.chaos", "bench.b", "engine.x"},
        "bench.versus_kafka": {"e2e.java"},  # allowed
        "fuzz.b": {"e2e.wire"},
        "tests.t": {"e2e.wire", "bench.a"},  # tests may import anything
    }
    assert non_product_overreach(non_product) == [
        ("bench.a", "tests.chaos"),
        ("fuzz.b", "e2e.wire"),
        ("scripts.gen", "e2e.wire"),
    ]
    cyclic = {"tests.a": {"bench.b"}, "bench.b": {"engine.c"}, "engine.c": {"tests.a"}, "engine.d": set()}
    assert import_cycles(cyclic) == [["bench.b", "engine.c", "tests.a"]]
