"""One way to change state (docs/architecture.md, "Operations and commit"): a shard's groups map
changes only when a committed operation is applied (`engine/replay.py`: records, and the group
changes an operation asked for with `put_group`), never by a handler writing it.

The source scan pins the rule; the behaviour tests show what it buys: a group created or replaced
by an operation whose append fails never appears, and the group it would have replaced stays with
its offsets (Kafka reverts the snapshot that held the change)."""

from __future__ import annotations

import ast
from pathlib import Path

from engine.classic.api import JoinGroupResponse
from engine.context import RequestContext
from engine.errors import Errors
from engine.offsets.api import CommitPartition, CommitTopic, OffsetCommitRequest, OffsetFetchGroupRequest
from tests.migration_harness import MigrationHarness, sub

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("engine", "translation")
# The one module that applies committed changes to the groups map.
APPLIER = "engine/replay.py"
MUTATORS = frozenset({"pop", "popitem", "setdefault", "clear", "update", "__setitem__", "__delitem__"})


def _is_groups(node: ast.expr, aliases: set[str]) -> bool:
    """`<anything>.groups`, or a local name bound to one."""
    return (isinstance(node, ast.Attribute) and node.attr == "groups") or (
        isinstance(node, ast.Name) and node.id in aliases
    )


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of a module or function, without those of the functions nested in it."""
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        n = todo.pop()
        out.append(n)
        if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            todo.extend(ast.iter_child_nodes(n))
    return out


def _group_writes(path: Path) -> list[str]:
    """Every write to a groups map in `path`: item assignment or deletion, a mutating method, or
    rebinding the map itself (outside an `__init__`), through `x.groups` or a local alias of it."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[int] = set()
    for scope in ast.walk(tree):
        if not isinstance(scope, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        nodes = _own_nodes(scope)
        aliases = {
            t.id
            for n in nodes
            if isinstance(n, ast.Assign) and _is_groups(n.value, set())
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        in_init = isinstance(scope, ast.FunctionDef) and scope.name == "__init__"
        for n in nodes:
            targets: list[ast.expr] = []
            if isinstance(n, ast.Assign | ast.Delete):
                targets = list(n.targets)
            elif isinstance(n, ast.AugAssign | ast.AnnAssign):
                targets = [n.target]
            for t in targets:
                for part in t.elts if isinstance(t, ast.Tuple | ast.List) else [t]:
                    item = isinstance(part, ast.Subscript) and _is_groups(part.value, aliases)
                    rebound = isinstance(part, ast.Attribute) and part.attr == "groups" and not in_init
                    if item or rebound:
                        found.add(part.lineno)
            if (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr in MUTATORS
                and _is_groups(n.func.value, aliases)
            ):
                found.add(n.lineno)
    return [f"{path.relative_to(ROOT)}:{line}" for line in sorted(found)]


def test_only_the_applier_writes_the_groups_map() -> None:
    writes = {
        str(path.relative_to(ROOT)): _group_writes(path)
        for layer in SCANNED
        for path in sorted((ROOT / layer).rglob("*.py"))
    }
    offenders = [w for module, ws in writes.items() if module != APPLIER for w in ws]
    assert offenders == [], f"groups written outside the Operation: {offenders}"
    # The scan sees the writes that are allowed: it would see the others.
    assert writes[APPLIER], "the scan no longer recognises engine/replay.py's writes"


def test_the_scan_sees_each_kind_of_write(tmp_path: Path) -> None:
    source = (
        "def f(shard, g):\n"
        "    shard.groups['a'] = g\n"
        "    del shard.state.groups['b']\n"
        "    shard.groups.pop('c', None)\n"
        "    groups = shard.groups\n"
        "    groups.setdefault('d', g)\n"
        "    groups['e'] = g\n"
        "    shard.groups = {}\n"
        "    local = {}\n"
        "    local['f'] = g\n"
    )
    path = ROOT / "tests" / f"_scan_probe_{tmp_path.name}.py"
    try:
        path.write_text(source)
        assert [int(w.rsplit(":", 1)[1]) for w in _group_writes(path)] == [2, 3, 4, 6, 7, 8]
    finally:
        path.unlink()


# --- behaviour -------------------------------------------------------------------------------


def _commit_offset(h: MigrationHarness, epoch: int, member_id: str) -> None:
    req = OffsetCommitRequest("g", epoch, member_id, topics=[CommitTopic("foo", [CommitPartition(0, 42)])])
    out = h.process(h.shard.offset_commit(req, RequestContext("c", "/h", 9), h.tick()))
    assert out.topics[0].partitions[0].error_code == 0


def _fetched(h: MigrationHarness) -> list[tuple[str, int, int]]:
    fetched = h.shard.offset_fetch([OffsetFetchGroupRequest("g", None)])[0]
    return [(t.name, p.partition_index, p.committed_offset) for t in fetched.topics for p in t.partitions]


def test_failed_replacement_of_an_empty_consumer_group_keeps_it_and_its_offsets() -> None:
    h = MigrationHarness(topics={"foo": 2})
    r = h.cgh("R1", 0, topics=["foo"])
    _commit_offset(h, r.member_epoch, "R1")
    assert h.cgh("R1", -1).error_code == Errors.NONE
    consumer = h.shard.consumer_group("g")
    assert consumer is not None and consumer.is_empty()

    h.append_error = Errors.KAFKA_STORAGE_ERROR
    j = h.join(metadata=sub("foo"))
    assert isinstance(j, JoinGroupResponse) and (j.error_code, j.member_id) == (Errors.NOT_COORDINATOR, "")
    assert h.shard.groups["g"] is consumer
    assert _fetched(h) == [("foo", 0, 42)]
    assert h.events("group.converted") == [] and h.events("append.failed")
    assert not [k for k in h.shard.timers.keys() if "-g-" in k or k.endswith("-g")]  # noqa: SIM118

    h.append_error = None
    j = h.join(metadata=sub("foo"))
    assert isinstance(j, JoinGroupResponse) and j.error_code == Errors.MEMBER_ID_REQUIRED
    assert h.shard.classic_group("g") is not None and _fetched(h) == [("foo", 0, 42)]
    assert h.replayed().persisted_state() == h.shard.persisted_state()


def test_failed_replacement_of_an_empty_classic_group_keeps_it_and_its_offsets() -> None:
    h = MigrationHarness(topics={"foo": 2})
    j = h.join(metadata=sub("foo"))
    assert isinstance(j, JoinGroupResponse) and j.error_code == Errors.MEMBER_ID_REQUIRED
    _commit_offset(h, -1, "")
    classic = h.shard.classic_group("g")
    assert classic is not None and classic.num_members == 0

    h.append_error = Errors.NOT_LEADER_OR_FOLLOWER
    assert h.cgh("R1", 0, topics=["foo"]).error_code == Errors.NOT_COORDINATOR
    assert h.shard.groups["g"] is classic
    assert _fetched(h) == [("foo", 0, 42)]

    h.append_error = None
    assert h.cgh("R1", 0, topics=["foo"]).error_code == Errors.NONE
    assert h.shard.consumer_group("g") is not None and _fetched(h) == [("foo", 0, 42)]
    assert h.replayed().persisted_state() == h.shard.persisted_state()


def test_a_new_classic_group_whose_append_fails_never_appears() -> None:
    """Kafka writes an empty GroupMetadata record for a group a JoinGroup creates, and a failed
    write reverts the snapshot that held the new group: the joiner gets the append's error."""
    h = MigrationHarness(topics={"foo": 2})
    h.append_error = Errors.KAFKA_STORAGE_ERROR
    j = h.join(metadata=sub("foo"))
    assert isinstance(j, JoinGroupResponse) and j.error_code == Errors.NOT_COORDINATOR
    assert "g" not in h.shard.groups
    assert h.shard.next_deadline() is None or not [k for k in h.shard.timers.keys() if "-g-" in k]  # noqa: SIM118

    h.append_error = None
    j = h.join(metadata=sub("foo"))
    assert isinstance(j, JoinGroupResponse) and j.error_code == Errors.MEMBER_ID_REQUIRED
    assert h.shard.classic_group("g") is not None
