"""The models, data and settings of the GPU test (test/gpu), shared by the
pack builder (pack.py, on the machine with ampc) and the check (check.py,
on the GPU machine). Needs torch and numpy only, and ampc_testing (the pack
copies it).

- mlp: Linear(20, 64), ReLU, Linear(64, 10), batches of 32, cross-entropy;
- cnn: Conv(3, 8, 3) BatchNorm ReLU MaxPool Conv(8, 16, 3) ReLU
  GlobalAveragePool Linear(16, 10), batches of 8x3x16x16, cross-entropy;
- transformer: one TransformerEncoderLayer (d_model 32, 4 heads, feed-forward
  64, dropout 0, batch_first) on 2x8x32, MSE against the sequence shifted by
  one and halved.
All train with AdamW (lr 2e-3, weight decay 0.01) at FP16 with dynamic loss
scaling (GradScaler's defaults).
"""
import torch

from ampc_testing import small_encoder, small_mlp

STEPS = 20
SEED = 1
ADAMW = dict(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = torch.relu(self.conv2(x))
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))


def module(name):
    if name == "mlp":
        return small_mlp()
    if name == "cnn":
        return Cnn()
    return small_encoder()


LOSS = {"mlp": "cross_entropy", "cnn": "cross_entropy", "transformer": "mse"}
MODELS = ["mlp", "cnn", "transformer"]


def batches(name, count, seed=SEED):
    g = torch.Generator().manual_seed(seed)
    shape = {"mlp": (32, 20), "cnn": (8, 3, 16, 16),
             "transformer": (2, 8, 32)}[name]
    teacher = torch.randn(shape[1] if name == "mlp" else 3, 10, generator=g)
    out = []
    for _ in range(count):
        x = torch.randn(*shape, generator=g)
        if name == "transformer":
            out.append((x, 0.5 * torch.roll(x, 1, dims=1)))
        elif name == "mlp":
            out.append((x, (x @ teacher).argmax(dim=1)))
        else:
            out.append((x, (x.mean(dim=(2, 3)) @ teacher).argmax(dim=1)))
    return out
