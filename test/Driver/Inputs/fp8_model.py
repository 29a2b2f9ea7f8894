"""Writes the model of test/Driver/fp8-options.test with trainable weights:
Inputs/fp8_gemms.onnxtext's three GEMMs (MatMul_0 32x64 by 64x48, MatMul_2
by 48x16, Gemm_3 by 20x16 transposed: N = 20), the weights initializers.

Usage: fp8_model.py OUT.onnx
"""

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)


def weight(name, *shape):
    return numpy_helper.from_array(
        (rng.standard_normal(shape) * 0.1).astype(np.float32), name)


graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w1"], ["h"], name="MatMul_0"),
     helper.make_node("Relu", ["h"], ["a"], name="Relu_1"),
     helper.make_node("MatMul", ["a", "w2"], ["g"], name="MatMul_2"),
     helper.make_node("Gemm", ["g", "w3"], ["logits"], name="Gemm_3",
                      transB=1)],
    "fp8_model",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 64])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [32, 20])],
    [weight("w1", 64, 48), weight("w2", 48, 16), weight("w3", 20, 16)])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
