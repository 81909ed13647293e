"""Every test under tests/ that starts another process carries the `e2e` mark.

`python -m pytest -m "not e2e"` is the quick, in-process run; it must not start a JVM, Spark,
Chromium, a cargo build or a Python child behind the reader's back. e2e/ marks all its tests in
its conftest; tests/ marks them one by one (`@pytest.mark.e2e`, or `pytestmark` for a module or
class), and this check reads the source to find the ones that forgot.

A test starts a process when its body, a fixture it asks for, or a function of its own module it
calls (directly or through others) uses one of `PROCESS_STARTERS` or one of the
`PROCESS_FIXTURES` of tests/plugins. Type annotations do not count: naming a type starts nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PLUGINS = TESTS / "plugins"

# Names whose use starts a process: the standard library's ways, then the product's and harness's
# own process starters that tests call directly (a Kafka node, Kafka's Java tools, Chromium, the
# compaction worker).
PROCESS_STARTERS = frozenset(
    {
        "subprocess",
        "multiprocessing",
        "Popen",
        "create_subprocess_exec",
        "create_subprocess_shell",
        "sys.executable",
        "os.fork",
        "os.forkpty",
        "os.system",
        "os.popen",
        "os.posix_spawn",
        "os.posix_spawnp",
        "pty.spawn",
        "KafkaCluster",
        "java_clients",
        "headless",
        "clean_in_worker",
        "start_worker",
    }
)
_OS_FAMILIES = ("os.spawn", "os.exec")
_STARTING_CALLS = frozenset({"Popen", "create_subprocess_exec", "create_subprocess_shell"})

# The fixtures of tests/plugins that start processes: Kafka nodes and Kafka's Java tools (JVMs),
# Tansu (a cargo build and a broker), a local Spark session (a JVM) and a standalone Spark cluster.
PROCESS_FIXTURES = frozenset(
    {
        "kafka4",
        "kafka37_classic",
        "kafka39_classic",
        "kafka_cluster_factory",
        "kafka_clients4",
        "tansu_factory",
        "spark",
        "spark_standalone",
    }
)


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (base := _dotted(node.value)) is not None:
        return f"{base}.{node.attr}"
    return None


def _is_e2e_mark(node: ast.expr) -> bool:
    """`pytest.mark.e2e`, `mark.e2e`, or either called."""
    if isinstance(node, ast.Call):
        node = node.func
    name = _dotted(node)
    return name is not None and name.endswith("mark.e2e")


def _pytestmark_has_e2e(body: list[ast.stmt]) -> bool:
    for stmt in body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
                value = stmt.value
                marks = value.elts if isinstance(value, ast.List | ast.Tuple) else [value]
                if any(m is not None and _is_e2e_mark(m) for m in marks):
                    return True
    return False


def _without_annotations(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk, skipping annotations."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        for name, value in ast.iter_fields(n):
            if name in ("annotation", "returns"):
                continue
            children = value if isinstance(value, list) else [value]
            todo.extend(c for c in children if isinstance(c, ast.AST))


@dataclass
class Function:
    """One function of a module: what it names, and whether a mark on it or around it says e2e."""

    name: str
    uses: set[str] = field(default_factory=set)  # names, parameters, dotted names (`os.fork`)
    attributes: set[str] = field(default_factory=set)  # `self.helper` names a method
    marked: bool = False


def _function(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str, marked: bool) -> Function:
    f = Function(name, marked=marked or any(_is_e2e_mark(d) for d in fn.decorator_list))
    f.uses.update(a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs))
    for d in fn.decorator_list:  # @pytest.mark.usefixtures("kafka4")
        if isinstance(d, ast.Call) and (_dotted(d.func) or "").endswith("usefixtures"):
            f.uses.update(a.value for a in d.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    for stmt in fn.body:
        for n in _without_annotations(stmt):
            if isinstance(n, ast.Name):
                f.uses.add(n.id)
            elif isinstance(n, ast.Attribute):
                f.attributes.add(n.attr)
                if (dotted := _dotted(n)) is not None:
                    f.uses.add(dotted)
    return f


def functions(source: str) -> list[Function]:
    """The module's functions and methods (a method under "Class.name", also reachable by its own
    name, as `self.name` shows it), with the e2e marks that apply to each."""
    tree = ast.parse(source)
    module_marked = _pytestmark_has_e2e(tree.body)
    autouse = [  # fixtures every test of the module gets without asking
        stmt.name
        for stmt in tree.body
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef)
        and any(
            isinstance(d, ast.Call)
            and any(
                k.arg == "autouse" and isinstance(k.value, ast.Constant) and k.value.value for k in d.keywords
            )
            for d in stmt.decorator_list
        )
    ]
    out: list[Function] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            out.append(_function(stmt, stmt.name, module_marked))
        elif isinstance(stmt, ast.ClassDef):
            class_marked = (
                module_marked
                or any(_is_e2e_mark(d) for d in stmt.decorator_list)
                or _pytestmark_has_e2e(stmt.body)
            )
            for m in stmt.body:
                if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef):
                    out.append(_function(m, f"{stmt.name}.{m.name}", class_marked))
    for f in out:
        if f.name.split(".")[-1].startswith("test"):
            f.uses.update(autouse)
    return out


def _imported_starters(source: str) -> set[str]:
    """Local names bound to process starters: `from subprocess import run`, `import x as y`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
            "subprocess",
            "multiprocessing",
        ):
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names.update(
                a.asname for a in node.names if a.asname and a.name.split(".")[-1] in PROCESS_STARTERS
            )
    return names


