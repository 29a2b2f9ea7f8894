#!/usr/bin/env python3
"""ampc's training trajectory against torch.optim, step by step.

usage: trajectory.py WORKDIR [--models mlp encoder] [--optimizers sgd adamw]
                     [--precision fp32|fp16] [--steps 50] [--seed 1]
                     [--tolerance T] [--param-tolerance P] [--perturb]

For each model of training_common.CASES and each optimizer (sgd: lr 0.05,
momentum 0.9, weight decay 1e-4; adamw: lr 2e-3, betas 0.9/0.999, eps 1e-8,
weight decay 0.01), the module initialised from torch seed 0 is exported,
compiled with

    ampc NAME.onnx --mode=train --target=cpu --precision=P --optimizer=...
         [--loss-scale=none at fp32; dynamic, the default, at fp16]

and trained for --steps steps, one different batch per step (batch k is the
k-th draw of a generator seeded with --seed); torch trains a copy of the same
module on the same batches in float32 (torch.optim with foreach=False, the
single-tensor loops ampc's kernels follow). Every step's loss is compared:

    relative difference = |loss_ampc - loss_torch| / |loss_torch|

and the largest over the steps must be at most --tolerance; after the last
step every parameter is compared, max|p_ampc - p_torch| / max|p_torch|, and
the largest must be at most --param-tolerance. At fp16 the reference stays
torch in FP32 (torch 1.13's CPU autocast has bfloat16 only); the scaler's
final state is printed and every step must have been taken.

--perturb compiles ampc with momentum 0.89 instead of 0.9 (sgd) or a
learning rate 10% higher (adamw) than torch's, to show that the comparison
catches a slightly wrong update.

Output per case: a few rows of the loss table, then
    MODEL OPT PRECISION: N steps, loss A -> B, max relative loss difference
    D (step K), final parameters D (TENSOR): ok|FAILED
and finally PASSED, or FAILED with exit status 1.
"""
import argparse
import copy
import os
import sys

import numpy as np
import torch

import training_common as tc
from ampc_testing import relative_difference, report_failures, torch_loss

SHOWN_STEPS = (0, 1, 2, 5, 10, 20, 30, 40)


def torch_run(module, kind, batches, loss_kind, dtype=torch.float32):
    """torch's losses and final parameters (as float32 arrays) when a copy
    of `module` in `dtype` trains on `batches`."""
    module = copy.deepcopy(module).to(dtype).train()
    optimizer = tc.torch_optimizer(kind, module.parameters())
    losses = []
    for x, label in batches:
        x = x.to(dtype)
        if label.is_floating_point():
            label = label.to(dtype)
        optimizer.zero_grad()
        loss = torch_loss(loss_kind, module(x), label)
        losses.append(float(loss))
        loss.backward()
        optimizer.step()
    return losses, {n: p.detach().float().numpy().copy()
                    for n, p in module.named_parameters()}


