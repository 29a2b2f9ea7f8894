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
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "utils", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from ampc.runtime import Model  # noqa: E402
from ampc_testing import median_times, write_mlp_onnx  # noqa: E402


def write_mlp(path, batch, inputs, hidden, outputs):
    rng = np.random.default_rng(0)
    write_mlp_onnx(path, batch, [inputs, hidden, outputs],
                   lambda rows, cols: rng.standard_normal((rows, cols)) /
                   np.sqrt(cols))


def time_steps(library, runtime, batch, inputs, outputs, steps):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, inputs)).astype(np.float32)
    y = rng.integers(0, outputs, batch).astype(np.int64)
    with Model(library, runtime=runtime) as model:
        # train_step waits for the device (synchronize).
        return median_times([lambda: model.train_step([x, y])], 2, steps)[0]


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
