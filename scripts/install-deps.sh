#!/usr/bin/env bash
# Installs every system dependency of opfuse from Debian 12 packages.
# Idempotent: apt skips what is already installed, so re-running is safe.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libprotobuf-dev protobuf-compiler libonnx-dev   # ONNX model files
  libdnnl-dev libhwy-dev                          # fast kernels (graph mode)
  nlohmann-json3-dev libcli11-dev                 # JSON output, CLI parsing
  libgtest-dev libgmock-dev libbenchmark-dev      # tests and micro-benchmarks
  graphviz                                        # graph pictures
  clang libclang-rt-14-dev libomp-dev             # fuzzing (libFuzzer, sanitizers; scripts/fuzz.sh)
  libonnx-testdata                                # ONNX backend conformance tests
  python3 python3-numpy python3-onnx python3-torch python3-torchvision  # model zoo
  python3-pybind11 python3-venv python3-setuptools python3-wheel python3-pytest  # Python package
  libcpp-httplib-dev python3-yaml                 # `opfuse serve` (HTTP), its deploy manifests' tests
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
