"""Run `groupshift groups` and read its output back.

`groups(bootstrap, *args)` runs `groupshift groups --bootstrap-server B ARGS...` and returns a
`subprocess.CompletedProcess` (args, returncode, stdout, stderr). By default the command runs in
this process (the same `main(argv)` the console script calls, with stdout and stderr captured):
a new interpreter per call costs about 1.5 s on a loaded CI machine and the Kafka-comparison
transcripts make dozens of calls. `subprocess=True` (and `GROUPS_CLI_SUBPROCESS=1` for all
calls) runs `python -m groupshift groups` as a user would; the tests of exit codes seen by a
shell, of colour on a pipe, and `--watch` under SIGINT use it.

`table(stdout)` parses the aligned tables it prints (and those of Kafka's
`kafka-consumer-groups.sh`, which uses the same headers) into one dict per row, keyed by header,
by the columns' start positions (headers such as "COORDINATOR (ID)" hold a space).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess as _subprocess
import sys
from typing import Any

from e2e.harness import REPO

HEADER_STARTS = ("GROUP", "TOPIC", "NAME", "CONSUMER-ID", "PARTITION")


def groups(bootstrap: str, *args: str, timeout: float = 60.0, subprocess: bool = False) -> Any:
    argv = ["groups", "--bootstrap-server", bootstrap, *args]
    if subprocess or os.environ.get("GROUPS_CLI_SUBPROCESS") == "1":
        return _subprocess.run(
            [sys.executable, "-m", "groupshift", *argv],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    from groupshift.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse usage errors
            code = e.code if isinstance(e.code, int) else 2
    return _subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def groups_json(bootstrap: str, *args: str, expect: int = 0) -> Any:
    r = groups(bootstrap, *args, "--json")
    assert r.returncode == expect, f"exit {r.returncode}, expected {expect}\n{r.stdout}\n{r.stderr}"
    return json.loads(r.stdout)


def ok(bootstrap: str, *args: str) -> str:
    r = groups(bootstrap, *args)
    assert r.returncode == 0, f"groups {' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return str(r.stdout)


def _columns(header: str) -> list[tuple[str, int]]:
    """(name, start) for each header; a header is a run of words separated by single spaces
    ('COORDINATOR (ID)'), columns by two or more spaces or one space before an upper-case word."""
    cols: list[tuple[str, int]] = []
    i = 0
    n = len(header)
    while i < n:
        while i < n and header[i] == " ":
            i += 1
        if i >= n:
            break
        start = i
        while i < n and header[i] != " ":
            i += 1
        word = header[start:i]
        if word.startswith("(") and cols:  # "COORDINATOR (ID)": continues the previous header
            name, s = cols.pop()
            cols.append((f"{name} {word}", s))
            continue
        cols.append((word, start))
    return cols


def table(text: str) -> list[dict[str, str]]:
    """Rows of every table in `text` (a header line starts with a known header word)."""
    rows: list[dict[str, str]] = []
    cols: list[tuple[str, int]] | None = None
    for line in text.splitlines():
        if not line.strip():
            cols = None
            continue
        if line.split(" ", 1)[0] in HEADER_STARTS and line.strip() == line.strip().upper():
            cols = _columns(line)
            continue
        if cols is None:
            continue
        row = {}
        for k, (name, start) in enumerate(cols):
            end = cols[k + 1][1] if k + 1 < len(cols) else len(line)
            row[name] = line[start:end].strip()
        rows.append(row)
    return rows
