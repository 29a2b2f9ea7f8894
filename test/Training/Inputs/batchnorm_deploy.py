#!/usr/bin/env python3
"""Train, then deploy: BatchNorm running statistics and eval mode, against
PyTorch.

usage: batchnorm_deploy.py prepare WORK
       batchnorm_deploy.py statistics WORK LIB.so [--steps N]
       batchnorm_deploy.py overflow WORK LIB.so
       batchnorm_deploy.py deploy WORK LIB.so CHECKPOINT
       batchnorm_deploy.py transformer WORK

The model is a digits CNN (sklearn's 8x8 digits, batch 32): Conv-BatchNorm-
ReLU-MaxPool twice, Flatten, Dropout, Linear, exported by torch.onnx in
TRAINING mode (so BatchNorm and Dropout are as in training and every
parameter and running statistic is an initializer named after the module).

- prepare: the data (WORK/x_train.npy ...) and two exports: cnn.onnx
  (Dropout 0.25) and cnn_nodrop.onnx (Dropout 0: ampc's dropout masks are
  not torch's, so trajectories are compared without them).
- statistics: LIB (cnn_nodrop, fp32, SGD lr 0.05 momentum 0.9) and torch
  train N steps on the same batches; prints the largest relative
  difference of every running statistic (read from ampc's ONNX export) to
  torch's, and of the losses. Fails above 1e-4.
- overflow: LIB is fp16 with an initial loss scale that overflows: the
  first step's optimizer update is skipped (parameters bit for bit), but
  its forward pass updates the running statistics as torch's does before
  GradScaler skips optimizer.step() (compared with torch's training-mode
  forward on the same batch; the library's forward is fp16, so within
  1e-2); a later step changes them again.
- deploy: LIB (cnn, fp32) after ampc-train saved CHECKPOINT: loads it,
  exports WORK/trained.onnx, and scores the test set three ways: ampc's own
  inference (the library's eval-mode `infer`), torch model.eval() with the
  exported ONNX's weights, and the exported ONNX compiled by ampc
  --mode=infer. Prints the accuracies and the largest logit difference;
  fails when the accuracies differ or the logits differ by more than 1e-4
  (relative to the largest logit).
- transformer: a small transformer classifier (Dropout 0.1) exported in
  TRAINING mode, compiled --mode=infer; its logits against torch
  model.eval(). Fails above 1e-4.
"""
import argparse
import functools
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import training_common as tc  # noqa: E402
from ampc_testing import relative_difference  # noqa: E402

BATCH = 32
TOLERANCE = 1e-4


