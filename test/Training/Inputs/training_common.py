"""Shared pieces of the training tests (test/Training): the two torch
models, their data, compiling them with ampc, and the measures.

Models (exported with ampc_testing.export_onnx in training mode, opset 17,
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
import warnings

import torch

from ampc.runtime import AmpcError, Model  # noqa: F401
from ampc_testing import export_onnx, run_commands, small_encoder, small_mlp

warnings.filterwarnings("ignore")


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


# name: (module factory, batch factory, ampc --loss)
CASES = {
    "mlp": (small_mlp, mlp_batches, "cross_entropy"),
    "encoder": (small_encoder, encoder_batches, "mse"),
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
    run_commands([["ampc", onnx_path, "--mode=train", "--target=cpu", "-o",
                   library] + list(flags)
                  for onnx_path, library, flags in jobs])


def inputs_of(batch):
    x, label = batch
    return {"input": x.numpy(), "label": label.numpy()}
