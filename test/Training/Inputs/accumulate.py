"""Gradient accumulation (--accumulate N) against one large batch and
against PyTorch's accumulation loop.

  equal   at fp32 (no loss scaling): 10 optimizer steps of 4 micro-batches
          of 8 (a library compiled with --batch 8 --accumulate 4) against
          10 steps of one batch of 32 (--batch 32), and against PyTorch's
          loop (loss / 4, backward per micro-batch, step every 4); prints
          the largest relative difference of the weights; exits 1 above
          1e-5. Under AdamW and (against PyTorch only) under SGD without
          momentum: AdamW divides
          each gradient by its own magnitude, so a sum of micro-batch
          gradients not divided by 4 trains it the same; SGD moves 4 times
          as far.
  overflow at fp16 with dynamic loss scaling: a micro-batch holding inf
          makes the whole optimizer step skip once (weights, moments and
          step count unchanged, scale halved once, skipped_steps 1), and
          the next window of micro-batches steps as usual.

  growth  at fp16 with dynamic loss scaling (--growth-interval 2): the
          scaler state after every call against PyTorch's GradScaler in its
          accumulation loop (scaler.scale(loss / 4).backward() per
          micro-batch, scaler.step and scaler.update every 4th), an inf in
          one micro-batch of the 4th window: the growth tracker counts
          optimizer steps, not micro-batches. torch 1.13's GradScaler runs
          only on CUDA: the oracle runs in a child (`python -O`, which
          drops GradScaler's device asserts) with its two CUDA kernels,
          _amp_update_scale_ and _amp_foreach_non_finite_check_and_unscale_,
          written here in Python from their CUDA sources
          (aten/src/ATen/native/cuda/AmpKernels.cu); the loop, the step
          skipping and the update are GradScaler's own.

usage: accumulate.py equal|overflow|growth OUT_DIR
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


def compile_library(net, batch, out, name, optimizer="adamw", **flags):
    path = ampc_module.export(net, (torch.zeros(batch, FEATURES),),
                              os.path.join(out, name + ".onnx"))
    return ampc_module.compile(path, output=os.path.join(out, name + ".so"),
                               target="cpu", optimizer=optimizer, lr=0.01,
                               **flags)


# optimizer -> (ampc flags, PyTorch's optimizer)
OPTIMIZERS = {
    "adamw": ({}, lambda p: torch.optim.AdamW(p, lr=0.01)),
    "sgd": ({"momentum": 0}, lambda p: torch.optim.SGD(p, lr=0.01)),
}


def equal(out):
    status = 0
    for name in OPTIMIZERS:
        status |= equal_under(out, name)
    return status


def equal_under(out, optimizer):
    flags, torch_optimizer = OPTIMIZERS[optimizer]
    torch.manual_seed(0)
    net = Net()
    initial = {k: v.clone() for k, v in net.state_dict().items()}
    x, y = data()

    # One batch of 32 under AdamW only: PyTorch's loop is the oracle, a
    # library compile is seconds of CI.
    big = compile_library(net, N * MICRO, out, optimizer + "-big",
                          optimizer, precision="fp32", **flags) \
        if optimizer == "adamw" else None
    small = compile_library(net, MICRO, out, optimizer + "-small", optimizer,
                            precision="fp32", accumulate=N, **flags)
    info = small.training_info()
    if "accumulate=%d" % N not in info[1]:
        raise SystemExit("training info does not say accumulate=%d: %r" %
                         (N, info[1]))
    for step in range(STEPS):
        rows = slice(step * N * MICRO, (step + 1) * N * MICRO)
        if big:
            big.train_step(x[rows], y[rows])
        for k in range(N):
            r = slice(rows.start + k * MICRO, rows.start + (k + 1) * MICRO)
            small.train_step(x[r], y[r])
    if small.scaler_state()["steps"] != STEPS:
        raise SystemExit("steps %d after %d calls, expected %d" %
                         (small.scaler_state()["steps"], STEPS * N, STEPS))

    # PyTorch's loop: loss / N per micro-batch, one step every N.
    net.load_state_dict(initial)
    opt = torch_optimizer(net.parameters())
    for step in range(STEPS):
        opt.zero_grad()
        for k in range(N):
            r = slice((step * N + k) * MICRO, (step * N + k + 1) * MICRO)
            loss = F.cross_entropy(net(torch.from_numpy(x[r])),
                                   torch.from_numpy(y[r])) / N
            loss.backward()
        opt.step()
    reference = {k: v.detach().numpy() for k, v in net.state_dict().items()}

    b = small.state_dict()
    moved = max(relative(b[k], initial[k].numpy()) for k in b)
    vs_big = 0.0
    if big:
        a = big.state_dict()
        vs_big = max(relative(b[k], a[k]) for k in a)
    vs_torch = max(relative(b[k], reference[k]) for k in reference)
    print("%s: weights after %d steps: %sagainst PyTorch's accumulation: "
          "%.1e (moved %.2f from the start)"
          % (optimizer, STEPS, "4 x 8 against 1 x 32: %.1e; " % vs_big
             if big else "", vs_torch, moved))
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


GROWTH_INTERVAL, WINDOWS, INF_WINDOW = 2, 6, 3


def growth_batches():
    """(x, y) of every micro-batch of the growth case; window INF_WINDOW's
    second micro-batch holds an inf."""
    x, y = data(2)
    x = x[:WINDOWS * N * MICRO].copy()
    x[(INF_WINDOW * N + 1) * MICRO, 0] = np.inf
    return x.reshape(WINDOWS * N, MICRO, FEATURES), \
        y[:WINDOWS * N * MICRO].reshape(WINDOWS * N, MICRO)


def torch_scaler_states():
    """PyTorch's GradScaler accumulation loop on the growth batches: its
    (scale, growth tracker) after every micro-batch call, as JSON on
    stdout. Run under `python -O` (see the module's docstring)."""
    import json
    import warnings
    import torch.cuda.amp.grad_scaler as grad_scaler

    def update_scale_(scale, tracker, found_inf, growth, backoff, interval):
        # AmpKernels.cu's amp_update_scale_cuda_kernel.
        if found_inf.item():
            scale.mul_(backoff)
            tracker.zero_()
        else:
            successful = tracker.item() + 1
            if successful == interval:
                grown = scale * growth
                if torch.isfinite(grown).all():
                    scale.copy_(grown)
                tracker.zero_()
            else:
                tracker.fill_(successful)
        return scale

    def check_and_unscale_(grads, found_inf, inv_scale):
        for g in grads:
            if not torch.isfinite(g).all():
                found_inf.fill_(1.0)
            g.mul_(inv_scale)

    torch._amp_update_scale_ = update_scale_
    torch._amp_foreach_non_finite_check_and_unscale_ = check_and_unscale_
    grad_scaler.amp_definitely_not_available = lambda: False
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    scaler = torch.cuda.amp.GradScaler(init_scale=65536.0,
                                       growth_interval=GROWTH_INTERVAL)
    states = []
    xs, ys = growth_batches()
    for call, (x, y) in enumerate(zip(xs, ys)):
        loss = F.cross_entropy(net(torch.from_numpy(x)), torch.from_numpy(y))
        scaler.scale(loss / N).backward()
        if (call + 1) % N == 0:
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
        states.append((scaler.get_scale(), int(scaler._get_growth_tracker())))
    print(json.dumps(states))


def growth(out):
    import json
    import subprocess
    p = subprocess.run([sys.executable, "-O", "-B", __file__, "torch-scaler",
                        out], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("PyTorch's loop failed: " + p.stderr[-500:])
    expected = json.loads(p.stdout)
    torch.manual_seed(0)
    model = compile_library(Net(), MICRO, out, "growth", "sgd",
                            precision="fp16", accumulate=N, momentum=0,
                            growth_interval=GROWTH_INTERVAL)
    xs, ys = growth_batches()
    differ = 0
    for call, (x, y) in enumerate(zip(xs, ys)):
        model.train_step(x, y)
        state = model.scaler_state()
        got = (state["scale"], state["growth_tracker"])
        want = tuple(expected[call])
        mark = "" if got == want else "   <- differs"
        differ += bool(mark)
        print("call %2d: ampc scale %g, tracker %d | GradScaler scale %g, "
              "tracker %d%s" % (call + 1, got[0], got[1], want[0], want[1],
                                mark))
    print("%d calls, %d differ" % (len(xs), differ))
    return 1 if differ else 0


if __name__ == "__main__":
    what, out = sys.argv[1], sys.argv[2]
    if what == "torch-scaler":
        sys.exit(torch_scaler_states())
    os.makedirs(out, exist_ok=True)
    sys.exit({"equal": equal, "overflow": overflow, "growth": growth}[what](out))
