#!/usr/bin/env python3
"""ampc's FP32 gradients against torch.autograd on torch-exported models.

usage: torch_gradients.py WORKDIR [--models NAME...] [--perturb]
                          [--tolerance T] [--runtime LIB]

For each model (mlp: 20 -> 64 -> ReLU -> 10 logits with cross-entropy on
int64 class ids; encoder: nn.TransformerEncoderLayer(32, 4 heads, 64,
dropout 0, batch_first) with MSE against a random target), exports it with
torch.onnx.export in training mode (ampc_testing.export_onnx: opset 17,
parameters kept as initializers named after them), compiles it with

    ampc NAME.onnx --mode=train --precision=fp32 --optimizer=none --target=cpu --loss=L
         -o NAME.so

loads the library through the runtime C API (ampc.runtime.Model), computes
the loss and the gradient of every trainable parameter on one batch
(ampc_model_gradients) and compares them with torch.autograd on the same
module and batch in float32. torch's loss is the one ampc attaches
(lib/Transforms/AttachLoss.cpp): cross-entropy with mean reduction, and
mean((y - label)^2) over every element.

Gradients are matched by name: an ampc parameter is an ONNX initializer,
which the export names after torch's named_parameters(). Before comparing,
each parameter's value in the library must equal torch's exactly, so a wrong
match cannot pass.

The measure, per tensor (the loss is a tensor of one element):
    relative difference = max|ampc - torch| / max|torch|
(0 when both are all zero, infinite when only torch's is). A model passes
when its loss and every gradient are within --tolerance (default 1e-5) and
every torch parameter has an ampc gradient. For scale, each model's line
also gives the same measure between torch in float32 and torch in float64.

--perturb adds 1e-4 max|g| to one element of ampc's first gradient before
comparing, to show that the comparison catches an error of that size.

Output: a line for the loss and for each gradient, the torch parameters
without an ampc gradient (and why) and ampc gradients without a torch
parameter, then per model
    NAME: N gradients, max relative difference D (TENSOR), torch fp32 against
    fp64 D64: ok|FAILED
and finally PASSED, or FAILED: NAME: TENSOR ... with exit status 1.
"""
import argparse
import copy
import os
import subprocess
import sys
import warnings

import numpy as np
import onnx
import torch

from ampc.runtime import Model
from ampc_testing import (export_onnx, relative_difference, report_failures,
                          small_encoder, small_mlp, torch_loss)

warnings.filterwarnings("ignore")


def mlp_case():
    model = small_mlp()
    x = torch.randn(32, 20)
    label = torch.randint(0, 10, (32,))
    return model, x, label, "cross_entropy"


def encoder_case():
    model = small_encoder()
    x = torch.randn(2, 8, 32)
    target = torch.randn(2, 8, 32)
    return model, x, target, "mse"


CASES = {"mlp": mlp_case, "encoder": encoder_case}


def torch_gradients(module, x, label, loss_kind, dtype):
    """The loss and {parameter name: gradient} of `module` (a copy, in
    `dtype`) on the batch, in training mode."""
    module = copy.deepcopy(module).to(dtype).train()
    if label.is_floating_point():
        label = label.to(dtype)
    loss = torch_loss(loss_kind, module(x.to(dtype)), label)
    loss.backward()
    grads = {name: p.grad.numpy() for name, p in module.named_parameters()
             if p.grad is not None}
    return loss.detach().numpy(), grads


def check(name, workdir, args):
    """Prints the comparison for one model; returns None when it passes,
    otherwise why it fails."""
    torch.manual_seed(0)
    module, x, label, loss_kind = CASES[name]()
    onnx_path = os.path.join(workdir, name + ".onnx")
    library = os.path.join(workdir, name + ".so")
    export_onnx(module, x, onnx_path, training=True)
    command = ["ampc", onnx_path, "--mode=train", "--precision=fp32",
               "--optimizer=none",
               "--target=cpu", "--loss=" + loss_kind, "-o", library]
    compiled = subprocess.run(command, capture_output=True, text=True)
    if compiled.returncode != 0:
        message = compiled.stderr.strip().splitlines()
        print("%s: ampc exited with %d: %s" % (
            name, compiled.returncode, message[0] if message else ""))
        return "ampc exited with %d" % compiled.returncode

    model = Model(library, runtime=args.runtime)
    torch_params = dict(module.named_parameters())
    for parameter in model.parameters:
        if parameter.name in torch_params:
            value = torch_params[parameter.name].detach().numpy()
            if not np.array_equal(model.get_parameter(parameter.name), value):
                print("%s: parameter %s differs from torch's" %
                      (name, parameter.name))
                return "parameter %s differs from torch's" % parameter.name

    inputs = {"input": x.numpy(), "label": label.numpy()}
    loss, grads = model.gradients(inputs)
    model.close()
    if args.perturb:
        first = next(iter(grads))
        grads[first].flat[0] += 1e-4 * np.abs(grads[first]).max()
        print("%s: perturbed %s[0] by 1e-4 of its max |g|" % (name, first))
    want_loss, torch_grads = torch_gradients(module, x, label, loss_kind,
                                             torch.float32)
    _, grads64 = torch_gradients(module, x, label, loss_kind, torch.float64)

    results = [("loss", relative_difference(loss, want_loss))]
    print("%s: loss ampc %.8g torch %.8g: %.2g" % (
        name, float(loss), float(want_loss), results[0][1]))
    for grad_name, grad in grads.items():
        if grad_name not in torch_grads:
            continue
        difference = relative_difference(grad, torch_grads[grad_name])
        results.append((grad_name, difference))
        print("%s: %s %s: %.2g" % (name, grad_name, list(grad.shape),
                                   difference))

    initializers = {i.name for i in onnx.load(onnx_path).graph.initializer}
    missing = []
    for torch_name in torch_grads:
        if torch_name in grads:
            continue
        why = ("ampc computes no gradient for it" if torch_name in initializers
               else "not an initializer of the export")
        missing.append("%s (%s)" % (torch_name, why))
    extra = [g for g in grads if g not in torch_grads]
    print("%s: torch parameters without an ampc gradient: %s" % (
        name, ", ".join(missing) or "none"))
    print("%s: ampc gradients without a torch parameter: %s" % (
        name, ", ".join(extra) or "none"))

    worst, difference = max(results, key=lambda r: r[1])
    noise = max(relative_difference(torch_grads[g], grads64[g])
                for g in torch_grads)
    ok = difference <= args.tolerance and not missing and not extra
    print("%s: %d gradients, max relative difference %.2g (%s), torch fp32 "
          "against fp64 %.2g: %s" % (name, len(results) - 1, difference,
                                     worst, noise, "ok" if ok else "FAILED"))
    if missing or extra:
        return "unmatched parameters"
    if not ok:
        return "%s relative difference %.2g, tolerance %g" % (
            worst, difference, args.tolerance)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("workdir")
    parser.add_argument("--models", nargs="+", choices=sorted(CASES),
                        default=["mlp", "encoder"])
    parser.add_argument("--perturb", action="store_true")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    parser.add_argument("--runtime", help="libampc_runtime.so (default: "
                        "beside the ampc on PATH)")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    torch.set_num_threads(1)

    failures = []
    for name in args.models:
        failure = check(name, args.workdir, args)
        if failure:
            failures.append("%s: %s" % (name, failure))
    return report_failures(failures, separator="; ")


if __name__ == "__main__":
    sys.exit(main())
