#!/usr/bin/env bash
# The unit suite (tests/, not e2e) against the compiled build (issue 30 point 1): builds the
# GROUPSHIFT_COMPILE=1 wheel (setup.py: mypyc), installs it into its own virtual environment and
# runs tests/ there, so the pure build (the editable install, CI's .venv) and the compiled one run
# the same tests.
#
#   scripts/compiled_tests.sh [PYTEST ARGS...]
#
# COMPILED_VENV (default /tmp/compiled-venv) is recreated; TEST_VENV (default .venv) lends its
# test tools (pytest, kafka-python, aiokafka, ...) through a .pth line placed after the wheel's
# site-packages, so nothing of the checkout's own packages comes from it (an editable install's
# finder is not activated by a plain path line). The tests run in a copy of the checkout without
# the package sources: the checkout's engine/*.py on sys.path would shadow the compiled modules.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${COMPILED_VENV:-/tmp/compiled-venv}"
test_venv="${TEST_VENV:-$repo/.venv}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

start=$(date +%s)
"$test_venv/bin/python" -m venv --clear "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
(cd "$repo" && GROUPSHIFT_COMPILE=1 "$venv/bin/pip" wheel --quiet --no-deps -w "$work/wheel" .)
"$venv/bin/pip" install --quiet "$work"/wheel/groupshift-*.whl
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$test_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/zz_test_tools.pth"
echo "built and installed in $(($(date +%s) - start)) s: $("$venv/bin/python" -m groupshift --version)"

# The checkout at HEAD plus uncommitted changes to tests, minus the packages the wheel installs.
mkdir "$work/tree"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work/tree" 2>/dev/null || true)
packages="$("$test_venv/bin/python" -c '
import tomllib
with open("'"$repo"'/pyproject.toml", "rb") as f:
    print(" ".join(p.rstrip("*") for p in tomllib.load(f)["tool"]["setuptools"]["packages"]["find"]["include"]))')"
for p in $packages; do rm -rf "${work:?}/tree/$p"; done
cd "$work/tree"
"$venv/bin/python" -c 'import engine.shard, sys; sys.exit(engine.shard.__file__.endswith(".py"))' \
    || { echo "engine.shard is not the compiled module" >&2; exit 1; }
tests_start=$(date +%s)
status=0
"$venv/bin/python" -m pytest -q -p no:cacheprovider --timeout 400 -m "not e2e" tests/ "$@" || status=$?
echo "tests/ against the compiled build: $(($(date +%s) - tests_start)) s (total $(($(date +%s) - start)) s)"
exit $status
