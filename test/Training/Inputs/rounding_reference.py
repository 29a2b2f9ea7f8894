#!/usr/bin/env python3
"""FP16/BF16 training against a bit-faithful reference, step by step.

usage: rounding_reference.py WORKDIR [--precision fp16 bf16]
                             [--optimizers adamw sgd] [--steps N]
                             [--portable] [--tolerance T]

The mlp of training_common (Linear(20, 64), ReLU, Linear(64, 10),
cross-entropy) is compiled by the CPU target at --precision=fp16 (dynamic
loss scaling) or bf16 (none), with AdamW or SGD, and trained through the
runtime C API. The same steps are computed here in NumPy, with the
arithmetic the design contract (docs/design.md) gives the CPU target:

- every f16/bf16 value is rounded to nearest even exactly where it is
  stored: the input cast, each Gemm's output (bias added in FP32 before the
  one rounding), ReLU, the cross-entropy's gradient cast to f16/bf16, the
  backward Gemms' input gradients, ReLU's gradient, and the low-precision
  weight copies the step writes after each update (and `init` before the
  first step); the weight gradients (dYᵀ X) and the bias-gradient sums are
  not: they are written in FP32, the accumulator (issue 37, item 3);
- GEMMs take f16/bf16 operands widened to FP32 and accumulate in FP32: the
  very cblas_sgemm call the generated code makes (same OpenBLAS, same
  transposes, the bias preloaded with beta 1), so accumulation order is
  the library's;
- sums (softmax, the loss, reductions) accumulate in FP32 pairwise over
  blocks of 64 (CpuKernels.h pairwiseSum); exp and log are libm's expf and
  logf, called through ctypes;
- cross-entropy, the loss-scale seed, the unscale (GradScaler: inverse
  scale computed in double), the scaler's update and the optimizer
  (torch.optim's single-tensor AdamW/SGD as TrainMath.h writes them) run in
  FP32 on FP32 master weights.

The 16-bit roundings are NumPy's float16 conversion and torch's bfloat16
conversion (both round to nearest even), not ampc's Float16.h, so the
reference is independent of the code under test there.

The data are chosen to contain rounding ties: every element of every
batch lies exactly halfway between two neighbouring f16 values (bf16 values
at --precision bf16), so the input cast rounds hundreds of ties per step,
half of them up and half down under round-to-nearest-even; so does every
initial weight (f16 ties), which `init` rounds into the weight copies. A
conversion that rounds ties away from zero, or toward zero, changes those
values and every value after them.

At fp16 the scale starts at 2^21 with --growth-interval 3: it grows, the
scaled gradients then overflow f16 on some steps (skipped, the scale
halved), so found_inf, the skip and both directions of the update are on
the path. (It started at 2^17 while the weight gradients were rounded to
f16: they overflowed first. Written in FP32 since issue 37, item 3, they
do not, and only the 16-bit activation gradients can, at a larger scale:
from 2^17 no step of the 12 overflowed any more.)

--portable compiles the libraries with CXX set to a wrapper that adds
-mno-f16c: the generated code then converts with Float16.h instead of the
F16C instructions (what a machine without F16C runs). Without it, a
machine with F16C converts f16 in hardware in the step, and Float16.h
writes the weight copies `init` makes (and every bf16 value).

Every step's loss and every final parameter (and optimizer state) must
equal the reference's bit for bit (--tolerance, a relative difference,
defaults to 0): the reference makes the same operations in the same order
on the same values, so nothing is left to differ. Each case prints

    CASE: step  loss ampc  loss reference  scale  skipped
    CASE: N steps (K skipped), losses IDENTICAL|max relative difference D
          (step S), parameters IDENTICAL|max relative difference D (NAME):
          ok|FAILED

and the run ends with PASSED, or FAILED (exit status 1).
"""
import argparse
import collections
import ctypes
import ctypes.util
import math
import os
import stat
import subprocess
import sys

import numpy as np
import torch

import checkpoint_format
import training_common as tc
from ampc_testing import relative_difference, report_failures, round_bf16

F32 = np.float32

