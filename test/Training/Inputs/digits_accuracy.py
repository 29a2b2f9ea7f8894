#!/usr/bin/env python3
"""FP16 against FP32 test accuracy of the digits MLP trained with ampc-train.

usage: digits_accuracy.py DATA_DIR FP16.so FP32.so [--epochs 20] [--lr 2e-3]
                          [--seeds 0 1 2] [--min 0.95] [--max-gap 0.01]
                          [--ampc-train PATH]

DATA_DIR holds examples/digits/prepare_digits.py's .npy files. For each
shuffle seed both libraries are trained with ampc-train (from PATH unless
--ampc-train) for --epochs epochs with the test set as the evaluation set,
and the final test accuracies are compared: each must be above --min, and
they may differ by at most --max-gap. Prints one line per seed and "ok" when
every check holds; otherwise a "FAIL: ..." line per failed check and exit
status 1. The FP16 run must also really have used dynamic loss scaling (a
scale above 1), the FP32 run none (scale 1).
"""
import argparse
import os
import re
import subprocess
import sys

FINAL = re.compile(r"^final: loss (\S+)  accuracy ([0-9.]+)  \((\d+) steps,",
                   re.M)
EPOCH = re.compile(r"^epoch \d+/\d+  loss \S+  scale (\S+)  skipped (\d+)",
                   re.M)


def train(tool, library, data, epochs, lr, seed):
    cmd = [tool, library,
           "--inputs", os.path.join(data, "x_train.npy"),
           "--labels", os.path.join(data, "y_train.npy"),
           "--eval-inputs", os.path.join(data, "x_test.npy"),
           "--eval-labels", os.path.join(data, "y_test.npy"),
           "--epochs", str(epochs), "--lr", str(lr), "--seed", str(seed)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{run.stderr}")
    final = FINAL.search(run.stdout)
    epochs_seen = EPOCH.findall(run.stdout)
    if not final or len(epochs_seen) != epochs:
        sys.exit(f"unexpected ampc-train output:\n{run.stdout}")
    scale, skipped = epochs_seen[-1]
    return float(final.group(2)), float(scale), int(skipped)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data")
    p.add_argument("fp16")
    p.add_argument("fp32")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--min", type=float, default=0.95)
    p.add_argument("--max-gap", type=float, default=0.01)
    p.add_argument("--ampc-train", default="ampc-train")
    args = p.parse_args()
    failures = []
    for seed in args.seeds:
        a16, scale16, skipped16 = train(args.ampc_train, args.fp16, args.data, args.epochs,
                                        args.lr, seed)
        a32, scale32, _ = train(args.ampc_train, args.fp32, args.data, args.epochs, args.lr,
                                seed)
        gap = abs(a16 - a32)
        print(f"seed {seed}: fp16 accuracy {a16:.4f} (loss scale {scale16:g}, "
              f"{skipped16} skipped)  fp32 accuracy {a32:.4f}  "
              f"gap {100 * gap:.2f} points")
        for name, acc in (("fp16", a16), ("fp32", a32)):
            if not acc > args.min:
                failures.append(f"seed {seed}: {name} accuracy {acc:.4f} is "
                                f"not above {args.min}")
        if gap > args.max_gap + 1e-9:
            failures.append(f"seed {seed}: fp16 and fp32 accuracies differ by "
                            f"{100 * gap:.2f} points (at most "
                            f"{100 * args.max_gap:g} allowed)")
        if scale16 < 2:
            failures.append(f"seed {seed}: the fp16 library's loss scale is "
                            f"{scale16:g}: no dynamic loss scaling")
        if scale32 != 1:
            failures.append(f"seed {seed}: the fp32 library's loss scale is "
                            f"{scale32:g}, expected 1")
    for f in failures:
        print(f"FAIL: {f}")
    if failures:
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
