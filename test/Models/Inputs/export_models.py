#!/usr/bin/env python3
"""Exports the reference models of the import tests with Debian's torch.

usage: export_models.py OUTDIR

Writes mlp.onnx, resnet18.onnx (training mode: BatchNormalization with its
running-statistics outputs) and encoder.onnx / encoder_train.onnx
(nn.TransformerEncoderLayer in eval and training mode), all at opset 17 with
a static batch, the way a user would call torch.onnx.export; and for each
NAME, NAME_input.npy (a fresh random input) and NAME_output.npy (torch's
float32 output on it, in the mode of the export). The export is
ampc_testing.export_onnx, which the other tests use for their own models.
"""
import os
import sys
import warnings

import numpy as np
import torch

from ampc_testing import export_onnx

warnings.filterwarnings("ignore")


def export(out, name, model, example, training):
    export_onnx(model, example, os.path.join(out, name + ".onnx"), training)
    # A reference for the compiled model: torch's output, in the same mode,
    # on a fresh input (not the export's example).
    x = torch.randn(*example.shape)
    model.train(training)
    with torch.no_grad():
        y = model(x)
    np.save(os.path.join(out, name + "_input.npy"), x.numpy())
    np.save(os.path.join(out, name + "_output.npy"), y.numpy())


def main():
    import torchvision

    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                              torch.nn.Linear(512, 512), torch.nn.ReLU(),
                              torch.nn.Linear(512, 10))
    export(out, "mlp", mlp, torch.randn(32, 784), training=False)
    export(out, "resnet18", torchvision.models.resnet18(),
           torch.randn(2, 3, 64, 64), training=True)
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4,
                                             dim_feedforward=128,
                                             batch_first=True)
    export(out, "encoder", layer, torch.randn(2, 16, 64), training=False)
    export(out, "encoder_train", layer, torch.randn(2, 16, 64),
           training=True)


if __name__ == "__main__":
    main()