#===----------------------------------------------------------------------===#
# The primitives: rounding, sgemm, expf/logf, pairwise sums.
#===----------------------------------------------------------------------===#


def round_f16(x):
    return np.asarray(x, F32).astype(np.float16).astype(F32)


def neighbours(x, nearest, precision):
    """The 16-bit values just toward zero (`low`) and just away from zero
    (`high`) of every element of `x`, from its nearest-even rounding."""
    x = np.asarray(x, F32)
    if precision == "fp16":
        def step(v, target):
            return np.nextafter(v.astype(np.float16),
                                target.astype(np.float16)).astype(F32)
    else:
        def step(v, target):
            return torch.nextafter(
                torch.from_numpy(v).to(torch.bfloat16),
                torch.from_numpy(target).to(torch.bfloat16)).float().numpy()
    zero = np.zeros_like(x)
    away = np.copysign(np.full_like(x, np.inf), x)
    beyond = np.abs(nearest) > np.abs(x)
    low = np.where(beyond, step(nearest, zero), nearest)
    high = np.where(beyond, nearest, step(nearest, away))
    return low, high


def rounding(precision, mode):
    """The conversion the reference applies: round to nearest even, or one
    of the wrong modes --reference-rounding offers to show that the
    comparison sees them."""
    nearest = {"fp16": round_f16, "bf16": round_bf16}[precision]
    if mode == "nearest-even":
        return nearest

    def wrong(x):
        x = np.asarray(x, F32)
        rounded = nearest(x)
        low, high = neighbours(x, rounded, precision)
        finite = np.isfinite(x)
        if mode == "toward-zero":
            return np.where(finite, low, x)
        tie = finite & (x.astype(np.float64) - low == high - x.astype(
            np.float64))
        return np.where(tie, high, rounded)  # ties away from zero
    return wrong


_blas = ctypes.CDLL("libopenblas.so.0")
_blas.cblas_sgemm.restype = None
_blas.cblas_sgemm.argtypes = (
    [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int,
                          ctypes.c_void_p, ctypes.c_int, ctypes.c_float,
                          ctypes.c_void_p, ctypes.c_int])
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112

_libm = ctypes.CDLL(ctypes.util.find_library("m"))
for _name in ("expf", "logf", "tanhf"):
    getattr(_libm, _name).restype = ctypes.c_float
    getattr(_libm, _name).argtypes = [ctypes.c_float]
_expf = np.vectorize(lambda v: _libm.expf(v), otypes=[F32])
_logf = np.vectorize(lambda v: _libm.logf(v), otypes=[F32])
_tanhf = np.vectorize(lambda v: _libm.tanhf(v), otypes=[F32])


def gemm(a, b, trans_a=False, trans_b=False, c=None):
    """ampc::cpu::gemm<float>: C = op(A) op(B) (+ C when `c` is given, as
    the generated code preloads a Gemm's bias with beta 1), row-major, by
    cblas_sgemm with the arguments the generated code passes."""
    a = np.ascontiguousarray(a, F32)
    b = np.ascontiguousarray(b, F32)
    m = a.shape[1] if trans_a else a.shape[0]
    k = a.shape[0] if trans_a else a.shape[1]
    n = b.shape[0] if trans_b else b.shape[1]
    out = (np.zeros((m, n), F32) if c is None
           else np.ascontiguousarray(np.broadcast_to(c, (m, n)), F32).copy())
    _blas.cblas_sgemm(_ROW_MAJOR, _TRANS if trans_a else _NO_TRANS,
                      _TRANS if trans_b else _NO_TRANS, m, n, k, F32(1),
                      a.ctypes.data, m if trans_a else k, b.ctypes.data,
                      k if trans_b else n, F32(0 if c is None else 1),
                      out.ctypes.data, n)
    return out


def pairwise_sum(rows):
    """CpuKernels.h pairwiseSum over axis 0 of `rows` (FP32): one running
    sum for 64 terms or fewer, else the two halves' sums added."""
    n = rows.shape[0]
    if n <= 64:
        total = np.zeros(rows.shape[1:], F32)
        for i in range(n):
            total = total + rows[i]
        return total
    middle = n // 2
    return pairwise_sum(rows[:middle]) + pairwise_sum(rows[middle:])


