#!/usr/bin/env python3
"""The cost of the CUDA execution on the CPU (--target=cuda-sim) against the
CPU target, in the same run: one training step of an MLP under each.

usage: /usr/bin/python3 bench/cuda_sim.py [--build build] [--steps 20]
           [--sizes 8x4x16x3 64x784x512x10]

For each size BATCHxINxHIDDENxOUT it writes an MLP (Gemm + Relu, Gemm,
cross-entropy), compiles it with --target=cpu and --target=cuda-sim (fp16,
AdamW, dynamic loss scaling: the defaults), runs --steps training steps on
each (after 2 warm-up steps) and prints the median step time and the ratio
cuda-sim / cpu. Every CUDA thread of every launch runs as a fiber under the
execution, so the ratio grows with the number of elements the kernels
touch; the GEMMs go through OpenBLAS on both. Figures are for CI planning
(docs/benchmarks.md), not for the GPU.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "Models", "Inputs"))


def write_mlp(path, batch, inputs, hidden, outputs):
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array((rng.standard_normal((hidden, inputs)) /
                                 np.sqrt(inputs)).astype(np.float32), "w1"),
        numpy_helper.from_array(np.zeros(hidden, np.float32), "b1"),
        numpy_helper.from_array((rng.standard_normal((outputs, hidden)) /
                                 np.sqrt(hidden)).astype(np.float32), "w2"),
        numpy_helper.from_array(np.zeros(outputs, np.float32), "b2")]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["logits"], transB=1)]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, inputs])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                       [batch, outputs])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def time_steps(library, runtime, batch, inputs, outputs, steps):
    from ampc_ctypes import Model
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, inputs)).astype(np.float32)
    y = rng.integers(0, outputs, batch).astype(np.int64)
    times = []
    with Model(library, runtime=runtime) as model:
        for step in range(steps + 2):
            start = time.perf_counter()
            model.train_step([x, y])  # waits for the device (synchronize)
            if step >= 2:
                times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--sizes", nargs="+", default=["8x4x16x3", "64x784x512x10"])
    args = p.parse_args()
    ampc = os.path.join(args.build, "bin", "ampc")
    runtime = os.path.join(args.build, "lib", "libampc_runtime.so")
    print("%-16s %12s %12s %8s" % ("MLP", "cpu ms", "cuda-sim ms", "ratio"))
    with tempfile.TemporaryDirectory() as folder:
        for size in args.sizes:
            batch, inputs, hidden, outputs = (int(v) for v in size.split("x"))
            model = os.path.join(folder, "mlp_%s.onnx" % size)
            write_mlp(model, batch, inputs, hidden, outputs)
            figures = {}
            for target in ("cpu", "cuda-sim"):
                library = os.path.join(folder, "mlp_%s.%s.so" % (size, target))
                subprocess.run([ampc, model, "--target=" + target,
                                "--cuda-resource-check=false", "-o", library],
                               check=True)
                figures[target] = time_steps(library, runtime, batch, inputs,
                                             outputs, args.steps)
            print("%-16s %12.3f %12.3f %8.1f" % (
                size, 1e3 * figures["cpu"], 1e3 * figures["cuda-sim"],
                figures["cuda-sim"] / figures["cpu"]))


if __name__ == "__main__":
    main()
