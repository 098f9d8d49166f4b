"""A script written against onnxruntime's API, as found in the wild; only the import names
opfuse. test_onnxruntime_api.py runs it: ort_style_script.py MODEL OUT.npz (the feeds and the
first output, for the test to check)"""

import sys

import numpy as np

import opfuse as ort

model_path, out_path = sys.argv[1], sys.argv[2]
options = ort.SessionOptions()
options.intra_op_num_threads = 2
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
session = ort.InferenceSession(model_path, sess_options=options, providers=["CPUExecutionProvider"])
print("device", ort.get_device(), "providers", session.get_providers())

rng = np.random.default_rng(0)
feeds = {}
for arg in session.get_inputs():
    print(arg.name, arg.shape, arg.type)
    shape = [d if isinstance(d, int) else 1 for d in arg.shape]
    if arg.type == "tensor(float)":
        feeds[arg.name] = rng.standard_normal(shape).astype(np.float32)
    elif arg.type == "tensor(int64)":
        feeds[arg.name] = np.ones(shape, dtype=np.int64)
    else:
        raise SystemExit(f"unexpected input type {arg.type}")

outputs = session.run(None, feeds)
names = [o.name for o in session.get_outputs()]
(first,) = session.run([names[0]], feeds)
assert np.array_equal(first, outputs[0])
for name, value in zip(names, outputs):
    print(name, value.shape, value.dtype)
np.savez(out_path, output=outputs[0], **feeds)
