#!/usr/bin/env python3
"""Exports a PyTorch nn.TransformerEncoderLayer to ONNX (opset 17).

usage: /usr/bin/python3 examples/export_encoder.py OUT.onnx
"""
import sys
import warnings

import torch

warnings.filterwarnings("ignore")
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4,
                                         dim_feedforward=256,
                                         batch_first=True).eval()
torch.onnx.export(layer, torch.randn(8, 32, 64), sys.argv[1],
                  opset_version=17, input_names=["tokens"],
                  output_names=["encoded"])
