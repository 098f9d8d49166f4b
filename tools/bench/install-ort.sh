#!/bin/sh
# Installs ONNX Runtime for Node (onnxruntime-node) into tools/bench/node_modules (git-ignored).
#
# --ignore-scripts: the package's install script tries to download optional GPU binaries from
# the internet, which fails here; the CPU library ships inside the npm package itself.
# Re-running is cheap: npm leaves an up-to-date install alone.
set -eu
ORT_VERSION="${ORT_VERSION:-1.30.0}"
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
# A package.json of our own keeps npm from walking up to the repository root.
[ -f package.json ] || { echo "install-ort.sh: missing $here/package.json" >&2; exit 1; }
npm install --no-save --no-audit --no-fund --ignore-scripts "onnxruntime-node@${ORT_VERSION}"
node -e "const o=require('onnxruntime-node'); console.log('onnxruntime-node', require('onnxruntime-node/package.json').version, 'ok; backends:', Object.keys(o).includes('InferenceSession') ? 'InferenceSession available' : 'missing InferenceSession')"