def _starts(uses: set[str], starters: frozenset[str] | set[str]) -> list[str]:
    return sorted(
        u
        for u in uses
        if u in starters or u.startswith(_OS_FAMILIES) or u.rsplit(".", 1)[-1] in _STARTING_CALLS
    )


def spawning_functions(source: str, fixtures: frozenset[str] = PROCESS_FIXTURES) -> dict[str, list[str]]:
    """Each function of `source` that starts a process, with the starters it reaches."""
    fns = functions(source)
    starters = PROCESS_STARTERS | fixtures | _imported_starters(source)
    reaches = {f.name: set(_starts(f.uses, starters)) for f in fns}
    by_short_name: dict[str, list[str]] = {}
    for f in fns:
        by_short_name.setdefault(f.name.split(".")[-1], []).append(f.name)
    changed = True
    while changed:  # through the module's own helpers and fixtures, to a fixed point
        changed = False
        for f in fns:
            for used in f.uses | f.attributes:
                for callee in by_short_name.get(used, []):
                    if callee != f.name and not reaches[callee] <= reaches[f.name]:
                        reaches[f.name] |= reaches[callee]
                        changed = True
    return {name: sorted(r) for name, r in reaches.items() if r}


def unmarked_process_tests(source: str, fixtures: frozenset[str] = PROCESS_FIXTURES) -> list[str]:
    """The tests of `source` that start a process without the e2e mark, with what they use."""
    spawning = spawning_functions(source, fixtures)
    return [
        f"{f.name} ({', '.join(spawning[f.name])})"
        for f in functions(source)
        if f.name.split(".")[-1].startswith("test") and f.name in spawning and not f.marked
    ]


def test_process_starting_tests_carry_the_e2e_mark() -> None:
    unmarked = [
        f"{path.relative_to(TESTS.parent)}::{test}"
        for path in sorted(TESTS.rglob("test_*.py"))
        for test in unmarked_process_tests(path.read_text())
    ]
    assert unmarked == [], "tests that start processes without @pytest.mark.e2e:\n" + "\n".join(unmarked)


