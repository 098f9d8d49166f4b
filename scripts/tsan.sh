#!/usr/bin/env bash
# Builds the unit tests with ThreadSanitizer into build-tsan and runs the concurrency tests
# under it (docs/robustness.md):
#   - ConcurrencyStressTest: one compiled model run from four threads at once, and the zoo's
#     tiny models compiled and run in parallel, each result compared bit for bit with the
#     single-threaded one;
#   - GraphModeTest.Concurrent*: concurrent runs of one session.
# OpenMP: libgomp is not built with TSan, so the synchronisation inside its parallel regions is
# invisible to TSan and would be reported as races. The sessions in these tests use threads = 1
# (OMP_NUM_THREADS=1 too), so no OpenMP team is ever formed and what TSan sees is opfuse's own
# threading: the plan cache, the arena pool, shared pre-packed weights, the registries.
# scripts/tsan.supp silences what remains inside the uninstrumented libraries.
#
#   scripts/tsan.sh                      # OPFUSE_STRESS_ROUNDS=4
#   OPFUSE_STRESS_ROUNDS=20 scripts/tsan.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-tsan
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOPFUSE_SANITIZE=thread >/dev/null
ninja -C "$build" -j"${BUILD_JOBS:-2}" opfuse_tests
export OPFUSE_ZOO_DIR="${OPFUSE_ZOO_DIR:-$HOME/.cache/opfuse/zoo}"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp}"
"./$build/tests/opfuse_tests" --gtest_filter='ConcurrencyStressTest.*:GraphModeTest.Concurrent*' "$@"
