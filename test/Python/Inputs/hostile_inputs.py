"""Hostile input through the Python module (issue 35): a library rebuilt at
the path of one still loaded is the new one; arrays are checked before they
are copied; values that become inf in the tensor's dtype and integers that
do not fit their C type are refused with the position or field named.

    hostile_inputs.py WORK TARGET
Prints one line per check; an assertion stops it (exit status 1)."""
import os
import resource
import sys
import tempfile
import time

import numpy as np
import torch

import ampc
from ampc.runtime import AmpcError

work, target = sys.argv[1], sys.argv[2]
tempfile.tempdir = os.path.join(work, "tmp")
os.makedirs(tempfile.tempdir, exist_ok=True)
same = os.path.join(work, "same.so")


def net(hidden):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, 3))


x = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
first = ampc.compile(net(8), (x,), output=same, target=target,
                     precision="fp16")
# Another architecture, precision, optimizer and learning rate at the same
# path, with the first library still loaded.
second = ampc.compile(net(5), (x,), output=same, target=target,
                      precision="fp32", optimizer="sgd", lr=0.1)
assert second.info.precision == "fp32", second.info
assert second.training_info()[0] == "sgd", second.training_info()
assert abs(second.learning_rate - 0.1) < 1e-7, second.learning_rate
shapes = sorted(tuple(p.shape) for p in second.parameters)
assert (5, 6) in shapes and (8, 6) not in shapes, shapes
assert first.info.precision == "fp16" and first.training_info()[0] == "adamw"
labels = np.zeros((4,), np.int64)
loss_first = first.train_step(x.numpy(), labels)
loss_second = second.train_step(x.numpy(), labels)
assert np.isfinite(loss_first) and np.isfinite(loss_second)
print("same path: the rebuilt library is fp32 sgd lr=0.1 with a 5-wide "
      "hidden layer; the first (fp16 adamw, 8 wide) still trains")

# A broadcast view of 2^31 rows: refused by its shape before any copy (it
# was made contiguous first: a 32 GiB MemoryError).
huge = np.broadcast_to(np.zeros((1, 6), np.float32), (2 ** 31, 6))
resource.setrlimit(resource.RLIMIT_AS, (8 << 30, resource.RLIM_INFINITY))
start = time.monotonic()
try:
    second.infer(huge)
    raise AssertionError("a (2^31, 6) input was accepted")
except AmpcError as e:
    assert e.status == 4, e
    print("broadcast input:", e, "in %s" %
          ("under a second" if time.monotonic() - start < 1 else "too long"))
try:
    second.infer(np.zeros((4, 6), np.float64))
    raise AssertionError("a float64 input was accepted")
except AmpcError as e:
    print("float64 input:", e)

# 2.7e40 in a float32 parameter would be inf.
state = second.state_dict()
name = next(n for n in state if state[n].ndim == 2)
before = state[name].copy()
big = state[name].astype(np.float64)
big[1, 2] = 2.7e40
try:
    second.load_state_dict(dict(state, **{name: big}))
    raise AssertionError("2.7e40 was stored in a float32 tensor")
except AmpcError as e:
    print("load_state_dict:", e)
assert np.array_equal(second.get_parameter(name), before)

# Integers ctypes would truncate, and counters the runtime refuses.
for value in (2 ** 64 + 1, 2 ** 63 - 1):
    try:
        second.set_scaler_state(1.0, 0, value, 0)
        raise AssertionError("steps=%d accepted" % value)
    except AmpcError as e:
        print("set_scaler_state(steps=%d):" % value, e)
assert second.scaler_state()["steps"] == 1, second.scaler_state()
print("scaler state unchanged:", second.scaler_state())
