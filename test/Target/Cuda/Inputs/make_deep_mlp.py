"""Writes deep_mlp.onnx: x[8, 64] through three 64-wide Gemm + Relu layers
and a 64 -> 10 Gemm, seeded weights. Deep enough that the memory plan puts
a Relu's result where an earlier Gemm's input lived (the case where a
RELU_BIAS epilogue writing the Relu's buffer would overlap its own A)."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(3)
nodes, inits, previous = [], [], "x"
for i, (fan_in, fan_out) in enumerate([(64, 64), (64, 64), (64, 64), (64, 10)]):
    w = (rng.standard_normal((fan_out, fan_in)) / np.sqrt(fan_in)).astype(np.float32)
    b = (0.1 * rng.standard_normal(fan_out)).astype(np.float32)
    inits += [numpy_helper.from_array(w, "w%d" % i), numpy_helper.from_array(b, "b%d" % i)]
    out = "logits" if i == 3 else "g%d" % i
    nodes.append(helper.make_node("Gemm", [previous, "w%d" % i, "b%d" % i], [out],
                                  name="Gemm_%d" % i, transB=1))
    if i < 3:
        nodes.append(helper.make_node("Relu", [out], ["h%d" % i], name="Relu_%d" % i))
        previous = "h%d" % i
graph = helper.make_graph(
    nodes, "deep_mlp",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [8, 10])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, sys.argv[1])
