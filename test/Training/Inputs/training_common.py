"""Shared pieces of the training tests (test/Training): the two torch
models, their data, compiling them with ampc, and the measures.

Models (exported with export_models.export_onnx in training mode, opset 17,
parameters kept as initializers named after torch's named_parameters()):
- mlp: Linear(20, 64), ReLU, Linear(64, 10) on 32x20 batches with ampc's
  default --loss=cross_entropy against int64 class ids that a fixed random
  linear "teacher" assigns (argmax of x @ W), so the loss can fall;
- encoder: nn.TransformerEncoderLayer(d_model 32, 4 heads, feed-forward 64,
  dropout 0, batch_first) on 2x8x32 batches with --loss=mse against the
  sequence shifted by one position and halved (attention can learn it).
Batch k of a run is the k-th draw of a torch.Generator seeded with `seed`,
so every process sees the same batches.
"""
import os
import subprocess
import sys
import warnings

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "Models", "Inputs"))
from ampc_ctypes import AmpcError, Model  # noqa: E402,F401
from export_models import export_onnx  # noqa: E402
# max|got - want| / max|want| (0 when both are zero), as the gradient test.
from torch_gradients import relative_difference  # noqa: E402,F401

warnings.filterwarnings("ignore")


def mlp_module():
    return torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 10))


def encoder_module():
    return torch.nn.TransformerEncoderLayer(d_model=32, nhead=4,
                                            dim_feedforward=64, dropout=0.0,
                                            batch_first=True)


def mlp_batches(count, seed):
    g = torch.Generator().manual_seed(seed)
    teacher = torch.randn(20, 10, generator=g)
    batches = []
    for _ in range(count):
        x = torch.randn(32, 20, generator=g)
        batches.append((x, (x @ teacher).argmax(dim=1)))
    return batches


def encoder_batches(count, seed):
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(count):
        x = torch.randn(2, 8, 32, generator=g)
        batches.append((x, 0.5 * torch.roll(x, 1, dims=1)))
    return batches


def cross_entropy(y, label):
    return torch.nn.functional.cross_entropy(y, label)


def mse(y, label):
    return ((y - label) ** 2).mean()


# name: (module factory, batch factory, ampc --loss, torch loss)
CASES = {
    "mlp": (mlp_module, mlp_batches, "cross_entropy", cross_entropy),
    "encoder": (encoder_module, encoder_batches, "mse", mse),
}

# Optimizer settings shared by ampc's flags and torch.optim.
OPTIMIZERS = {
    "sgd": dict(lr=0.05, momentum=0.9, weight_decay=1e-4),
    "adamw": dict(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01),
}


def ampc_optimizer_flags(kind, settings=None):
    s = dict(OPTIMIZERS[kind], **(settings or {}))
    flags = ["--optimizer=" + kind, "--lr=%r" % s["lr"],
             "--weight-decay=%r" % s["weight_decay"]]
    if kind == "sgd":
        flags.append("--momentum=%r" % s["momentum"])
    else:
        flags += ["--beta1=%r" % s["betas"][0], "--beta2=%r" % s["betas"][1],
                  "--eps=%r" % s["eps"]]
    return flags


def torch_optimizer(kind, params):
    s = OPTIMIZERS[kind]
    if kind == "sgd":
        return torch.optim.SGD(params, lr=s["lr"], momentum=s["momentum"],
                               weight_decay=s["weight_decay"], foreach=False)
    return torch.optim.AdamW(params, lr=s["lr"], betas=s["betas"],
                             eps=s["eps"], weight_decay=s["weight_decay"],
                             foreach=False)


def make_model(name, workdir, seed=0):
    """The torch module of case `name` (initialised from `seed`) and its
    training-mode export WORKDIR/NAME.onnx."""
    torch.manual_seed(seed)
    module = CASES[name][0]()
    example = CASES[name][1](1, seed)[0][0]
    path = os.path.join(workdir, name + ".onnx")
    export_onnx(module, example, path, training=True)
    return module, path


def compile_commands(jobs):
    """Runs `ampc` for every (onnx, library, flags) in `jobs` two at a time
    (the machine has two cores); raises with ampc's message on a failure."""
    pending = list(jobs)
    running = []
    while pending or running:
        while pending and len(running) < 2:
            onnx_path, library, flags = pending.pop(0)
            command = ["ampc", onnx_path, "--mode=train", "--target=cpu",
                       "-o", library] + list(flags)
            running.append((command, subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)))
        command, process = running.pop(0)
        _, err = process.communicate()
        if process.returncode != 0:
            raise RuntimeError("%s exited with %d: %s" % (
                " ".join(command), process.returncode, err.strip()))


def inputs_of(batch):
    x, label = batch
    return {"input": x.numpy(), "label": label.numpy()}
