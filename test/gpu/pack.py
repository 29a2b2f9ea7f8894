"""Builds the GPU test's pack (run here, where ampc is built): exports the
models of gpu_models.py, compiles each for CUDA (a training library and a
gradients-only library, FP16, --gpu-arch as given), runs the same libraries
compiled for the CPU target to record the reference (losses over the steps,
gradients of step 1), and copies what the GPU machine needs: the CUDA
libraries, libampc_runtime.so (the only ampc library the check loads, through
ctypes), the data, the initial weights, check.py, sanitize.py, run.sh and the Python
modules the check imports (gpu_models.py, utils/python's ampc_testing.py and
ampc_ctypes.py).

    /usr/bin/python3 test/gpu/pack.py OUT [--build build] [--gpu-arch sm_90a]
    # then, on the GPU machine:  OUT/run.sh
"""
import argparse
import os
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_UTILS = os.path.join(HERE, "..", "..", "utils", "python")
sys.path.insert(0, PYTHON_UTILS)
import gpu_models as gm  # noqa: E402
from ampc_ctypes import Model  # noqa: E402
from ampc_testing import export_onnx, run_commands  # noqa: E402

FLAGS = ["--precision=fp16", "--lr=%r" % gm.ADAMW["lr"],
         "--weight-decay=%r" % gm.ADAMW["weight_decay"]]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    p.add_argument("--gpu-arch", default="sm_80,sm_90a")
    args = p.parse_args()
    ampc = os.path.join(os.path.abspath(args.build), "bin", "ampc")
    runtime = os.path.join(os.path.abspath(args.build), "lib",
                           "libampc_runtime.so")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    jobs = []
    for name in gm.MODELS:
        torch.manual_seed(gm.SEED)
        m = gm.module(name)
        data = gm.batches(name, gm.STEPS)
        onnx = os.path.join(out, name + ".onnx")
        export_onnx(m, data[0][0], onnx, training=True)
        torch.save(m.state_dict(), os.path.join(out, name + ".init.pt"))
        np.save(os.path.join(out, name + ".x.npy"),
                np.stack([b[0].numpy() for b in data]))
        np.save(os.path.join(out, name + ".y.npy"),
                np.stack([b[1].numpy() for b in data]))
        loss = ["--loss=" + gm.LOSS[name]]
        for target in ("cuda", "cpu"):
            arch = ["--gpu-arch=" + args.gpu_arch] if target == "cuda" else []
            base = os.path.join(out, "%s.%s" % (name, target))
            jobs.append([ampc, onnx, "--target=" + target, "-o",
                         base + ".train.so"] + FLAGS + loss + arch)
            jobs.append([ampc, onnx, "--target=" + target, "-o",
                         base + ".grads.so", "--optimizer=none"] + FLAGS +
                        loss + arch)
    try:
        run_commands(jobs)
    except RuntimeError as e:
        sys.exit("pack: %s" % e)
    # The CPU target's reference: losses of every step, gradients of step 1.
    for name in gm.MODELS:
        x = np.load(os.path.join(out, name + ".x.npy"))
        y = np.load(os.path.join(out, name + ".y.npy"))
        model = Model(os.path.join(out, name + ".cpu.train.so"), runtime)
        losses = [float(model.train_step({"input": x[s], "label": y[s]}))
                  for s in range(gm.STEPS)]
        model.close()
        np.save(os.path.join(out, name + ".cpu.losses.npy"), np.array(losses))
        model = Model(os.path.join(out, name + ".cpu.grads.so"), runtime)
        _, grads = model.gradients({"input": x[0], "label": y[0]})
        model.close()
        np.savez(os.path.join(out, name + ".cpu.grads.npz"), **grads)
        for suffix in (".cpu.train.so", ".cpu.grads.so"):
            os.remove(os.path.join(out, name + suffix))
    shutil.copy(runtime, out)
    for f in ("check.py", "sanitize.py", "run.sh", "gpu_models.py"):
        shutil.copy(os.path.join(HERE, f), out)
    shutil.copy(os.path.join(PYTHON_UTILS, "ampc_testing.py"), out)
    # The runtime binding stands alone: the pack's ampc_ctypes.py is the
    # Python module's (python/ampc/runtime.py).
    shutil.copy(os.path.join(PYTHON_UTILS, "..", "..", "python", "ampc",
                             "runtime.py"),
                os.path.join(out, "ampc_ctypes.py"))
    print("pack: %s (%d models; run %s/run.sh on the GPU machine)" %
          (out, len(gm.MODELS), out))


if __name__ == "__main__":
    main()
