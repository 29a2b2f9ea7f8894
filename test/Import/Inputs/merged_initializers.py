#!/usr/bin/env python3
"""Models as an EVAL-mode torch.onnx.export writes them, for
test/Import/merged-initializers.test.

usage: merged_initializers.py make DIR     writes DIR/merged.onnx, DIR/folded.onnx
       merged_initializers.py check DIR LIB.so

merged.onnx: x [4, 4] -> LayerNormalization(n1.weight, n1.bias) ->
LayerNormalization(n2.weight, n2.bias) -> MatMul(fc.weight) -> y, where the
exporter merged n2.weight/n2.bias (equal to n1's at export) into n1's: they
are read through Identity nodes (`n2.bias = Identity(n1.bias)`), as torch
1.13 writes them. folded.onnx: a Conv whose weight is `onnx::Conv_7` (a
BatchNorm folded into it) and an ordinary Conv.

check: trains LIB (compiled from merged.onnx, SGD) for one step and prints
whether n1.bias and n2.bias are separate parameters that now differ, then
exports the trained model and prints whether onnx.checker accepts it and
which initializers and Identity nodes it has.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make(work):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(np.ones(4, np.float32), "n1.weight"),
             numpy_helper.from_array(np.zeros(4, np.float32), "n1.bias"),
             numpy_helper.from_array(
                 rng.standard_normal((4, 4)).astype(np.float32), "fc.weight")]
    nodes = [
        helper.make_node("Identity", ["n1.bias"], ["n2.bias"], "Identity_0"),
        helper.make_node("Identity", ["n1.weight"], ["n2.weight"],
                         "Identity_1"),
        helper.make_node("LayerNormalization", ["x", "n1.weight", "n1.bias"],
                         ["h1"], "/n1/LayerNormalization"),
        helper.make_node("Mul", ["h1", "h1"], ["h2"], "/Mul"),
        helper.make_node("LayerNormalization", ["h2", "n2.weight", "n2.bias"],
                         ["h3"], "/n2/LayerNormalization"),
        helper.make_node("MatMul", ["h3", "fc.weight"], ["y"], "/fc/MatMul")]
    graph = helper.make_graph(
        nodes, "merged",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, os.path.join(work, "merged.onnx"))

    conv = [numpy_helper.from_array(
                rng.standard_normal((2, 1, 3, 3)).astype(np.float32),
                "onnx::Conv_7"),
            numpy_helper.from_array(np.zeros(2, np.float32), "onnx::Conv_8"),
            numpy_helper.from_array(
                rng.standard_normal((2, 2, 1, 1)).astype(np.float32),
                "c2.weight")]
    nodes = [helper.make_node("Conv", ["x", "onnx::Conv_7", "onnx::Conv_8"],
                              ["h"], "/c1/Conv"),
             helper.make_node("Conv", ["h", "c2.weight"], ["y"], "/c2/Conv")]
    graph = helper.make_graph(
        nodes, "folded",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2, 3, 3])],
        conv)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, os.path.join(work, "folded.onnx"))


def check(work, lib):
    from ampc.runtime import Model
    model = Model(lib)
    names = [p.name for p in model.parameters]
    print("parameters: " + " ".join(sorted(names)))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 4)).astype(np.float32)
    label = rng.standard_normal((4, 4)).astype(np.float32)
    model.train_step([x, label])
    if "n2.bias" in names:
        differ = not np.array_equal(model.get_parameter("n1.bias"),
                                    model.get_parameter("n2.bias"))
        print("after a step n1.bias and n2.bias %s" % (
            "differ" if differ else "ARE EQUAL"))
    exported = os.path.join(work, "trained.onnx")
    model.export_onnx(exported)
    m = onnx.load(exported)
    onnx.checker.check_model(m, full_check=True)
    print("export: checker ok; initializers %s; Identity nodes %d" % (
        " ".join(sorted(t.name for t in m.graph.initializer)),
        sum(n.op_type == "Identity" for n in m.graph.node)))
    values = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    same = all(np.array_equal(values[n], model.get_parameter(n))
               for n in names)
    print("export: every parameter's trained value %s" % (
        "written" if same else "NOT WRITTEN"))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        check(sys.argv[2], sys.argv[3])
