"""Inputs of indexing-sim.test: the nine inputs of
test/Target/Cpu/indexing.onnxtext, random and with ties and NaN, indices in
[-2, 2)."""
import sys
import numpy as np

d = sys.argv[1]
rng = np.random.default_rng(18)
shapes = [((3, 4), "f"), ((2, 3, 4), "f"), ((2, 4), "i8"), ((3, 2), "i4"),
          ((2, 2, 1), "i8"), ((2, 3), "i8"), ((2, 3), "f"), ((3, 1), "i8"),
          ((3, 4), "f")]
for kind in ("random", "ties"):
    for n, (shape, t) in enumerate(shapes):
        if t == "f":
            v = rng.standard_normal(shape).astype(np.float32)
            if kind == "ties":
                v = np.round(v * 2) / 2
                v.flat[1] = np.nan
        else:
            v = rng.integers(-2, 2, shape).astype(t)
        np.save(f"{d}/{kind}_{n}.npy", v)
