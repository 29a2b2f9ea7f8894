"""The models of the GPU benchmark (issue 8), shared by the pack builder
(bench/gpu/pack.py, here) and the benchmark (bench/gpu/bench.py, on the GPU
machine). Needs torch (and torchvision for resnet18).

- mlp: 784-512-512-10, ReLU, batch 128, cross-entropy;
- gpt: one GPT-style block, d_model 1024, 16 heads, sequence 512, batch 8,
  causal attention, GELU MLP 4x, pre-LayerNorm, residuals, MSE loss against
  a target of the block's shape;
- resnet18: torchvision's, batch 64, 3x64x64, 1000 classes, cross-entropy;
- resnet18_224, resnet50, mobilenet_v3_large: torchvision's at batch 64,
  3x224x224, 1000 classes, cross-entropy (issue 39, item 5); resnet50 is
  98 MB of FP32 weights: pack it with --zero-weights.
- gpt2s: GPT-2 small's shape (issue 37, item 10): 12 of those blocks at
  d_model 768, 12 heads, sequence 1024, batch 8, one causal mask buffer
  for all of them, MSE against a target of the stack's shape (no
  embedding or vocabulary head: the blocks are where the step's time goes).
  Its 85 M parameters make a 340 MB library: pack.py --zero-weights packs
  it with zero weights (the pack then compresses to a few MB) and bench.py
  loads PyTorch's initial weights into it before timing.
All train with AdamW (lr 1e-3, weight decay 0.01) at FP16 with dynamic loss
scaling.
"""
import math
import os

import torch

ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
CNNS = ["resnet18", "resnet18_224", "resnet50", "mobilenet_v3_large"]
MODELS = ["mlp", "gpt", "gpt2s"] + CNNS
LOSS = dict({"mlp": "cross_entropy", "gpt": "mse", "gpt2s": "mse"},
            **{name: "cross_entropy" for name in CNNS})
# The CNNs' input side (batch 64 each).
IMAGE = {"resnet18": 64, "resnet18_224": 224, "resnet50": 224,
         "mobilenet_v3_large": 224}
GPT2_SMALL = dict(layers=12, d=768, heads=12, batch=8, seq=1024)


class GptBlock(torch.nn.Module):
    """Separate q/k/v projections and fixed shapes, so that the export has
    no Split and no shape arithmetic."""

    def __init__(self, d=1024, heads=16, batch=8, seq=512, own_mask=True):
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
        if own_mask:
            self.register_buffer("mask", causal_mask(seq))

    def heads_of(self, t):
        return t.reshape(self.batch, self.seq, self.heads,
                         self.d // self.heads).transpose(1, 2)

    def forward(self, x, mask=None):
        mask = self.mask if mask is None else mask
        h = self.ln1(x)
        q, k, v = self.heads_of(self.q(h)), self.heads_of(self.k(h)), \
            self.heads_of(self.v(h))
        scores = q @ k.transpose(2, 3) * (1.0 / math.sqrt(self.d // self.heads))
        attention = torch.softmax(scores + mask, dim=-1)
        y = (attention @ v).transpose(1, 2).reshape(self.batch, self.seq, self.d)
        x = x + self.proj(y)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


def causal_mask(seq):
    return torch.triu(torch.full((seq, seq), float("-inf")), 1)


class GptStack(torch.nn.Module):
    """`layers` GptBlocks reading one causal mask buffer."""

    def __init__(self, layers, d, heads, batch, seq):
        super().__init__()
        self.d, self.heads, self.batch, self.seq = d, heads, batch, seq
        self.layers = layers
        self.register_buffer("mask", causal_mask(seq))
        self.blocks = torch.nn.ModuleList(
            GptBlock(d, heads, batch, seq, own_mask=False)
            for _ in range(layers))

    def forward(self, x):
        for block in self.blocks:
            x = block(x, self.mask)
        return x


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
    if name == "gpt2s":
        return GptStack(**GPT2_SMALL)
    import torchvision
    return getattr(torchvision.models, name.replace("_224", ""))()


def example(name, generator=None):
    """One batch: (input, label) as torch CPU tensors."""
    g = generator or torch.Generator().manual_seed(0)
    if name == "mlp":
        return torch.randn(128, 784, generator=g), torch.randint(0, 10, (128,), generator=g)
    if name in ("gpt", "gpt2s"):
        shape = ((8, 512, 1024) if name == "gpt" else
                 (GPT2_SMALL["batch"], GPT2_SMALL["seq"], GPT2_SMALL["d"]))
        return (torch.randn(*shape, generator=g),
                torch.randn(*shape, generator=g))
    side = IMAGE[name]
    return (torch.randn(64, 3, side, side, generator=g),
            torch.randint(0, 1000, (64,), generator=g))


def step_flops(name, m):
    """Model FLOPs of one training step (3x the forward's multiply-adds x 2),
    counting the GEMMs and convolutions (attention's two batched GEMMs
    included, in full although half is masked)."""
    if name in ("gpt", "gpt2s"):
        b, s, d = m.batch, m.seq, m.d
        forward = 2 * b * s * 12 * d * d + 4 * b * s * s * d
        return 3 * forward * getattr(m, "layers", 1)
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
