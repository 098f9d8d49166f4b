#!/usr/bin/env node
// ONNX Runtime's outputs for one real-zoo model on its seeded inputs: the reference the tests
// and benchmarks compare opfuse against. Reads DIR/manifest.json's entry, runs the model once
// (all graph optimisations, 1 thread), writes each output as DIR/<file> (.npy, float32).
//
// Usage: node ort_reference.mjs --zoo DIR --model ID
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { readNpy } from '../bench/ort_bench.mjs';

const require = createRequire(new URL('../bench/package.json', import.meta.url));

function writeNpyF32(path, dims, data) {
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${dims.join(', ')}${dims.length === 1 ? ',' : ''}), }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1; head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const body = Buffer.from(new Float32Array(data).buffer);
  writeFileSync(path, Buffer.concat([head, Buffer.from(header, 'latin1'), body]));
}

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, v, i, a) => (i % 2 ? acc : [...acc, [a[i].replace(/^--/, ''), a[i + 1]]]), []));
const ort = require('onnxruntime-node');
const manifest = JSON.parse(readFileSync(join(args.zoo, 'manifest.json'), 'utf8'));
const entry = manifest[args.model];
if (!entry) throw new Error(`${args.model} is not in the manifest`);
const feeds = {};
for (const io of entry.inputs) {
  const a = readNpy(join(args.zoo, io.file));
  feeds[io.name] = new ort.Tensor(a.dtype, a.data, a.shape);
}
const session = await ort.InferenceSession.create(join(args.zoo, entry.file),
  { graphOptimizationLevel: 'all', intraOpNumThreads: 1, executionProviders: ['cpu'] });
const out = await session.run(feeds);
for (const io of entry.outputs) {
  const t = out[io.name];
  if (!t) throw new Error(`ORT gave no output ${io.name}`);
  if (t.type !== 'float32') throw new Error(`output ${io.name} is ${t.type}; only float32 references are written`);
  writeNpyF32(join(args.zoo, io.file), t.dims, t.data);
  io.shape = Array.from(t.dims);
  io.ref_shape = Array.from(t.dims);
}
writeFileSync(join(args.zoo, 'manifest.json'), JSON.stringify(manifest, null, 1));
process.stdout.write(`${args.model}: ${entry.outputs.length} outputs from onnxruntime-node ${require('onnxruntime-node/package.json').version}\n`);
