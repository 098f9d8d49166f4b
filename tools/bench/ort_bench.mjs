#!/usr/bin/env node
// Times one zoo model under ONNX Runtime (onnxruntime-node) and prints ONE JSON object on stdout,
// shaped like `opfuse bench --json`: median_ms, min_ms, p90_ms, peak_rss_bytes, kernels (null).
// It also checks ORT's outputs against the zoo's reference outputs (max|diff| / max|ref|), so a
// timing is only trusted when ORT computed the same model.
//
// Usage: node ort_bench.mjs --zoo DIR --model NAME [--opt disabled|basic|extended|all]
//            [--threads 2] [--iters 20] [--warmup 3] [--allow-spinning 1|0] [--denormal-as-zero 1|0]
// Errors go to stderr with a non-zero exit code (the harness records them).

import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const rssAtStart = process.memoryUsage().rss;

function parseArgs(argv) {
  const args = { opt: 'all', threads: 2, iters: 20, warmup: 3, allowSpinning: null, denormalAsZero: '0' };
  for (let i = 0; i < argv.length; i++) {
    const key = argv[i];
    const val = argv[i + 1];
    if (val === undefined) throw new Error(`missing value for ${key}`);
    i++;
    switch (key) {
      case '--zoo': args.zoo = val; break;
      case '--model': args.model = val; break;
      case '--opt': args.opt = val; break;
      case '--threads': args.threads = Number(val); break;
      case '--iters': args.iters = Number(val); break;
      case '--warmup': args.warmup = Number(val); break;
      case '--allow-spinning': args.allowSpinning = val; break;
      case '--denormal-as-zero': args.denormalAsZero = val; break;
      default: throw new Error(`unknown option ${key}`);
    }
  }
  if (!args.zoo || !args.model) throw new Error('--zoo DIR and --model NAME are required');
  for (const k of ['threads', 'iters', 'warmup']) {
    if (!Number.isInteger(args[k]) || args[k] < (k === 'warmup' ? 0 : 1)) {
      throw new Error(`--${k} must be a positive integer, got ${args[k]}`);
    }
  }
  return args;
}

// ---- .npy reader (format versions 1-3, little-endian C-order arrays only) ----
const NPY_TYPES = {
  '<f4': ['float32', Float32Array],
  '<f8': ['float64', Float64Array],
  '<i8': ['int64', BigInt64Array],
  '<i4': ['int32', Int32Array],
  '<u8': ['uint64', BigUint64Array],
  '|u1': ['uint8', Uint8Array],
  '|i1': ['int8', Int8Array],
  '|b1': ['bool', Uint8Array],
};

export function readNpy(path) {
  const buf = readFileSync(path);
  if (buf.length < 10 || buf[0] !== 0x93 || buf.toString('latin1', 1, 6) !== 'NUMPY') {
    throw new Error(`${path}: not a .npy file`);
  }
  const major = buf[6];
  let headerLen;
  let offset;
  if (major === 1) {
    headerLen = buf.readUInt16LE(8);
    offset = 10;
  } else if (major === 2 || major === 3) {
    headerLen = buf.readUInt32LE(8);
    offset = 12;
  } else {
    throw new Error(`${path}: unsupported .npy version ${major}`);
  }
  const header = buf.toString('latin1', offset, offset + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const fortran = /'fortran_order':\s*(True|False)/.exec(header)?.[1];
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1];
  if (!descr || !fortran || shapeText === undefined) throw new Error(`${path}: bad .npy header ${header}`);
  if (fortran === 'True') throw new Error(`${path}: Fortran-order arrays are not supported`);
  const type = NPY_TYPES[descr];
  if (!type) throw new Error(`${path}: unsupported dtype ${descr}`);
  const shape = shapeText.split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const count = shape.reduce((a, b) => a * b, 1);
  const [dtype, Ctor] = type;
  const dataStart = offset + headerLen;
  const nbytes = count * Ctor.BYTES_PER_ELEMENT;
  if (buf.length < dataStart + nbytes) throw new Error(`${path}: truncated data`);
  // Copy into a fresh, aligned ArrayBuffer (the file buffer's data offset need not be aligned).
  const data = new Ctor(count);
  new Uint8Array(data.buffer).set(buf.subarray(dataStart, dataStart + nbytes));
  return { dtype, shape, data };
}

