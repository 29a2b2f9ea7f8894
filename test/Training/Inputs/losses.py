"""Each loss ampc attaches (--loss and PyTorch's options) against PyTorch's
functional at fp32: a linear layer's scores (N, C), or (N, C, L) for the
spatial cases, its loss and the gradients of its weight and bias (the
gradient of the loss with respect to the scores, through a known matrix)
from ampc's library (CPU target, --precision=fp32, no optimizer) and from
torch.autograd on the same weights and batch.

Prints one line per case with the largest relative difference of the loss
and of the gradients; exits 1 when any exceeds the tolerance.

With --precision=fp16 or bf16 the layer computes in low precision
(autocast's Gemm) and the loss in FP32 after ampc's cast, against torch at
FP32: a check that every loss compiles and trains there, with a tolerance
of the low-precision scores' rounding.

--target=cuda-sim runs the CUDA target's kernels on the CPU instead.

--partial=ROWS trains one SGD step (lr 1, so each parameter moves by
minus its gradient) on the first ROWS rows of the batch through
train_step's partial batches (issue 34, item 6), against torch on those
rows alone.

usage: losses.py [--precision=fp16|bf16] [--target=cuda-sim] [--partial=ROWS]
                 OUT_DIR [CASE...]
"""
import os
import sys
import zlib

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                "python"))
import ampc as ampc_module  # noqa: E402

N, FEATURES, C, L = 6, 5, 4, 3
# fp32 rounding of a few dozen terms; far below what any wrong term gives.
# At fp16/bf16 the scores carry the inputs' and weights' rounding (2^-11,
# 2^-8 relative, times a few dozen terms).
TOLERANCE = {"fp32": 2e-5, "fp16": 1e-2, "bf16": 6e-2}


class Scores(torch.nn.Module):
    """(N, F) -> (N, C), or (N, L, F) -> (N, C, L)."""

    def __init__(self, spatial):
        super().__init__()
        self.fc = torch.nn.Linear(FEATURES, C)
        self.spatial = spatial

    def forward(self, x):
        y = self.fc(x)
        return y.permute(0, 2, 1) if self.spatial else y


def class_ids(rng, shape, ignore=None):
    ids = rng.integers(0, C, size=shape).astype(np.int64)
    if ignore is not None:
        flat = ids.reshape(-1)
        flat[::3] = ignore  # every third position ignored
    return ids


def probabilities(rng, shape):
    p = rng.random(shape).astype(np.float32) + 0.05
    return (p / p.sum(axis=1, keepdims=True)).astype(np.float32)


# name: (ampc flags, spatial, label maker, torch loss of (scores, label))
WEIGHTS = [0.5, 2.0, 1.0, 0.25]
CASES = {
    "cross_entropy": (
        {"loss": "cross_entropy"}, False,
        lambda rng, s: class_ids(rng, s),
        lambda z, y: F.cross_entropy(z, y)),
    "ce_class_weights": (
        {"loss": "cross_entropy", "class_weights": WEIGHTS}, False,
        lambda rng, s: class_ids(rng, s),
        lambda z, y: F.cross_entropy(z, y, weight=torch.tensor(WEIGHTS))),
    "ce_ignore_index": (
        {"loss": "cross_entropy", "ignore_index": -100}, False,
        lambda rng, s: class_ids(rng, s, ignore=-100),
        lambda z, y: F.cross_entropy(z, y, ignore_index=-100)),
    "ce_label_smoothing": (
        {"loss": "cross_entropy", "label_smoothing": 0.2}, False,
        lambda rng, s: class_ids(rng, s),
        lambda z, y: F.cross_entropy(z, y, label_smoothing=0.2)),
    "ce_smoothing_weights": (
        {"loss": "cross_entropy", "label_smoothing": 0.1,
         "class_weights": WEIGHTS}, False,
        lambda rng, s: class_ids(rng, s),
        lambda z, y: F.cross_entropy(z, y, weight=torch.tensor(WEIGHTS),
                                     label_smoothing=0.1)),
    # Every option at once on (N, C, L) scores, the ignored id a class.
    "ce_spatial_all": (
        {"loss": "cross_entropy", "label_smoothing": 0.3, "ignore_index": 2,
         "class_weights": WEIGHTS}, True,
        lambda rng, s: class_ids(rng, s, ignore=2),
        lambda z, y: F.cross_entropy(z, y, weight=torch.tensor(WEIGHTS),
                                     ignore_index=2, label_smoothing=0.3)),
    "ce_spatial_ignore_smoothing": (
        {"loss": "cross_entropy", "label_smoothing": 0.15,
         "ignore_index": -1}, True,
        lambda rng, s: class_ids(rng, s, ignore=-1),
        lambda z, y: F.cross_entropy(z, y, ignore_index=-1,
                                     label_smoothing=0.15)),
    "ce_soft_targets": (
        {"loss": "cross_entropy", "soft_targets": True}, False,
        lambda rng, s: probabilities(rng, s),
        lambda z, y: F.cross_entropy(z, y)),
    "ce_soft_spatial_all": (
        {"loss": "cross_entropy", "soft_targets": True,
         "label_smoothing": 0.25, "class_weights": WEIGHTS}, True,
        lambda rng, s: probabilities(rng, s),
        lambda z, y: F.cross_entropy(z, y, weight=torch.tensor(WEIGHTS),
                                     label_smoothing=0.25)),
    "bce_with_logits": (
        {"loss": "bce_with_logits"}, False,
        lambda rng, s: rng.random(s).astype(np.float32),
        lambda z, y: F.binary_cross_entropy_with_logits(z, y)),
    "bce_pos_weight": (
        {"loss": "bce_with_logits", "pos_weight": [3.0, 0.5, 1.0, 2.0]}, False,
        lambda rng, s: (rng.random(s) > 0.5).astype(np.float32),
        lambda z, y: F.binary_cross_entropy_with_logits(
            z, y, pos_weight=torch.tensor([3.0, 0.5, 1.0, 2.0]))),
    "bce_pos_weight_one": (
        {"loss": "bce_with_logits", "pos_weight": [2.5]}, True,
        lambda rng, s: rng.random(s).astype(np.float32),
        lambda z, y: F.binary_cross_entropy_with_logits(
            z, y, pos_weight=torch.tensor([2.5]))),
    "mse": (
        {"loss": "mse"}, False,
        lambda rng, s: rng.standard_normal(s).astype(np.float32),
        lambda z, y: F.mse_loss(z, y)),
    "l1": (
        {"loss": "l1"}, False,
        lambda rng, s: rng.standard_normal(s).astype(np.float32),
        lambda z, y: F.l1_loss(z, y)),
    "smooth_l1": (
        {"loss": "smooth_l1", "smooth_l1_beta": 0.5}, False,
        lambda rng, s: rng.standard_normal(s).astype(np.float32),
        lambda z, y: F.smooth_l1_loss(z, y, beta=0.5)),
    "smooth_l1_default": (
        {"loss": "smooth_l1"}, True,
        lambda rng, s: rng.standard_normal(s).astype(np.float32),
        lambda z, y: F.smooth_l1_loss(z, y)),
    "smooth_l1_beta0": (
        {"loss": "smooth_l1", "smooth_l1_beta": 0.0}, False,
        lambda rng, s: rng.standard_normal(s).astype(np.float32),
        lambda z, y: F.smooth_l1_loss(z, y, beta=0.0)),
    "huber": (
        {"loss": "huber", "huber_delta": 0.7}, False,
        lambda rng, s: rng.standard_normal(s).astype(np.float32),
        lambda z, y: F.huber_loss(z, y, delta=0.7)),
}


