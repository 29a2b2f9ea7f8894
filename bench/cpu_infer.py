#!/usr/bin/env python3
"""Inference latency of an ampc CPU library against PyTorch on this machine.

usage: /usr/bin/python3 bench/cpu_infer.py [--build build] [--batch 8]
           [--size 224] [--threads N] [--runs 20] [--precision fp32 ...]

Exports torchvision's resnet18 (eval mode, seeded random weights) to ONNX,
compiles it with `ampc --mode=infer --target=cpu` for each --precision, and
times, in this one process and on the same input, the library's
`ampc_model_infer` (through libampc_runtime.so) and the torch model under
`torch.inference_mode()`. Both get the same number of threads (OpenBLAS's
and torch's). Each side runs 3 warm-up calls, then --runs timed calls,
alternating sides so both see the same machine load; the table shows the
median and the ratio ampc/torch (below 1: ampc is faster), and how far the
library's output is from torch's (max |diff| / max |torch|).
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--precision", nargs="+", default=["fp32"],
                   choices=["fp32", "fp16", "bf16"])
    args = p.parse_args()
    # Before numpy/torch load their BLAS.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import numpy as np
    import torch
    import torchvision
    torch.set_num_threads(args.threads)

    build = os.path.abspath(args.build)
    work = tempfile.mkdtemp(prefix="ampc-bench-")
    torch.manual_seed(0)
    model = torchvision.models.resnet18().eval()
    x = torch.randn(args.batch, 3, args.size, args.size)
    onnx_path = os.path.join(work, "resnet18.onnx")
    torch.onnx.export(model, x, onnx_path, opset_version=17,
                      input_names=["x"], output_names=["y"])

    rt = ctypes.CDLL(os.path.join(build, "lib", "libampc_runtime.so"))
    rt.ampc_last_error.restype = ctypes.c_char_p

    class Tensor(ctypes.Structure):
        _fields_ = [("dtype", ctypes.c_int), ("rank", ctypes.c_int32),
                    ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("data", ctypes.c_void_p), ("size_bytes", ctypes.c_size_t)]

    def tensor(array):
        shape = (ctypes.c_int64 * array.ndim)(*array.shape)
        t = Tensor(1, array.ndim, shape, array.ctypes.data, array.nbytes)
        t._keep = shape
        return t

    with torch.inference_mode():
        want = model(x).numpy()
    xin = np.ascontiguousarray(x.numpy())
    rows = []
    for precision in args.precision:
        so = os.path.join(work, f"resnet18_{precision}.so")
        subprocess.run([os.path.join(build, "bin", "ampc"), onnx_path,
                        "--mode=infer", "--target=cpu",
                        f"--precision={precision}", "-o", so], check=True)
        handle = ctypes.c_void_p()
        if rt.ampc_model_load(so.encode(), None, ctypes.byref(handle)):
            sys.exit(f"load: {rt.ampc_last_error().decode()}")
        got = np.empty(want.shape, np.float32)
        ins, outs = tensor(xin), tensor(got)

        def run_ampc():
            if rt.ampc_model_infer(handle, ctypes.byref(ins), 1,
                                   ctypes.byref(outs), 1):
                sys.exit(f"infer: {rt.ampc_last_error().decode()}")

        def run_torch():
            with torch.inference_mode():
                model(x)

        for _ in range(3):
            run_ampc()
            run_torch()
        ta, tt = [], []
        for _ in range(args.runs):
            for fn, times in ((run_ampc, ta), (run_torch, tt)):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
        diff = float(np.abs(got - want).max() / np.abs(want).max())
        rows.append((precision, statistics.median(ta), statistics.median(tt),
                     diff))
        rt.ampc_model_release(handle)

    print(f"resnet18, batch {args.batch}, 3x{args.size}x{args.size}, "
          f"{args.threads} thread(s), median of {args.runs} runs; "
          f"torch {torch.__version__} fp32 eager (inference_mode)")
    print(f"{'ampc precision':<15}{'ampc ms':>10}{'torch ms':>10}"
          f"{'ampc/torch':>12}{'max|diff|/max|y|':>18}")
    for precision, a, t, diff in rows:
        print(f"{precision:<15}{a * 1e3:>10.1f}{t * 1e3:>10.1f}{a / t:>12.2f}"
              f"{diff:>18.2e}")


if __name__ == "__main__":
    main()
