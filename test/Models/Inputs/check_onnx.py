#!/usr/bin/env python3
"""Checks an exported mixed-precision model with onnx.checker (full check).

usage: check_onnx.py MODEL.onnx

Prints "checker ok", then the number of Cast nodes, the initializers per
data type, and the element types of the graph inputs and outputs; exits 1
(with onnx's message) when the checker rejects the model.
"""
import collections
import sys

import onnx


def name(t):
    return onnx.TensorProto.DataType.Name(t)


def main():
    model = onnx.load(sys.argv[1])
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # the checker raises several exception types
        print(f"checker failed: {e}")
        sys.exit(1)
    print("checker ok")
    ops = collections.Counter(n.op_type for n in model.graph.node)
    print(f"casts {ops['Cast']}")
    inits = collections.Counter(name(t.data_type) for t in model.graph.initializer)
    print("initializers " + " ".join(f"{k}={inits[k]}" for k in sorted(inits)))
    for kind, values in (("inputs", model.graph.input), ("outputs", model.graph.output)):
        print(kind + " " + " ".join(
            f"{v.name}:{name(v.type.tensor_type.elem_type)}" for v in values))


if __name__ == "__main__":
    main()
