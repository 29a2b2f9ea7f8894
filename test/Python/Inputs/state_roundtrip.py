"""The whole module state round-trips between torch and ampc (issue 34): a
Conv1d + BatchNorm1d audio classifier through ampc.compile.

- compile leaves the module as it was (state_dict byte for byte, training
  flags), and the library starts from that state: BatchNorm statistics as
  the module has them (not as the export's forward pass left them) and the
  batch counters;
- state_dict() has exactly torch's keys and dtypes, num_batches_tracked
  included; after 10 SGD steps the statistics and counters match torch's
  training (1e-6 / exactly) and the parameters within 1e-6;
- torch -> ampc -> torch: a state loaded into the library comes back bit for
  bit, so the torch module's eval outputs are bit-identical; ampc's own
  eval outputs match torch's within 1e-5;
- strict load_state_dict: missing and unexpected keys raise torch's
  message; strict=False returns the keys as torch does.

    state_roundtrip.py WORK TARGET
Prints one line per check; an assertion stops it (exit status 1)."""
import os
import sys

import numpy as np
import torch

import ampc

work, target = sys.argv[1], sys.argv[2]


class Audio(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv1d(2, 6, 5, padding=2), torch.nn.BatchNorm1d(6),
            torch.nn.ReLU(), torch.nn.Conv1d(6, 6, 3, padding=1),
            torch.nn.BatchNorm1d(6), torch.nn.ReLU())
        self.classifier = torch.nn.Linear(6, 4)

    def forward(self, x):
        return self.classifier(self.features(x).mean(2))


def audio():
    torch.manual_seed(0)
    net = Audio()
    # A module that has trained before: statistics and counters not at
    # their initial values.
    with torch.no_grad():
        for _ in range(3):
            net(torch.randn(8, 2, 16) * 2 + 1)
    return net


g = torch.Generator().manual_seed(3)
batches = [(torch.randn(8, 2, 16, generator=g),
            torch.randint(0, 4, (8,), generator=g)) for _ in range(10)]
net = audio()
before = {k: v.clone() for k, v in net.state_dict().items()}
flags = {k: m.training for k, m in net.named_modules()}
model = ampc.compile(net, (batches[0][0],), os.path.join(work, "audio.so"),
                     target=target, precision="fp32", optimizer="sgd",
                     lr=0.05, loss="cross_entropy")
after = net.state_dict()
assert list(after) == list(before)
for k in before:
    assert after[k].dtype == before[k].dtype and torch.equal(after[k],
                                                             before[k]), k
assert flags == {k: m.training for k, m in net.named_modules()}
print("compile: the module's state_dict is unchanged (%d entries), training "
      "flags too" % len(before))

state = model.state_dict()
assert sorted(state) == sorted(before), (sorted(state), sorted(before))
for k, v in before.items():
    assert state[k].dtype == v.numpy().dtype, (k, state[k].dtype, v.dtype)
    assert np.array_equal(state[k], v.numpy()), k
print("state_dict: torch's %d keys and dtypes, the library starting from "
      "the module's state (num_batches_tracked %d)" %
      (len(state), int(state["features.1.num_batches_tracked"])))

reference = audio()
optimizer = torch.optim.SGD(reference.parameters(), lr=0.05)
for x, y in batches:
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(reference(x), y).backward()
    optimizer.step()
    model.train_step(x.numpy(), y.numpy())
trained, expected = model.state_dict(), reference.state_dict()
worst = {"parameters": 0.0, "statistics": 0.0}
for k, v in expected.items():
    if k.endswith("num_batches_tracked"):
        assert int(trained[k]) == int(v), (k, trained[k], v)
        continue
    kind = "statistics" if "running" in k else "parameters"
    worst[kind] = max(worst[kind], float(np.max(np.abs(
        trained[k].astype(np.float64) - v.numpy()))))
assert worst["parameters"] <= 1e-6 and worst["statistics"] <= 1e-6, worst
print("10 SGD steps: parameters within %.1e of torch's, running statistics "
      "within %.1e, num_batches_tracked %d as torch's" %
      (worst["parameters"], worst["statistics"],
       int(trained["features.1.num_batches_tracked"])))

# torch -> ampc -> torch.
source = audio()
for _ in range(2):  # other statistics than the library has
    with torch.no_grad():
        source(torch.randn(8, 2, 16))
model.load_state_dict(source.state_dict())
back = audio()
back.load_state_dict({k: torch.from_numpy(v)
                      for k, v in model.state_dict().items()}, strict=True)
for k, v in source.state_dict().items():
    assert torch.equal(back.state_dict()[k], v), k
x = batches[0][0]
with torch.no_grad():
    want = source.eval()(x)
    got = back.eval()(x)
assert torch.equal(want, got)
(logits,) = model.infer(x.numpy())
infer = float(np.max(np.abs(logits - want.numpy())))
assert infer <= 1e-5, infer
print("torch -> ampc -> torch: every entry bit for bit, eval outputs "
      "bit-identical; ampc's eval outputs within %.1e" % infer)

# strict errors, as torch's.
bad = dict(source.state_dict())
del bad["features.1.running_mean"]
bad["features.9.weight"] = torch.zeros(1)
try:
    source.load_state_dict(bad)
    raise AssertionError("torch accepted it")
except RuntimeError as e:
    torch_message = str(e).split(":", 1)[1]
try:
    model.load_state_dict(bad)
    raise AssertionError("ampc accepted it")
except RuntimeError as e:
    ampc_message = str(e).split(":", 1)[1]
assert ampc_message == torch_message, (ampc_message, torch_message)
keys = model.load_state_dict(bad, strict=False)
assert keys.missing_keys == ["features.1.running_mean"] and \
    keys.unexpected_keys == ["features.9.weight"], keys
print("strict: the same message as torch's:%s" %
      ampc_message.replace("\n\t", " | "))
