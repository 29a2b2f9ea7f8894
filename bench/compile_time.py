#!/usr/bin/env python3
"""Compile time of the ampc pipeline against model size (CPU only, no GPU).

usage: /usr/bin/python3 bench/compile_time.py [--build build]
           [--layers 100 1000 10000] [--width 16] [--batch 4] [--runs 3]
           [--modes train infer cpp] [--passes] [--keep]

Writes synthetic MLPs (binary .onnx through onnx.helper: an input of
--batch x --width features, then N layers of Gemm(transB=1) + Relu, each with
its own --width x --width weight and bias, a final Gemm to 10 classes) into a
temporary folder, and times the whole `ampc` process on each:

  train  ampc MODEL --emit=mlir -o FILE              (import, autodiff, fp16
         loss scaling, sgd optimizer, casts, fusion, memory plan, printing)
  infer  ampc MODEL --mode=infer --emit=mlir -o FILE
  cpp    ampc MODEL --target=cpu --emit=cpp -o MODEL.cpp   (training step C++
         source and its parameter file, without running the C++ compiler)

Each figure is the median wall time of --runs runs. The table gives seconds,
seconds per layer, and for each mode the ratio of the per-layer time of the
largest model to that of the smallest, and to that of the next largest (the
smallest model's time is mostly process start-up). Compile time grows
linearly when the ratios stay near 1; the bench calls a ratio <= 2 linear and
exits 1 otherwise (a quadratic pass makes the ratio tend to the ratio of the
layer counts, 100 for 10,000 against 100 layers).
With --passes it also times --emit-after=PASS for every pipeline pass on the
largest model, to find the pass where the time goes.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "utils", "python"))

LINEAR_RATIO = 2.0

MODES = {
    "train": ["--emit=mlir"],
    "infer": ["--mode=infer", "--emit=mlir"],
    "cpp": ["--target=cpu", "--emit=cpp"],
}


def write_mlp(path, layers, width, batch):
    import numpy as np
    from ampc_testing import write_mlp_onnx

    rng = np.random.default_rng(layers)
    scale = 1.0 / np.sqrt(width)
    write_mlp_onnx(path, batch, [width] * (layers + 1) + [10],
                   lambda rows, cols: rng.uniform(-scale, scale, (rows, cols)),
                   name="mlp%d" % layers)


def time_ampc(cmd, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        times.append(time.perf_counter() - start)
        if proc.returncode:
            sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                     f"{proc.stderr}")
    return statistics.median(times)


def pass_names(ampc, model):
    proc = subprocess.run([ampc, model, "--emit=mlir",
                           "--emit-after=nonsense"],
                          capture_output=True, text=True)
    listed = proc.stderr.split("(", 1)[-1].rsplit(")", 1)[0]
    return ["import"] + [p.strip() for p in listed.split(",") if p.strip()]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--layers", type=int, nargs="+", default=[100, 1000, 10000])
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--modes", nargs="+", default=["train", "infer", "cpp"],
                   choices=list(MODES))
    p.add_argument("--passes", action="store_true",
                   help="also time --emit-after=PASS on the largest model")
    p.add_argument("--keep", action="store_true",
                   help="keep the temporary folder with the models")
    args = p.parse_args()

    ampc = os.path.join(os.path.abspath(args.build), "bin", "ampc")
    work = tempfile.mkdtemp(prefix="ampc-compile-time-")
    try:
        models = {}
        for n in args.layers:
            models[n] = os.path.join(work, f"mlp{n}.onnx")
            write_mlp(models[n], n, args.width, args.batch)

        seconds = {}
        for mode in args.modes:
            for n in args.layers:
                # --emit=cpp writes MODEL.params.bin and MODEL.model.onnx
                # beside its output, so it writes into the temporary folder.
                out = (os.path.join(work, f"mlp{n}.cpp") if mode == "cpp"
                       else os.path.join(work, "out.mlir"))
                cmd = [ampc, models[n], *MODES[mode], "-o", out]
                seconds[mode, n] = time_ampc(cmd, args.runs)

        print(f"ampc compile time, MLP width {args.width}, batch "
              f"{args.batch}, median of {args.runs} runs")
        print()
        print("| mode | layers | seconds | ms per layer |")
        print("|---|---|---|---|")
        for mode in args.modes:
            for n in args.layers:
                s = seconds[mode, n]
                print(f"| {mode} | {n} | {s:.3f} | {1000 * s / n:.3f} |")
        print()
        sizes = sorted(set(args.layers))
        small, large = sizes[0], sizes[-1]
        pairs = [(large, small)]
        if len(sizes) > 2:
            # The smallest model's time is mostly process start-up (about
            # 0.1 s), which flatters its ratio; the next size is not.
            pairs.append((large, sizes[-2]))
        verdicts = []
        for mode in args.modes:
            for big, other in pairs:
                ratio = ((seconds[mode, big] / big) /
                         (seconds[mode, other] / other))
                linear = ratio <= LINEAR_RATIO
                verdicts.append(linear)
                print(f"{mode}: per-layer time {big} / {other} layers = "
                      f"{ratio:.2f} ({'linear' if linear else 'NOT linear'}, "
                      f"linear means <= {LINEAR_RATIO:g})")

        if args.passes:
            print()
            print(f"train pipeline cut after each pass, {large} layers "
                  f"(cumulative seconds, includes printing the IR)")
            print()
            print("| --emit-after | seconds |")
            print("|---|---|")
            for name in pass_names(ampc, models[large]):
                cmd = [ampc, models[large], "--emit=mlir",
                       f"--emit-after={name}", "-o",
                       os.path.join(work, "out.mlir")]
                print(f"| {name} | {time_ampc(cmd, args.runs):.3f} |")
        return 0 if all(verdicts) else 1
    finally:
        if args.keep:
            print(f"models kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main())