class DigitsCnn(torch.nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = torch.nn.BatchNorm2d(16)
        self.pool = torch.nn.MaxPool2d(2)
        self.drop = torch.nn.Dropout(dropout)
        self.fc = torch.nn.Linear(16 * 2 * 2, 10)

    def forward(self, x):
        x = x.reshape(-1, 1, 8, 8)
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        x = self.pool(torch.relu(self.bn2(self.conv2(x))))
        return self.fc(self.drop(torch.flatten(x, 1)))


class TinyTransformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(8, 32)
        self.enc = torch.nn.TransformerEncoderLayer(
            d_model=32, nhead=4, dim_feedforward=64, dropout=0.1,
            batch_first=True)
        self.head = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.head(self.enc(self.embed(x)).mean(dim=1))


def cnn(dropout):
    torch.manual_seed(0)
    return DigitsCnn(dropout)


# Running statistics and losses may be zero: there the difference itself.
relative = functools.partial(relative_difference, absolute_at_zero=True)


def load(work, name):
    return np.load(os.path.join(work, name + ".npy"))


def batches(work, count, seed=1):
    x, y = load(work, "x_train"), load(work, "y_train")
    rng = np.random.default_rng(seed)
    for _ in range(count):
        pick = rng.choice(len(x), BATCH, replace=False)
        yield x[pick], y[pick]


def initializers(path):
    return {t.name: numpy_helper.to_array(t)
            for t in onnx.load(path).graph.initializer}


def load_weights(module, path):
    """Copies the initializers of the ONNX model at `path` into `module`'s
    parameters and buffers of the same name (num_batches_tracked aside)."""
    values = initializers(path)
    state = module.state_dict()
    for name in state:
        if name.endswith("num_batches_tracked"):
            continue
        state[name] = torch.from_numpy(values[name].copy())
    module.load_state_dict(state)


def prepare(args):
    subprocess.check_call([sys.executable, os.path.join(
        HERE, "..", "..", "..", "examples", "digits", "prepare_digits.py"),
        args.work], stdout=subprocess.DEVNULL)
    example = torch.zeros(BATCH, 64)
    for name, dropout in [("cnn", 0.25), ("cnn_nodrop", 0.0)]:
        tc.export_onnx(cnn(dropout), example,
                       os.path.join(args.work, name + ".onnx"), training=True)


def running_names(module):
    return [n for n, _ in module.named_buffers() if "running" in n]


def statistics(args):
    # The export traced a training-mode forward, which moved torch's running
    # statistics: both start from the exported values.
    module = cnn(0.0)
    load_weights(module, os.path.join(args.work, "cnn_nodrop.onnx"))
    module.train()
    optimizer = torch.optim.SGD(module.parameters(), lr=0.05, momentum=0.9)
    model = tc.Model(args.lib)
    exported = os.path.join(args.work, "statistics.onnx")
    worst_loss = 0.0
    for x, y in batches(args.work, args.steps):
        loss = model.train_step({"input": x, "label": y})
        optimizer.zero_grad()
        want = torch.nn.functional.cross_entropy(module(torch.from_numpy(x)),
                                                 torch.from_numpy(y))
        want.backward()
        optimizer.step()
        worst_loss = max(worst_loss, relative(loss, want.item()))
    model.export_onnx(exported)
    got = initializers(exported)
    buffers = dict(module.named_buffers())
    names = running_names(module)
    worst = 0.0
    for name in names:
        d = relative(got[name], buffers[name].numpy())
        worst = max(worst, d)
        print("%s: largest relative difference %.2e" % (name, d))
    print("after %d steps: running statistics %.2e, losses %.2e" % (
        args.steps, worst, worst_loss))
    parameters = [p.name for p in model.parameters]
    listed = [n for n in names if n in parameters]
    if listed:
        sys.exit("running statistics listed as parameters: %s" % listed)
    if worst > TOLERANCE or worst_loss > TOLERANCE:
        sys.exit("FAIL: above %g" % TOLERANCE)
    print("ok")


def overflow(args):
    model = tc.Model(args.lib)
    first = os.path.join(args.work, "before.onnx")
    model.export_onnx(first)
    before = initializers(first)
    names = running_names(cnn(0.0))
    steps = batches(args.work, 2)
    x, y = next(steps)
    model.train_step({"input": x, "label": y})
    skipped = model.scaler_state()["skipped_steps"]
    after_path = os.path.join(args.work, "after.onnx")
    model.export_onnx(after_path)
    after = initializers(after_path)
    module = cnn(0.0)
    load_weights(module, first)
    with torch.no_grad():
        module.train()(torch.from_numpy(x))
    buffers = dict(module.named_buffers())
    kept = all(np.array_equal(before[p.name], after[p.name])
               for p in model.parameters)
    worst = max(relative(after[n], buffers[n].numpy()) for n in names)
    updated = worst <= 1e-2
    print("overflowing step: skipped %d, parameters %s, running statistics "
          "%s" % (skipped, "unchanged" if kept else "CHANGED",
                  "updated as torch's forward does" if updated else
                  "NOT AS TORCH'S (%.2e)" % worst))
    state = model.scaler_state()
    model.set_scaler_state(1024.0, 0, state["steps"], state["skipped_steps"])
    model.train_step({"input": x, "label": y})
    finite = model.scaler_state()["skipped_steps"] == skipped
    model.export_onnx(after_path)
    later = initializers(after_path)
    changed = all(not np.array_equal(after[n], later[n]) for n in names)
    print("first finite step: running statistics %s" % (
        "updated" if changed else "NOT UPDATED"))
    if skipped != 1 or not kept or not updated or not finite or not changed:
        sys.exit("FAIL")
    print("ok")


def accuracy(logits, labels):
    return float(np.mean(np.argmax(logits, axis=1) == labels))


def ampc_logits(model, x, labels=None):
    """Logits of every row of x from `model`'s infer, in batches of BATCH
    (the last one padded with copies of the first rows)."""
    out = []
    names = [i.name for i in model.inputs]
    position = next(i for i, o in enumerate(model.outputs)
                    if o.name == "output")
    for begin in range(0, len(x), BATCH):
        rows = np.arange(begin, begin + BATCH) % len(x)
        feed = {"input": x[rows]}
        if "label" in names:
            feed["label"] = (labels[rows] if labels is not None
                             else np.zeros(BATCH, np.int64))
        got = model.infer(feed)[position]
        out.append(got[:min(BATCH, len(x) - begin)])
    return np.concatenate(out)


def deploy(args):
    x, y = load(args.work, "x_test"), load(args.work, "y_test")
    model = tc.Model(args.lib)
    model.load_checkpoint(args.checkpoint)
    exported = os.path.join(args.work, "trained.onnx")
    model.export_onnx(exported)
    onnx.checker.check_model(onnx.load(exported), full_check=True)
    ours = ampc_logits(model, x, y)

    module = cnn(0.25)
    load_weights(module, exported)
    module.eval()
    with torch.no_grad():
        theirs = module(torch.from_numpy(x)).numpy()

    infer_lib = os.path.join(args.work, "trained_infer.so")
    subprocess.check_call(["ampc", exported, "--mode=infer", "--target=cpu",
                           "--precision=fp32", "-o", infer_lib])
    reimported = ampc_logits(tc.Model(infer_lib), x)

    a, b, c = accuracy(ours, y), accuracy(theirs, y), accuracy(reimported, y)
    d1, d2 = relative(ours, theirs), relative(reimported, theirs)
    print("ampc eval accuracy %.4f, torch eval accuracy of the exported "
          "weights %.4f, difference %.4f" % (a, b, abs(a - b)))
    print("exported ONNX compiled by ampc --mode=infer: accuracy %.4f" % c)
    print("largest relative logit difference to torch: library %.2e, "
          "exported model %.2e" % (d1, d2))
    if a != b or c != b or d1 > TOLERANCE or d2 > TOLERANCE:
        sys.exit("FAIL")
    print("ok")


def transformer(args):
    torch.manual_seed(0)
    module = TinyTransformer()
    example = torch.zeros(4, 6, 8)
    path = os.path.join(args.work, "transformer.onnx")
    tc.export_onnx(module, example, path, training=True)
    lib = os.path.join(args.work, "transformer_infer.so")
    subprocess.check_call(["ampc", path, "--mode=infer", "--target=cpu",
                           "--precision=fp32", "-o", lib])
    x = torch.randn(4, 6, 8, generator=torch.Generator().manual_seed(3))
    got = tc.Model(lib).infer({"input": x.numpy()})[0]
    module.eval()
    with torch.no_grad():
        want = module(x).numpy()
    d = relative(got, want)
    print("transformer eval logits: largest relative difference %.2e" % d)
    if d > TOLERANCE:
        sys.exit("FAIL")
    print("ok")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["prepare", "statistics",
                                            "overflow", "deploy",
                                            "transformer"])
    parser.add_argument("work")
    parser.add_argument("lib", nargs="?")
    parser.add_argument("checkpoint", nargs="?")
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    globals()[args.command](args)


if __name__ == "__main__":
    main()
