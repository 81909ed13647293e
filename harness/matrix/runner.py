"""Runs a grid: prepares clients, shares backends, runs cells in parallel, writes the results.

Cells run `--jobs` at a time in threads of the runner (each cell's clients are processes or
containers of the chosen runtime); backends are started on first use per (backend, policy) and
shared. The results go to DIR (`report.write_all`): `results.json`, `junit.xml`, `report.html`.
`--rerun-failed` reads DIR/results.json and runs only the grid's cells that did not pass there
(failed, or not run: an interrupted run, a grown grid), keeping the other results.
"""

from __future__ import annotations

import importlib
import json
import shutil
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TextIO

from harness.matrix import clients as cl
from harness.matrix.backends import BackendPool
from harness.matrix.grid import Cell, Grid
from harness.matrix.runtime import NOT_RUN, ClientNotInstalled, ClientSpec, Runtime
from harness.matrix.scenarios import CellResult, CellRun


class RuntimeUnavailable(RuntimeError):
    pass


def make_runtime(name: str, workdir: Path) -> Runtime:
    """The runtime called `name`; the Docker one is imported only when asked for."""
    if name == "process":
        from harness.matrix.process_runtime import ProcessRuntime

        return ProcessRuntime(workdir)
    if name == "docker":
        try:
            module = importlib.import_module("harness.matrix.docker_runtime")
        except ModuleNotFoundError as e:
            if e.name == "harness.matrix.docker_runtime":
                raise RuntimeUnavailable(
                    "--runtime docker: this build has no harness/matrix/docker_runtime.py "
                    "(the container runtime is not installed); use --runtime process"
                ) from e
            raise
        factory = getattr(module, "DockerRuntime", None)
        if factory is None:
            raise RuntimeUnavailable("harness.matrix.docker_runtime has no DockerRuntime")
        runtime: Runtime = factory(workdir) if _takes_arg(factory) else factory()
        return runtime
    raise RuntimeUnavailable(f"unknown runtime {name!r} (process or docker)")


def _takes_arg(factory: Any) -> bool:
    import inspect

    try:
        return len(inspect.signature(factory).parameters) >= 1
    except (TypeError, ValueError):
        return False


def needed_clients(cells: list[Cell]) -> list[ClientSpec]:
    out: list[ClientSpec] = []
    for cell in cells:
        specs = [cell.spec]
        new = cl.new_protocol(cell.spec)
        uses_new = cell.scenario not in ("add-remove", "static-bounce") or cell.protocol == new
        if uses_new and not cl.speaks(cell.spec, new):
            specs.append(cl.partner(cell.spec))
        for s in specs:
            if s not in out:
                out.append(s)
    return out


class Progress:
    """One line per finished cell plus a running count; a live line when stdout is a terminal."""

    def __init__(self, total: int, out: TextIO) -> None:
        self.total, self.out = total, out
        self.done = self.failed = self.not_run = 0
        self.t0 = time.monotonic()
        self.lock = threading.Lock()
        self.tty = out.isatty()

    def started(self, cell: Cell) -> None:
        if self.tty:
            with self.lock:
                self.out.write(f"\r\x1b[K[{self.done}/{self.total}] running {cell.id}")
                self.out.flush()

    def finished(self, r: CellResult) -> None:
        with self.lock:
            self.done += 1
            self.failed += r.verdict not in ("pass", NOT_RUN)
            self.not_run += r.verdict == NOT_RUN
            mark = {"pass": "PASS", NOT_RUN: "NOT RUN"}.get(r.verdict, "FAIL")
            elapsed = time.monotonic() - self.t0
            prefix = "\r\x1b[K" if self.tty else ""
            self.out.write(
                f"{prefix}[{self.done}/{self.total} {elapsed:5.0f}s] {mark} {r.cell.id} ({r.seconds:.0f}s)"
                f"{'' if r.verdict == 'pass' else ': ' + r.reason}\n"
            )
            self.out.flush()


