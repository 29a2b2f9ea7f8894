"""20 training steps of a library compiled from masked.onnxtext with
--lr=1e-3 --weight-decay=0.05, b* without weight decay and w2 at lr 3e-3
(test/Driver/param-groups.test), against torch's AdamW with those three
groups on the same weights (read out of the library) and batches."""
import sys

import numpy as np
import torch

from ampc_ctypes import Model

model = Model(sys.argv[1])
start = {p.name: torch.tensor(model.get_parameter(p.name))
         for p in model.parameters}
w = {k: v.clone().requires_grad_(k != "keep") for k, v in start.items()}
optimizer = torch.optim.AdamW(
    [{"params": [w["w1"]]},
     {"params": [w["b1"], w["b2"]], "weight_decay": 0.0},
     {"params": [w["w2"]], "lr": 3e-3}], lr=1e-3, weight_decay=0.05)
rng = np.random.default_rng(0)
for _ in range(20):
    x = rng.standard_normal((2, 4)).astype(np.float32)
    y = np.array([0, 2], np.int64)
    model.train_step(x, y)
    h = torch.relu(torch.from_numpy(x) @ w["w1"] + w["b1"])
    h = torch.where(w["keep"] > 0.5, h, torch.zeros(()))
    loss = torch.nn.functional.cross_entropy(h @ w["w2"].T + w["b2"],
                                             torch.from_numpy(y))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
worst = max(float(np.max(np.abs(model.get_parameter(k) -
                                w[k].detach().numpy()))) for k in w)
assert worst <= 1e-6, worst
print("20 steps: every parameter within %.1e of torch's three-group AdamW" %
      worst)
