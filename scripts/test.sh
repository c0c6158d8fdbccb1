#!/usr/bin/env bash
# Sets up and builds what is missing, then runs every test: ctest (labels cpu, dist,
# cuda, slow; CUDA tests report SKIPPED without a GPU) and the Python tests.
# Extra arguments go to ctest, e.g.:  scripts/test.sh -L cpu
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sb_prepare
# `sparsebalance run` draws the report's figures by default; the many runs the tests
# start skip them (seconds each). report --plots is tested on its own.
export SB_NO_PLOTS=1
cd "$SB_BUILD_DIR"
ctest --output-on-failure --timeout 900 -j "${SB_TEST_JOBS:-2}" "$@"
cd "$SB_REPO"
SB_BINARY="$SB_BUILD_DIR/sparsebalance" SB_BUILD_DIR="$SB_BUILD_DIR" "$SB_VENV/bin/python" -m pytest -q tests/python
