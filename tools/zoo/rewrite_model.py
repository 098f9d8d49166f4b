"""What quantize_dynamic.py and quantize_qdq.py share: load a model, check its opset, rewrite it,
drop the initializers nothing reads any more, check and save it."""
import sys

import onnx


def rewrite_file(tool, path_in, path_out, min_opset, why, rewrite):
    """Applies rewrite(model) -> count of rewritten nodes; exits with a message naming `tool`
    when the opset is below `min_opset` (`why` says what needs it) or nothing was rewritten."""
    model = onnx.load(path_in)
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if opset < min_opset:
        sys.exit(f"{tool}: {path_in} is opset {opset}; {why} needs {min_opset}")
    count = rewrite(model)
    if count == 0:
        sys.exit(f"{tool}: nothing to rewrite in {path_in}")
    graph = model.graph
    used = {i for n in graph.node for i in n.input}
    kept = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    onnx.checker.check_model(model)
    onnx.save(model, path_out)
    return count
