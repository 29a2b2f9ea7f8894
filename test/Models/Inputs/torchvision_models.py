"""The torchvision classification models on ampc (issue 18's acceptance):
each model, built with 10 classes and seeded, is exported by torch at
opset 17 in training mode (utils/python's export_onnx) with a batch of 2,
compiled for training on the CPU target with ampc's defaults (FP16
autocast, dynamic loss scaling from 2^16, AdamW) but --lr (1e-4), trained
on one fixed batch (random images, fixed labels) until --steps optimizer
steps were taken (the steps the scaler skips while it finds its scale, as
GradScaler does, are counted and reported). A model passes when the loss
before each optimizer step is finite and below the one before.

    /usr/bin/python3 test/Models/Inputs/torchvision_models.py OUT [--models
        NAME ...|--all] [--image-size N] [--steps 3] [--ampc build/bin/ampc]
        [--precision fp16|bf16|fp32] [--torch]

--torch also trains the torch module in FP32 with torch.optim.AdamW (the
same learning rate, weight decay 0.01, betas and eps as ampc's defaults)
for the same number of steps on the same batch and prints its losses: the
reference for a model whose loss does not fall (at a loss near zero the
FP16 activations' rounding can outweigh one AdamW step's gain).

One line per model: name, parameters, export/compile seconds, the losses,
ok or FAIL and why; then "N passed, N failed, N not exportable". Models
torch 1.13 cannot export are listed with torch's reason (not counted as
failures of ampc). Exported with Dropout's and StochasticDepth's p set to 0
(a fixed batch's loss is then a function of the weights alone, so that
"falling" means something; torch 1.13's exporter has no Bernoulli for
StochasticDepth in training mode) and GoogLeNet and Inception v3 without
their auxiliary heads (an adaptive pooling torch cannot export at 224;
their training-time extra outputs).
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

# Steps the loss scaler may skip before --steps optimizer steps are taken.
MAX_SKIPS = 16

# The classification builders of torchvision.models (0.14), smallest first
# within each family; --all runs them all.
ALL = [
    "alexnet", "squeezenet1_0", "squeezenet1_1", "shufflenet_v2_x0_5",
    "shufflenet_v2_x1_0", "shufflenet_v2_x1_5", "shufflenet_v2_x2_0",
    "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large",
    "mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3",
    "efficientnet_b0", "efficientnet_b1", "efficientnet_b2", "efficientnet_b3",
    "efficientnet_b4", "efficientnet_b5", "efficientnet_b6", "efficientnet_b7",
    "efficientnet_v2_s", "efficientnet_v2_m", "efficientnet_v2_l",
    "googlenet", "inception_v3",
    "densenet121", "densenet161", "densenet169", "densenet201",
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
    "resnext50_32x4d", "resnext101_32x8d", "resnext101_64x4d",
    "wide_resnet50_2", "wide_resnet101_2",
    "regnet_x_400mf", "regnet_x_800mf", "regnet_x_1_6gf", "regnet_x_3_2gf",
    "regnet_x_8gf", "regnet_x_16gf", "regnet_x_32gf",
    "regnet_y_400mf", "regnet_y_800mf", "regnet_y_1_6gf", "regnet_y_3_2gf",
    "regnet_y_8gf", "regnet_y_16gf", "regnet_y_32gf", "regnet_y_128gf",
    "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19",
    "vgg19_bn",
    "convnext_tiny", "convnext_small", "convnext_base", "convnext_large",
    "vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32", "vit_h_14",
    "swin_t", "swin_s", "swin_b", "swin_v2_t", "swin_v2_s", "swin_v2_b",
    "maxvit_t",
]


def build(name):
    import torch
    import torchvision
    torch.manual_seed(0)
    kwargs = dict(num_classes=10)
    if name in ("googlenet", "inception_v3"):
        kwargs.update(aux_logits=False, init_weights=True)
    m = getattr(torchvision.models, name)(**kwargs)
    for module in m.modules():
        if isinstance(module, (torchvision.ops.StochasticDepth,
                               torch.nn.Dropout)):
            module.p = 0.0
    return m


def torch_losses(m, x, y, args):
    """The losses before each of --steps AdamW steps of the torch module
    itself in FP32 (a copy: `m` is left as built)."""
    import copy
    import torch
    module = copy.deepcopy(m).train()
    opt = torch.optim.AdamW(module.parameters(), lr=args.lr,
                            weight_decay=0.01)
    labels = torch.from_numpy(y)
    losses = []
    for _ in range(args.steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(module(x), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--models", nargs="+", default=None)
    p.add_argument("--all", action="store_true")
    p.add_argument("--image-size", type=int, default=None,
                   help="default 224 (299 for inception_v3)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--lr", type=float, default=1e-4,
                   help="AdamW's learning rate (default 1e-4: at ampc's "
                        "default 1e-3 AdamW's first steps overshoot on a "
                        "batch of 2, in torch too: squeezenet1_1's FP32 "
                        "losses go 2.25, 0.93, 2.44 there)")
    p.add_argument("--precision", default="fp16",
                   choices=["fp16", "bf16", "fp32"])
    p.add_argument("--torch", action="store_true",
                   help="also print torch FP32's losses (AdamW, same batch)")
    p.add_argument("--ampc", default="ampc")
    p.add_argument("--runtime", default=None)
    p.add_argument("--keep", action="store_true",
                   help="keep each model's ONNX file and library")
    args = p.parse_args()
    import torch
    from ampc.runtime import Model
    from ampc_testing import export_onnx, optimizer_steps
    names = ALL if args.all else (args.models or ["squeezenet1_1"])
    os.makedirs(args.out, exist_ok=True)
    passed, failed, unexportable = [], [], []
    for name in names:
        size = args.image_size or (299 if name == "inception_v3" else 224)
        m = build(name)
        params = sum(t.numel() for t in m.parameters())
        g = torch.Generator().manual_seed(1)
        x = torch.randn(2, 3, size, size, generator=g)
        y = np.array([3, 7], np.int64)
        onnx_path = os.path.join(args.out, name + ".onnx")
        lib = os.path.join(args.out, name + ".so")
        start = time.time()
        try:
            export_onnx(m, x, onnx_path, training=True)
        except Exception as e:  # torch's exporter: not ampc's failure
            reason = str(e).strip().splitlines()[0][:160]
            print("%s: not exportable by torch %s: %s" % (
                name, torch.__version__, reason), flush=True)
            unexportable.append(name)
            continue
        exported = time.time() - start
        start = time.time()
        reference = torch_losses(m, x, y, args) if args.torch else None
        r = subprocess.run([args.ampc, onnx_path, "--target=cpu",
                            "--precision=" + args.precision,
                            "--lr=%r" % args.lr, "-o", lib],
                           capture_output=True, text=True)
        compiled = time.time() - start
        del m
        if r.returncode:
            message = (r.stderr.strip().splitlines() or ["exit %d" %
                                                         r.returncode])[0]
            print("%s: FAIL: ampc: %s" % (name, message[:300]), flush=True)
            failed.append(name)
            continue
        # At most MAX_SKIPS steps skipped by the scaler (ampc_testing's
        # optimizer_steps).
        start = time.time()
        with Model(lib, args.runtime) as model:
            losses, calls, skipped = optimizer_steps(
                model, {"input": x.numpy(), "label": y}, args.steps, MAX_SKIPS)
        trained = time.time() - start
        problems = []
        if len(losses) < args.steps:
            problems.append("only %d of %d steps taken" % (len(losses),
                                                             args.steps))
        if not all(np.isfinite(losses)):
            problems.append("a loss is not finite")
        if any(b >= a for a, b in zip(losses, losses[1:])):
            problems.append("the loss does not decrease")
        print("%s: %.1fM parameters, %dx%d, export %.0f s, compile %.0f s, "
              "%d calls (%d skipped by the scaler) %.1f s, losses %s%s: %s" % (
                  name, params / 1e6, size, size, exported, compiled, calls,
                  skipped, trained, " ".join("%.5f" % v for v in losses),
                  "" if reference is None else ", torch FP32 " +
                  " ".join("%.5f" % v for v in reference),
                  "FAIL: " + "; ".join(problems) if problems else "ok"),
              flush=True)
        (failed if problems else passed).append(name)
        if not args.keep:
            for f in (onnx_path, lib):
                if os.path.exists(f):
                    os.remove(f)
    print("%d passed, %d failed, %d not exportable" % (
        len(passed), len(failed), len(unexportable)))
    if failed:
        print("failed: " + " ".join(failed))
    if unexportable:
        print("not exportable: " + " ".join(unexportable))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
