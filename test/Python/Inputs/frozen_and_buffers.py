"""Train exactly what PyTorch trains (issue 34): frozen parameters and
registered buffers stay fixed.

fine-tune: a CNN whose backbone has requires_grad=False and a new head, 50
AdamW steps through ampc.compile against torch's AdamW: the head within
1e-6, every frozen tensor bit-identical to its start, and the backbone's
convolution backward (weight and data gradients) absent from the compiled
step, counted in the step's IR with and without the freeze.

buffers: a small attention model with a sinusoidal position-encoding
buffer added to its input and a causal-mask buffer added to its scores,
50 AdamW steps against torch: parameters within 1e-6, both buffers
unchanged, neither with optimizer state.

    frozen_and_buffers.py WORK TARGET
Prints one line per check; an assertion stops it (exit status 1)."""
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import torch

import ampc

work, target = sys.argv[1], sys.argv[2]
STEPS = 50
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)


def max_difference(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) -
                               np.asarray(b, np.float64))))


def torch_train(net, batches):
    optimizer = torch.optim.AdamW(
        [p for p in net.parameters() if p.requires_grad], **ADAMW)
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    return losses


def ampc_train(net, batches, name):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = ampc.compile(net, (batches[0][0],),
                             os.path.join(work, name + ".so"), target=target,
                             precision="fp32", optimizer="adamw",
                             lr=ADAMW["lr"], weight_decay=ADAMW["weight_decay"],
                             loss="cross_entropy")
    notes = [str(w.message) for w in caught
             if issubclass(w.category, ampc.AmpcWarning)]
    losses = [float(model.train_step(x.numpy(), y.numpy()))
              for x, y in batches]
    return model, losses, notes


def step_ops(net, example, flags):
    """How many convolution backward ops the training step of `net`'s
    export has, with ampc's `flags` (the IR after autodiff)."""
    onnx = os.path.join(work, "ops.onnx")
    ampc.export(net, (example,), onnx)
    ir = subprocess.run([ampc.find_compiler(), onnx, "--emit=mlir",
                         "--emit-after=ampc-autodiff", "--precision=fp32"] +
                        flags, capture_output=True, text=True, check=True)
    step = ir.stdout[ir.stdout.index("func.func @train_step"):]
    return (step.count("ampc.conv_backward_weight"),
            step.count("ampc.conv_backward_data"))


# --- fine-tune: a frozen backbone, a new head ------------------------------
class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = torch.nn.Sequential(
            torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU())
        self.head = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.head(self.backbone(x).flatten(1))


def fine_tune_net():
    torch.manual_seed(0)
    net = Classifier()
    for p in net.backbone.parameters():
        p.requires_grad_(False)
    return net


g = torch.Generator().manual_seed(1)
batches = [(torch.randn(16, 1, 8, 8, generator=g),
            torch.randint(0, 10, (16,), generator=g)) for _ in range(STEPS)]
reference = fine_tune_net()
torch_losses = torch_train(reference, batches)
net = fine_tune_net()
start = {k: v.clone() for k, v in net.state_dict().items()}
model, losses, _ = ampc_train(net, batches, "fine_tune")
trained = model.state_dict()
assert {k: v for k, v in net.state_dict().items()}.keys() == start.keys()
for k, v in net.state_dict().items():  # compile left the module alone
    assert torch.equal(v, start[k]), k
frozen = [k for k in start if k.startswith("backbone.")]
for k in frozen:
    assert np.array_equal(trained[k], start[k].numpy()), k
head = max(max_difference(trained[k], reference.state_dict()[k].numpy())
           for k in ("head.weight", "head.bias"))
assert head <= 1e-6, head
loss = max_difference(losses, torch_losses)
assert loss <= 1e-5, loss
print("fine-tune: %d frozen tensors bit-identical after %d AdamW steps, "
      "head within %.1e of torch's, losses within %.1e" %
      (len(frozen), STEPS, head, loss))
x0 = batches[0][0]
full = step_ops(fine_tune_net(), x0, [])
frozen_ops = step_ops(fine_tune_net(), x0, ["--freeze=backbone.*"])
assert full == (2, 1) and frozen_ops == (0, 0), (full, frozen_ops)
print("fine-tune: convolution backward ops (weight, data) in the step: "
      "%s trained, %s frozen" % (full, frozen_ops))