def test_every_process_fixture_of_the_plugins_is_known() -> None:
    """A plugin fixture that starts a process must be in PROCESS_FIXTURES (else tests using it go
    unseen), and every name there must still be a plugin fixture."""
    defined: set[str] = set()
    spawning: set[str] = set()
    for path in sorted(PLUGINS.glob("*.py")):
        source = path.read_text()
        for stmt in ast.parse(source).body:
            if isinstance(stmt, ast.FunctionDef) and any(
                (_dotted(d.func if isinstance(d, ast.Call) else d) or "").endswith("fixture")
                for d in stmt.decorator_list
            ):
                defined.add(stmt.name)
        spawning |= set(spawning_functions(source, frozenset()))
    assert sorted((spawning & defined) - PROCESS_FIXTURES) == []
    assert sorted(PROCESS_FIXTURES - defined) == []


# -- self-tests --------------------------------------------------------------------------------


def test_the_check_finds_each_way_of_starting_a_process() -> None:
    source = (
        "import subprocess, sys, os\n"
        "from subprocess import run as go\n"
        "import pytest\n"
        "from harness.kafka_dist import KafkaCluster\n"
        "def test_popen() -> None:\n    subprocess.Popen(['x'])\n"
        "def test_aliased_run() -> None:\n    go(['x'])\n"
        "def test_fork() -> None:\n    os.fork()\n"
        "def test_exec() -> None:\n    os.execv('x', [])\n"
        "def test_kafka(kafka4: object) -> None:\n    pass\n"
        "@pytest.mark.usefixtures('spark')\ndef test_usefixtures() -> None:\n    pass\n"
        "def _child() -> None:\n    print(sys.executable)\n"
        "def _via_helper() -> None:\n    _child()\n"
        "def test_through_two_helpers() -> None:\n    _via_helper()\n"
        "@pytest.fixture\ndef cluster() -> object:\n    return KafkaCluster('4')\n"
        "def test_through_a_local_fixture(cluster: object) -> None:\n    pass\n"
        "class TestInAClass:\n    def test_m(self) -> None:\n        self._h()\n"
        "    def _h(self) -> None:\n        subprocess.run(['x'])\n"
        "def test_annotation_only(c: KafkaCluster) -> None:\n    pass\n"
        "def test_attribute_named_like_a_fixture(x: object) -> None:\n    print(x.spark)\n"
        "def test_nothing() -> None:\n    assert 1\n"
    )
    autouse = (
        "@pytest.fixture(autouse=True)\ndef _kafka(kafka4: object) -> None:\n    pass\n"
        "def test_x() -> None:\n    pass\n"
    )
    assert unmarked_process_tests(autouse) == ["test_x (kafka4)"]
    assert unmarked_process_tests(source) == [
        "test_popen (subprocess, subprocess.Popen)",
        "test_aliased_run (go)",
        "test_fork (os.fork)",
        "test_exec (os.execv)",
        "test_kafka (kafka4)",
        "test_usefixtures (spark)",
        "test_through_two_helpers (sys.executable)",
        "test_through_a_local_fixture (KafkaCluster)",
        "TestInAClass.test_m (subprocess)",
    ]


def test_each_kind_of_e2e_mark_satisfies_the_check() -> None:
    body = "def test_p() -> None:\n    subprocess.run(['x'])\n"
    assert unmarked_process_tests("import subprocess\n" + body) == ["test_p (subprocess)"]
    assert unmarked_process_tests("@pytest.mark.e2e\n" + body) == []
    assert unmarked_process_tests("pytestmark = pytest.mark.e2e\n" + body) == []
    assert unmarked_process_tests("pytestmark = [pytest.mark.slow, pytest.mark.e2e]\n" + body) == []
    in_class = (
        "class TestC:\n    pytestmark = pytest.mark.e2e\n"
        "    def test_p(self) -> None:\n        subprocess.run(['x'])\n"
    )
    assert unmarked_process_tests(in_class) == []
    assert unmarked_process_tests("@pytest.mark.slow\n" + body) == ["test_p (subprocess)"]
