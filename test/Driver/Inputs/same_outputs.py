"""Loads two model libraries (each PATH or PATH:ENTRY, ENTRY a symbol of a
library with several models) and checks that they compute the same outputs,
bit for bit, on the same random inputs; with --export, that the first one
exports its ONNX model (a training library's embedded model); with
--train K, that K training steps on one random batch (integer labels 0)
give the same losses first. Prints "same losses: K" and "same outputs: N", or the
first difference (exit status 1)."""

import argparse
import sys

import numpy as np

from ampc.runtime import Model


def load(spec):
    path, _, entry = spec.partition(":")
    return Model(path, entry=entry or None)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("first")
    p.add_argument("second")
    p.add_argument("--export")
    p.add_argument("--train", type=int, default=0)
    args = p.parse_args()
    with load(args.first) as a, load(args.second) as b:
        rng = np.random.default_rng(3)
        inputs = [rng.standard_normal(i.shape).astype(i.dtype) if
                  i.dtype.kind == "f" else np.zeros(i.shape, i.dtype)
                  for i in a.inputs]
        if args.train:
            for step in range(args.train):
                la, lb = a.train_step(*inputs), b.train_step(*inputs)
                if not np.array_equal(la, lb):
                    print("step %d: losses %s and %s" % (step, la, lb))
                    return 1
            print("same losses: %d" % args.train)
        out_a, out_b = a.infer(inputs), b.infer(inputs)
        if len(out_a) != len(out_b):
            print("different output counts: %d, %d" % (len(out_a), len(out_b)))
            return 1
        for k, (x, y) in enumerate(zip(out_a, out_b)):
            if x.shape != y.shape or not np.array_equal(x, y):
                print("output %d differs: %s against %s" % (k, x, y))
                return 1
        if args.export:
            a.export_onnx(args.export)
            import onnx
            onnx.checker.check_model(onnx.load(args.export))
            print("exported %s" % args.export)
        print("same outputs: %d" % len(out_a))
    return 0


if __name__ == "__main__":
    sys.exit(main())
