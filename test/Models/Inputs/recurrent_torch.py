#!/usr/bin/env python3
"""nn.LSTM and nn.GRU classifiers trained by ampc and by torch (issue 34):
ONNX's LSTM and GRU are imported as compositions of ampc ops
(lib/Import/Recurrent.cpp), so their gradients are the parts' rules.

usage: recurrent_torch.py WORKDIR [--steps 20] [--tolerance 1e-5]

- lstm: nn.LSTM(6, 8, num_layers=2, bidirectional=True, batch_first=True),
  the last step's output into Linear(16, 4); SGD (lr 0.3, momentum 0.9).
- gru: nn.GRU(6, 8, num_layers=2) (sequence first; torch exports it with
  linear_before_reset=1), the last layer's final state into Linear(8, 4);
  AdamW (lr 0.03, weight decay 0.01).

Each module (torch seed 0) is exported in training mode (opset 17), compiled
with `ampc NAME.onnx --target=cpu --precision=fp32 --loss-scale=none
--optimizer=...` and trained --steps steps on 4 sequences of 5 steps, one
batch per step (batch k the k-th draw of a generator seeded 1, labels a
fixed random teacher's class of the last step); torch trains a copy on the
same batches (torch.optim, foreach=False). Every step's loss must be within
--tolerance of torch's (absolute), the final parameters within 1e-4
(max|ampc - torch| / max|torch|), and the mean loss of the last five steps
below that of the first five. Prints a line per model, then PASSED, or
FAILED with exit status 1.
"""
import argparse
import copy
import os
import sys
import warnings

import numpy as np
import torch

from ampc.runtime import Model
from ampc_testing import (export_onnx, relative_difference, report_failures,
                          run_commands)

warnings.filterwarnings("ignore")

INPUT, HIDDEN, CLASSES, BATCH, SEQ = 6, 8, 4, 4, 5


class LstmClassifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(INPUT, HIDDEN, num_layers=2,
                                 bidirectional=True, batch_first=True)
        self.head = torch.nn.Linear(2 * HIDDEN, CLASSES)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y[:, -1])


class GruClassifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(INPUT, HIDDEN, num_layers=2)
        self.head = torch.nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        _, h = self.rnn(x)
        return self.head(h[-1])


# name: (module, batch first, ampc's optimizer flags, torch's optimizer)
CASES = {
    "lstm": (LstmClassifier, True,
             ["--optimizer=sgd", "--lr=0.3", "--momentum=0.9",
              "--weight-decay=0"],
             lambda p: torch.optim.SGD(p, lr=0.3, momentum=0.9,
                                       foreach=False)),
    "gru": (GruClassifier, False,
            ["--optimizer=adamw", "--lr=0.03", "--weight-decay=0.01",
             "--beta1=0.9", "--beta2=0.999", "--eps=1e-08"],
            lambda p: torch.optim.AdamW(p, lr=0.03, weight_decay=0.01,
                                        foreach=False)),
}


def batches(count, batch_first):
    g = torch.Generator().manual_seed(1)
    teacher = torch.randn(INPUT, CLASSES, generator=g)
    out = []
    for _ in range(count):
        x = torch.randn(BATCH, SEQ, INPUT, generator=g)
        label = (x[:, -1] @ teacher).argmax(dim=1)
        out.append((x if batch_first else x.transpose(0, 1).contiguous(),
                    label))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("workdir")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--tolerance", type=float, default=1e-5)
    args = p.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    torch.set_num_threads(1)

    modules, jobs = {}, []
    for name, (make, batch_first, flags, _) in CASES.items():
        torch.manual_seed(0)
        module = make()
        modules[name] = module
        onnx_path = os.path.join(args.workdir, name + ".onnx")
        export_onnx(module, batches(1, batch_first)[0][0], onnx_path,
                    training=True)
        jobs.append(["ampc", onnx_path, "--target=cpu", "--precision=fp32",
                     "--loss-scale=none", "-o",
                     os.path.join(args.workdir, name + ".so")] + flags)
    run_commands(jobs)

    failures = []
    for name, (_, batch_first, _, make_optimizer) in CASES.items():
        data = batches(args.steps, batch_first)
        reference = copy.deepcopy(modules[name]).train()
        optimizer = make_optimizer(reference.parameters())
        want = []
        for x, label in data:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(reference(x), label)
            want.append(float(loss))
            loss.backward()
            optimizer.step()
        torch_params = dict(modules[name].named_parameters())
        with Model(os.path.join(args.workdir, name + ".so")) as model:
            names = [q.name for q in model.parameters]
            for n in names:
                if not np.array_equal(model.get_parameter(n),
                                      torch_params[n].detach().numpy()):
                    failures.append("%s: initial %s differs" % (name, n))
            got = [float(model.train_step({"input": x.numpy(),
                                           "label": label.numpy()}))
                   for x, label in data]
            final = {n: model.get_parameter(n) for n in names}
        trained = dict(reference.named_parameters())
        missing = sorted(set(trained) - set(final))
        worst_param = max(relative_difference(final[n],
                                              trained[n].detach().numpy())
                          for n in final)
        worst = max(abs(a - b) for a, b in zip(got, want))
        # Each step sees a new batch: the loss is noisy, its mean falls.
        first, last = np.mean(got[:5]), np.mean(got[-5:])
        ok = (not missing and worst <= args.tolerance and worst_param <= 1e-4
              and last < first)
        print("%s: %d steps, mean loss of the first and last five %.4f -> "
              "%.4f, max |ampc - torch| %.2e, final parameters %.2e, "
              "%d parameters%s: %s" % (
                  name, args.steps, first, last, worst, worst_param,
                  len(final), (", missing " + " ".join(missing))
                  if missing else "", "ok" if ok else "FAILED"))
        if not ok:
            failures.append(name)
    return report_failures(failures)


if __name__ == "__main__":
    sys.exit(main())
