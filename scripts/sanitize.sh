#!/usr/bin/env bash
# Builds opfuse with AddressSanitizer + UndefinedBehaviorSanitizer into build-asan and runs the
# unit and conformance tests under them (docs/robustness.md). UB aborts the test that hits it.
#
#   scripts/sanitize.sh                    # everything ctest knows (unit, conformance, zoo e2e)
#   scripts/sanitize.sh -R 'Robustness|Onnx'   # extra args go to ctest (-R/-E select tests)
#   scripts/sanitize.sh --conformance-only     # the library + the ONNX node tests (what CI runs)
#
# The compiler is the project's default (gcc): its OpenMP runtime is libgomp, the one oneDNN
# uses, so the process has one OpenMP runtime as in the normal build.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-asan
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DOPFUSE_SANITIZE=address,undefined >/dev/null
targets=(opfuse_tests opfuse_conformance opfuse_cli)
conformance_only=0
if [[ ${1:-} == --conformance-only ]]; then
  conformance_only=1
  targets=(opfuse_conformance)
  shift
fi
ninja -C "$build" -j"${BUILD_JOBS:-2}" "${targets[@]}"
export OPFUSE_ZOO_DIR="${OPFUSE_ZOO_DIR:-$HOME/.cache/opfuse/zoo}"
# detect_leaks: leaks fail a test too. allocator_may_return_null: a refused huge allocation is
# an error value (tested), not an ASan abort. The CLI re-executes itself once (main.cc):
# ASan handles that fine.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export OMP_WAIT_POLICY=passive
if ((conformance_only)); then
  exec "./$build/tests/opfuse_conformance" "$@"
fi
ctest --test-dir "$build" --output-on-failure -j2 --timeout 1800 "$@"
