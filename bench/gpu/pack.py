"""Builds the GPU benchmark's pack (issue 8), here where ampc is built:
exports the models of models.py, compiles each for CUDA (FP16, dynamic loss
scaling, AdamW; --embed-model=false, the benchmark exports nothing) and
copies the libraries, libampc_runtime.so, models.py, bench.py, run.sh and
the Python modules bench.py imports (utils/python's ampc_testing.py and
ampc_ctypes.py) into one folder. The weights travel inside the
libraries (bench.py loads them into PyTorch from there), so packs stay
small: resnet18's and the GPT block's are about 50 MB each, so pack them
one at a time for a machine that takes at most 64 MB per transfer.
GPT-2 small's shape (gpt2s, 85 M parameters, 340 MB) is packed with
--zero-weights: its library holds zeros (a few MB once compressed) and a
NAME.zero-weights file tells bench.py to load PyTorch's initial weights
(torch.manual_seed(0), models.module) into it before timing.

    /usr/bin/python3 bench/gpu/pack.py OUT [--models mlp gpt resnet18]
    /usr/bin/python3 bench/gpu/pack.py OUT --models gpt2s --zero-weights
    /usr/bin/python3 bench/gpu/pack.py OUT --models resnet18_224 resnet50 \
        mobilenet_v3_large --zero-weights
    tar -C OUT -cJf OUT.tar.xz .
    # then, on the GPU machine:  OUT/run.sh
"""
import argparse
import os
import shutil
import subprocess
import sys

import onnx as onnx_module
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
PYTHON_UTILS = os.path.join(ROOT, "utils", "python")
sys.path.insert(0, PYTHON_UTILS)
import models as bm  # noqa: E402
from ampc_testing import export_onnx  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--gpu-arch", default="sm_90a")
    p.add_argument("--models", nargs="+", default=bm.MODELS, choices=bm.MODELS)
    p.add_argument("--bf16-weights", action="store_true",
                   help="round the initial weights to BF16 values (kept in "
                   "FP32): the libraries then compress to about half "
                   "(tar -cJ), so that every model fits one transfer")
    p.add_argument("--zero-weights", action="store_true",
                   help="compile every model with zero weights (its library "
                   "then compresses to almost nothing); bench.py loads "
                   "PyTorch's initial weights into it")
    args = p.parse_args()
    build = os.path.abspath(args.build)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    for name in args.models:
        torch.manual_seed(0)
        m = bm.module(name)
        if args.bf16_weights:
            with torch.no_grad():
                for t in m.parameters():
                    t.copy_(t.to(torch.bfloat16).float())
        if args.zero_weights:
            with torch.no_grad():
                for t in m.parameters():
                    t.zero_()
        x, _ = bm.example(name)
        onnx = os.path.join(out, name + ".onnx")
        export_onnx(m, x, onnx, training=True)
        # Buffers do not train (the GPT block's causal mask); BatchNorm's
        # running statistics, buffers too, are updated as torch does.
        initializers = {t.name for t in onnx_module.load(onnx).graph.initializer}
        buffers = [n for n, _ in m.named_buffers() if n in initializers]
        command = [os.path.join(build, "bin", "ampc"), onnx, "--target=cuda",
                   "--gpu-arch=" + args.gpu_arch, "--precision=fp16",
                   "--loss=" + bm.LOSS[name], "--optimizer=adamw",
                   "--lr=%r" % bm.ADAMW["lr"],
                   "--weight-decay=%r" % bm.ADAMW["weight_decay"],
                   "--embed-model=false"] + (
                       ["--freeze=" + ",".join(buffers)] if buffers else []) + [
                   "-o",
                   os.path.join(out, name + ".cuda.train.so")]
        r = subprocess.run(command, capture_output=True, text=True)
        if r.returncode:
            sys.exit("pack: %s failed: %s" % (" ".join(command),
                                                r.stderr.strip()))
        os.remove(onnx)
        marker = os.path.join(out, name + ".zero-weights")
        if args.zero_weights:
            open(marker, "w").close()
        elif os.path.exists(marker):
            os.remove(marker)
        print("pack: %s compiled" % name)
    shutil.copy(os.path.join(build, "lib", "libampc_runtime.so"), out)
    for f in ("models.py", "bench.py", "kernel_profile.py"):
        shutil.copy(os.path.join(HERE, f), out)
    shutil.copy(os.path.join(ROOT, "test", "gpu", "run.sh"), out)
    shutil.copy(os.path.join(PYTHON_UTILS, "ampc_testing.py"), out)
    # The runtime binding stands alone: the pack's ampc_ctypes.py is the
    # Python module's (python/ampc/runtime.py).
    shutil.copy(os.path.join(PYTHON_UTILS, "..", "..", "python", "ampc",
                             "runtime.py"),
                os.path.join(out, "ampc_ctypes.py"))
    print("pack: %s (run %s/run.sh on the GPU machine)" % (out, out))


if __name__ == "__main__":
    main()
