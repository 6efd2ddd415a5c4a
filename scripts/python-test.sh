#!/usr/bin/env bash
# The Python package's tests: a fresh virtual environment, `pip install ./python`
# (maturin compiles the extension in release mode, from the checked-in
# python/Cargo.lock), then pytest under python/tests. The tests compare against
# the `rewardlab` CLI: the debug binary `cargo test` already built, or one they build.
#
# Usage: scripts/python-test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/python-test-venv
rm -rf "$venv"
python3 -m venv "$venv"
echo "== pip install ./python pytest numpy pyyaml"
start=$(date +%s)
"$venv/bin/pip" install --quiet --disable-pip-version-check ./python pytest numpy pyyaml
echo "installed in $(( $(date +%s) - start )) s"
echo "== pytest python/tests"
"$venv/bin/python" -m pytest python/tests -q "$@"
