import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { readNpy } from './ort_bench.mjs';
const require = createRequire(import.meta.url);
const ort = require('onnxruntime-node');
const [zoo, model, iters] = [process.argv[2], process.argv[3], Number(process.argv[4] || 10)];
const manifest = JSON.parse(readFileSync(join(zoo, 'manifest.json'), 'utf8'));
const entry = manifest[model];
const feeds = {};
for (const io of entry.inputs) { const a = readNpy(join(zoo, io.file)); feeds[io.name] = new ort.Tensor(a.dtype, a.data, a.shape); }
const session = await ort.InferenceSession.create(join(zoo, entry.file), {
  graphOptimizationLevel: 'all', intraOpNumThreads: 2, interOpNumThreads: 1, executionMode: 'sequential',
  enableProfiling: true, profileFilePrefix: '/tmp/ortprof/' + model, executionProviders: ['cpu'] });
for (let i = 0; i < 3; i++) await session.run(feeds);
for (let i = 0; i < iters; i++) await session.run(feeds);
await session.endProfiling();
