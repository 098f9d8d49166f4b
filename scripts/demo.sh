#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install dependencies, build, run `opfuse demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh opfuse_cli  # the library and the CLI only: the tests are the test command's
./build/opfuse demo "$@"
