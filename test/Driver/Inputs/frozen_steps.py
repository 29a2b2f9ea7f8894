"""Five AdamW steps of a library compiled from masked.onnxtext with
--freeze=w1 (test/Driver/freeze.test): w1 (frozen by the flag) and keep
(frozen because no gradient reaches it) are bit-identical, the other
parameters moved."""
import sys

import numpy as np

from ampc_ctypes import Model

model = Model(sys.argv[1])
start = {p.name: model.get_parameter(p.name) for p in model.parameters}
rng = np.random.default_rng(0)
for _ in range(5):
    model.train_step(rng.standard_normal((2, 4)).astype(np.float32),
                     np.array([0, 2], np.int64))
end = {p.name: model.get_parameter(p.name) for p in model.parameters}
same = [n for n in start if np.array_equal(start[n], end[n])]
moved = [n for n in start if n not in same]
assert same == ["w1", "keep"], same
print("w1 bit-identical after 5 steps, keep bit-identical, %s changed" %
      " ".join(sorted(moved, key=lambda n: (n[0] != "w", n))))
