#!/usr/bin/env bash
# The unit suite (tests/, not e2e) against the compiled build (issue 30 point 1): builds the
# GROUPSHIFT_COMPILE=1 wheel (setup.py: mypyc), installs it into its own virtual environment and
# runs tests/ there, so the pure build (the editable install, CI's .venv) and the compiled one run
# the same tests.
#
#   scripts/compiled_tests.sh [PYTEST ARGS...]
#
# The arguments go to pytest; without a path under tests/ among them the whole of tests/ runs
# (`scripts/compiled_tests.sh -x`, `scripts/compiled_tests.sh tests/test_offsets.py -k expire`).
#
# COMPILED_VENV (default /tmp/compiled-venv) is recreated; TEST_VENV (default .venv) lends its
# test tools (pytest, kafka-python, aiokafka, ...) through a .pth line placed after the wheel's
# site-packages, so nothing of the checkout's own packages comes from it (an editable install's
# finder is not activated by a plain path line).
#
# REUSE=1 keeps COMPILED_VENV when it holds a wheel built from the same sources (the hash of the
# files the wheel is built from, the working tree's, is kept in the venv): only the tests run.
# Any change to a package, setup.py, pyproject.toml or build_backend/ rebuilds, and so does another
# GROUPSHIFT_OPT_LEVEL (setup.py: the C compiler's -O, default 3) or another Python (the wheel's
# extensions are built for one interpreter).
#
# The tests run in a copy of the checkout (HEAD plus uncommitted changes, untracked files not
# ignored), whole, so that tests reading sources (tests/test_import_graph.py,
# tests/test_one_way_to_change_state.py, ...) read them. The compiled modules must still win over
# the copy's .py files: the copy's root is put on sys.path by a .pth line after the wheel's
# site-packages, and nothing puts it in front: PYTHONSAFEPATH (no current directory or script
# directory first, for pytest and every Python process the tests start), pytest's `pythonpath`
# setting emptied and --import-mode=append. GROUPSHIFT_EXPECT_BUILD=compiled makes the root
# conftest.py stop the session if engine.shard was imported from a .py file after all.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${COMPILED_VENV:-/tmp/compiled-venv}"
test_venv="${TEST_VENV:-$repo/.venv}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

packages="$("$test_venv/bin/python" -c '
import tomllib
with open("'"$repo"'/pyproject.toml", "rb") as f:
    print(" ".join(p.rstrip("*") for p in tomllib.load(f)["tool"]["setuptools"]["packages"]["find"]["include"]))')"
# What the wheel is made of, as the working tree has it (uncommitted changes count), and for which
# Python.
# shellcheck disable=SC2086
sources_hash="$(cd "$repo" && { git ls-files -z --cached --others --exclude-standard -- $packages setup.py pyproject.toml build_backend \
    | sort -z | xargs -0 sha256sum 2>/dev/null || true; echo "opt level ${GROUPSHIFT_OPT_LEVEL:-3}"; "$test_venv/bin/python" -VV; } | sha256sum | cut -d' ' -f1)"
stamp="$venv/groupshift-sources.sha256"

start=$(date +%s)
if [ "${REUSE:-0}" = "1" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sources_hash" ] && [ -x "$venv/bin/python" ]; then
    echo "reusing $venv: built from these sources"
else
    # mypyc writes C: a machine without a compiler (or without Python's headers) cannot build the
    # wheel. Say so in one line rather than let pip end in a compiler traceback. setuptools
    # compiles with $CC, else the compiler Python was built with (sysconfig's CC).
    read -r compiler include <<<"$("$test_venv/bin/python" -c '
import os, shlex, sysconfig
cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
print(shlex.split(cc)[0], sysconfig.get_paths()["include"])')"
    if ! command -v "$compiler" >/dev/null; then
        echo "compiled_tests.sh: no C compiler ('$compiler' not found): the compiled build needs one" \
            "(Debian: apt-get install gcc). The pure build (pip install -e .) needs none." >&2
        exit 3
    fi
    if [ ! -f "$include/Python.h" ]; then
        echo "compiled_tests.sh: no Python.h in $include: the compiled build needs Python's headers" \
            "(Debian: apt-get install python3-dev)." >&2
        exit 3
    fi
    "$test_venv/bin/python" -m venv --clear "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
    (cd "$repo" && GROUPSHIFT_COMPILE=1 "$venv/bin/pip" wheel --quiet --no-deps -w "$work/wheel" .)
    "$venv/bin/pip" install --quiet "$work"/wheel/groupshift-*.whl
    echo "$sources_hash" > "$stamp"
    echo "built and installed in $(($(date +%s) - start)) s"
fi

# The checkout at HEAD plus uncommitted changes, whole.
mkdir "$work/tree"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work/tree" 2>/dev/null || true)
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
{
    "$test_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'
    echo "$work/tree"
} > "$site/zz_test_tools.pth"

cd "$work/tree"
export PYTHONSAFEPATH=1 GROUPSHIFT_EXPECT_BUILD=compiled
"$venv/bin/python" -c 'import engine.shard, sys; sys.exit(engine.shard.__file__.endswith(".py"))' \
    || { echo "engine.shard is not the compiled module" >&2; exit 1; }
echo "testing: $("$venv/bin/python" -m groupshift --version)"
tests_start=$(date +%s)
status=0
# tests/ unless the arguments name tests themselves (a file, a directory or a node id under tests/)
targets=(tests/)
for arg in "$@"; do
    case "$arg" in tests | tests/*) targets=() ;; esac
done
"$venv/bin/python" -m pytest -q -p no:cacheprovider --import-mode=append -o pythonpath= --timeout 400 \
    -m "not e2e" "${targets[@]}" "$@" || status=$?
echo "tests/ against the compiled build: $(($(date +%s) - tests_start)) s (total $(($(date +%s) - start)) s)"
exit $status
