"""No `groupshift` command ever prints a traceback (issue 28, point 7).

Every sub-command of the command table (groupshift.cli.COMMANDS) is run as a real process with
a bad argument, a missing path (where it takes one), an unreachable server (where it takes one:
127.0.0.1 on a port that was bound and closed, so nobody listens) and bad values. Each must end
with the documented exit status (README: 2 usage for most commands, 3 input errors for `check`,
1 unreachable cluster for `groups`) and one clear error line, or for argparse's usage errors the
usage block of the sub-command that was being parsed, never the top-level one.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


NOBODY = f"127.0.0.1:{_closed_port()}"
MISSING = "/nonexistent-groupshift/x"
G = ["groups", "--bootstrap-server", NOBODY, "--timeout", "1"]
# a --command-config file naming a mechanism the tools do not speak (written by the `tmp` fixture)
BAD_PROPERTIES = "{tmp}/bad.properties"
ACL = ["acls", "--bootstrap-server", NOBODY]


class Case(NamedTuple):
    argv: list[str]
    status: int
    usage_of: str | None = None  # argparse's usage block of this parser, else one line


# Every sub-command, by the kind of bad input. The ids list what is covered.
CASES: dict[str, Case] = {
    # simulate
    "simulate/bad-argument": Case(["simulate", "--bogus"], 2, "groupshift simulate"),
    "simulate/bad-value-steps": Case(["simulate", "--steps", "0"], 2, "groupshift simulate"),
    "simulate/bad-value-seeds": Case(["simulate", "--chaos", "--seeds", "0"], 2, "groupshift simulate"),
    "simulate/bad-value-assignor": Case(["simulate", "--assignor", "nope"], 2, "groupshift simulate"),
    "simulate/bad-value-scenario": Case(["simulate", "--scenario", "nope"], 2, "groupshift simulate"),
    # serve (its unreachable upstream: test_serve_outlives_an_unreachable_upstream)
    "serve/bad-argument": Case(["serve", "--bogus"], 2, "groupshift serve"),
    "serve/missing-path": Case(["serve", "--config", MISSING], 2),
    "serve/bad-value-set": Case(["serve", "--set", "bad"], 2),
    "serve/bad-value-listen": Case(["serve", "--listen", "nope"], 2),
    "serve/bad-value-log-format": Case(["serve", "--log-format", "xml"], 2, "groupshift serve"),
    # records
    "records/bad-argument": Case(["records", "--bogus"], 2, "groupshift records"),
    "records-dump/bad-argument": Case(["records", "dump", "--bogus", "x"], 2, "groupshift records dump"),
    "records-dump/missing-path": Case(["records", "dump", MISSING], 2),
    "records-export/bad-argument": Case(["records", "export", "--bogus"], 2, "groupshift records export"),
    "records-export/missing-path": Case(
        ["records", "export", "--data-dir", MISSING, "--to-log-dir", "{tmp}/e"], 2
    ),
    "records-export/bad-value": Case(
        ["records", "export", "--data-dir", "{tmp}", "--to-log-dir", "{tmp}/e", "--partitions", "0"],
        2,
        "groupshift records export",
    ),
    "records-import/bad-argument": Case(["records", "import", "--bogus"], 2, "groupshift records import"),
    "records-import/missing-path": Case(
        ["records", "import", "--from-log-dir", MISSING, "--data-dir", "{tmp}/i"], 2
    ),
    "records-rewrite/bad-argument": Case(["records", "rewrite", "--bogus"], 2, "groupshift records rewrite"),
    "records-rewrite/missing-path": Case(
        ["records", "rewrite", "--for-downgrade", "kafka-3.9", "--data-dir", MISSING, "--out", "{tmp}/r"], 2
    ),
    "records-rewrite/bad-value": Case(
        ["records", "rewrite", "--for-downgrade", "nope", "--data-dir", "{tmp}", "--out", "{tmp}/r"],
        2,
        "groupshift records rewrite",
    ),
    # groups
    "groups/bad-argument": Case([*G, "--bogus"], 2, "groupshift groups"),
    "groups/no-bootstrap-server": Case(["groups", "list"], 2, "groupshift groups list"),
    "groups/bad-value-timeout": Case(
        ["groups", "--bootstrap-server", NOBODY, "--timeout", "-1", "list"], 2, "groupshift groups"
    ),
    "groups/bad-value-bootstrap": Case(["groups", "--bootstrap-server", "nope", "list"], 2),
    "groups/missing-path-command-config": Case([*G, "--command-config", MISSING, "list"], 2),
    "groups/bad-value-command-config": Case([*G, "--command-config", BAD_PROPERTIES, "list"], 2),
    "groups-describe/bad-value-command-config": Case(
        [*G, "describe", "g", "--command-config", BAD_PROPERTIES], 2
    ),
    "groups-list/bad-argument": Case([*G, "list", "--bogus"], 2, "groupshift groups list"),
    "groups-list/unreachable": Case([*G, "list"], 1),
    "groups-list/options-after": Case(
        ["groups", "list", "--json", "--bootstrap-server", NOBODY, "--timeout", "1"], 1
    ),
    "groups-describe/bad-argument": Case([*G, "describe", "--bogus", "g"], 2, "groupshift groups describe"),
    "groups-describe/no-group": Case([*G, "describe"], 2),
    "groups-describe/unreachable": Case([*G, "describe", "g", "h", "--group", "i"], 1),
    "groups-describe/unreachable-all-groups": Case([*G, "describe", "--all-groups"], 1),
    "groups-reset-offsets/bad-argument": Case(
        [*G, "reset-offsets", "--bogus", "g"], 2, "groupshift groups reset-offsets"
    ),
    "groups-reset-offsets/missing-path": Case([*G, "reset-offsets", "g", "--from-file", MISSING], 2),
    "groups-reset-offsets/unreachable": Case([*G, "reset-offsets", "g", "--all-topics", "--to-earliest"], 1),
    "groups-reset-offsets/bad-value": Case(
        [*G, "reset-offsets", "g", "--all-topics", "--to-datetime", "bad"], 2
    ),
    "groups-reset-offsets/unreachable-all-groups": Case(
        [*G, "reset-offsets", "--all-groups", "--all-topics", "--to-earliest"], 1
    ),
    "groups-reset-offsets/group-and-all-groups": Case(
        [*G, "reset-offsets", "g", "--all-groups", "--all-topics", "--to-earliest"], 2
    ),
    "groups-delete-offsets/bad-argument": Case(
        [*G, "delete-offsets", "g"], 2, "groupshift groups delete-offsets"
    ),
    "groups-delete-offsets/unreachable": Case([*G, "delete-offsets", "g", "--topic", "t"], 1),
    "groups-delete/bad-argument": Case([*G, "delete", "--bogus", "g"], 2, "groupshift groups delete"),
    "groups-delete/no-group": Case([*G, "delete"], 2),
    "groups-delete/unreachable": Case([*G, "delete", "g"], 1),
    "groups-delete/unreachable-all-groups": Case([*G, "delete", "--all-groups"], 1),
    "groups-config/bad-argument": Case([*G, "config", "--bogus", "g"], 2, "groupshift groups config"),
    "groups-config/unreachable": Case([*G, "config", "g"], 1),
    "groups-config/bad-value": Case([*G, "config", "g", "--set", "bad"], 2),
    "groups-migration/bad-argument": Case(
        [*G, "migration", "--bogus", "g"], 2, "groupshift groups migration"
    ),
    "groups-migration/unreachable": Case([*G, "migration", "g"], 1),
    "groups-migration/unreachable-watch": Case(
        [*G, "migration", "g", "--watch", "--count", "1", "--interval", "0.1"], 1
    ),
    "groups-migration/missing-path-events": Case([*G, "migration", "g", "--events", MISSING], 2),
    "groups-migration/missing-path-plot": Case([*G, "migration", "g", "--plot", MISSING + "/p.png"], 2),
    "groups-migration/bad-value-count": Case(
        [*G, "migration", "g", "--watch", "--count", "0"], 2, "groupshift groups migration"
    ),
    "groups-migration/bad-value-interval": Case(
        [*G, "migration", "g", "--watch", "--interval", "-1"], 2, "groupshift groups migration"
    ),
    # kafka (start and fetch never reach Maven: the version spec is refused first)
    "kafka/bad-argument": Case(["kafka", "--bogus"], 2, "groupshift kafka"),
    "kafka-start/bad-argument": Case(["kafka", "start", "--bogus"], 2, "groupshift kafka start"),
    "kafka-start/bad-value-brokers": Case(["kafka", "start", "--brokers", "0"], 2),
    "kafka-start/bad-value-set": Case(["kafka", "start", "--set", "bad"], 2),
    "kafka-start/bad-value-version": Case(["kafka", "start", "--version", "nope"], 2),
    "kafka-start/bad-value-security": Case(
        ["kafka", "start", "--security", "kerberos"], 2, "groupshift kafka start"
    ),
    "kafka-versions/bad-argument": Case(["kafka", "versions", "--bogus"], 2, "groupshift kafka versions"),
    "kafka-fetch/bad-argument": Case(["kafka", "fetch", "--bogus", "4"], 2, "groupshift kafka fetch"),
    "kafka-fetch/bad-value": Case(["kafka", "fetch", "not-a-version", "--broker-only"], 1),
    "kafka-tool/bad-argument": Case(["kafka", "tool"], 2, "groupshift kafka tool"),
    "kafka-tool/bad-value": Case(["kafka", "tool", "kafka-no-such-tool", "--help"], 2),
    # acls (kafka-acls.sh's checks, before any connection)
    "acls/bad-argument": Case(["acls", "--bogus"], 2, "groupshift acls"),
    "acls/no-bootstrap-server": Case(["acls", "--list"], 2, "groupshift acls"),
    "acls/unreachable": Case(["acls", "--bootstrap-server", NOBODY, "--timeout", "1", "--list"], 1),
    "acls/missing-path-command-config": Case(
        ["acls", "--bootstrap-server", NOBODY, "--command-config", MISSING, "--list"], 2
    ),
    "acls/bad-value-verb": Case(["acls", "--bootstrap-server", NOBODY, "--add", "--list"], 2),
    "acls/bad-value-operation": Case(
        [*ACL, "--add", "--topic", "t", "--allow-principal", "User:a", "--operation", "Fly"], 2
    ),
    "acls/bad-value-operation-for-resource": Case(
        [*ACL, "--add", "--cluster", "--allow-principal", "User:a", "--operation", "Read"], 2
    ),
    "acls/bad-value-principal": Case(
        ["acls", "--bootstrap-server", NOBODY, "--add", "--group", "g", "--allow-principal", "alice"], 2
    ),
    # check (README: 3 for every input error, bad arguments included)
    "check/bad-argument": Case(["check", "--bogus"], 3, "groupshift check"),
    "check-upgrade/bad-argument": Case(
        ["check", "upgrade", "--data-dir", "{tmp}", "--bogus"], 3, "groupshift check upgrade"
    ),
    "check-upgrade/missing-path": Case(["check", "upgrade", "--data-dir", MISSING, "--all"], 3),
    "check-upgrade/missing-path-log-dir": Case(["check", "upgrade", "--log-dir", MISSING, "--all"], 3),
    "check-upgrade/unreachable": Case(
        ["check", "upgrade", "--bootstrap-server", NOBODY, "--timeout", "1", "--all"], 3
    ),
    "check-upgrade/missing-path-command-config": Case(
        ["check", "upgrade", "--bootstrap-server", NOBODY, "--command-config", MISSING, "--all"], 3
    ),
    "check-upgrade/bad-value-command-config": Case(
        ["check", "upgrade", "--bootstrap-server", NOBODY, "--command-config", BAD_PROPERTIES, "--all"], 3
    ),
    "check-upgrade/command-config-without-cluster": Case(
        ["check", "upgrade", "--data-dir", "{tmp}", "--command-config", BAD_PROPERTIES, "--all"], 3
    ),
    "check-upgrade/bad-value-timeout": Case(
        ["check", "upgrade", "--bootstrap-server", NOBODY, "--timeout", "-1", "--all"],
        3,
        "groupshift check upgrade",
    ),
    "check-downgrade/bad-argument": Case(["check", "downgrade", "--bogus"], 3, "groupshift check downgrade"),
    "check-downgrade/missing-path": Case(
        ["check", "downgrade", "--to", "classic-protocol", "--data-dir", MISSING, "--all"], 3
    ),
    "check-downgrade/unreachable": Case(
        [
            "check",
            "downgrade",
            "--to",
            "classic-protocol",
            "--bootstrap-server",
            NOBODY,
            "--timeout",
            "1",
            "--all",
        ],
        3,
    ),
    "check-downgrade/bad-value": Case(
        ["check", "downgrade", "--to", "nope", "--data-dir", "{tmp}", "--all"], 3
    ),
    # matrix
    "matrix/bad-argument": Case(["matrix", "--bogus"], 2, "groupshift matrix"),
    "matrix-run/bad-argument": Case(["matrix", "run", "--bogus"], 2, "groupshift matrix run"),
    "matrix-run/missing-path": Case(["matrix", "run", "--grid", MISSING], 2),
    "matrix-run/bad-value-jobs": Case(["matrix", "run", "--jobs", "0", "--out", "{tmp}/m"], 2),
    "matrix-list/bad-argument": Case(["matrix", "list", "--bogus"], 2, "groupshift matrix list"),
    "matrix-list/missing-path": Case(["matrix", "list", "--grid", MISSING], 2),
    "matrix-list/bad-value": Case(["matrix", "list", "--only", "=,"], 2),
    # fleet
    "fleet/bad-argument": Case(["fleet", "--bogus"], 2, "groupshift fleet"),
    "fleet-report/bad-argument": Case(["fleet", "report", "--bogus"], 2, "groupshift fleet report"),
    "fleet-report/missing-path": Case(["fleet", "report", MISSING, "--out", "{tmp}/f"], 2),
    "fleet-report/bad-value": Case(
        ["fleet", "report", "{tmp}", "--out", "{tmp}/f", "--downgrade-target", "nope", "--reference"], 2
    ),
    "fleet-synth/bad-argument": Case(["fleet", "synth", "--bogus"], 2, "groupshift fleet synth"),
    "fleet-synth/bad-value-clusters": Case(
        ["fleet", "synth", "--clusters", "0", "--groups", "1", "--records", "1", "--out", "{tmp}/s"], 2
    ),
    "fleet-synth/bad-value-hours": Case(
        [
            "fleet",
            "synth",
            "--clusters",
            "1",
            "--groups",
            "1",
            "--records",
            "1",
            "--hours",
            "-1",
            "--out",
            "{tmp}/s",
        ],
        2,
    ),
}


def groupshift(argv: list[str], tmp: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GROUPSHIFT_KAFKA_CACHE": str(tmp / "kafka-cache"), "NO_COLOR": "1"}
    env.pop("GROUPSHIFT_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "groupshift", *argv],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_every_subcommand_is_covered() -> None:
    """A new sub-command without bad-input cases fails here."""
    from groupshift.cli import build_parser, innermost_parser

    parser = build_parser()
    names: set[str] = set()
    for action in parser._actions:
        for name, sub in (getattr(action, "choices", None) or {}).items():
            if not isinstance(sub, type(parser)):
                continue
            inner = [a for a in sub._actions if a.__class__.__name__ == "_SubParsersAction"]
            names.add(name)
            for a in inner:
                names.update(f"{name}-{n}" for n in a.choices)
    covered = {case_id.split("/")[0] for case_id in CASES}
    assert names - covered == set()
    assert innermost_parser(parser, parser.parse_args(["groups", "list"])).prog == "groupshift groups list"


def _with_bad_properties(directory: Path) -> Path:
    (directory / "bad.properties").write_text("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n")
    return directory


@pytest.fixture
def tmp(tmp_path: Path) -> Iterator[Path]:
    yield _with_bad_properties(tmp_path)


@pytest.fixture(scope="module")
def bad_input_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[subprocess.CompletedProcess[str]]]]:
    """The selected cases' processes, started four at a time when the module starts (each in its
    own directory): a case is a Python start and a wait for nobody, about a second of mostly
    idle wall time, and one after the other the cases were over a minute of a CI run on two
    cores. Each test waits for its own case's process and checks it."""
    selected = [
        item.callspec.params["case_id"]
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec") and "case_id" in item.callspec.params
    ]
    dirs = {
        case_id: _with_bad_properties(tmp_path_factory.mktemp(case_id.replace("/", "-")))
        for case_id in selected
    }

    def run(case_id: str) -> subprocess.CompletedProcess[str]:
        tmp = dirs[case_id]
        return groupshift([a.replace("{tmp}", str(tmp)) for a in CASES[case_id].argv], tmp)

    with ThreadPoolExecutor(4) as pool:
        yield {case_id: pool.submit(run, case_id) for case_id in selected}


