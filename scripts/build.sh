#!/usr/bin/env bash
# Configures and builds opfuse (Release, Ninja) into ./build. Arguments name the ninja targets to
# build (default: everything, tests included); e.g. `./scripts/build.sh opfuse_cli` builds the
# library and the CLI only. Extra cmake options go in OPFUSE_CMAKE_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC2086  # OPFUSE_CMAKE_ARGS is a list of options
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${OPFUSE_CMAKE_ARGS:-} >/dev/null
ninja -C build -j"$(nproc)" "$@"
