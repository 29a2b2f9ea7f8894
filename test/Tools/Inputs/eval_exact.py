#!/usr/bin/env python3
"""ampc-train's evaluation counts every sample once (test/Tools/
ampc-train-eval.test).

usage: eval_exact.py classifier WORK   (WORK holds prepare_digits.py's data
                                        and train.so, the digits MLP, batch 64)
       eval_exact.py regressor WORK    (WORK/regressor.so: test/Driver/Inputs/
                                        regressor.onnxtext, batch 4, mse)

Runs ampc-train with --lr 0 (one step that changes nothing) and evaluation
sets whose size is not a multiple of the batch, and smaller than it; reads
eval_loss (and accuracy) from the metrics CSV, and compares them with the
loss and accuracy over exactly those samples computed independently (torch
for the MLP from the ONNX model's weights, NumPy for the regressor).
Prints one line per set; fails above a relative difference of 1e-5.
"""
import csv
import os
import subprocess
import sys

import numpy as np

TOLERANCE = 1e-5


def train_metrics(work, lib, x, y, ex, ey):
    files = {}
    for name, array in [("x", x), ("y", y), ("ex", ex), ("ey", ey)]:
        files[name] = os.path.join(work, "eval_%s.npy" % name)
        np.save(files[name], array)
    metrics = os.path.join(work, "eval_metrics.csv")
    subprocess.check_call(
        ["ampc-train", lib, "--inputs", files["x"], "--labels", files["y"],
         "--eval-inputs", files["ex"], "--eval-labels", files["ey"],
         "--steps", "1", "--lr", "0", "--metrics", metrics, "--quiet"],
        stdout=subprocess.DEVNULL)
    with open(metrics) as f:
        rows = list(csv.DictReader(f))
    return rows[-1], list(rows[-1].keys())


def compare(label, got, want):
    d = abs(got - want) / max(abs(want), 1e-30)
    print("%s: ampc-train %.7g, reference %.7g, relative difference %.1e" % (
        label, got, want, d))
    return d <= TOLERANCE


def classifier(work):
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                    "..", "examples", "digits"))
    import onnx
    from onnx import numpy_helper
    from export_mlp import DigitsMlp
    module = DigitsMlp()
    weights = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
               for t in onnx.load(os.path.join(work, "digits_mlp.onnx"))
               .graph.initializer}
    module.load_state_dict({k: weights[k] for k in module.state_dict()})
    x, y = np.load(os.path.join(work, "x_train.npy")), np.load(
        os.path.join(work, "y_train.npy"))
    tx, ty = np.load(os.path.join(work, "x_test.npy")), np.load(
        os.path.join(work, "y_test.npy"))
    ok = True
    for n in [100, 10]:
        row, _ = train_metrics(work, os.path.join(work, "train.so"), x, y,
                               tx[:n], ty[:n])
        with torch.no_grad():
            logits = module(torch.from_numpy(tx[:n]))
            loss = torch.nn.functional.cross_entropy(
                logits, torch.from_numpy(ty[:n])).item()
            accuracy = float((logits.argmax(1).numpy() == ty[:n]).mean())
        ok &= compare("%d samples: eval loss" % n, float(row["eval_loss"]),
                      loss)
        ok &= compare("%d samples: accuracy" % n, float(row["accuracy"]),
                      accuracy)
    return ok


def regressor(work):
    w = np.array([0.5, -0.25, 0.125], np.float32)
    b = np.float32(0.1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 3)).astype(np.float32)
    y = rng.standard_normal(8).astype(np.float32)
    ok = True
    for n in [6, 3]:
        ex = rng.standard_normal((n, 3)).astype(np.float32)
        ey = rng.standard_normal(n).astype(np.float32)
        row, columns = train_metrics(work, os.path.join(work, "regressor.so"),
                                     x, y, ex, ey)
        want = float(np.mean(((ex.astype(np.float64) @ w + b) - ey) ** 2))
        ok &= compare("%d samples: eval loss" % n, float(row["eval_loss"]),
                      want)
        print("%d samples: metrics columns %s" % (n, ",".join(columns)))
        ok &= "accuracy" not in columns
    return ok


def main():
    command, work = sys.argv[1:3]
    ok = {"classifier": classifier, "regressor": regressor}[command](work)
    if not ok:
        sys.exit("FAIL")
    print("ok")


if __name__ == "__main__":
    main()
