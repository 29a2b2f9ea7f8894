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
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "utils", "python"))
# The Python module (python/ampc) for the runtime binding.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))


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
    from ampc.runtime import Model
    from ampc_testing import median_times
    torch.set_num_threads(args.threads)

    build = os.path.abspath(args.build)
    work = tempfile.mkdtemp(prefix="ampc-bench-")
    torch.manual_seed(0)
    model = torchvision.models.resnet18().eval()
    x = torch.randn(args.batch, 3, args.size, args.size)
    onnx_path = os.path.join(work, "resnet18.onnx")
    torch.onnx.export(model, x, onnx_path, opset_version=17,
                      input_names=["x"], output_names=["y"])

    runtime = os.path.join(build, "lib", "libampc_runtime.so")
    with torch.inference_mode():
        want = model(x).numpy()
    xin = np.ascontiguousarray(x.numpy())
    rows = []
    for precision in args.precision:
        so = os.path.join(work, f"resnet18_{precision}.so")
        subprocess.run([os.path.join(build, "bin", "ampc"), onnx_path,
                        "--mode=infer", "--target=cpu",
                        f"--precision={precision}", "-o", so], check=True)
        library = Model(so, runtime=runtime)
        got = np.empty(want.shape, np.float32)
        run_ampc = library.bind_infer([xin], [got])

        def run_torch():
            with torch.inference_mode():
                model(x)

        ta, tt = median_times([run_ampc, run_torch], 3, args.runs)
        diff = float(np.abs(got - want).max() / np.abs(want).max())
        rows.append((precision, ta, tt, diff))
        library.close()

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