def ampc_run(library, module, batches):
    model = tc.Model(library)
    torch_params = dict(module.named_parameters())
    for p in model.parameters:
        if not np.array_equal(model.get_parameter(p.name),
                              torch_params[p.name].detach().numpy()):
            raise RuntimeError("initial %s differs from torch's" % p.name)
    losses = [float(model.train_step(tc.inputs_of(b))) for b in batches]
    params = {p.name: model.get_parameter(p.name) for p in model.parameters}
    state = model.scaler_state()
    model.close()
    return losses, params, state


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("workdir")
    parser.add_argument("--models", nargs="+", default=["mlp", "encoder"],
                        choices=sorted(tc.CASES))
    parser.add_argument("--optimizers", nargs="+", default=["sgd", "adamw"],
                        choices=sorted(tc.OPTIMIZERS))
    parser.add_argument("--precision", choices=["fp32", "fp16"],
                        default="fp32")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tolerance", type=float, help="largest relative "
                        "loss difference (default 1e-4 at fp32, 5e-3 at "
                        "fp16)")
    parser.add_argument("--param-tolerance", type=float, help="largest "
                        "relative difference of a final parameter (default "
                        "1e-4 at fp32; at fp16 they are printed only)")
    parser.add_argument("--perturb", action="store_true")
    args = parser.parse_args()
    fp32 = args.precision == "fp32"
    if args.tolerance is None:
        args.tolerance = 1e-4 if fp32 else 5e-3
    if args.param_tolerance is None:
        args.param_tolerance = 1e-4 if fp32 else float("inf")
    os.makedirs(args.workdir, exist_ok=True)
    torch.set_num_threads(1)

    cases, jobs = [], []
    for name in args.models:
        module, onnx_path = tc.make_model(name, args.workdir)
        for kind in args.optimizers:
            settings = {}
            if args.perturb:
                settings = ({"momentum": 0.89} if kind == "sgd" else
                            {"lr": tc.OPTIMIZERS[kind]["lr"] * 1.1})
            flags = ["--precision=" + args.precision,
                     "--loss=" + tc.CASES[name][2]]
            flags += tc.ampc_optimizer_flags(kind, settings)
            if args.precision == "fp32":
                flags.append("--loss-scale=none")
            library = os.path.join(args.workdir, "%s_%s_%s.so" % (
                name, kind, args.precision))
            jobs.append((onnx_path, library, flags))
            cases.append((name, module, kind, library))
    tc.compile_commands(jobs)

    failures = []
    for name, module, kind, library in cases:
        _, make_batches, loss_kind = tc.CASES[name]
        batches = make_batches(args.steps, args.seed)
        want, want_params = torch_run(module, kind, batches, loss_kind)
        got, got_params, state = ampc_run(library, module, batches)
        label = "%s %s %s" % (name, kind, args.precision)
        differences = [abs(a - t) / abs(t) for a, t in zip(got, want)]
        print("%s: step  loss ampc      loss torch    relative difference"
              % label)
        for k in SHOWN_STEPS + (args.steps - 1,):
            if k < args.steps:
                print("%s: %4d  %.8f  %.8f  %.2e" % (
                    label, k, got[k], want[k], differences[k]))
        worst = int(np.argmax(differences))
        # A parameter whose exact gradient is zero (the key projection's
        # bias: softmax ignores q . b_k, the same for every key) is moved by
        # rounding noise alone, which AdamW normalises into full-size steps;
        # there torch's float32 run is no closer to its own float64 run, and
        # ampc is held to 4x that distance instead.
        _, params64 = torch_run(module, kind, batches, loss_kind,
                                torch.float64)
        param_ok, worst_param, worst_excess = True, None, -1.0
        for n in want_params:
            d = relative_difference(got_params[n], want_params[n])
            d64 = relative_difference(want_params[n], params64[n])
            allowed = max(args.param_tolerance, 4 * d64)
            if d > args.param_tolerance:
                print("%s: parameter %s: %.2e, torch fp32 against fp64 %.2e"
                      % (label, n, d, d64))
            if d > allowed:
                param_ok = False
            if d > worst_excess:
                worst_param, worst_excess = n, d
        ok = differences[worst] <= args.tolerance and param_ok
        if args.precision == "fp16":
            print("%s: scaler scale %g growth_tracker %d steps %d "
                  "skipped_steps %d" % (label, state["scale"],
                                        state["growth_tracker"],
                                        state["steps"],
                                        state["skipped_steps"]))
            ok = ok and state["skipped_steps"] == 0
        print("%s: %d steps, loss %.4f -> %.4f, max relative loss difference "
              "%.2e (step %d), final parameters %.2e (%s): %s" % (
                  label, args.steps, want[0], want[-1], differences[worst],
                  worst, worst_excess, worst_param,
                  "ok" if ok else "FAILED"))
        if not ok:
            failures.append(label)
    return report_failures(failures)


if __name__ == "__main__":
    sys.exit(main())
