#!/usr/bin/env bash
# The layering is enforced by the build (CMakeLists.txt: each layer compiles against an include
# root holding only its own directories and those below). This check shows it: for each layer, a
# file including a header of its own layer compiles against that root, and one including a
# header of a layer above it fails because the header is not there.
# Usage: check_layering.sh CXX LAYERS_DIR
set -uo pipefail
cxx=$1
layers=$2
probe=$(mktemp --suffix=.cc)
trap 'rm -f "$probe"' EXIT
failed=0

compiles() {  # layer header
  printf '#include "%s"\n' "$2" >"$probe"
  "$cxx" -std=c++20 -fsyntax-only -I"$layers/$1" "$probe" 2>&1
}

# layer  a header of its own  headers of layers above it
while read -r layer own above; do
  if ! out=$(compiles "$layer" "$own"); then
    echo "FAIL: layer $layer cannot include its own $own:"; echo "$out"; failed=1
  fi
  for header in ${above//,/ }; do
    if out=$(compiles "$layer" "$header"); then
      echo "FAIL: layer $layer includes $header, a header of a layer above it"; failed=1
    elif ! grep -q "$header: No such file" <<<"$out"; then
      echo "FAIL: layer $layer including $header failed for another reason:"; echo "$out"; failed=1
    else
      echo "ok: layer $layer cannot include $header"
    fi
  done
done <<'TABLE'
core      core/tensor.h               ir/graph.h,ops/op_def.h
ops       ops/eager.h                 frontend/onnx/importer.h,codegen/fused_program.h,kernels/kernel.h,passes/pass.h,runtime/session.h
frontend  frontend/onnx/importer.h    codegen/fused_program.h,passes/pass.h,pipelines/pipeline.h,runtime/session.h
codegen   codegen/lower_region.h      kernels/kernel.h,passes/pass.h,frontend/builder/composite.h
kernels   kernels/kernel.h            passes/pass.h,pipelines/pipeline.h,runtime/session.h,frontend/onnx/importer.h
passes    passes/pass.h               kernels/kernel.h,pipelines/pipeline.h,runtime/session.h,report/profiler.h
pipelines pipelines/pipeline.h        kernels/kernel.h,runtime/session.h,report/profiler.h
runtime   runtime/session.h           report/profiler.h,plugin/plugin_loader.h
report    report/fusion_report.h      plugin/plugin_loader.h
plugin    plugin/plugin_loader.h      kernels/kernel.h,passes/pass.h,runtime/session.h
TABLE
exit $failed
