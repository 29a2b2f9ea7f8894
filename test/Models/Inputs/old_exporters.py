"""Models as older exporters wrote them import and compute what their source
computes.

1. torch.onnx.export at opset 7 with keep_initializers_as_inputs=True: ONNX
   IR version 3, every initializer also listed as a graph input, Softmax
   with its pre-13 axis semantics. The importer brings it to opset 13 with
   the ONNX version converter; the initializers stay parameters with their
   exported values (the library's only input is x).
2. A hand-written opset 6 model with the legacy attributes: Add and Mul with
   `broadcast` (and `axis` where it names the trailing dimensions),
   BatchNormalization with `is_test` and `spatial`, compared with numpy.
   (Broadcasting from another axis, `axis=1` for a per-channel vector, is
   what libonnx 1.12's converter cannot adapt: old-opsets.test checks that
   it is a clear error.)

Each library is compiled for the CPU target in inference mode at fp32 and run through
the runtime C API on a fixed input; the largest relative difference is
printed and must stay below 1e-5.

usage: old_exporters.py AMPC OUTDIR
"""
import os
import subprocess
import sys
import warnings

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import torch
import torch.nn as nn

from ampc.runtime import Model

warnings.filterwarnings("ignore")


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 8 * 8, 6)
        self.bn = nn.BatchNorm1d(6)

    def forward(self, x):
        y = torch.relu(self.conv(x)).flatten(1)
        y = self.bn(self.fc(y)) * 2.0 + 1.0
        return torch.softmax(y, dim=1)


def compile_and_run(ampc, path, x):
    lib = path.replace(".onnx", ".so")
    subprocess.run([ampc, path, "--mode=infer", "--precision=fp32",
                    "--target=cpu", "-o", lib],
                   check=True)
    with Model(lib) as model:
        names = [i.name for i in model.inputs]
        return names, model.infer([x])[0]


def relative(got, want):
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def torch_opset7(ampc, out):
    torch.manual_seed(0)
    model = Cnn().eval()
    with torch.no_grad():  # statistics that are not the identity
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    x = torch.randn(2, 3, 8, 8)
    path = os.path.join(out, "cnn_opset7.onnx")
    torch.onnx.export(model, x, path, opset_version=7,
                      keep_initializers_as_inputs=True,
                      input_names=["x"], output_names=["y"])
    proto = onnx.load(path)
    listed = {i.name for i in proto.graph.input}
    as_inputs = sum(t.name in listed for t in proto.graph.initializer)
    print(f"torch opset 7: ir_version {proto.ir_version}, opset "
          f"{proto.opset_import[0].version}, {as_inputs} of "
          f"{len(proto.graph.initializer)} initializers are graph inputs")
    names, got = compile_and_run(ampc, path, x.numpy())
    with torch.no_grad():
        want = model(x).numpy()
    print(f"torch opset 7: library inputs {names}, "
          f"max relative difference {relative(got, want):.1e}")
    return relative(got, want) < 1e-5


def onnx_opset6(ampc, out):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    scale = rng.standard_normal(4).astype(np.float32)
    gamma, beta = (rng.standard_normal(3).astype(np.float32) for _ in range(2))
    mean = rng.standard_normal(3).astype(np.float32)
    var = rng.uniform(0.5, 2.0, 3).astype(np.float32)
    inits = {"bias": bias, "scale": scale, "gamma": gamma, "beta": beta,
             "mean": mean, "var": var}
    nodes = [
        helper.make_node("Add", ["x", "bias"], ["a"], broadcast=1),
        helper.make_node("Mul", ["a", "scale"], ["m"], broadcast=1, axis=3),
        helper.make_node("BatchNormalization",
                         ["m", "gamma", "beta", "mean", "var"], ["b"],
                         epsilon=1e-5, is_test=1, spatial=1),
        helper.make_node("Relu", ["b"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "legacy",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)] +
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape)
         for k, v in inits.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)])
    model.ir_version = 3
    path = os.path.join(out, "legacy_opset6.onnx")
    onnx.save(model, path)
    c = (1, 3, 1, 1)
    m = (x + bias) * scale
    want = np.maximum(gamma.reshape(c) * (m - mean.reshape(c)) /
                      np.sqrt(var.reshape(c) + 1e-5) + beta.reshape(c), 0)
    names, got = compile_and_run(ampc, path, x)
    print(f"onnx opset 6: library inputs {names}, "
          f"max relative difference {relative(got, want):.1e}")
    return relative(got, want) < 1e-5


def main():
    ampc, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    ok = torch_opset7(ampc, out) & onnx_opset6(ampc, out)
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
