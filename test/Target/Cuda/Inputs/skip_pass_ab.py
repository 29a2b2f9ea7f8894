"""One compiled training step with and without a pass (--skip-pass), bit
for bit: three steps on fixed random inputs (labels from the label
input's dtype), then every loss and every parameter compared exactly.

usage: ab.py MODEL OUT_DIR TARGET PASS [ampc flags...]"""
import subprocess
import sys

import numpy as np

from ampc.runtime import Model

model, folder, target, skip = sys.argv[1:5]
flags = sys.argv[5:]
results = {}
for name, extra in [("with", []), ("without", ["--skip-pass=" + skip])]:
    lib = f"{folder}/{target}-{skip}-{name}.so"
    subprocess.check_call(["ampc", model, "--target=" + target,
                           "--cuda-resource-check=false", "-o", lib]
                          + flags + extra)
    with Model(lib) as m:
        rng = np.random.default_rng(0)
        inputs = []
        for info in m.inputs:
            shape = tuple(info.shape)
            if info.dtype.kind == "f":
                inputs.append(rng.standard_normal(shape).astype(info.dtype))
            else:
                inputs.append(rng.integers(0, 3, shape).astype(info.dtype))
        losses = [float(m.train_step(*inputs)) for _ in range(3)]
        params = {p.name: m.get_parameter(p.name).copy() for p in m.parameters}
        results[name] = (losses, params)
a, b = results["with"], results["without"]
same = a[0] == b[0] and all(np.array_equal(a[1][n], b[1][n]) for n in a[1])
print(f"{skip} on {target}: losses {a[0]}; 3 steps' losses and "
      f"{len(a[1])} parameters {'bit-identical' if same else 'DIFFERENT'}")
if not same:
    print("without:", b[0])
sys.exit(0 if same else 1)
