#!/usr/bin/env python3
"""Exports two torch models and what torch computes on a fresh input.

usage: torch_models.py OUTDIR

Writes, at opset 17 with a static batch and exported the way
test/Models/Inputs/export_models.py exports them:
  encoder.onnx   nn.TransformerEncoderLayer(64, 4, 128, batch_first), eval
  resnet18.onnx  torchvision resnet18, training mode (BatchNormalization with
                 batch statistics)
and for each NAME: NAME_input.npy (a new random input, not the export's
example) and NAME_output.npy, torch's float32 output on it in the same mode.
"""
import os
import sys
import warnings

import numpy as np
import torch
import torchvision

warnings.filterwarnings("ignore")
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)


def export(name, model, shape, training):
    mode = (torch.onnx.TrainingMode.TRAINING if training
            else torch.onnx.TrainingMode.EVAL)
    model.train(training)
    torch.onnx.export(model, torch.randn(*shape), os.path.join(out, name + ".onnx"),
                      opset_version=17, training=mode,
                      do_constant_folding=not training,
                      input_names=["input"], output_names=["output"])
    x = torch.randn(*shape)
    model.train(training)
    with torch.no_grad():
        y = model(x)
    np.save(os.path.join(out, name + "_input.npy"), x.numpy())
    np.save(os.path.join(out, name + "_output.npy"), y.numpy())


export("encoder", torch.nn.TransformerEncoderLayer(
    d_model=64, nhead=4, dim_feedforward=128, batch_first=True),
    (2, 16, 64), training=False)
export("resnet18", torchvision.models.resnet18(), (2, 3, 64, 64),
       training=True)
