#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan, coverage) into build-fuzz and runs each for a
# bounded time. docs/robustness.md explains the targets, the corpus and what to do with a crash.
#
#   scripts/fuzz.sh                      # every target, 60 s each (the CI run uses --seconds 30)
#   scripts/fuzz.sh --seconds 3600 fuzz_compile      # a long run of one target
#   scripts/fuzz.sh --build-only
#
# New inputs that reach new coverage go to fuzz/work/<target>/ (not in git; merge good ones into
# fuzz/corpus/<target>/ with `-merge=1`); crashes go to fuzz/artifacts/<target>/ and make the
# script fail. JOBS=N runs N fuzzing processes per target (default 1: the machine is shared).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
build_only=0
targets=()
while (($#)); do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=(fuzz_onnx_loader fuzz_text_ir fuzz_compile)

build=build-fuzz
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ \
      -DOPFUSE_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
ninja -C "$build" -j"${BUILD_JOBS:-2}" "${targets[@]}"
((build_only)) && exit 0

# The fuzz targets load models with threads = 1; keep OpenMP from spinning idle threads.
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
status=0
for t in "${targets[@]}"; do
  mkdir -p "fuzz/work/$t" "fuzz/artifacts/$t"
  seeds=("fuzz/corpus/$t")
  # The compile target also starts from the loader's seeds (every conformance model).
  [[ $t == fuzz_compile ]] && seeds+=("fuzz/corpus/fuzz_onnx_loader")
  log="fuzz/artifacts/$t/last_run.log"
  echo "== $t: ${seconds}s (log: $log)"
  parallel=()
  # Several jobs: libFuzzer forks workers, each logging to fuzz-<n>.log in the current directory.
  ((${JOBS:-1} > 1)) && parallel=(-jobs="$JOBS" -workers="$JOBS")
  if ! "./$build/fuzz/$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2560 \
       -malloc_limit_mb=1024 "${parallel[@]}" -print_final_stats=1 \
       -artifact_prefix="fuzz/artifacts/$t/" "fuzz/work/$t" "${seeds[@]}" >"$log" 2>&1; then
    echo "!! $t failed: see $log and fuzz/artifacts/$t/"
    tail -40 "$log"
    status=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$log" || grep -E "^#[0-9]+.*(DONE|pulse)" "$log" | tail -1
done
exit $status
