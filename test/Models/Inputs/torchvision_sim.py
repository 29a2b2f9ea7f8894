"""torchvision models on the CUDA target, run under the CUDA execution on
the CPU (--target=cuda-sim), against the CPU target and torch: each model
is built, seeded, exported and fed as torchvision_models.py does (10
classes, batch 2, one fixed random batch), then

  gradients  --optimizer=none at fp32 on both targets, each compared with
             torch's FP64 gradients over all parameters together (the
             relative error |g - g64| / |g64|). Conv-before-BatchNorm
             models amplify rounding (a bias before a norm has gradient 0
             in exact arithmetic, and the norm's backward cancels), so the
             scale is torch FP32's own error against FP64 on the same
             batch: each target must be within 2x torch FP32's error (plus
             1e-7), and the two targets within that of each other.
  training   the default library (FP16, dynamic loss scaling, AdamW, --lr
             1e-4) on both targets until --steps optimizer steps were
             taken: the losses finite and falling on each, the two
             targets' within 4e-3 relative of each other (they differ only
             in summation order, docs/design.md).

    /usr/bin/python3 test/Models/Inputs/torchvision_sim.py OUT --models
        NAME ... [--image-size 64] [--steps 3] [--ampc ampc]

One line per model, "MATCH" or "MISMATCH" with the figures; exit 1 on any
mismatch.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torchvision_models as tv  # noqa: E402


def compile_lib(args, onnx_path, lib, target, flags):
    subprocess.run([args.ampc, onnx_path, "--target=" + target, "-o", lib]
                   + flags, check=True)


def ampc_gradients(args, onnx_path, target, inputs):
    from ampc.runtime import Model
    lib = onnx_path[:-5] + "-grad-%s.so" % target
    compile_lib(args, onnx_path, lib, target,
                ["--precision=fp32", "--optimizer=none"])
    with Model(lib) as m:
        _, grads = m.gradients(inputs)
    return grads


def ampc_losses(args, onnx_path, target, inputs):
    from ampc.runtime import Model
    from ampc_testing import optimizer_steps
    lib = onnx_path[:-5] + "-train-%s.so" % target
    compile_lib(args, onnx_path, lib, target, ["--lr=1e-4"])
    with Model(lib) as m:
        losses, _, _ = optimizer_steps(m, inputs, args.steps, tv.MAX_SKIPS)
    return losses


def torch_gradients(name, x, y, dtype):
    import torch
    m = tv.build(name).train().to(dtype)
    loss = torch.nn.functional.cross_entropy(m(x.to(dtype)),
                                             torch.from_numpy(y))
    loss.backward()
    return {n: p.grad.double().numpy() for n, p in m.named_parameters()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--models", nargs="+", required=True)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--ampc", default="ampc")
    args = p.parse_args()
    import torch
    from ampc_testing import export_onnx
    os.makedirs(args.out, exist_ok=True)
    bad = 0
    for name in args.models:
        g = torch.Generator().manual_seed(1)
        x = torch.randn(2, 3, args.image_size, args.image_size, generator=g)
        y = np.array([3, 7], np.int64)
        onnx_path = os.path.join(args.out, name + ".onnx")
        export_onnx(tv.build(name), x, onnx_path, training=True)
        inputs = {"input": x.numpy(), "label": y}
        ref = torch_gradients(name, x, y, torch.float64)
        grads = {"torch fp32": torch_gradients(name, x, y, torch.float32)}
        for target in ("cpu", "cuda-sim"):
            grads[target] = ampc_gradients(args, onnx_path, target, inputs)
        keys = [k for k in ref if k in grads["cpu"]]
        if len(keys) != len(ref):
            print("MISMATCH: %s: the libraries have %d of torch's %d "
                  "parameters" % (name, len(keys), len(ref)), flush=True)
            bad += 1
            continue

        def flat(d):
            return np.concatenate([np.asarray(d[k], np.float64).ravel()
                                   for k in keys])
        r = flat(ref)

        def error(a, b):
            return float(np.linalg.norm(flat(a) - flat(b)) / np.linalg.norm(r))
        scale = error(grads["torch fp32"], ref)
        limit = 2 * scale + 1e-7
        errors = {t: error(grads[t], ref) for t in ("cpu", "cuda-sim")}
        between = error(grads["cpu"], grads["cuda-sim"])
        losses = {t: ampc_losses(args, onnx_path, t, inputs)
                  for t in ("cpu", "cuda-sim")}
        problems = ["%s's gradients %.3g from FP64's (limit %.3g)" %
                    (t, e, limit) for t, e in errors.items() if e > limit]
        if between > limit:
            problems.append("the targets' gradients %.3g apart (limit %.3g)"
                            % (between, limit))
        for t, ls in losses.items():
            if len(ls) < args.steps or not all(np.isfinite(ls)) or any(
                    b >= a for a, b in zip(ls, ls[1:])):
                problems.append("%s's losses do not fall: %s" % (t, ls))
        apart = max((abs(a - b) / abs(a) for a, b in
                     zip(losses["cpu"], losses["cuda-sim"])), default=0.0)
        if apart > 4e-3:
            problems.append("the targets' losses %.3g apart" % apart)
        print("%s: %s: gradients' relative error against torch FP64: cpu "
              "%.3g, cuda-sim %.3g, torch FP32 %.3g, cpu to cuda-sim %.3g; "
              "FP16 losses cpu %s, cuda-sim %s (%.2g apart)%s" % (
                  "MISMATCH" if problems else "MATCH", name,
                  errors["cpu"], errors["cuda-sim"], scale, between,
                  " ".join("%.5f" % v for v in losses["cpu"]),
                  " ".join("%.5f" % v for v in losses["cuda-sim"]), apart,
                  ": " + "; ".join(problems) if problems else ""),
              flush=True)
        bad += bool(problems)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
