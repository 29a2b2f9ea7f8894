#!/usr/bin/env python3
"""Gather's gradient (gather_grad) on the CUDA target, under the CUDA
execution on the CPU, against the CPU target.

usage: gather_grad.py WORKDIR AMPC

Two models, loss = sum(Gather(W, idx) * c) with W a parameter and idx, c
inputs, so dW[k] is the sum of c[i] over the indices i naming row k:

- order: W 4x2, idx [2, 0, -2, 3, 2] (-2 is row 2), c[:, 0] = 1e8, 5,
  -1e8, 7, 1 (row 2's terms 1e8, -1e8, 1). Summed in index order in FP32
  that is 1; in any other order 0 or 2. The CUDA kernel buckets the indices
  by row with atomics (the execution runs threads in reverse, so the
  buckets fill in reverse) and must sort each bucket back.
- table: an embedding-sized table (V 20000 x 8) and 3000 random indices,
  one row named 1000 times (a long bucket), every value a random FP32;
  both targets sum in index order in FP32, so dW must be bit-identical.

Compiled at fp32 without an optimizer (--loss=none --optimizer=none).
Prints one line per model and target, and "ok" or "FAILED".
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "..", "python"))
from ampc.runtime import Model  # noqa: E402


def write_model(path, w, count):
    rows, width = w.shape
    nodes = [
        helper.make_node("Gather", ["w", "idx"], ["y"], axis=0),
        helper.make_node("Mul", ["y", "c"], ["yc"]),
        helper.make_node("ReduceSum", ["yc"], ["loss"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "gather_grad",
        [helper.make_tensor_value_info("idx", TensorProto.INT64, [count]),
         helper.make_tensor_value_info("c", TensorProto.FLOAT,
                                       [count, width])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(w, "w")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def gradients(work, name, target, ampc, inputs):
    lib = os.path.join(work, "%s-%s.so" % (name, target))
    subprocess.run([ampc, os.path.join(work, name + ".onnx"),
                    "--target=" + target, "--precision=fp32", "--loss=none",
                    "--optimizer=none", "-o", lib], check=True)
    with Model(lib) as m:
        _, grads = m.gradients(inputs)
    return grads["w"]


def main():
    work, ampc = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(7)
    failed = False

    idx = np.array([2, 0, -2, 3, 2], np.int64)
    c = np.zeros((5, 2), np.float32)
    c[:, 0] = [1e8, 5, -1e8, 7, 1]
    c[:, 1] = [0.5, 0.25, 0.125, 2, 4]
    write_model(os.path.join(work, "order.onnx"),
                rng.standard_normal((4, 2)).astype(np.float32), len(idx))
    for target in ("cpu", "cuda-sim"):
        dw = gradients(work, "order", target, ampc, [idx, c])
        ok = dw[2, 0] == 1.0 and dw[2, 1] == 4.625 and dw[0, 0] == 5 and \
            dw[3, 0] == 7 and dw[1, 0] == 0
        failed |= not ok
        print("order %s: dW[:, 0] %s dW[2, 1] %r %s" % (
            target, dw[:, 0].tolist(), float(dw[2, 1]),
            "ok" if ok else "FAILED"))

    rows, count = 20000, 3000
    idx = rng.integers(-rows, rows, count).astype(np.int64)
    idx[rng.choice(count, 1000, replace=False)] = 1234
    c = rng.standard_normal((count, 8)).astype(np.float32)
    write_model(os.path.join(work, "table.onnx"),
                rng.standard_normal((rows, 8)).astype(np.float32), count)
    cpu = gradients(work, "table", "cpu", ampc, [idx, c])
    sim = gradients(work, "table", "cuda-sim", ampc, [idx, c])
    named = np.unique(np.where(idx < 0, idx + rows, idx))
    ok = np.array_equal(cpu, sim) and np.count_nonzero(
        np.any(cpu != 0, axis=1)) == len(named)
    failed |= not ok
    print("table: %d rows named, row 1234 from %d indices, cpu and cuda-sim "
          "%s %s" % (len(named), int(np.sum(idx == 1234)),
                     "bit-identical" if np.array_equal(cpu, sim) else
                     "differ by %g" % float(np.max(np.abs(cpu - sim))),
                     "ok" if ok else "FAILED"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
