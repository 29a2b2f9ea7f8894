"""Gradient accumulation (--accumulate N) against one large batch and
against PyTorch's accumulation loop.

  equal   at fp32 (no loss scaling): 10 optimizer steps of 4 micro-batches
          of 8 (a library compiled with --batch 8 --accumulate 4) against
          10 steps of one batch of 32 (--batch 32), and against PyTorch's
          loop (loss / 4, backward per micro-batch, step every 4); prints
          the largest relative difference of the weights; exits 1 above
          1e-5.
  overflow at fp16 with dynamic loss scaling: a micro-batch holding inf
          makes the whole optimizer step skip once (weights, moments and
          step count unchanged, scale halved once, skipped_steps 1), and
          the next window of micro-batches steps as usual.

usage: accumulate.py equal|overflow OUT_DIR
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                "python"))
import ampc as ampc_module  # noqa: E402

MICRO, N, STEPS, FEATURES, CLASSES = 8, 4, 10, 6, 5


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(FEATURES, 16)
        self.fc2 = torch.nn.Linear(16, CLASSES)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((STEPS * N * MICRO, FEATURES)).astype(np.float32)
    y = rng.integers(0, CLASSES, STEPS * N * MICRO).astype(np.int64)
    return x, y


def relative(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-12))


def compile_library(net, batch, out, name, **flags):
    path = ampc_module.export(net, (torch.zeros(batch, FEATURES),),
                              os.path.join(out, name + ".onnx"))
    return ampc_module.compile(path, output=os.path.join(out, name + ".so"),
                               target="cpu", optimizer="adamw", lr=0.01,
                               **flags)


def equal(out):
    torch.manual_seed(0)
    net = Net()
    initial = {k: v.clone() for k, v in net.state_dict().items()}
    x, y = data()

    big = compile_library(net, N * MICRO, out, "big", precision="fp32")
    small = compile_library(net, MICRO, out, "small", precision="fp32",
                            accumulate=N)
    info = small.training_info()
    if "accumulate=%d" % N not in info[1]:
        raise SystemExit("training info does not say accumulate=%d: %r" %
                         (N, info[1]))
    for step in range(STEPS):
        rows = slice(step * N * MICRO, (step + 1) * N * MICRO)
        big.train_step(x[rows], y[rows])
        for k in range(N):
            r = slice(rows.start + k * MICRO, rows.start + (k + 1) * MICRO)
            small.train_step(x[r], y[r])
    if small.scaler_state()["steps"] != STEPS:
        raise SystemExit("steps %d after %d calls, expected %d" %
                         (small.scaler_state()["steps"], STEPS * N, STEPS))

    # PyTorch's loop: loss / N per micro-batch, one step every N.
    net.load_state_dict(initial)
    opt = torch.optim.AdamW(net.parameters(), lr=0.01)
    for step in range(STEPS):
        opt.zero_grad()
        for k in range(N):
            r = slice((step * N + k) * MICRO, (step * N + k + 1) * MICRO)
            loss = F.cross_entropy(net(torch.from_numpy(x[r])),
                                   torch.from_numpy(y[r])) / N
            loss.backward()
        opt.step()
    reference = {k: v.detach().numpy() for k, v in net.state_dict().items()}

    a, b = big.state_dict(), small.state_dict()
    moved = max(relative(b[k], initial[k].numpy()) for k in b)
    vs_big = max(relative(b[k], a[k]) for k in a)
    vs_torch = max(relative(b[k], reference[k]) for k in reference)
    print("weights after %d steps: 4 x 8 against 1 x 32: %.1e; against "
          "PyTorch's accumulation: %.1e (moved %.2f from the start)"
          % (STEPS, vs_big, vs_torch, moved))
    ok = vs_big <= 1e-5 and vs_torch <= 1e-5 and moved > 1e-2
    return 0 if ok else 1


def overflow(out):
    torch.manual_seed(0)
    net = Net()
    x, y = data(1)
    model = compile_library(net, MICRO, out, "fp16", precision="fp16",
                            accumulate=N)
    start = model.state_dict()
    scale0 = model.scaler_state()["scale"]

    def window(first, poison=None):
        for k in range(N):
            r = slice((first + k) * MICRO, (first + k + 1) * MICRO)
            xs = x[r].copy()
            if k == poison:
                xs[0, 0] = np.inf
            model.train_step(xs, y[r])

    # Calls 1-3 change nothing but the accumulators.
    for k in range(N - 1):
        model.train_step(x[k * MICRO:(k + 1) * MICRO],
                         y[k * MICRO:(k + 1) * MICRO])
    mid = model.state_dict()
    same_mid = all(np.array_equal(mid[k], start[k]) for k in start)
    state_mid = model.scaler_state()
    model.train_step(x[3 * MICRO:4 * MICRO], y[3 * MICRO:4 * MICRO])
    stepped = model.state_dict()
    moved = any(not np.array_equal(stepped[k], start[k]) for k in start)
    state1 = model.scaler_state()

    window(N, poison=1)  # inf in the second micro-batch of window 2
    after_skip = model.state_dict()
    same_skip = all(np.array_equal(after_skip[k], stepped[k]) for k in start)
    state2 = model.scaler_state()

    window(2 * N)  # a clean window steps again
    after = model.state_dict()
    moved_again = any(not np.array_equal(after[k], after_skip[k])
                      for k in start)
    state3 = model.scaler_state()

    print("after 3 of 4 calls: weights unchanged %s, steps %d" %
          (same_mid, state_mid["steps"]))
    print("after 4 calls: weights moved %s, steps %d, skipped %d, scale %g" %
          (moved, state1["steps"], state1["skipped_steps"], state1["scale"]))
    print("window with inf: weights unchanged %s, steps %d, skipped %d, "
          "scale %g" % (same_skip, state2["steps"], state2["skipped_steps"],
                        state2["scale"]))
    print("clean window: weights moved %s, steps %d, skipped %d, scale %g" %
          (moved_again, state3["steps"], state3["skipped_steps"],
           state3["scale"]))
    ok = (same_mid and state_mid["steps"] == 0 and moved and
          state1["steps"] == 1 and state1["skipped_steps"] == 0 and
          state1["scale"] == scale0 and same_skip and
          state2["steps"] == 1 and state2["skipped_steps"] == 1 and
          state2["scale"] == scale0 / 2 and moved_again and
          state3["steps"] == 2 and state3["skipped_steps"] == 1 and
          state3["scale"] == scale0 / 2)
    return 0 if ok else 1


if __name__ == "__main__":
    what, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    sys.exit({"equal": equal, "overflow": overflow}[what](out))
