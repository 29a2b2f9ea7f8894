"""Trains an ONNX model a few steps (issue 38, long sequences): compiles
it with ampc (--loss=mse, the default FP16 precision and optimizer, plus
any other flags) and runs STEPS training steps on one random input and label,
printing each loss; PASSED when every loss is finite and the last is below
the first, else FAILED with exit status 1.

usage: train_steps.py MODEL.onnx LIB.so --ampc AMPC [--steps N]
                      [--lr X] AMPC_FLAGS...
"""
import argparse
import subprocess
import sys

import numpy as np
import onnx

from ampc.runtime import Model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("lib")
    parser.add_argument("--ampc", default="ampc")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--lr", type=float, default=None)
    args, flags = parser.parse_known_args()
    subprocess.run([args.ampc, args.model, "--loss=mse", *flags, "-o",
                    args.lib], check=True)
    graph = onnx.load(args.model).graph
    names = {i.name for i in graph.initializer}

    def shape(value):
        return [d.dim_value for d in value.type.tensor_type.shape.dim]

    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape(i)).astype(np.float32)
              for i in graph.input if i.name not in names]
    label = rng.standard_normal(shape(graph.output[0])).astype(np.float32)
    losses = []
    with Model(args.lib) as m:
        if args.lr is not None:
            m.learning_rate = args.lr
        for step in range(args.steps):
            losses.append(float(m.train_step(*inputs, label)))
            print("step %d: loss %.6f" % (step + 1, losses[-1]))
    ok = all(np.isfinite(losses)) and losses[-1] < losses[0]
    print("PASSED" if ok else "FAILED: losses %s" % losses)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
