"""Quantization-aware training as torch exports it: a QuantizeLinear whose
result its DequantizeLinear (same scale and zero point) takes back is fake
quantization, and the gradient passes straight through to the float input
where it was in the 8-bit range (torch.fake_quantize_per_tensor_affine's
backward). A weight (int8, zero point 0) and an activation (uint8, zero
point 128, some values saturating) are fake-quantized; ampc's loss and
weight gradient (--optimizer=none, fp32, MSE) are compared with torch's on
the same batch, and the scales must be frozen (no gradient, unchanged by
training steps).

usage: fake_quant.py WORKDIR TARGET
Prints one line per check; an assertion stops it (exit status 1)."""
import os
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto as T, helper, numpy_helper

import ampc

work, target = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(5)
x = (rng.standard_normal((8, 6)) * 6).astype(np.float32)
w = (rng.standard_normal((6, 4)) * 0.8).astype(np.float32)
label = rng.standard_normal((8, 4)).astype(np.float32)
s_w, s_a = np.float32(0.05), np.float32(0.1)

inits = [numpy_helper.from_array(w, "w"),
         numpy_helper.from_array(np.array(s_w), "s_w"),
         numpy_helper.from_array(np.array(0, np.int8), "z_w"),
         numpy_helper.from_array(np.array(s_a), "s_a"),
         numpy_helper.from_array(np.array(128, np.uint8), "z_a")]
nodes = [helper.make_node("QuantizeLinear", ["w", "s_w", "z_w"], ["wq"]),
         helper.make_node("DequantizeLinear", ["wq", "s_w", "z_w"], ["wd"]),
         helper.make_node("MatMul", ["x", "wd"], ["h"]),
         helper.make_node("QuantizeLinear", ["h", "s_a", "z_a"], ["hq"]),
         helper.make_node("DequantizeLinear", ["hq", "s_a", "z_a"], ["y"])]
graph = helper.make_graph(
    nodes, "fake_quant", [helper.make_tensor_value_info("x", T.FLOAT, [8, 6])],
    [helper.make_tensor_value_info("y", T.FLOAT, [8, 4])], inits)
path = os.path.join(work, "fake_quant.onnx")
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)

# torch: the same network with torch's fake quantization.
wt = torch.from_numpy(w.copy()).requires_grad_()
h = torch.from_numpy(x) @ torch.fake_quantize_per_tensor_affine(wt, float(s_w), 0, -128, 127)
y = torch.fake_quantize_per_tensor_affine(h, float(s_a), 128, 0, 255)
loss = torch.nn.functional.mse_loss(y, torch.from_numpy(label))
loss.backward()
saturated = int(((h / float(s_a)).round() + 128 > 255).sum() + ((h / float(s_a)).round() + 128 < 0).sum())
assert saturated > 0, "no activation saturates: the mask is not exercised"

model = ampc.compile(path, output=os.path.join(work, "fq-%s.so" % target),
                     target=target, loss="mse", optimizer="none",
                     precision="fp32")
names = [model.parameters[p].name for p in model.gradient_parameters]
assert names == ["w"], names
print("trainable: %s (the scales are frozen)" % names)
got_loss, grads = model.gradients([x, label])
rel_loss = abs(float(got_loss) - float(loss)) / abs(float(loss))
g, want = grads["w"], wt.grad.numpy()
assert np.abs(want).max() > 0
rel = float(np.abs(g - want).max() / np.abs(want).max())
assert rel_loss < 1e-6 and rel < 1e-5, (rel_loss, rel, g, want)
print("loss and weight gradient match torch's fake quantization "
      "(%d activations saturate): loss %.1e, gradient %.1e relative"
      % (saturated, rel_loss, rel))

trained = ampc.compile(path, output=os.path.join(work, "fq-train-%s.so" % target),
                       target=target, loss="mse", precision="fp32", lr=0.01)
before = {n: trained.get_parameter(n).copy() for n in ("s_w", "s_a", "w")}
for _ in range(3):
    trained.train_step(x, label)
assert all(np.array_equal(trained.get_parameter(n), before[n]) for n in ("s_w", "s_a"))
assert not np.array_equal(trained.get_parameter("w"), before["w"])
print("3 training steps: w changed, s_w and s_a unchanged")

# The same through torch.onnx.export of a module that fake-quantizes its
# weight per channel and its output per tensor (torch writes each scale
# once, a Constant that its QuantizeLinear and DequantizeLinear share).


class FakeQuantLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 4)

    def forward(self, v):
        # Per output channel (axis 0, int8), as torch's default QAT config
        # quantizes weights.
        wq = torch.fake_quantize_per_channel_affine(
            self.fc.weight, torch.tensor([0.05, 0.02, 0.1, 0.04]),
            torch.zeros(4, dtype=torch.int32), 0, -128, 127)
        h = torch.nn.functional.linear(v, wq, self.fc.bias)
        return torch.fake_quantize_per_tensor_affine(h, float(s_a), 128, 0, 255)


torch.manual_seed(0)
module = FakeQuantLinear()
exported = ampc.compile(module, (torch.from_numpy(x),),
                        output=os.path.join(work, "fq-torch-%s.so" % target),
                        target=target, loss="mse", optimizer="none",
                        precision="fp32")
module.zero_grad()
torch_loss = torch.nn.functional.mse_loss(module(torch.from_numpy(x)),
                                          torch.from_numpy(label))
torch_loss.backward()
got_loss, grads = exported.gradients([x, label])
worst = 0.0
for name, p in module.named_parameters():
    want = p.grad.numpy()
    assert np.abs(want).max() > 0, name
    worst = max(worst, float(np.abs(grads[name] - want).max() / np.abs(want).max()))
assert abs(float(got_loss) - float(torch_loss)) <= 1e-6 * abs(float(torch_loss)) and worst < 1e-5, (got_loss, torch_loss, worst)
print("torch.onnx.export of fake_quantize_per_channel_affine and "
      "fake_quantize_per_tensor_affine: gradients of %s "
      "match torch's (%.1e relative)" % (sorted(grads), worst))
