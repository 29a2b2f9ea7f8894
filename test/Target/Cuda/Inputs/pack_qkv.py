"""ampc-pack-qkv on a compiled library: one training step of the GPT
block (launch_count.py gpt) with ampc-pack-qkv and without it
(--skip-pass=ampc-pack-qkv), SGD with lr 1 and
no weight decay, so that each parameter's change is its gradient. Q, K, V
and everything above them are computed alike either way, so their
gradients must be bit-identical; LayerNorm 1's input gradient is the sum of
the three projections' dX, which the packed step takes from one GEMM's
FP32 accumulator (rounded once) where the unpacked one adds three
16-bit results, so LayerNorm 1's parameters may differ by that rounding.

usage: pack_qkv.py MODEL.onnx OUT_DIR TARGET"""

import subprocess
import sys

import numpy as np

from ampc.runtime import Model

model, folder, target = sys.argv[1:4]
SAME = ["q.weight", "q.bias", "k.weight", "v.weight", "v.bias",
        "proj.weight", "proj.bias", "fc1.weight", "fc2.weight", "ln2.weight"]
CLOSE = ["ln1.weight", "ln1.bias"]
grads = {}
for pack, skip in [("true", []), ("false", ["--skip-pass=ampc-pack-qkv"])]:
    out = f"{folder}/{target}-{pack}.so"
    subprocess.check_call(
        ["ampc", model, f"--target={target}", "--cuda-resource-check=false",
         "--loss=mse", "--optimizer=sgd", "--lr=1", "--weight-decay=0",
         "--freeze=mask", "-o", out] + skip)
    with Model(out) as m:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((2, 8, 32)).astype(np.float32)
        y = rng.standard_normal((2, 8, 32)).astype(np.float32)
        before = {n: m.get_parameter(n).copy() for n in SAME + CLOSE}
        m.train_step(x, y)
        grads[pack] = {n: before[n] - m.get_parameter(n) for n in SAME + CLOSE}
failed = False
for n in SAME:
    a, b = grads["true"][n], grads["false"][n]
    same = np.array_equal(a, b) and np.abs(b).max() > 0
    print(f"{n}: {'identical' if same else 'DIFFERENT'}")
    failed |= not same
for n in CLOSE:
    a, b = grads["true"][n], grads["false"][n]
    rel = float(np.abs(a - b).max() / np.abs(b).max())
    ok = rel < 2e-3
    print(f"{n}: max difference {rel:.1e} of the largest gradient: "
          f"{'ok' if ok else 'TOO LARGE'}")
    failed |= not ok
print("FAILED" if failed else "PASSED")
sys.exit(1 if failed else 0)
