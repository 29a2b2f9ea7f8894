"""Runs each CUDA library of a GPU pack (test/gpu/pack.py) for a few steps,
for compute-sanitizer (memcheck, racecheck, synccheck) to watch: three
training steps of every <model>.cuda.train.so, one of the gradients-only
library, one inference. Needs numpy only; prints one line per library.

    compute-sanitizer --tool memcheck --error-exitcode 9 python3 sanitize.py
"""
import os
import sys

import numpy as np

from ampc_ctypes import Model

HERE = os.path.dirname(os.path.abspath(__file__))
RUNTIME = os.path.join(HERE, "libampc_runtime.so")


def main():
    names = sys.argv[1:] or ["mlp", "cnn", "transformer"]
    for name in names:
        x = np.load(os.path.join(HERE, name + ".x.npy"))
        y = np.load(os.path.join(HERE, name + ".y.npy"))
        with Model(os.path.join(HERE, name + ".cuda.train.so"), RUNTIME) as m:
            losses = [float(m.train_step({"input": x[s], "label": y[s]}))
                      for s in range(3)]
            out = m.infer({"input": x[0], "label": y[0]})
        with Model(os.path.join(HERE, name + ".cuda.grads.so"), RUNTIME) as m:
            loss, grads = m.gradients({"input": x[0], "label": y[0]})
        print("%s: losses %s, %d gradients, %d outputs" % (
            name, " ".join("%.5f" % v for v in losses), len(grads), len(out)),
            flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