def relative(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-12))


def run_case(name, out, precision, target, partial=None):
    flags, spatial, make_label, torch_loss = CASES[name]
    torch.manual_seed(0)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    model = Scores(spatial)
    with torch.no_grad():
        # Scores of a few units: the quadratic and linear parts of
        # smooth_l1/huber and both sides of BCE are all reached.
        model.fc.weight.mul_(4.0)
    x = rng.standard_normal((N, L, FEATURES) if spatial else (N, FEATURES))
    x = x.astype(np.float32)
    label_shape = (N, L) if spatial else (N,)
    scores_shape = (N, C, L) if spatial else (N, C)
    class_label = flags["loss"] == "cross_entropy" and \
        not flags.get("soft_targets")
    y = make_label(rng, label_shape if class_label else scores_shape)

    path = ampc_module.export(model, (torch.from_numpy(x),),
                              os.path.join(out, name + ".onnx"))
    if partial is None:
        library = ampc_module.compile(
            path, output=os.path.join(out, name + ".so"), target=target,
            precision=precision, optimizer="none", **flags)
        loss, grads = library.gradients([x, y])
    else:
        # A partial batch of the first `partial` rows through train_step:
        # one SGD step at lr 1 moves each parameter by minus its gradient.
        library = ampc_module.compile(
            path, output=os.path.join(out, name + ".so"), target=target,
            precision=precision, optimizer="sgd", lr=1.0, **flags)
        before = {k: library.get_parameter(k) for k in ("fc.weight",
                                                         "fc.bias")}
        x, y = x[:partial], y[:partial]
        loss = library.train_step(x, y)
        grads = {k: before[k] - library.get_parameter(k) for k in before}

    scores = model(torch.from_numpy(x))
    reference = torch_loss(scores, torch.from_numpy(y))
    model.zero_grad()
    reference.backward()
    expected = {"fc.weight": model.fc.weight.grad.numpy(),
                "fc.bias": model.fc.bias.grad.numpy()}
    if sorted(grads) != sorted(expected):
        raise SystemExit(f"{name}: the library's gradients are of "
                         f"{sorted(grads)}, expected {sorted(expected)}")
    loss_diff = relative(loss, reference.item())
    grad_diff = max(relative(grads[k], expected[k]) for k in expected)
    ok = max(loss_diff, grad_diff) <= TOLERANCE[precision]
    print(f"{name}: loss {float(loss):.6f} torch {reference.item():.6f} "
          f"value rel {loss_diff:.1e} gradient rel {grad_diff:.1e} "
          f"{'ok' if ok else 'MISMATCH'}")
    return ok


def main():
    args = sys.argv[1:]
    options = {"precision": "fp32", "target": "cpu"}
    while args and args[0].startswith("--"):
        name, _, value = args.pop(0)[2:].partition("=")
        options[name] = value
    out, names = args[0], args[1:] or list(CASES)
    os.makedirs(out, exist_ok=True)
    precision = options["precision"]
    partial = int(options["partial"]) if "partial" in options else None
    failed = [n for n in names
              if not run_case(n, out, precision, options["target"], partial)]
    if failed:
        print("mismatch: " + ", ".join(failed))
        return 1
    rows = "" if partial is None else \
        f" on a partial batch of {partial} of {N} rows"
    print(f"all {len(names)} losses match at {precision}{rows}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