#===----------------------------------------------------------------------===#
# The model's step.
#===----------------------------------------------------------------------===#


def log_softmax(y):
    """ampc::cpu::softmax<float>(logarithm): (y - max) - log(sum exp)."""
    shifted = y - y.max(axis=1, keepdims=True)
    log_sum = _logf(pairwise_sum(_expf(shifted).T))
    return shifted - log_sum[:, None]


def mlp_step(copies, x, labels, seed, rnd):
    """The mlp's forward and backward at the low precision: the loss and
    the FP32 gradients (scaled by `seed`) of its parameters."""
    w1, b1, w2, b2 = (copies[n] for n in MODELS["mlp"].parameters)
    x16 = rnd(x)
    h1 = rnd(gemm(x16, w1, trans_b=True, c=b1))
    r = rnd(np.where(h1 > 0, h1, F32(0)))
    y = rnd(gemm(r, w2, trans_b=True, c=b2))
    logp = log_softmax(y)
    n = y.shape[0]
    picked = -logp[np.arange(n), labels] * F32(1)
    loss = pairwise_sum(picked) / pairwise_sum(np.ones(n, F32))
    # nll_loss_grad: -seed / n at each label; its row sums; the fused
    # softmax adjoint g - exp(logp) * rowsum, rounded once.
    g = np.zeros_like(y)
    g[np.arange(n), labels] = -((F32(1) * seed) / pairwise_sum(
        np.ones(n, F32)))
    row = pairwise_sum(g.T)
    gy = rnd(g - _expf(logp) * row[:, None])
    dr = rnd(gemm(gy, w2))
    dw2 = gemm(gy, r, trans_a=True)
    db2 = pairwise_sum(gy)
    # Relu's gradient: 0 where the output is not positive, whatever dr
    # (PyTorch's threshold_backward; cuBLASLt's DRELU on the CUDA target).
    dh = rnd(np.where(r > 0, dr, F32(0)))
    dw1 = gemm(dh, x16, trans_a=True)
    db1 = pairwise_sum(dh)
    return loss, dict(zip(MODELS["mlp"].parameters, (dw1, db1, dw2, db2)))


def regressor_step(copies, x, target, seed, rnd):
    """The regressor's forward and backward: Tanh and Sigmoid computed in
    FP32 from 16-bit operands and rounded once; their fused adjoints round
    every intermediate (1 - s, s (1 - s), ...), as a fusion stores each
    value in its dtype; the MSE loss (Sub, Mul, ReduceMean) in FP32."""
    w1, b1, w2, b2, w3, b3 = (copies[n]
                              for n in MODELS["regressor"].parameters)
    x16 = rnd(x)
    a1 = rnd(gemm(x16, w1, trans_b=True, c=b1))
    t = rnd(_tanhf(a1))
    a2 = rnd(gemm(t, w2, trans_b=True, c=b2))
    sg = rnd(F32(1) / (F32(1) + _expf(-a2)))
    y = rnd(gemm(sg, w3, trans_b=True, c=b3))
    d = y - target
    count = F32(d.size)
    loss = pairwise_sum((d * d).ravel()) / count
    c = seed * (F32(1) / count)
    gy = rnd(c * d + c * d)
    ds = rnd(gemm(gy, w3))
    dw3 = gemm(gy, sg, trans_a=True)
    db3 = pairwise_sum(gy)
    da2 = rnd(ds * rnd(sg * rnd(F32(1) - sg)))
    dt = rnd(gemm(da2, w2))
    dw2 = gemm(da2, t, trans_a=True)
    db2 = pairwise_sum(da2)
    da1 = rnd(dt * rnd(F32(1) - rnd(t * t)))
    dw1 = gemm(da1, x16, trans_a=True)
    db1 = pairwise_sum(da1)
    return loss, dict(zip(MODELS["regressor"].parameters,
                          (dw1, db1, dw2, db2, dw3, db3)))


def regressor_module():
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32),
        torch.nn.Sigmoid(), torch.nn.Linear(32, 8))


