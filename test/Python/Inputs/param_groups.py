"""Parameter groups like torch's (issue 34): AdamW without weight decay on
biases and LayerNorm weights and with a second learning rate for the head,
against torch's three-group AdamW under CosineAnnealingLR, 100 steps at
FP32. ampc's learning rate is set to torch's first group's before each step
(the schedule); the other groups follow in proportion, as torch's
scheduler scales each base rate.

Then each group's own optimizer settings: Adam with the head at other
betas and eps, SGD with momentum and dampening on the head only (30 steps
each, FP32, against torch's groups).

    param_groups.py WORK TARGET [--settings-only]
Prints one line per check; an assertion stops it (exit status 1)."""
import os
import sys

import numpy as np
import torch

import ampc

work, target = sys.argv[1], sys.argv[2]
settings_only = "--settings-only" in sys.argv[3:]
STEPS = 100
LR, HEAD_LR, DECAY = 1e-3, 3e-3, 0.05


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(6, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.body = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.body(self.norm(self.embed(x))))
        return self.head(h)


def net():
    torch.manual_seed(0)
    return Net()


def groups(module):
    """torch's three groups: decayed weights, no decay (biases, LayerNorm),
    the head at its own rate."""
    decay, plain, head = [], [], []
    for name, _ in module.named_parameters():
        if name.startswith("head."):
            head.append(name)
        elif name.endswith(".bias") or name.startswith("norm."):
            plain.append(name)
        else:
            decay.append(name)
    return decay, plain, head


g = torch.Generator().manual_seed(4)
batches = [(torch.randn(8, 6, generator=g),
            torch.randint(0, 4, (8,), generator=g)) for _ in range(STEPS)]



def worst_difference(model, reference):
    trained = model.state_dict()
    return max(float(np.max(np.abs(trained[n].astype(np.float64) -
                                   p.detach().numpy())))
               for n, p in reference.named_parameters())


def group_settings(kind, torch_groups, ampc_groups, options):
    """30 steps of torch's `kind` with `torch_groups` (settings for the
    parameters whose names start with "head.", the rest take the
    defaults) against ampc with `ampc_groups`."""
    reference = net()
    named = dict(reference.named_parameters())
    head = [p for n, p in named.items() if n.startswith("head.")]
    rest = [p for n, p in named.items() if not n.startswith("head.")]
    optimizer = getattr(torch.optim, kind)(
        [{"params": rest}, dict(torch_groups, params=head)], **options)
    model = ampc.compile(net(), (batches[0][0],),
                         os.path.join(work, kind + ".so"), target=target,
                         precision="fp32", optimizer=kind.lower(),
                         loss="cross_entropy", param_groups=ampc_groups,
                         **options)
    for x, y in batches[:30]:
        model.train_step(x.numpy(), y.numpy())
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(reference(x), y).backward()
        optimizer.step()
    return worst_difference(model, reference)


if not settings_only:
    reference = net()
    decay, plain, head = groups(reference)
    params = dict(reference.named_parameters())
    optimizer = torch.optim.AdamW(
        [{"params": [params[n] for n in decay]},
         {"params": [params[n] for n in plain], "weight_decay": 0.0},
         {"params": [params[n] for n in head], "lr": HEAD_LR}],
        lr=LR, weight_decay=DECAY)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=STEPS)

    model = ampc.compile(net(), (batches[0][0],), os.path.join(work, "groups.so"),
                         target=target, precision="fp32", optimizer="adamw",
                         lr=LR, weight_decay=DECAY, loss="cross_entropy",
                         param_groups=[{"params": plain, "weight_decay": 0.0},
                                       {"params": ["head.*"], "lr": HEAD_LR}])
    torch_losses, losses = [], []
    for x, y in batches:
        model.learning_rate = optimizer.param_groups[0]["lr"]
        losses.append(float(model.train_step(x.numpy(), y.numpy())))
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(reference(x), y)
        loss.backward()
        optimizer.step()
        schedule.step()
        torch_losses.append(float(loss))

    trained = model.state_dict()
    worst = {}
    for name, p in reference.named_parameters():
        kind = "head" if name in head else "no decay" if name in plain else "decay"
        worst[kind] = max(worst.get(kind, 0.0), float(np.max(np.abs(
            trained[name].astype(np.float64) - p.detach().numpy()))))
    assert max(worst.values()) <= 1e-6, worst
    loss = float(np.max(np.abs(np.array(losses) - np.array(torch_losses))))
    assert loss <= 1e-5, loss
    print("param groups: %d steps of AdamW under a cosine schedule: decay %s, no "
          "decay %s, head %s within %.1e of torch's; losses within %.1e" %
          (STEPS, decay, plain, head, max(worst.values()), loss))

    # Without the groups the biases decay and the head is slower: the groups
    # are what made the match.
    model = ampc.compile(net(), (batches[0][0],), os.path.join(work, "one.so"),
                         target=target, precision="fp32", optimizer="adamw",
                         lr=LR, weight_decay=DECAY, loss="cross_entropy")
    for x, y in batches:
        model.train_step(x.numpy(), y.numpy())
    apart = max(float(np.max(np.abs(model.state_dict()[n] - p.detach().numpy())))
                for n, p in reference.named_parameters())
    assert apart > 1e-4, apart
    print("one group instead: %.1e apart" % apart)


adam = group_settings("Adam", {"betas": (0.8, 0.95), "eps": 1e-3},
                      [{"params": ["head.*"], "betas": (0.8, 0.95),
                        "eps": 1e-3}], {"lr": 1e-2})
assert adam <= 1e-6, adam
sgd = group_settings("SGD", {"momentum": 0.9, "dampening": 0.1},
                     [{"params": ["head.*"], "momentum": 0.9,
                       "dampening": 0.1}], {"lr": 0.1})
assert sgd <= 1e-6, sgd
print("group settings: Adam with the head's betas and eps within %.1e of "
      "torch's, SGD with the head's momentum and dampening within %.1e" %
      (adam, sgd))