# --- buffers: a position encoding and a causal mask ------------------------
class Attention(torch.nn.Module):
    def __init__(self, seq=6, d=8, classes=3):
        super().__init__()
        self.embed = torch.nn.Linear(4, d)
        self.q = torch.nn.Linear(d, d)
        # No key bias: softmax cancels it (its gradient is rounding noise
        # that AdamW's normalisation turns into lr-sized steps, different in
        # any two implementations).
        self.k = torch.nn.Linear(d, d, bias=False)
        self.v = torch.nn.Linear(d, d)
        self.out = torch.nn.Linear(d, classes)
        position = torch.arange(seq, dtype=torch.float32)[:, None]
        rate = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) *
                         (-math.log(10000.0) / d))
        pe = torch.zeros(seq, d)
        pe[:, 0::2] = torch.sin(position * rate)
        pe[:, 1::2] = torch.cos(position * rate)
        self.register_buffer("pe", pe)
        self.register_buffer(
            "mask", torch.triu(torch.full((seq, seq), float("-inf")), 1))
        self.scale = 1.0 / math.sqrt(d)

    def forward(self, x):
        h = self.embed(x) + self.pe
        scores = self.q(h) @ self.k(h).transpose(1, 2) * self.scale
        attention = torch.softmax(scores + self.mask, dim=-1)
        return self.out((attention @ self.v(h)).mean(1))


def attention_net():
    torch.manual_seed(0)
    return Attention()


g = torch.Generator().manual_seed(2)
batches = [(torch.randn(5, 6, 4, generator=g),
            torch.randint(0, 3, (5,), generator=g)) for _ in range(STEPS)]
reference = attention_net()
torch_losses = torch_train(reference, batches)
net = attention_net()
model, losses, _ = ampc_train(net, batches, "buffers")
trained = model.state_dict()
for name in ("pe", "mask"):
    assert np.array_equal(trained[name], getattr(net, name).numpy()), name
worst = max(max_difference(trained[k], v.detach().numpy())
            for k, v in reference.named_parameters())
assert worst <= 1e-6, worst
loss = max_difference(losses, torch_losses)
assert loss <= 1e-5, loss
print("buffers: pe and mask unchanged after %d AdamW steps, parameters "
      "within %.1e of torch's, losses within %.1e" % (STEPS, worst, loss))
onnx = ampc.export(attention_net(), (batches[0][0],),
                   os.path.join(work, "attention.onnx"))
flags = ["--freeze=" + ",".join(ampc.frozen_names(attention_net()))]
ir = subprocess.run([ampc.find_compiler(), onnx, "--emit=mlir",
                     "--precision=fp32", "--summary", "-o",
                     os.path.join(work, "summary.mlir")] + flags,
                    capture_output=True, text=True, check=True)
summary = ir.stderr.strip().splitlines()[-1]
print("buffers: " + summary[summary.index("parameters"):])
ir = subprocess.run([ampc.find_compiler(), onnx, "--emit=mlir",
                     "--precision=fp32"] + flags, capture_output=True,
                    text=True, check=True).stdout
states = sorted(set(l.split("@")[1].split()[0].strip('"')
                    for l in ir.splitlines() if "ampc.state @" in l))
assert states and not any(s.startswith(("pe.", "mask.", '"pe', '"mask'))
                          for s in states), states
print("buffers: optimizer state for %d tensors, none for pe or mask" %
      sum(s.endswith(".exp_avg") for s in states))

# BatchNorm's running statistics start as the module has them: the
# export's forward pass in training mode moves the statistics it writes to
# the file, and ampc.export puts the module's values back in the file.
norm = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
with torch.no_grad():
    norm[1].running_mean.fill_(0.5)
    norm[1].running_var.fill_(2.0)
example = torch.randn(8, 4, generator=torch.Generator().manual_seed(5))
import onnx as onnx_module  # noqa: E402
from onnx import numpy_helper  # noqa: E402
exported = ampc.export(norm, (example,), os.path.join(work, "norm.onnx"))
initial = {i.name: numpy_helper.to_array(i)
           for i in onnx_module.load(exported).graph.initializer}
compiled = ampc.compile(norm, (example,), os.path.join(work, "norm.so"),
                        target=target, precision="fp32", loss="mse")
state = compiled.state_dict()
for name in ("1.running_mean", "1.running_var"):
    want = norm.state_dict()[name].numpy()
    assert np.array_equal(initial[name], want), (name, initial[name], want)
    assert np.array_equal(state[name], want), (name, state[name], want)
print("BatchNorm: the exported file and the library start from the "
      "module's running statistics (mean 0.5, variance 2)")