def regressor_batches(count, seed):
    """16x16 inputs and 16x8 targets of a fixed random smooth teacher."""
    g = torch.Generator().manual_seed(seed)
    teacher = torch.randn(16, 8, generator=g) / 4
    batches = []
    for _ in range(count):
        x = torch.randn(16, 16, generator=g)
        batches.append((x, torch.tanh(x @ teacher)))
    return batches


Model = collections.namedtuple(
    "Model", "module batches loss step parameters")
MODELS = {
    "mlp": Model(tc.small_mlp, tc.mlp_batches, "cross_entropy", mlp_step,
                 ("0.weight", "0.bias", "2.weight", "2.bias")),
    "regressor": Model(regressor_module, regressor_batches, "mse",
                       regressor_step, ("0.weight", "0.bias", "2.weight",
                                        "2.bias", "4.weight", "4.bias")),
}


#===----------------------------------------------------------------------===#
# Scaler and optimizers (TrainMath.h, torch.amp.GradScaler, torch.optim).
#===----------------------------------------------------------------------===#


class Scaler:
    def __init__(self, scale, growth_interval, growth=2.0, backoff=0.5):
        self.scale, self.tracker = F32(scale), 0
        self.interval, self.growth, self.backoff = (growth_interval,
                                                    F32(growth), F32(backoff))

    def unscale(self, grads):
        inv = F32(1.0 / float(self.scale))
        found = any(not np.all(np.isfinite(g)) for g in grads.values())
        if inv != F32(1):
            grads = {n: g * inv for n, g in grads.items()}
        return grads, found

    def update(self, found):
        if found:
            self.scale, self.tracker = self.scale * self.backoff, 0
            return
        self.tracker += 1
        if self.tracker == self.interval:
            grown = self.scale * self.growth
            self.scale = grown if np.isfinite(grown) else self.scale
            self.tracker = 0


class AdamW:
    def __init__(self, names, shapes, lr, betas, eps, weight_decay):
        self.lr, self.beta1, self.beta2 = F32(lr), F32(betas[0]), F32(betas[1])
        self.eps, self.wd = F32(eps), F32(weight_decay)
        self.m = {n: np.zeros(s, F32) for n, s in zip(names, shapes)}
        self.v = {n: np.zeros(s, F32) for n, s in zip(names, shapes)}

    def step(self, name, p, g, step):
        t = float(step + 1)
        bc1 = F32(1 - math.pow(float(self.beta1), t))
        bc2 = F32(1 - math.pow(float(self.beta2), t))
        step_size, bc2_sqrt = self.lr / bc1, np.sqrt(bc2)
        one = F32(1)
        p = p * (one - self.lr * self.wd)
        m = self.m[name] + (one - self.beta1) * (g - self.m[name])
        v = self.v[name] * self.beta2 + (one - self.beta2) * g * g
        self.m[name], self.v[name] = m, v
        return p - step_size * (m / (np.sqrt(v) / bc2_sqrt + self.eps))

    def state(self):
        return {**{n + ".exp_avg": a for n, a in self.m.items()},
                **{n + ".exp_avg_sq": a for n, a in self.v.items()}}


class SGD:
    def __init__(self, names, shapes, lr, momentum, weight_decay):
        self.lr, self.momentum, self.wd = F32(lr), F32(momentum), \
            F32(weight_decay)
        self.buffer = {n: np.zeros(s, F32) for n, s in zip(names, shapes)}

    def step(self, name, p, g, step):
        if self.wd != 0:
            g = g + self.wd * p
        b = g if step == 0 else self.momentum * self.buffer[name] + \
            (F32(1) - F32(0)) * g
        self.buffer[name] = b
        return p - self.lr * b

    def state(self):
        return {n + ".momentum_buffer": a for n, a in self.buffer.items()}


OPTIMIZERS = {
    "adamw": (lambda names, shapes: AdamW(names, shapes, **tc.OPTIMIZERS[
        "adamw"])),
    "sgd": (lambda names, shapes: SGD(names, shapes, **tc.OPTIMIZERS["sgd"])),
}

INIT_SCALE, GROWTH_INTERVAL = 2.0 ** 21, 3


