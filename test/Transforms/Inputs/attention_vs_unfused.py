"""The fused attention's CPU kernel against the unfused graph (issue 38):
a Q/K/V projection, heads split by Reshape and Transpose, a scale, a mask
(a causal -inf triangle, an additive random mask, or none), Softmax, maybe
a training-mode Dropout on the probabilities, and MatMul, exported by torch; compiled by ampc at FP32 with
--fuse-attention=false and with the fusion on (the report must show the
attention fused), the loss and every parameter gradient compared.

usage: attention_vs_unfused.py WORKDIR --ampc AMPC
Prints a line per case and PASSED, or FAILED with exit status 1.
"""
import argparse
import os
import subprocess
import sys
import warnings

import torch

from ampc.runtime import Model
from ampc_testing import export_onnx, report_failures
from fused_vs_unfused import compare

warnings.filterwarnings("ignore")

# (head dim, heads, sequence, mask, dropout): sequences not multiples of
# 16. The fused op draws the unfused Dropout's masks (its seed, the step,
# each probability's index), so the two agree to rounding with dropout too.
CASES = [(32, 2, 7, "causal", 0.0), (64, 2, 13, "none", 0.0),
         (128, 1, 9, "additive", 0.0), (32, 2, 11, "causal", 0.25)]
BATCH = 2


class Attention(torch.nn.Module):
    def __init__(self, d, heads, seq, mask, dropout):
        super().__init__()
        self.heads, self.d, self.dropout = heads, d, dropout
        width = d * heads
        self.q = torch.nn.Linear(width, width)
        self.k = torch.nn.Linear(width, width)
        self.v = torch.nn.Linear(width, width)
        self.kind = mask
        if mask == "causal":
            m = torch.triu(torch.full((seq, seq), float("-inf")), 1)
        else:
            m = torch.randn(heads, seq, seq)
        self.register_buffer("mask", m)

    def forward(self, x):
        b, s, _ = x.shape
        split = lambda t: t.reshape(b, s, self.heads, self.d).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(-2, -1) / (self.d ** 0.5)
        if self.kind != "none":
            scores = scores + self.mask
        p = torch.softmax(scores, dim=-1)
        if self.dropout:
            p = torch.nn.functional.dropout(p, self.dropout, self.training)
        y = p @ v
        return y.transpose(1, 2).reshape(b, s, self.heads * self.d)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("workdir")
    parser.add_argument("--ampc", default="ampc")
    parser.add_argument("--runtime", default=None)
    args = parser.parse_args()
    failures = []
    for d, heads, seq, mask, dropout in CASES:
        torch.manual_seed(d)
        model = Attention(d, heads, seq, mask, dropout)
        x = torch.randn(BATCH, seq, d * heads)
        label = torch.randn(BATCH, seq, d * heads)
        name = "d%d_s%d_%s%s" % (d, seq, mask,
                                 "_dropout" if dropout else "")
        path = os.path.join(args.workdir, name + ".onnx")
        export_onnx(model, x, path, training=True)
        results = {}
        for fused in (False, True):
            lib = os.path.join(args.workdir, "%s.%d.so" % (name, fused))
            flags = ["--target=cpu", "--precision=fp32", "--optimizer=none",
                     "--loss=mse", "--freeze=mask",
                     "--fuse-attention=%s" % ("true" if fused else "false")]
            subprocess.run([args.ampc, path] + flags + ["-o", lib],
                           check=True)
            out = subprocess.run([args.ampc, "explain", path] + flags,
                                 check=True, capture_output=True,
                                 text=True).stdout
            if fused != ("attention" in out and ": fused" in out):
                failures.append(name + ": fused is %s in the report" % fused)
            with Model(lib, args.runtime) as m:
                results[fused] = m.gradients(
                    {"input": x.numpy(), "label": label.numpy()})
        (l0, g0), (l1, _) = results[False], results[True]
        worst, ok = compare(results[False], results[True])
        print("%s: loss %.6f vs %.6f, %d gradients, max relative difference "
              "%.2e: %s" % (name, float(l1), float(l0), len(g0), worst,
                            "ok" if ok else "FAILED"))
        if not ok:
            failures.append(name)
    return report_failures(failures)


if __name__ == "__main__":
    sys.exit(main())
