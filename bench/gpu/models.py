"""The models of the GPU benchmark (issue 8), shared by the pack builder
(bench/gpu/pack.py, here) and the benchmark (bench/gpu/bench.py, on the GPU
machine). Needs torch (and torchvision for resnet18).

- mlp: 784-512-512-10, ReLU, batch 128, cross-entropy;
- gpt: one GPT-style block, d_model 1024, 16 heads, sequence 512, batch 8,
  causal attention, GELU MLP 4x, pre-LayerNorm, residuals, MSE loss against
  a target of the block's shape;
- resnet18: torchvision's, batch 64, 3x64x64, 1000 classes, cross-entropy.
All train with AdamW (lr 1e-3, weight decay 0.01) at FP16 with dynamic loss
scaling.
"""
import math
import os

import torch

ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
MODELS = ["mlp", "gpt", "resnet18"]
LOSS = {"mlp": "cross_entropy", "gpt": "mse", "resnet18": "cross_entropy"}


class GptBlock(torch.nn.Module):
    """Separate q/k/v projections and fixed shapes, so that the export has
    no Split and no shape arithmetic."""

    def __init__(self, d=1024, heads=16, batch=8, seq=512):
        super().__init__()
        self.d, self.heads, self.batch, self.seq = d, heads, batch, seq
        self.ln1 = torch.nn.LayerNorm(d)
        self.q = torch.nn.Linear(d, d)
        self.k = torch.nn.Linear(d, d)
        self.v = torch.nn.Linear(d, d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, 4 * d)
        self.fc2 = torch.nn.Linear(4 * d, d)
        self.register_buffer(
            "mask", torch.triu(torch.full((seq, seq), float("-inf")), 1))

    def heads_of(self, t):
        return t.reshape(self.batch, self.seq, self.heads,
                         self.d // self.heads).transpose(1, 2)

    def forward(self, x):
        h = self.ln1(x)
        q, k, v = self.heads_of(self.q(h)), self.heads_of(self.k(h)), \
            self.heads_of(self.v(h))
        scores = q @ k.transpose(2, 3) * (1.0 / math.sqrt(self.d // self.heads))
        attention = torch.softmax(scores + self.mask, dim=-1)
        y = (attention @ v).transpose(1, 2).reshape(self.batch, self.seq, self.d)
        x = x + self.proj(y)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


def library(folder, name):
    """The CUDA training library of model `name` in a pack."""
    return os.path.join(folder, name + ".cuda.train.so")


def packed(folder, wanted=None):
    """`wanted`, or the models of MODELS whose library the pack holds."""
    return wanted or [n for n in MODELS if os.path.exists(library(folder, n))]


def module(name):
    if name == "mlp":
        return torch.nn.Sequential(
            torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
            torch.nn.ReLU(), torch.nn.Linear(512, 10))
    if name == "gpt":
        return GptBlock()
    import torchvision
    return torchvision.models.resnet18()


def example(name, generator=None):
    """One batch: (input, label) as torch CPU tensors."""
    g = generator or torch.Generator().manual_seed(0)
    if name == "mlp":
        return torch.randn(128, 784, generator=g), torch.randint(0, 10, (128,), generator=g)
    if name == "gpt":
        return (torch.randn(8, 512, 1024, generator=g),
                torch.randn(8, 512, 1024, generator=g))
    return (torch.randn(64, 3, 64, 64, generator=g),
            torch.randint(0, 1000, (64,), generator=g))


def step_flops(name, m):
    """Model FLOPs of one training step (3x the forward's multiply-adds x 2),
    counting the GEMMs and convolutions (attention's two batched GEMMs
    included, in full although half is masked)."""
    if name == "gpt":
        b, s, d = m.batch, m.seq, m.d
        forward = 2 * b * s * 12 * d * d + 4 * b * s * s * d
        return 3 * forward
    flops = [0]

    def hook(layer, inputs, output):
        if isinstance(layer, torch.nn.Linear):
            flops[0] += 2 * inputs[0].numel() // inputs[0].shape[-1] * \
                layer.in_features * layer.out_features
        elif isinstance(layer, torch.nn.Conv2d):
            k = layer.kernel_size[0] * layer.kernel_size[1]
            flops[0] += 2 * output.numel() * k * layer.in_channels // layer.groups

    handles = [l.register_forward_hook(hook) for l in m.modules()
               if isinstance(l, (torch.nn.Linear, torch.nn.Conv2d))]
    with torch.no_grad():
        x, _ = example(name)
        m(x.to(next(m.parameters()).device))
    for h in handles:
        h.remove()
    return 3 * flops[0]
