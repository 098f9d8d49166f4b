"""What quantize_dynamic.py and quantize_qdq.py share: their command line, and loading a model,
checking its opset, rewriting it, dropping the initializers nothing reads any more, checking and
saving it."""
import argparse
import sys

import onnx


def rewrite_file(tool, path_in, path_out, min_opset, why, rewrite):
    """Applies rewrite(model) -> (the graph's new node list, how many nodes it rewrote); exits
    with a message naming `tool` when the opset is below `min_opset` (`why` says what needs it)
    or nothing was rewritten."""
    model = onnx.load(path_in)
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if opset < min_opset:
        sys.exit(f"{tool}: {path_in} is opset {opset}; {why} needs {min_opset}")
    nodes, count = rewrite(model)
    if count == 0:
        sys.exit(f"{tool}: nothing to rewrite in {path_in}")
    graph = model.graph
    del graph.node[:]
    graph.node.extend(nodes)
    used = {i for n in graph.node for i in n.input}
    kept = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    onnx.checker.check_model(model)
    onnx.save(model, path_out)
    return count


def main(tool, doc, min_opset, why, add_arguments, rewrite, summary):
    """The command line `tool IN.onnx OUT.onnx [options]`: `add_arguments(parser)` adds the
    options, `rewrite(model, args)` returns the new node list and how many nodes it rewrote, `summary(args, count)` is
    the line printed at the end."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("input")
    parser.add_argument("output")
    add_arguments(parser)
    args = parser.parse_args()
    count = rewrite_file(tool, args.input, args.output, min_opset, why, lambda model: rewrite(model, args))
    print(summary(args, count))
