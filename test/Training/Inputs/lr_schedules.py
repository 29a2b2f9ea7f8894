"""Runs ampc-train with each --lr-schedule and checks the learning rate of
every step (the metrics' lr column) against torch.optim.lr_scheduler's,
stepped as a PyTorch loop with GradScaler steps it: once per optimizer step
taken, not on a step the scaler skipped. The runtime keeps the rate in
float32, so each torch rate is rounded to float32 and must be equal.

usage: lr_schedules.py --ampc-train BIN --library LIB.so --work DIR
           [--steps N] [--expect-skips] NAME=SPEC...
Prints "NAME: N steps, K skipped, identical" per schedule, or the first
step that differs (exit status 1)."""

import argparse
import csv
import os
import subprocess
import sys

import numpy as np
import torch

BASE_LR = 0.1


def torch_scheduler(name, spec, optimizer):
    kind, *a = spec.split(":")
    sched = torch.optim.lr_scheduler
    if kind == "step":
        return sched.StepLR(optimizer, int(a[0]), float(a[1]) if len(a) > 1 else 0.1)
    if kind == "multistep":
        return sched.MultiStepLR(optimizer, [int(m) for m in a[0].split(",")],
                                 float(a[1]) if len(a) > 1 else 0.1)
    if kind == "exponential":
        return sched.ExponentialLR(optimizer, float(a[0]))
    if kind == "cosine":
        t_max, eta_min = int(a[0]), float(a[1]) if len(a) > 1 else 0.0
        warmup = int(a[2]) if len(a) > 2 else 0
        start = float(a[3]) if len(a) > 3 else 1.0 / 3.0
        cosine = sched.CosineAnnealingLR(optimizer, t_max, eta_min)
        if not warmup:
            return cosine
        # A fresh optimizer state for the composition (each scheduler's
        # constructor steps it once).
        for g in optimizer.param_groups:
            g["lr"] = g["initial_lr"]
        linear = sched.LinearLR(optimizer, start_factor=start, total_iters=warmup)
        return sched.SequentialLR(optimizer, [linear, cosine], milestones=[warmup])
    if kind == "onecycle":
        return sched.OneCycleLR(
            optimizer, max_lr=float(a[0]), total_steps=int(a[1]),
            pct_start=float(a[2]) if len(a) > 2 else 0.3, anneal_strategy="cos",
            cycle_momentum=False, div_factor=float(a[3]) if len(a) > 3 else 25.0,
            final_div_factor=float(a[4]) if len(a) > 4 else 1e4)
    raise SystemExit("unknown schedule " + spec)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--ampc-train", required=True)
    p.add_argument("--library", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--expect-skips", action="store_true")
    p.add_argument("schedules", nargs="+")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5], np.float32)).astype(np.float32)
    np.save(os.path.join(args.work, "x.npy"), x)
    np.save(os.path.join(args.work, "y.npy"), y)
    failed = False
    for item in args.schedules:
        name, spec = item.split("=", 1)
        metrics = os.path.join(args.work, name + ".csv")
        subprocess.run([args.ampc_train, args.library,
                        "--inputs", os.path.join(args.work, "x.npy"),
                        "--labels", os.path.join(args.work, "y.npy"),
                        "--steps", str(args.steps), "--lr", str(BASE_LR),
                        "--lr-schedule", spec, "--metrics", metrics, "--quiet"],
                       check=True, stdout=subprocess.DEVNULL)
        with open(metrics) as f:
            rows = list(csv.DictReader(f))
        param = torch.zeros(1, requires_grad=True)
        optimizer = torch.optim.SGD([param], lr=BASE_LR)
        scheduler = torch_scheduler(name, spec, optimizer)
        skipped_before, message = 0, None
        for row in rows:
            want = np.float32(optimizer.param_groups[0]["lr"])
            got = np.float32(float(row["lr"]))
            if got != want and message is None:
                message = "step %s: ampc %r, torch %r" % (row["step"], float(got),
                                                          float(want))
            skipped = int(row["skipped"])
            if skipped == skipped_before:  # the optimizer stepped
                optimizer.step()
                scheduler.step()
            skipped_before = skipped
        if args.expect_skips and not skipped_before:
            message = message or "no step was skipped"
        if message:
            failed = True
            print("%s: MISMATCH %s" % (name, message))
        else:
            print("%s: %d steps, %d skipped, identical" % (name, len(rows),
                                                           skipped_before))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