@pytest.mark.parametrize("case_id", list(CASES))
def test_bad_input_gives_one_clear_error(
    case_id: str, bad_input_runs: dict[str, Future[subprocess.CompletedProcess[str]]]
) -> None:
    case = CASES[case_id]
    r = bad_input_runs[case_id].result()
    said = r.stderr
    assert "Traceback" not in r.stderr + r.stdout, said
    assert said.strip(), f"the error went to stdout, not stderr: {r.stdout!r}"
    assert "a bug: please report it" not in said, said
    assert r.returncode == case.status, (r.returncode, said)
    lines = [line for line in said.splitlines() if line.strip()]
    assert lines, "no error message"
    if case.usage_of is not None:
        assert lines[0].startswith(f"usage: {case.usage_of} "), said
        assert lines[-1].startswith(f"{case.usage_of}: error: "), said
    else:
        assert len(lines) == 1, said


def test_serve_outlives_an_unreachable_upstream(tmp: Path) -> None:
    """`serve --upstream` to nobody keeps serving and says why on warning lines; SIGTERM stops
    it with 0 and no traceback."""
    env = {**os.environ, "NO_COLOR": "1"}
    argv = ["serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp / "d"), "--upstream", NOBODY]
    argv += ["--set", "upstream.socket.connection.setup.timeout.ms=500"]
    argv += ["--set", "upstream.request.timeout.ms=500"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "groupshift", *argv],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            if "upstream.refresh_failed" in line:
                break
        assert any("upstream.refresh_failed" in s for s in seen), "".join(seen[-5:])
    finally:
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=30)[1]
    assert proc.returncode == 0, rest[-2000:]
    assert "Traceback" not in "".join(seen) + rest


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "GROUPSHIFT_DEBUG"} | env
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )


