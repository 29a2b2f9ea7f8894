"""The Python module keeps the user's model and messages intact (issue 34):
compiler warnings as ampc.AmpcWarning, failures as ampc.CompileError naming
the user's module (never a temporary path), no temporary folders left
behind, the runtime's own message from gradients() on a library with an
optimizer; batch=N for a torch module, infer on a partial last batch,
train_step training one.

    messages_and_batches.py WORK TARGET
Prints one line per check; an assertion stops it (exit status 1)."""
import glob
import os
import sys
import tempfile
import warnings

import numpy as np
import torch

import ampc

work, target = sys.argv[1], sys.argv[2]
# A temporary folder of this script's own: tests running beside it compile
# in the shared one.
tempfile.tempdir = os.path.join(work, "tmp")
os.makedirs(tempfile.tempdir, exist_ok=True)
temporary = os.path.join(tempfile.tempdir, "ampc-python-*")


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(),
                               torch.nn.Linear(8, 3))


x = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
folders = set(glob.glob(temporary))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model = ampc.compile(mlp(), (x,), target=target, precision="fp32",
                         keep_fp32=["node:nosuchnode"])
messages = [str(w.message) for w in caught
            if issubclass(w.category, ampc.AmpcWarning)]
assert any("'node:nosuchnode' names no op or node" in m for m in messages), \
    messages
assert all("ampc-python" not in m for m in messages), messages
print("warning: %s" % [m for m in messages if "nosuchnode" in m][0])
assert set(glob.glob(temporary)) == folders, set(glob.glob(temporary)) - folders
print("temporary folders: none left behind")


class Determinant(torch.nn.Module):
    def forward(self, x):
        return torch.linalg.det(x.reshape(-1, 2, 2))


try:
    ampc.compile(Determinant(), (torch.randn(3, 4),), target=target)
    raise AssertionError("an unsupported op compiled")
except ampc.CompileError as e:
    error = e
message = str(error)
assert isinstance(error, ampc.AmpcError) and "ampc-python" not in message, \
    message
assert "docs/ops.md" in message and "ampc supports" not in message, message
print("CompileError: %s" % message)
assert set(glob.glob(temporary)) == folders

try:
    model.gradients([x.numpy(), np.zeros(4, np.int64)])
    raise AssertionError("gradients of a library with an optimizer")
except ampc.AmpcError as e:
    print("gradients: %s" % e)

# batch=N: the example's batch is 4, the library's 8.
model8 = ampc.compile(mlp(), (x,), target=target, precision="fp32",
                      optimizer="sgd", lr=0.1, batch=8)
assert model8.inputs[0].shape == (8, 6), model8.inputs[0].shape
full = np.random.default_rng(1).standard_normal((8, 6)).astype(np.float32)
(want,) = model8.infer(full)
(got,) = model8.infer(full[:5])
assert got.shape == (5, 3) and np.array_equal(got, want[:5]), got.shape
print("batch=8 from an example of 4 rows: inputs %s; infer on 5 rows gives "
      "%s, the full batch's first rows bit for bit" %
      (model8.inputs[0].shape, got.shape))
# A partial batch trains as the smaller batch (test/Python/
# partial-batches.test checks it against torch).
loss = model8.train_step(full[:5], np.zeros(5, np.int64))
assert np.isfinite(loss), loss
print("partial train_step: trained on 5 of 8 rows")
