#!/usr/bin/env python3
"""A small GPT-style decoder block on ampc (issue 18's acceptance): token
and position embeddings, a pre-norm block with a fused QKV projection split
into q, k, v (torch.split: ONNX Split), a causal mask (masked_fill with -inf:
Where), softmax attention, a tanh-GELU MLP, a final LayerNorm and an output
head tied to the token embedding (the same initializer read by Gather and a
MatMul), logits reshaped to (batch x sequence, vocabulary) for
cross-entropy against the next tokens.

usage: gpt_block.py WORKDIR [--runtime LIB] [--steps 3]

1. FP32 gradients: `ampc --precision=fp32 --optimizer=none` against
   torch.autograd on one batch; the loss and every gradient within 1e-5
   (max|ampc - torch| / max|torch|), the tied embedding's included (its
   gradient sums the Gather's and the head's).
2. Training: ampc's defaults (FP16 autocast, dynamic loss scaling, AdamW)
   on one fixed batch until --steps optimizer steps were taken (steps the
   scaler skips while it finds its scale are counted); the loss before
   each step must be finite and below the one before.
Prints a line per check and PASSED, or FAILED with exit status 1.
"""
import argparse
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import torch

from ampc.runtime import Model
from ampc_testing import (export_onnx, optimizer_steps, relative_difference,
                          report_failures)

warnings.filterwarnings("ignore")

VOCAB, D, HEADS, SEQ, BATCH = 64, 32, 4, 8, 2


class GptBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = torch.nn.Embedding(VOCAB, D)
        self.pos = torch.nn.Parameter(0.02 * torch.randn(SEQ, D))
        self.ln1 = torch.nn.LayerNorm(D)
        self.qkv = torch.nn.Linear(D, 3 * D)
        self.proj = torch.nn.Linear(D, D)
        self.ln2 = torch.nn.LayerNorm(D)
        self.fc1 = torch.nn.Linear(D, 4 * D)
        self.fc2 = torch.nn.Linear(4 * D, D)
        self.lnf = torch.nn.LayerNorm(D)
        self.register_buffer("causal",
                             torch.tril(torch.ones(SEQ, SEQ, dtype=torch.bool)))

    def forward(self, ids):
        b, t = ids.shape
        x = self.tok(ids) + self.pos
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        heads = lambda z: z.reshape(b, t, HEADS, D // HEADS).transpose(1, 2)  # noqa: E731
        q, k, v = heads(q), heads(k), heads(v)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(D // HEADS)
        scores = scores.masked_fill(~self.causal, float("-inf"))
        y = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, t, D)
        x = x + self.proj(y)
        x = x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x)),
                                                  approximate="tanh"))
        logits = self.lnf(x) @ self.tok.weight.t()
        return logits.reshape(b * t, VOCAB)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("workdir")
    p.add_argument("--runtime", default=None)
    p.add_argument("--ampc", default="ampc")
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    torch.manual_seed(0)
    model = GptBlock()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
    x, label = ids[:, :-1].contiguous(), ids[:, 1:].reshape(-1).contiguous()
    onnx_path = os.path.join(args.workdir, "gpt.onnx")
    export_onnx(model, x, onnx_path, training=True)
    failures = []
    inputs = {"input": x.numpy(), "label": label.numpy()}

    # 1. FP32 gradients against torch.autograd.
    lib = os.path.join(args.workdir, "gpt.grads.so")
    subprocess.run([args.ampc, onnx_path, "--target=cpu", "--precision=fp32",
                    "--optimizer=none", "-o", lib], check=True)
    with Model(lib, args.runtime) as m:
        loss, grads = m.gradients(inputs)
    model.zero_grad()
    torch_loss = torch.nn.functional.cross_entropy(model(x), label)
    torch_loss.backward()
    named = dict(model.named_parameters())
    worst = relative_difference([float(loss)], [float(torch_loss)])
    print("loss: ampc %.6f torch %.6f, relative difference %.2e" % (
        float(loss), float(torch_loss), worst))
    missing = sorted(set(named) - set(grads))
    print("torch parameters without an ampc gradient: %s" % (
        " ".join(missing) or "none"))
    if missing:
        failures.append("missing gradients")
    for name in sorted(grads):
        if name not in named:
            failures.append("unknown gradient " + name)
            continue
        d = relative_difference(grads[name], named[name].grad.numpy())
        print("%s %s: %.2e" % (name, list(grads[name].shape), d))
        worst = max(worst, d)
    print("fp32 gradients: %d, max relative difference %.2e: %s" % (
        len(grads), worst, "ok" if worst <= 1e-5 else "FAILED"))
    if worst > 1e-5:
        failures.append("fp32 gradients")

    # 2. Training steps at the defaults (FP16).
    lib = os.path.join(args.workdir, "gpt.train.so")
    subprocess.run([args.ampc, onnx_path, "--target=cpu", "-o", lib],
                   check=True)
    with Model(lib, args.runtime) as m:
        losses, calls, skipped = optimizer_steps(m, inputs, args.steps)
    ok = (len(losses) == args.steps and all(np.isfinite(losses)) and
          all(b < a for a, b in zip(losses, losses[1:])))
    print("fp16 training: %d calls (%d skipped by the scaler), losses %s: %s"
          % (calls, skipped, " ".join("%.5f" % v for v in losses),
             "ok" if ok else "FAILED"))
    if not ok:
        failures.append("fp16 training")
    return report_failures(failures)


if __name__ == "__main__":
    sys.exit(main())