def reference_run(model, params, batches, precision, kind, mode):
    """The reference's losses, final tensors (parameters and optimizer
    state) and the scale and skip flag of each step."""
    rnd = rounding(precision, mode)
    names = list(params)
    params = {n: np.array(v, F32) for n, v in params.items()}
    copies = {n: rnd(v) for n, v in params.items()}
    optimizer = OPTIMIZERS[kind](names, [v.shape for v in params.values()])
    scaler = Scaler(INIT_SCALE, GROWTH_INTERVAL) if precision == "fp16" \
        else None
    losses, scales, skipped, step = [], [], [], 0
    for x, labels in batches:
        seed = scaler.scale if scaler else F32(1)
        loss, grads = model.step(copies, x, labels, seed, rnd)
        found = False
        if scaler:
            grads, found = scaler.unscale(grads)
            scaler.update(found)
        if not found:
            for n in names:
                params[n] = optimizer.step(n, params[n], grads[n], step)
                copies[n] = rnd(params[n])
            step += 1
        losses.append(F32(loss))
        scales.append(float(scaler.scale) if scaler else 1.0)
        skipped.append(found)
    return losses, dict(params, **optimizer.state()), scales, skipped


#===----------------------------------------------------------------------===#
# Data with ties, ampc's run, the comparison.
#===----------------------------------------------------------------------===#


def ties(x, precision):
    """Each element of `x` moved to the midpoint between its 16-bit
    rounding and the next 16-bit value away from zero: an exact tie."""
    x = np.asarray(x, F32)
    low, high = neighbours(x, rounding(precision, "nearest-even")(x),
                           precision)
    mid = (low.astype(np.float64) + high.astype(np.float64)) / 2
    out = mid.astype(F32)
    assert np.array_equal(out.astype(np.float64), mid), "a tie is not exact"
    return out


def tie_batches(model, count, seed, precision):
    return [(ties(x.numpy(), precision), label.numpy())
            for x, label in model.batches(count, seed)]


PORTABLE_CXX = """#!/bin/sh
# The C++ compiler without F16C: CpuKernels.h then converts f16 with
# Float16.h (ampc adds -mf16c on machines that have it; the last flag wins).
exec "${REAL_CXX:-c++}" "$@" -mno-f16c
"""


def ampc_run(library, params, batches):
    """ampc's losses, the scale and skip flag of each step, and every
    tensor of a checkpoint saved after the last step (parameters and
    optimizer state, read per lib/Runtime/Checkpoint.cpp's format)."""
    model = tc.Model(library)
    for n, v in params.items():
        if not np.array_equal(model.get_parameter(n), v):
            raise RuntimeError("initial %s differs" % n)
    losses, scales, skipped, before = [], [], [], 0
    for x, labels in batches:
        losses.append(F32(model.train_step({"input": x, "label": labels})))
        state = model.scaler_state()
        scales.append(float(state["scale"]))
        skipped.append(state["skipped_steps"] > before)
        before = state["skipped_steps"]
    path = library + ".ckpt"
    model.save_checkpoint(path)
    model.close()
    return losses, checkpoint_format.read(path)[1], scales, skipped


def identical(a, b):
    return np.array_equal(np.asarray(a, F32).view(np.uint32),
                          np.asarray(b, F32).view(np.uint32))


