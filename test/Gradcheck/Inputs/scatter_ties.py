#!/usr/bin/env python3
"""ampc.scatter's max and min gradients at ties, against torch.

usage: scatter_ties.py WORKDIR AMPC

Builds ScatterElements (axis 0, reduction max, then min) of a parameter
x (6) with a parameter u (6) at indices where the output equals: the data
and one update, two updates, the data and two updates, one update alone,
and the data alone; the loss is sum(y * w) with fixed weights w. Compiles
it at fp32 without an optimizer (ampc --loss=none --optimizer=none), takes
the gradients of x and u (ampc.runtime.Model.gradients) and compares them
with torch.scatter_reduce(x, 0, i, u, 'amax'/'amin', include_self=True)'s
autograd, which splits dy evenly between the tied values. Prints one line
per reduction and parameter with the largest absolute difference, and
"ok" or "FAILED".
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "python"))
from ampc.runtime import Model  # noqa: E402

# Position 0: data and u0 tie; 1: u1 and u2 tie above the data; 2: data,
# u3 and u4 tie; 3: u5 wins alone; 4 and 5: the data alone.
X = np.array([2.0, -1.0, 3.0, 0.5, 1.5, -2.5], np.float32)
I = np.array([0, 1, 1, 2, 2, 3], np.int64)
U = np.array([2.0, 4.0, 4.0, 3.0, 3.0, 7.0], np.float32)
W = np.array([1.0, -2.0, 3.0, 0.5, 1.25, -0.75], np.float32)


def model(path, reduction, x, u):
    nodes = [
        helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0,
                         reduction=reduction),
        helper.make_node("Mul", ["y", "w"], ["yw"]),
        helper.make_node("ReduceSum", ["yw"], ["loss"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "ties", [],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(x, "x"),
         numpy_helper.from_array(I, "i"),
         numpy_helper.from_array(u, "u"),
         numpy_helper.from_array(W, "w")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.save(m, path)


def main():
    work, ampc = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    failed = False
    for reduction, torch_name in (("max", "amax"), ("min", "amin")):
        # min: the same ties with every value negated.
        sign = 1.0 if reduction == "max" else -1.0
        x, u = sign * X, sign * U
        onnx_path = os.path.join(work, reduction + ".onnx")
        lib = os.path.join(work, reduction + ".so")
        model(onnx_path, reduction, x, u)
        subprocess.run([ampc, onnx_path, "--target=cpu", "--precision=fp32",
                        "--loss=none", "--optimizer=none", "-o", lib],
                       check=True)
        with Model(lib) as m:
            _, grads = m.gradients([])
        tx = torch.tensor(x, requires_grad=True)
        tu = torch.tensor(u, requires_grad=True)
        y = torch.scatter_reduce(tx, 0, torch.tensor(I), tu, torch_name,
                                 include_self=True)
        (y * torch.tensor(W)).sum().backward()
        for name, expected in (("x", tx.grad.numpy()), ("u", tu.grad.numpy())):
            diff = float(np.max(np.abs(grads[name] - expected)))
            ok = diff <= 1e-6
            failed |= not ok
            print("%s d%s: ampc %s torch %s: largest difference %.3g %s" % (
                reduction, name, np.array2string(grads[name], precision=4),
                np.array2string(expected, precision=4), diff,
                "ok" if ok else "FAILED"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
