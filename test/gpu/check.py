"""The GPU test, run by run.sh in a pack that pack.py built: the CUDA
train.so of each model of gpu_models.py against the CPU target's reference
(losses over the steps, gradients of step 1) and against PyTorch CUDA AMP
(torch.autocast FP16 + GradScaler, fused AdamW, the same initial weights and
batches), then the loss scaler's overflow skip on the device. Prints one
line per check and "N passed, N failed"; exits 1 on a failure. Without a
visible CUDA device it prints why it skipped and exits 0.

Tolerances (largest relative difference, max|a - b| / max|b|):
- CUDA vs CPU target, loss of every step: 5e-3 (both round to f16 at the
  same places; only the order of accumulation differs);
- CUDA vs CPU target, each gradient of step 1: 1e-2 of its largest value
  (or of 1e-3 of the model's largest gradient, where that is more: a
  gradient that is zero in exact arithmetic is rounding noise on both);
- CUDA vs PyTorch AMP, loss of every step: 2e-2 (autocast rounds in places
  ampc's lists do not, and the other way round);
- CUDA vs PyTorch AMP, BatchNorm's buffers after the steps (the library's
  read with get_buffer, after its initial values were written with
  set_buffer): running variances 2e-2, num_batches_tracked exactly. Not
  the running means: the convolution bias before the BatchNorm has a
  gradient that is zero in exact arithmetic, AdamW turns its rounding
  noise into lr-sized steps that differ in any two implementations, and
  the batch means carry that bias (the variances do not).
"""
import functools
import os
import sys

import numpy as np

# The pack has this script, gpu_models.py, ampc_testing.py and ampc_ctypes.py
# in one folder.
from ampc_testing import amp_step, relative_difference

HERE = os.path.dirname(os.path.abspath(__file__))
RUNTIME = os.path.join(HERE, "libampc_runtime.so")

TOL_LOSS_CPU, TOL_GRAD_CPU, TOL_LOSS_TORCH = 5e-3, 1e-2, 2e-2

relative = functools.partial(relative_difference, absolute_at_zero=True)


