#!/usr/bin/env bash
# All tests on a fresh Debian 12 machine: install dependencies, build, generate the tiny model
# zoo (cached), run unit, conformance and end-to-end tests.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
./scripts/python.sh
export OPFUSE_ZOO_DIR="${OPFUSE_ZOO_DIR:-$HOME/.cache/opfuse/zoo}"
/usr/bin/python3 tools/zoo/make_zoo.py --tiny --out "$OPFUSE_ZOO_DIR"
ctest --test-dir build --output-on-failure -j2 --timeout 900
