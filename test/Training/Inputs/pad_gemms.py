"""Tensor Core shapes (issue 37, item 11): a 1,001-class head padded to
1,008 trains exactly as the unpadded one.

The model: Linear(20, 40), ReLU, Linear(40, 1001) on 16x20 batches with
ampc's default cross-entropy, FP16 with dynamic loss scaling, AdamW.
For TARGET (cpu or cuda-sim) it compiles the model with --pad-gemms=on and
--pad-gemms=off and compares, bit for bit: the logits `infer` returns, the
loss and every parameter's gradient at the start, then the loss of each of
STEPS training steps (AdamW) and every parameter (state_dict) after them. Prints
one line per comparison and exits 1 when anything differs. (The gradients
at the start only on the CPU target: a library without an optimizer is
two more compiles, which cuda-sim makes slow.)

Run it with OPENBLAS_NUM_THREADS=1: both targets' GEMMs on the CPU are
OpenBLAS's sgemm, whose split of M between threads depends on M, and with
2 threads one element of 40,040 of fc2's weight gradient (M 1008 against
1001 rows) came out 1 ulp apart.

usage: pad_gemms.py TARGET OUT_DIR
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                "python"))
import ampc as ampc_module  # noqa: E402

BATCH, FEATURES, HIDDEN, CLASSES, STEPS = 16, 20, 40, 1001, 3


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(FEATURES, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def same(a, b):
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def main(target, out):
    torch.manual_seed(0)
    path = ampc_module.export(Head(), (torch.zeros(BATCH, FEATURES),),
                              os.path.join(out, "head.onnx"))
    # The gradients come from libraries without an optimizer.
    models = {(pad, opt): ampc_module.compile(
        path, output=os.path.join(out, "head-%s-%s-%s.so" % (target, pad,
                                                              opt)),
        target=target, pad_gemms=pad, optimizer=opt)
        for pad in ("on", "off")
        for opt in (("adamw", "none") if target == "cpu" else ("adamw",))}
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((BATCH, FEATURES)).astype(np.float32),
                rng.integers(0, CLASSES, BATCH).astype(np.int64))
               for _ in range(STEPS)]
    on, off = models["on", "adamw"], models["off", "adamw"]
    ok = True

    def report(what, equal):
        nonlocal ok
        ok &= equal
        print("%s: %s: %s" % (target, what, "identical" if equal
                              else "DIFFER"))

    x, y = batches[0]
    logits = [m.infer(x)[0] for m in (on, off)]
    report("logits %s" % "x".join(map(str, logits[0].shape)),
           same(*logits))
    if ("on", "none") in models:
        (loss_on, grads_on), (loss_off, grads_off) = (
            models["on", "none"].gradients([x, y]),
            models["off", "none"].gradients([x, y]))
        report("loss and %d gradients at the start" % len(grads_on),
               same(loss_on, loss_off) and
               grads_on.keys() == grads_off.keys() and
               all(same(grads_on[k], grads_off[k]) for k in grads_on))
    start = on.state_dict()
    losses = [[float(m.train_step(bx, by)) for bx, by in batches]
              for m in (on, off)]
    report("losses of %d steps %s" % (STEPS, losses[0]),
           losses[0] == losses[1])
    s_on, s_off = on.state_dict(), off.state_dict()
    report("state_dict after %d steps (%s)" % (
        STEPS, ", ".join("%s %s" % (k, "x".join(map(str, v.shape)))
                         for k, v in sorted(s_on.items()))),
           s_on.keys() == s_off.keys() and
           all(same(s_on[k], s_off[k]) for k in s_on))
    moved = not same(s_on["fc2.weight"], start["fc2.weight"])
    report("fc2.weight moved by training", moved)
    return 0 if ok and moved else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