def run_grid(
    grid: Grid,
    out_dir: Path,
    *,
    jobs: int = 2,
    runtime_name: str = "process",
    rerun_failed: bool = False,
    progress_out: TextIO = sys.stdout,
    on_result: Callable[[CellResult], None] | None = None,
) -> list[dict[str, Any]]:
    """Run the grid's cells; write DIR/results.json, junit.xml, report.html; return the rows."""
    from harness.matrix.report import result_row, write_all

    out_dir.mkdir(parents=True, exist_ok=True)
    previous: list[dict[str, Any]] = []
    cells = list(grid.cells)
    if rerun_failed:
        path = out_dir / "results.json"
        if not path.exists():
            raise ValueError(f"--rerun-failed: no {path} from an earlier run")
        # rows of cells still in the grid (before --only) are kept unless run again now
        known = {c.id for c in grid.universe}
        previous = [r for r in json.loads(path.read_text())["cells"] if r["id"] in known]
        passed = {r["id"] for r in previous if r["verdict"] == "pass"}
        cells = [c for c in cells if c.id not in passed]  # failed, or not run before
        rerun = {c.id for c in cells}
        previous = [r for r in previous if r["id"] not in rerun]
    work = out_dir / "work"
    if work.exists():  # backends' data and client logs of an earlier run: never reused
        shutil.rmtree(work)
    runtime = make_runtime(runtime_name, work)
    pool = BackendPool(work / "backends")
    progress = Progress(len(cells), progress_out)
    rows: list[dict[str, Any]] = []
    results: list[CellResult] = []
    lock = threading.Lock()
    prepared: dict[ClientSpec, str | None] = {}
    not_installed: set[ClientSpec] = set()
    versions: dict[ClientSpec, str] = {}
    t0 = time.time()
    try:
        for spec in needed_clients(cells):
            try:
                runtime.prepare(spec)
                prepared[spec] = None
                installed = getattr(runtime, "installed_version", None)
                if installed is not None:
                    versions[spec] = str(installed(spec))
            except ClientNotInstalled as e:
                prepared[spec] = f"{NOT_RUN}: {e}"
                not_installed.add(spec)
            except Exception as e:
                prepared[spec] = f"client {spec.key} unavailable: {e}"

        def one(cell: Cell) -> CellResult:
            progress.started(cell)
            t = time.time()
            specs = needed_clients([cell])
            missing = next((s for s in specs if prepared.get(s)), None)
            if missing is not None:
                verdict = NOT_RUN if missing in not_installed else "fail"
                r = CellResult(cell, verdict, str(prepared[missing]), 0.0, t0=t, t1=t)
            else:
                try:
                    backend = pool.get(cell.backend, cell.policy)
                    cell_dir = work / "cells" / cell.id.replace("/", "_").replace("@", "-")
                    if cell.spec.library == cl.CONNECT_LIBRARY:
                        from harness.matrix.connect_scenario import ConnectCellRun

                        r = ConnectCellRun(cell, backend, cell_dir).run()
                    else:
                        r = CellRun(cell, backend, runtime, cell_dir).run()
                except Exception as e:
                    r = CellResult(
                        cell, "fail", f"{type(e).__name__}: {e}", time.time() - t, t0=t, t1=time.time()
                    )
            r.versions = {s.key: versions.get(s, s.version) for s in specs}
            progress.finished(r)
            with lock:
                results.append(r)
                # results so far, so that an interrupted long run still leaves a report
                done = previous + [result_row(x) for x in results]
                write_all(out_dir, grid, done, results, time.time() - t0, runtime_name)
            if on_result is not None:
                on_result(r)
            return r

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
            list(ex.map(one, cells))
    finally:
        pool.close()
        runtime.close()
    order = {c.id: i for i, c in enumerate(grid.universe)}
    results.sort(key=lambda r: order.get(r.cell.id, 0))
    rows = previous + [result_row(r) for r in results]
    rows.sort(key=lambda row: order.get(row["id"], len(order)))
    write_all(out_dir, grid, rows, results, time.time() - t0, runtime_name)
    return rows
