#!/usr/bin/env python3
"""New code's compile time as pieces against one translation unit
(the CPU target's --compile-piece-kb; docs/design.md, "Pieces compiled at
once").

usage: /usr/bin/python3 bench/compile_pieces.py [--build build]
           [--model mobilenet_v3_small] [--image-size 64] [--kb 0 64]
           [--jobs N] [--runs 1]

Exports a torchvision classification model as test/Models/Inputs/
torchvision_models.py does (training mode, batch 2, 10 classes) and times
`ampc MODEL --target=cpu --compile-piece-kb=KB -o LIB.so` for each --kb
(0: one translation unit), each time with a cache folder that holds the
precompiled runtime header but no code object (every piece compiles, as
after a precision change), AMPC_COMPILE_JOBS=--jobs (default: one per
hardware thread). Figures: wall and CPU seconds (user + system of ampc
and its compilers), the median of --runs, the number of pieces, and each
wall time as a ratio of the first --kb's.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "utils", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "Models", "Inputs"))
sys.path.insert(0, HERE)

from rebuild_time import timed  # noqa: E402  (wall and CPU seconds)

MARKER = "piece, compiled apart after the shared lines above"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--model", default="mobilenet_v3_small")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--kb", type=int, nargs="+", default=[0, 64])
    p.add_argument("--jobs", type=int, default=0)
    p.add_argument("--runs", type=int, default=1)
    args = p.parse_args()
    import torch
    import torchvision_models
    from ampc_testing import export_onnx

    ampc = os.path.join(os.path.abspath(args.build), "bin", "ampc")
    work = tempfile.mkdtemp(prefix="ampc-pieces-")
    try:
        model = os.path.join(work, args.model + ".onnx")
        module = torchvision_models.build(args.model)
        x = torch.randn(2, 3, args.image_size, args.image_size)
        export_onnx(module, x, model, training=True)
        env = dict(os.environ)
        if args.jobs:
            env["AMPC_COMPILE_JOBS"] = str(args.jobs)
        print("| model | --compile-piece-kb | pieces | wall s | CPU s | "
              "wall ratio |")
        print("|---|---|---|---|---|---|")
        first = None
        for kb in args.kb:
            source = os.path.join(work, f"source{kb}.cpp")
            subprocess.run([ampc, model, "--target=cpu", "--emit=cpp",
                            f"--compile-piece-kb={kb}", "-o", source],
                           check=True, capture_output=True)
            with open(source) as f:
                pieces = max(1, f.read().count(MARKER))
            walls, cpus = [], []
            for r in range(args.runs):
                cache = os.path.join(work, f"cache{kb}-{r}")
                env["AMPC_CACHE_DIR"] = cache
                cmd = [ampc, model, "--target=cpu",
                       f"--compile-piece-kb={kb}", "-o",
                       os.path.join(work, "lib.so")]
                timed(cmd, env)  # builds the precompiled header
                shutil.rmtree(os.path.join(cache, "objects"))
                wall, cpu = timed(cmd, env)
                walls.append(wall)
                cpus.append(cpu)
            wall, cpu = statistics.median(walls), statistics.median(cpus)
            first = first or wall
            print(f"| {args.model} {args.image_size}x{args.image_size} | "
                  f"{kb} | {pieces} | {wall:.1f} | {cpu:.1f} | "
                  f"{wall / first:.2f}x |", flush=True)
        return 0
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main())