def test_a_bug_is_one_line_and_ctrl_c_is_quiet(tmp: Path) -> None:
    """The safety net of groupshift.cli.main: an exception no command handles is one line with
    exit 1 (the traceback with GROUPSHIFT_DEBUG=1); KeyboardInterrupt is exit 130, quietly."""
    code = (
        "import sys, groupshift.commands.simulate as s\n"
        "def boom(args): raise {exc}\n"
        "s.run = boom\n"
        "orig = s.add_parser\n"
        "def add(sub, summary):\n"
        "    p = orig(sub, summary); p.set_defaults(run=boom); return p\n"
        "s.add_parser = add\n"
        "from groupshift.cli import main\n"
        "sys.exit(main(['simulate']))\n"
    )
    bug = run_python(code.format(exc="RuntimeError('boom')"))
    assert bug.returncode == 1
    assert bug.stderr == (
        "groupshift simulate: error: boom (a bug: please report it; run with GROUPSHIFT_DEBUG=1 "
        "for the traceback)\n"
    )
    debug = run_python(code.format(exc="RuntimeError('boom')"), GROUPSHIFT_DEBUG="1")
    assert "Traceback" in debug.stderr
    interrupted = run_python(code.format(exc="KeyboardInterrupt"))
    assert (interrupted.returncode, interrupted.stderr) == (130, "")


def test_a_spark_failure_is_one_line_and_sparks_log_goes_to_a_file(tmp: Path) -> None:
    """A Spark that cannot start (a bad --master) gives one line naming Spark's log file; Spark's
    own WARN/ERROR lines and Java stack traces go to that file, never to the terminal."""
    (tmp / "in").mkdir()
    (tmp / "in" / "events.jsonl").write_text('{"event": "gateway.listening"}\n')
    argv = ["fleet", "report", str(tmp / "in"), "--out", str(tmp / "out"), "--master", "local[0]"]
    r = groupshift(argv, tmp, timeout=300)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "\tat " not in r.stderr and " WARN " not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("groupshift fleet report: error:")]
    assert len(errors) == 1 and errors[0].endswith(f"(Spark's log: {tmp / 'out' / 'spark.log'})"), r.stderr
    assert "Spark did not start" in errors[0]
    assert "JavaSparkContext" in (tmp / "out" / "spark.log").read_text()
