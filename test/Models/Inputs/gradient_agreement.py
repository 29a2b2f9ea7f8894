"""How far mixed-precision gradients are from FP32 ones, ampc's beside
torch's own autocast: for each torchvision model (built, seeded and fed as
torchvision_models.py does: 10 classes, batch 2, a fixed random batch), the
gradient of the cross-entropy loss at the initial weights from

  - ampc at fp32, fp16 and bf16 (compiled with --optimizer=none; at fp16
    the dynamic loss scale backs off until the gradients are finite, as the
    scaler does in the first training steps),
  - torch CPU autocast at bf16 (torch 1.13's CPU autocast has no fp16),

each compared with torch FP32's: the cosine and the relative error
|g - g_fp32| / |g_fp32| over all parameters together, then the parameters
with the largest share of ampc fp16's error.

    /usr/bin/python3 test/Models/Inputs/gradient_agreement.py OUT
        --models NAME ... [--ampc build/bin/ampc] [--runtime LIB]

A model whose FP32 gradients already move by a percent between two FP32
implementations (ampc fp32 against torch fp32) amplifies rounding; there
its FP16/BF16 gradients are far from FP32's in any implementation, which
is what this shows (docs/design.md, "Models").
"""
import argparse
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torchvision_models as tv  # noqa: E402

MAX_BACKOFFS = 16


def ampc_gradients(args, name, onnx_path, precision, inputs):
    from ampc.runtime import Model
    lib = os.path.join(args.out, "%s-%s.so" % (name, precision))
    subprocess.run([args.ampc, onnx_path, "--target=cpu",
                    "--precision=" + precision, "--optimizer=none", "-o",
                    lib], check=True)
    with Model(lib, args.runtime) as m:
        for _ in range(MAX_BACKOFFS + 1):
            _, grads = m.gradients(inputs)
            if all(np.isfinite(g).all() for g in grads.values()):
                break
    os.remove(lib)
    return grads


def torch_gradients(name, x, y, autocast):
    import torch
    m = tv.build(name).train()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = torch.nn.functional.cross_entropy(m(x), torch.from_numpy(y))
    loss.backward()
    return {n: p.grad.numpy() for n, p in m.named_parameters()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--models", nargs="+", required=True)
    p.add_argument("--ampc", default="ampc")
    p.add_argument("--runtime", default=None)
    args = p.parse_args()
    import torch
    from ampc_testing import export_onnx
    os.makedirs(args.out, exist_ok=True)
    for name in args.models:
        m = tv.build(name)
        g = torch.Generator().manual_seed(1)
        x = torch.randn(2, 3, 224, 224, generator=g)
        y = np.array([3, 7], np.int64)
        onnx_path = os.path.join(args.out, name + ".onnx")
        export_onnx(m, x, onnx_path, training=True)
        del m
        inputs = {"input": x.numpy(), "label": y}
        grads = {"ampc " + p: ampc_gradients(args, name, onnx_path, p, inputs)
                 for p in ("fp32", "fp16", "bf16")}
        os.remove(onnx_path)
        grads["torch autocast bf16"] = torch_gradients(name, x, y, True)
        ref = torch_gradients(name, x, y, False)
        keys = [k for k in ref if k in grads["ampc fp32"]]

        def flat(d):
            return np.concatenate([np.asarray(d[k], np.float64).ravel()
                                   for k in keys])
        r = flat(ref)
        parts = []
        for label, d in grads.items():
            a = flat(d)
            parts.append("%s %.5f %.3g" % (
                label, a @ r / (np.linalg.norm(a) * np.linalg.norm(r)),
                np.linalg.norm(a - r) / np.linalg.norm(r)))
        print("%s: cosine and relative error against torch FP32's "
              "gradients: %s" % (name, ", ".join(parts)), flush=True)
        err = {k: float(np.sum((np.asarray(grads["ampc fp16"][k], np.float64)
                                - ref[k]) ** 2)) for k in keys}
        total = sum(err.values())
        worst = sorted(keys, key=lambda k: -err[k])[:3]
        print("  largest shares of ampc fp16's error: " + ", ".join(
            "%s %.0f%% (relative error %.3g)" % (
                k, 100 * err[k] / total,
                np.sqrt(err[k]) / np.linalg.norm(ref[k])) for k in worst),
            flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
