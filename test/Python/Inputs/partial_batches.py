"""train_step on a partial last batch (issue 34, item 6): a torch model with
Linear, LayerNorm and an attention-like block (no BatchNorm) compiled for
batches of 8 and trained on batches of 8, 8 and 5 rows with AdamW matches
torch trained on the same batches, every parameter within 1e-6 at FP32; a
BatchNorm model's partial batch is refused with a message that names
drop_last and the BatchNormalization node.

    partial_batches.py WORK TARGET
Prints one line per check; an assertion stops it (exit status 1)."""
import os
import sys
import tempfile

import numpy as np
import torch

import ampc

work, target = sys.argv[1], sys.argv[2]
tempfile.tempdir = os.path.join(work, "tmp")
os.makedirs(tempfile.tempdir, exist_ok=True)
B, T, D, CLASSES = 8, 4, 6, 3
LR, DECAY = 1e-2, 0.05


class Attentive(torch.nn.Module):
    """(N, T, D) -> (N, CLASSES): a Linear, a LayerNorm, one head of
    self-attention over T, the mean over T and a classifier."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(D, D)
        self.norm = torch.nn.LayerNorm(D)
        # No bias: the key's bias has a zero gradient (softmax does not see
        # it), whose rounding noise AdamW would scale up to lr-sized steps.
        self.qkv = torch.nn.Linear(D, 3 * D, bias=False)
        self.head = torch.nn.Linear(D, CLASSES)

    def forward(self, x):
        h = self.norm(torch.relu(self.embed(x)))
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        a = torch.softmax(q @ k.transpose(1, 2) / D ** 0.5, dim=-1)
        return self.head((h + a @ v).mean(dim=1))


torch.manual_seed(0)
net = Attentive()
rng = np.random.default_rng(0)
xs = rng.standard_normal((21, T, D)).astype(np.float32)
ys = rng.integers(0, CLASSES, 21).astype(np.int64)
batches = [(xs[s:s + B], ys[s:s + B]) for s in range(0, 21, B)]
assert [len(b[0]) for b in batches] == [8, 8, 5]

model = ampc.compile(net, (torch.from_numpy(xs[:B]),), target=target,
                     precision="fp32", optimizer="adamw", lr=LR,
                     weight_decay=DECAY, loss="cross_entropy")
assert model.inputs[0].shape == (B, T, D), model.inputs[0].shape

optimizer = torch.optim.AdamW(net.parameters(), lr=LR, weight_decay=DECAY)
losses = []
for x, y in batches:
    loss = model.train_step(x, y)
    optimizer.zero_grad()
    reference = torch.nn.functional.cross_entropy(net(torch.from_numpy(x)),
                                                  torch.from_numpy(y))
    reference.backward()
    optimizer.step()
    losses.append(abs(float(loss) - reference.item()))
worst = max(float(np.max(np.abs(model.get_parameter(n) -
                                p.detach().numpy())))
            for n, p in net.named_parameters())
assert worst <= 1e-6, worst
assert max(losses) <= 1e-6, losses
print("batches of 8, 8, 5 rows, AdamW: every parameter within %.1e of "
      "torch's (limit 1e-6), losses within %.1e" % (worst, max(losses)))

# The partial batch is not the full batch's first rows trained as a whole
# batch: the same step padded to 8 rows (the padding counted) moves the
# parameters elsewhere.
padded = ampc.compile(net, (torch.from_numpy(xs[:B]),), target=target,
                      precision="fp32", optimizer="sgd", lr=1.0,
                      loss="cross_entropy")
x, y = batches[2]
start = {p.name: padded.get_parameter(p.name) for p in padded.parameters}
padded.train_step(x, y)
moved = padded.get_parameter("head.bias") - start["head.bias"]
for p in padded.parameters:
    padded.set_parameter(p.name, start[p.name])
padded.train_step(np.concatenate([x, np.repeat(x[:1], 3, axis=0)]),
                  np.concatenate([y, np.repeat(y[:1], 3)]))
counted = padded.get_parameter("head.bias") - start["head.bias"]
assert np.max(np.abs(moved - counted)) > 1e-3, (moved, counted)
print("the padding counts in no gradient: head.bias moves %.4f apart from "
      "a step that counts it" % float(np.max(np.abs(moved - counted))))

# BatchNorm's statistics over the batch would include the padding: refused.
torch.manual_seed(0)
bn = torch.nn.Sequential(torch.nn.Linear(D, 8), torch.nn.BatchNorm1d(8),
                         torch.nn.Linear(8, CLASSES))
bn_model = ampc.compile(bn, (torch.randn(B, D),), target=target,
                        precision="fp32", optimizer="sgd", lr=0.1)
try:
    bn_model.train_step(xs[:5, 0], ys[:5])
    raise AssertionError("a BatchNorm model trained a partial batch")
except ampc.AmpcError as e:
    message = str(e)
assert "drop_last" in message and "BatchNormalization" in message, message
print("BatchNorm: %s" % message)