function relMaxAbsDiff(got, want) {
  if (got.length !== want.length) return { error: `size ${got.length} vs reference ${want.length}` };
  let maxDiff = 0;
  let maxRef = 0;
  for (let i = 0; i < want.length; i++) {
    const w = Number(want[i]);
    const d = Math.abs(Number(got[i]) - w);
    if (!(d <= maxDiff)) maxDiff = d;  // also catches NaN
    if (Math.abs(w) > maxRef) maxRef = Math.abs(w);
  }
  return { max_abs_diff: maxDiff, max_abs_ref: maxRef, rel: maxDiff / Math.max(maxRef, 1e-30) };
}

function percentile(sorted, p) {  // nearest-rank
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ort = require('onnxruntime-node');
  const manifest = JSON.parse(readFileSync(join(args.zoo, 'manifest.json'), 'utf8'));
  const entry = manifest[args.model];
  if (!entry) throw new Error(`model ${args.model} is not in ${join(args.zoo, 'manifest.json')}`);

  const feeds = {};
  for (const io of entry.inputs) {
    const a = readNpy(join(args.zoo, io.file));
    feeds[io.name] = new ort.Tensor(a.dtype, a.data, a.shape);
  }
  const rssBeforeLoad = process.memoryUsage().rss;

  const options = {
    graphOptimizationLevel: args.opt,
    intraOpNumThreads: args.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    executionProviders: ['cpu'],
  };
  const session_extra = {};
  if (args.allowSpinning !== null) session_extra.intra_op = { allow_spinning: args.allowSpinning };
  // Denormals as zero on ORT's threads (off by default in ORT, as --flush-denormals is in opfuse).
  if (args.denormalAsZero === '1') session_extra.set_denormal_as_zero = '1';
  if (Object.keys(session_extra).length > 0) options.extra = { session: session_extra };
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(join(args.zoo, entry.file), options);
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;

  // First run doubles as the accuracy check (and as a warm-up iteration).
  const out = await session.run(feeds);
  const check = {};
  let worst = 0;
  for (const io of entry.outputs) {
    const want = readNpy(join(args.zoo, io.file));
    const got = out[io.name];
    const sameShape = got && got.dims.length === want.shape.length && got.dims.every((d, i) => d === want.shape[i]);
    const r = !got ? { error: 'missing output' }
      : !sameShape ? { error: `shape [${got.dims}] vs reference [${want.shape}]` }
        : relMaxAbsDiff(got.data, want.data);
    check[io.name] = r;
    worst = r.error ? Infinity : Math.max(worst, r.rel);
  }
  const tol = entry.tolerance?.max ?? 1e-4;

  for (let i = 1; i < args.warmup; i++) await session.run(feeds);
  const times = [];
  for (let i = 0; i < args.iters; i++) {
    const s = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - s) / 1e6);
  }
  const sorted = [...times].sort((a, b) => a - b);
  const n = sorted.length;
  const median = n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  const result = {
    engine: 'onnxruntime-node',
    version: ort.env.versions?.node ?? require('onnxruntime-node/package.json').version,
    model: args.model,
    opt: args.opt,
    threads: args.threads,
    iters: args.iters,
    warmup: args.warmup,
    median_ms: median,
    min_ms: sorted[0],
    p90_ms: percentile(sorted, 90),
    mean_ms: times.reduce((a, b) => a + b, 0) / n,
    times_ms: times,
    load_ms: loadMs,
    peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
    rss_at_start_bytes: rssAtStart,
    rss_before_load_bytes: rssBeforeLoad,
    arena_bytes: null,
    kernels: null,
    session_options: options,
    check: { metric: 'max_abs_diff / max_abs_ref', rel_max_abs_diff: worst, tolerance: tol,
      ok: worst <= tol, outputs: check },
  };
  process.stdout.write(JSON.stringify(result) + '\n');
}

// Run only as a script, so tests can import readNpy.
if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch((e) => {
    // The stack first; the last line (which the harness quotes) is the message itself.
    if (e && e.stack) process.stderr.write(`${e.stack}\n`);
    process.stderr.write(`ort_bench: error: ${e && e.message ? e.message : e}\n`);
    process.exit(1);
  });
}