def compare(label, steps, ampc, reference, tolerance):
    """Prints the loss table and the verdict of one case; True when it
    passes."""
    got, got_tensors, got_scales, got_skipped = ampc
    want, want_tensors, want_scales, want_skipped = reference
    print("%s: step  loss ampc      loss reference  scale     skipped"
          % label)
    for k in range(steps):
        print("%s: %4d  %-12.9g  %-14.9g  %-8g  %s" % (
            label, k, got[k], want[k], got_scales[k],
            "yes" if got_skipped[k] else "no"))
    # A relative difference, the difference itself where the reference is 0.
    loss_diffs = [relative_difference(a, b, absolute_at_zero=True)
                  for a, b in zip(got, want)]
    worst_step = int(np.argmax(loss_diffs))
    tensor_diffs = {n: relative_difference(got_tensors[n], want_tensors[n],
                                           absolute_at_zero=True)
                    for n in want_tensors}
    worst_tensor = max(tensor_diffs, key=tensor_diffs.get)
    losses_same = all(identical(a, b) for a, b in zip(got, want))
    tensors_same = all(identical(got_tensors[n], want_tensors[n])
                       for n in want_tensors)
    scaler_same = got_scales == want_scales and got_skipped == want_skipped
    ok = (loss_diffs[worst_step] <= tolerance and
          tensor_diffs[worst_tensor] <= tolerance and scaler_same)
    print("%s: %d steps (%d skipped), losses %s, %d final tensors %s%s: %s"
          % (label, steps, sum(got_skipped),
             "IDENTICAL" if losses_same else
             "max relative difference %.2e (step %d)" % (
                 loss_diffs[worst_step], worst_step),
             len(want_tensors),
             "IDENTICAL" if tensors_same else
             "max relative difference %.2e (%s)" % (
                 tensor_diffs[worst_tensor], worst_tensor),
             "" if scaler_same else
             ", scaler DIFFERENT (reference: scales %s, skipped %s)" % (
                 want_scales, want_skipped),
             "ok" if ok else "FAILED"))
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("workdir")
    parser.add_argument("--models", nargs="+", default=sorted(MODELS),
                        choices=sorted(MODELS))
    parser.add_argument("--precision", nargs="+", default=["fp16", "bf16"],
                        choices=["fp16", "bf16"])
    parser.add_argument("--optimizers", nargs="+", default=["adamw", "sgd"],
                        choices=sorted(OPTIMIZERS))
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--portable", action="store_true")
    parser.add_argument("--reference-rounding", default="nearest-even",
                        choices=["nearest-even", "toward-zero", "ties-away"])
    parser.add_argument("--tolerance", type=float, default=0.0)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    torch.set_num_threads(1)

    if args.portable:
        wrapper = os.path.join(args.workdir, "cxx-no-f16c")
        with open(wrapper, "w") as f:
            f.write(PORTABLE_CXX)
        os.chmod(wrapper, os.stat(wrapper).st_mode | stat.S_IXUSR)
        os.environ["REAL_CXX"] = os.environ.get("CXX") or "c++"
        os.environ["CXX"] = wrapper
    cases, jobs = [], []
    for name in args.models:
        model = MODELS[name]
        torch.manual_seed(0)
        module = model.module()
        # Initial weights that are f16 ties too: `init` rounds them into the
        # weight copies with Float16.h even where F16C converts the rest.
        with torch.no_grad():
            for p in module.parameters():
                p.copy_(torch.from_numpy(ties(p.numpy(), "fp16")))
        example = torch.from_numpy(tie_batches(model, 1, args.seed,
                                               "fp16")[0][0])
        onnx_path = os.path.join(args.workdir, name + ".onnx")
        tc.export_onnx(module, example, onnx_path, training=True)
        initial = {n: p.detach().numpy().copy()
                   for n, p in module.named_parameters()}
        for precision in args.precision:
            for kind in args.optimizers:
                flags = ["--precision=" + precision, "--loss=" + model.loss]
                flags += tc.ampc_optimizer_flags(kind)
                if precision == "fp16":
                    flags += ["--init-scale=%r" % INIT_SCALE,
                              "--growth-interval=%d" % GROWTH_INTERVAL]
                library = os.path.join(args.workdir, "%s_%s_%s.so" % (
                    name, kind, precision))
                jobs.append((onnx_path, library, flags))
                cases.append((name, initial, precision, kind, library))
    tc.compile_commands(jobs)

    failures = []
    for name, initial, precision, kind, library in cases:
        label = "%s %s %s%s" % (name, kind, precision,
                                " portable" if args.portable else "")
        batches = tie_batches(MODELS[name], args.steps, args.seed, precision)
        reference = reference_run(MODELS[name], initial, batches, precision,
                                  kind, args.reference_rounding)
        ampc = ampc_run(library, initial, batches)
        if not compare(label, args.steps, ampc, reference, args.tolerance):
            failures.append(label)
    return report_failures(failures)


if __name__ == "__main__":
    sys.exit(main())