def main():
    import torch
    import gpu_models as gm
    from ampc_ctypes import Model

    if not torch.cuda.is_available():
        print("SKIPPED: no CUDA device visible (torch.cuda.is_available() is "
              "False); nothing ran on a GPU")
        return 0
    print("device: %s; torch %s; CUDA %s" % (
        torch.cuda.get_device_name(0), torch.__version__, torch.version.cuda))
    results = []

    def report(what, value, tolerance):
        ok = value <= tolerance
        results.append(ok)
        print("%s: %s %.3e (tolerance %.0e)" % ("PASS" if ok else "FAIL", what,
                                                value, tolerance))

    for name in gm.MODELS:
        x = np.load(os.path.join(HERE, name + ".x.npy"))
        y = np.load(os.path.join(HERE, name + ".y.npy"))
        batch = lambda s: {"input": x[s], "label": y[s]}  # noqa: E731
        model = Model(os.path.join(HERE, name + ".cuda.train.so"), RUNTIME)
        assert model.info.target == "cuda", model.info
        # The buffers start where the torch module's do (the export's
        # forward pass counted one batch).
        initial = torch.load(os.path.join(HERE, name + ".init.pt"))
        for b in model.buffers:
            model.set_buffer(b.name, initial[b.name].numpy())
        ampc_losses = [float(model.train_step(batch(s)))
                       for s in range(gm.STEPS)]
        buffers = {b.name: model.get_buffer(b.name) for b in model.buffers}
        model.close()
        cpu_losses = np.load(os.path.join(HERE, name + ".cpu.losses.npy"))
        print("%s: ampc CUDA losses %s" % (name, " ".join(
            "%.5f" % v for v in ampc_losses)))
        report("%s losses vs CPU target (%d steps)" % (name, gm.STEPS),
               max(relative([a], [c]) for a, c in zip(ampc_losses, cpu_losses)),
               TOL_LOSS_CPU)

        model = Model(os.path.join(HERE, name + ".cuda.grads.so"), RUNTIME)
        _, grads = model.gradients(batch(0))
        model.close()
        want = np.load(os.path.join(HERE, name + ".cpu.grads.npz"))
        # Each tensor's difference over its own largest value, but never
        # over less than 1e-3 of the model's largest gradient: a gradient
        # that is zero in exact arithmetic (a convolution's bias before a
        # BatchNorm, which subtracts every channel's mean) is rounding
        # noise of about 1e-6 on both targets, and its noise over its noise
        # is not an error (the first GPU run: 0.6 there, 7e-4 at most
        # elsewhere).
        floor = 1e-3 * max(float(np.abs(want[k]).max(initial=0)) for k in want)
        worst = max((float(np.abs(grads[k].astype(np.float64) - want[k]).max(
            initial=0)) / max(float(np.abs(want[k]).max(initial=0)), floor), k)
            for k in grads)
        report("%s gradients of step 1 vs CPU target (%d tensors; worst %s)" % (
            name, len(grads), worst[1]), worst[0], TOL_GRAD_CPU)

        torch.manual_seed(gm.SEED)
        m = gm.module(name)
        m.load_state_dict(torch.load(os.path.join(HERE, name + ".init.pt")))
        m = m.cuda().train()
        opt = torch.optim.AdamW(m.parameters(), fused=True, **gm.ADAMW)
        scaler = torch.amp.GradScaler("cuda")
        torch_losses = []
        for s in range(gm.STEPS):
            xb = torch.from_numpy(x[s]).cuda()
            yb = torch.from_numpy(y[s]).cuda()
            loss = amp_step(m, opt, scaler, xb, yb, gm.LOSS[name])
            torch_losses.append(float(loss))
        print("%s: torch AMP losses %s" % (name, " ".join(
            "%.5f" % v for v in torch_losses)))
        report("%s losses vs PyTorch CUDA AMP (%d steps)" % (name, gm.STEPS),
               max(relative([a], [t]) for a, t in zip(ampc_losses,
                                                      torch_losses)),
               TOL_LOSS_TORCH)
        if buffers:
            want = {k: v.cpu().numpy() for k, v in m.state_dict().items()}
            counts = all(int(buffers[k]) == int(want[k]) for k in buffers
                         if k.endswith("num_batches_tracked"))
            worst = max(relative(buffers[k].ravel(), want[k].ravel())
                        for k in buffers if "running_var" in k)
            report("%s %d buffers vs PyTorch CUDA AMP's (running variances; counters "
                   "%s)" % (name, len(buffers),
                            "equal" if counts else "DIFFERENT"),
                   worst if counts else float("inf"), TOL_LOSS_TORCH)

    # The scaler on the device: an input that overflows FP16 makes the step
    # skip (parameters and step count bit-identical, scale halved, one
    # skipped step), and the next step trains again.
    x = np.load(os.path.join(HERE, "mlp.x.npy"))
    y = np.load(os.path.join(HERE, "mlp.y.npy"))
    model = Model(os.path.join(HERE, "mlp.cuda.train.so"), RUNTIME)
    model.train_step({"input": x[0], "label": y[0]})
    before = {p.name: model.get_parameter(p.name) for p in model.parameters}
    state = model.scaler_state()
    bad = x[1].copy()
    bad[0, 0] = 1e6
    model.train_step({"input": bad, "label": y[1]})
    after = {p.name: model.get_parameter(p.name) for p in model.parameters}
    skipped = model.scaler_state()
    model.train_step({"input": x[2], "label": y[2]})
    moved = {p.name: model.get_parameter(p.name) for p in model.parameters}
    final = model.scaler_state()
    model.close()
    checks = [
        all(np.array_equal(before[k], after[k]) for k in before),
        skipped["scale"] == state["scale"] * 0.5,
        skipped["skipped_steps"] == state["skipped_steps"] + 1,
        skipped["steps"] == state["steps"],
        any(not np.array_equal(after[k], moved[k]) for k in after),
        final["steps"] == state["steps"] + 1,
    ]
    ok = all(checks)
    results.append(ok)
    print("%s: scaler overflow skip on the device: scale %g -> %g, skipped "
          "%d -> %d, steps %d -> %d -> %d, parameters unchanged %s, then "
          "trained %s" % (
              "PASS" if ok else "FAIL", state["scale"], skipped["scale"],
              state["skipped_steps"], skipped["skipped_steps"],
              state["steps"], skipped["steps"], final["steps"], checks[0],
              checks[4]))
    print("%d passed, %d failed" % (results.count(True), results.count(False)))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
