"""The Python module's API on the linear regressor (test/Driver/Inputs):
compile from a file and from a torch module, train_step on numpy arrays and
torch tensors, infer without labels, state_dict round trips with torch,
checkpoints, and errors as exceptions with the messages. Prints one line
per check; an assertion stops it (exit status 1)."""
import os
import sys

import numpy as np
import torch

import ampc

work, regressor = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(0)
x = rng.standard_normal((4, 3)).astype(np.float32)
y = (x @ np.array([1, -2, 0.5], np.float32)).astype(np.float32)

model = ampc.compile(regressor, output=os.path.join(work, "reg.so"),
                     target="cpu", loss="mse", lr=0.05, precision="fp32")
first = float(model.train_step(x, y))
second = float(model.train_step(torch.from_numpy(x), torch.from_numpy(y)))
assert second < first, (first, second)
print("train_step: numpy and torch tensors, loss %.4f then %.4f" % (first, second))

(pred,) = model.infer(x)
w, b = model.get_parameter("w"), model.get_parameter("b")
assert pred.shape == (4,) and np.allclose(pred, x @ w + b, rtol=1e-2, atol=1e-2)
print("infer without labels: %s, the model's output only" % (pred.shape,))

state = model.state_dict()
assert sorted(state) == ["b", "w"], sorted(state)
model.load_state_dict({"w": torch.zeros(3), "b": torch.ones(1)})
assert np.array_equal(model.get_parameter("w"), np.zeros(3, np.float32))
try:
    model.load_state_dict({"w": torch.zeros(3)})
    raise AssertionError("a missing key was accepted")
except RuntimeError as e:
    print("load_state_dict: %s" % str(e).replace("\n\t", " | "))
model.load_state_dict(state)
assert np.array_equal(model.get_parameter("w"), state["w"])
print("state_dict round trip")

model.save_checkpoint(os.path.join(work, "reg.ckpt"))
model.train_step(x, y)
model.load_checkpoint(os.path.join(work, "reg.ckpt"))
assert np.array_equal(model.get_parameter("w"), state["w"])
print("checkpoint: scale %g, steps %d" % (model.scaler_state()["scale"],
                                          model.scaler_state()["steps"]))

try:
    model.train_step(x)
    raise AssertionError("a missing label was accepted")
except ampc.AmpcError as e:
    print("AmpcError: %s" % e)

try:
    ampc.compile(os.path.join(work, "missing.onnx"), target="cpu")
    raise AssertionError("a missing model compiled")
except ampc.CompileError as e:
    print("CompileError: %s" % e)

# A torch module: its state_dict names come back.
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(),
                          torch.nn.Linear(4, 2))
trained = ampc.compile(net, (torch.from_numpy(x),), os.path.join(work, "net.so"),
                       target="cpu", precision="fp32", optimizer="sgd", lr=0.1)
labels = np.array([0, 1, 1, 0], np.int64)
for _ in range(3):
    trained.train_step(x, labels)
net.load_state_dict({k: torch.from_numpy(v)
                     for k, v in trained.state_dict().items()})
(logits,) = trained.infer(x)
with torch.no_grad():
    assert np.allclose(net(torch.from_numpy(x)).numpy(), logits, atol=1e-5)
print("torch module: %s trained, loaded back into torch, same outputs" %
      ", ".join(sorted(net.state_dict())))
