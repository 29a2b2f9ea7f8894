#!/usr/bin/env python3
"""The transformer's rebuild after a flag change, without and with ampc's
compile cache (docs/design.md, "Faster rebuilds").

usage: /usr/bin/python3 bench/rebuild_time.py [--build build]
           [--targets cpu cuda-sim cuda] [--runs 1]

Exports test/gpu/gpu_models.py's transformer (one TransformerEncoderLayer,
d_model 32, 4 heads, batch 2x8, MSE) and, for each target, times the whole
`ampc MODEL -o LIB.so` (import, pipeline, source, host compiler) of:

  lr      --lr=2e-3 after a build at the default rate (new data, same code)
  bf16    --precision=bf16 after the fp16 build (new code)

each with AMPC_CACHE_DIR=off (every compile parses the kernel headers and
compiles the whole source: the time before the cache) and with a cache
folder that the previous build filled (the precompiled header and the
fp16 build's code object). Figures: wall seconds and CPU seconds (user +
system of ampc and the compilers it runs), the median of --runs, and the
ratio with/without. This machine is shared: CPU seconds move less than wall
seconds when other jobs run.
"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "utils", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "gpu"))


def export_transformer(path):
    import torch
    import gpu_models

    torch.manual_seed(0)
    module = gpu_models.module("transformer")
    torch.onnx.export(module, (torch.randn(2, 8, 32),), path,
                      opset_version=17, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING)


def timed(cmd, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime -
                                                 before.ru_stime)
    return wall, cpu


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--targets", nargs="+", default=["cpu", "cuda-sim"])
    p.add_argument("--runs", type=int, default=1)
    args = p.parse_args()
    ampc = os.path.join(os.path.abspath(args.build), "bin", "ampc")
    work = tempfile.mkdtemp(prefix="ampc-rebuild-")
    try:
        model = os.path.join(work, "transformer.onnx")
        export_transformer(model)
        base = [ampc, model, "--loss=mse"]
        changes = {"lr": (["--precision=fp16"], ["--lr=2e-3"]),
                   "bf16": (["--precision=fp16"], ["--precision=bf16"])}
        print("| target | change | cache | wall s | CPU s |")
        print("|---|---|---|---|---|")
        ratios = []
        for target in args.targets:
            for change, (first, second) in changes.items():
                row = {}
                for cache in ("off", "on"):
                    walls, cpus = [], []
                    for run in range(args.runs):
                        env = dict(os.environ)
                        folder = os.path.join(work, f"cache-{target}-{change}-{run}")
                        env["AMPC_CACHE_DIR"] = "off" if cache == "off" else folder
                        out = os.path.join(work, "lib.so")
                        # The build before the change fills the cache.
                        timed(base + [f"--target={target}", *first, "-o", out],
                              env)
                        wall, cpu = timed(base + [f"--target={target}",
                                                  *second, "-o", out], env)
                        walls.append(wall)
                        cpus.append(cpu)
                    row[cache] = (statistics.median(walls),
                                  statistics.median(cpus))
                    print(f"| {target} | {change} | {cache} | "
                          f"{row[cache][0]:.2f} | {row[cache][1]:.2f} |",
                          flush=True)
                ratios.append((target, change, row["on"][0] / row["off"][0],
                               row["on"][1] / row["off"][1]))
        print()
        for target, change, wall, cpu in ratios:
            print(f"{target} {change}: with the cache {wall:.2f}x the wall "
                  f"time, {cpu:.2f}x the CPU time of a build without it")
        return 0
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main())
