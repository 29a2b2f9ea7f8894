"""One exported model's training step with the attention fused and not
(issue 38): compiled by ampc for the CPU target at FP32 with
--fuse-attention=on and off (MSE loss, no optimizer), the loss and every
parameter gradient of one step on a random input compared.

usage: fused_vs_unfused.py MODEL.onnx WORKDIR --ampc AMPC [--freeze NAME]
Prints the largest relative difference and PASSED, or FAILED with exit
status 1.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx

from ampc.runtime import Model
from ampc_testing import relative_difference, report_failures


def compare(unfused, fused):
    """(worst, ok) for two (loss, {name: gradient}) results: the loss's
    relative difference and each gradient's largest difference relative to
    the model's largest gradient (K's bias has a zero gradient
    analytically, softmax ignoring a constant per row: only rounding noise
    of its own); ok within 1e-5 and with the same gradients."""
    (l0, g0), (l1, g1) = unfused, fused
    worst = relative_difference([float(l1)], [float(l0)])
    scale = max(float(np.abs(g).max()) for g in g0.values())
    for key in g0:
        worst = max(worst, float(np.abs(np.asarray(g1[key]) -
                                        np.asarray(g0[key])).max()) / scale)
    return worst, worst <= 1e-5 and sorted(g0) == sorted(g1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("workdir")
    parser.add_argument("--ampc", default="ampc")
    parser.add_argument("--freeze", default=None)
    args = parser.parse_args()
    graph = onnx.load(args.model).graph
    names = {i.name for i in graph.initializer}
    rng = np.random.default_rng(0)

    def shape(value):
        return [d.dim_value for d in value.type.tensor_type.shape.dim]

    feeds = {i.name: rng.standard_normal(shape(i)).astype(np.float32)
             for i in graph.input if i.name not in names}
    feeds["label"] = rng.standard_normal(
        shape(graph.output[0])).astype(np.float32)
    base = os.path.splitext(os.path.basename(args.model))[0]
    results = {}
    for fuse in ("off", "on"):
        lib = os.path.join(args.workdir, "%s.%s.so" % (base, fuse))
        flags = ["--target=cpu", "--precision=fp32", "--optimizer=none",
                 "--loss=mse", "--fuse-attention=" + fuse]
        if args.freeze:
            flags.append("--freeze=" + args.freeze)
        subprocess.run([args.ampc, args.model] + flags + ["-o", lib],
                       check=True)
        with Model(lib) as m:
            results[fuse] = m.gradients(feeds)
    (l0, g0), (l1, _) = results["off"], results["on"]
    worst, ok = compare(results["off"], results["on"])
    print("%s: loss %.6f fused vs %.6f unfused, %d gradients, max relative "
          "difference %.2e: %s" % (base, float(l1), float(l0), len(g0), worst,
                                   "ok" if ok else "FAILED"))
    return report_failures([] if ok else [base])


if __name__ == "__main__":
    sys.exit(main())
