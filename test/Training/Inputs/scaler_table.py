#!/usr/bin/env python3
"""ampc's dynamic loss scaler, step by step, against REFERENCE.md 3.

usage: scaler_table.py WORKDIR [--cases overflow growth bounds] [--perturb]

Each case compiles the mlp of training_common (fp16 autocast, SGD with
momentum 0.9, so there is optimizer state, --loss-scale=dynamic) with its
own scaler flags and trains it through the runtime C API. On the chosen
steps the batch carries one input of 1e5, which is inf once cast to f16, so
the forward, the loss and every gradient are non-finite there and nowhere
else. After every step the state from ampc_model_get_scaler_state (scale,
growth_tracker, steps, skipped_steps) is compared with a Python model of
torch.amp.GradScaler's update (REFERENCE.md 3) plus ampc's bounds:

    found_inf: scale = scale * backoff, raised to min_scale; tracker = 0
    otherwise: t = tracker + 1
               t == growth_interval: new = scale * growth (float32),
                   kept when finite, lowered to max_scale; tracker = 0
               else tracker = t
    steps counts the steps taken, skipped_steps the others

Cases (steps are numbered from 1):
  overflow: --growth-interval 4, 12 steps, overflows on steps 3 and 7
  growth:   --growth-interval 10, 30 steps, no overflow (the scale doubles
            on steps 10, 20 and 30)
  bounds:   --growth-interval 2 --min-scale 32768 --max-scale 131072,
            12 steps, overflows on steps 7, 8 and 9
Across every skipped step, a checkpoint saved before it and one saved after
it (read with checkpoint_format.py) must differ only in the scaler's
tensors (ampc.loss_scale, ampc.growth_tracker, ampc.skipped_steps):
parameters, momentum buffers, the step count and the learning rate stay
bit-identical, and so do the parameters read with get_parameter.

--perturb compiles ampc with --backoff-factor 0.25 while the model expects
0.5, to show that a wrong transition is caught.

Output: one table row per step, ampc's state then the model's, and for each
skipped step the tensors that changed; per case a summary line; finally
PASSED, or FAILED with exit status 1.
"""
import argparse
import os
import sys

import numpy as np

import checkpoint_format as cf
import training_common as tc
from ampc_testing import report_failures

SCALER_TENSORS = {"ampc.loss_scale", "ampc.growth_tracker",
                  "ampc.skipped_steps"}

# name: (steps, overflow steps, scaler settings)
CASES = {
    "overflow": (12, {3, 7}, dict(growth_interval=4)),
    "growth": (30, set(), dict(growth_interval=10)),
    "bounds": (12, {7, 8, 9}, dict(growth_interval=2, min_scale=32768.0,
                                   max_scale=131072.0)),
}
DEFAULTS = dict(init_scale=65536.0, growth_factor=2.0, backoff_factor=0.5,
                growth_interval=2000, min_scale=0.0, max_scale=0.0)


class ReferenceScaler:
    """REFERENCE.md 3 in float32, with ampc's optional bounds (0: none)."""

    def __init__(self, s):
        self.s = s
        self.scale = np.float32(s["init_scale"])
        self.tracker = 0
        self.steps = 0
        self.skipped = 0

    def update(self, found_inf):
        s = self.s
        if found_inf:
            self.scale = np.float32(self.scale * np.float32(
                s["backoff_factor"]))
            if s["min_scale"] > 0 and self.scale < s["min_scale"]:
                self.scale = np.float32(s["min_scale"])
            self.tracker = 0
            self.skipped += 1
            return
        self.steps += 1
        t = self.tracker + 1
        if t == s["growth_interval"]:
            with np.errstate(over="ignore"):
                new = np.float32(self.scale * np.float32(s["growth_factor"]))
            if np.isfinite(new):
                self.scale = new
            if s["max_scale"] > 0 and self.scale > s["max_scale"]:
                self.scale = np.float32(s["max_scale"])
            self.tracker = 0
        else:
            self.tracker = t

    def state(self):
        return (float(self.scale), self.tracker, self.steps, self.skipped)


def run_case(name, workdir, perturb):
    steps, overflows, settings = CASES[name]
    s = dict(DEFAULTS, **settings)
    module, onnx_path = tc.make_model("mlp", workdir)
    library = os.path.join(workdir, "mlp_%s.so" % name)
    flags = ["--precision=fp16", "--loss-scale=dynamic", "--optimizer=sgd",
             "--lr=0.05", "--momentum=0.9",
             "--init-scale=%r" % s["init_scale"],
             "--growth-factor=%r" % s["growth_factor"],
             "--backoff-factor=%r" % (0.25 if perturb else
                                      s["backoff_factor"]),
             "--growth-interval=%d" % s["growth_interval"]]
    if s["min_scale"]:
        flags.append("--min-scale=%r" % s["min_scale"])
    if s["max_scale"]:
        flags.append("--max-scale=%r" % s["max_scale"])
    tc.compile_commands([(onnx_path, library, flags)])
    print("%s: %s" % (name, " ".join(flags)))

    model = tc.Model(library)
    reference = ReferenceScaler(s)
    batches = tc.mlp_batches(steps, 1)
    problems = []
    print("%s: step  input    ampc: scale tracker steps skipped | "
          "reference: scale tracker steps skipped" % name)
    for k, (x, label) in enumerate(batches, start=1):
        inputs = tc.inputs_of((x, label))
        if k in overflows:
            inputs["input"] = inputs["input"].copy()
            inputs["input"][0, 0] = 1e5
            before = os.path.join(workdir, "%s_before_%d.ckpt" % (name, k))
            model.save_checkpoint(before)
            params = [model.get_parameter(p.name).tobytes()
                      for p in model.parameters]
        loss = float(model.train_step(inputs))
        reference.update(k in overflows)
        a = model.scaler_state()
        got = (a["scale"], a["growth_tracker"], a["steps"],
               a["skipped_steps"])
        want = reference.state()
        mark = "" if got == want else "   <- differs"
        print("%s: %4d  %-7s  %10g %7d %5d %7d | %10g %7d %5d %7d%s" % (
            name, k, "1e5" if k in overflows else "normal", *got, *want,
            mark))
        if got != want:
            problems.append("step %d state" % k)
        if k in overflows:
            if np.isfinite(loss):
                problems.append("step %d: finite loss %g" % (k, loss))
            after = os.path.join(workdir, "%s_after_%d.ckpt" % (name, k))
            model.save_checkpoint(after)
            _, t0 = cf.read(before)
            _, t1 = cf.read(after)
            diff = cf.changed(t0, t1)
            same_params = params == [model.get_parameter(p.name).tobytes()
                                     for p in model.parameters]
            print("%s: step %d skipped: tensors changed: %s; the other %d "
                  "tensors bit-identical: %s; get_parameter unchanged: %s" % (
                      name, k, ", ".join(diff), len(t0) - len(diff),
                      "yes" if set(diff) <= SCALER_TENSORS else "NO",
                      "yes" if same_params else "NO"))
            if not set(diff) <= SCALER_TENSORS or not same_params:
                problems.append("step %d changed the model" % k)
    model.close()
    print("%s: %d steps, %d skipped, final scale %g: %s" % (
        name, steps, len(overflows), reference.state()[0],
        "ok" if not problems else "FAILED (%s)" % "; ".join(problems)))
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("workdir")
    parser.add_argument("--cases", nargs="+", default=list(CASES),
                        choices=list(CASES))
    parser.add_argument("--perturb", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    failures = [c for c in args.cases
                if run_case(c, args.workdir, args.perturb)]
    return report_failures(failures)


if __name__ == "__main__":
    sys.exit(main())
