#!/usr/bin/env python3
"""Compares ampc's per-node compute dtypes with PyTorch CUDA autocast.

usage: autocast_table.py MODEL REPORT.json

MODEL is resnet18, encoder or encoder_train (test/Models/Inputs/
export_models.py). The tables below say, for every ONNX node those exports
contain, which torch op produced it and what CUDA autocast does with that op
(REFERENCE.md section 1: aten/src/ATen/autocast_mode.cpp lists). Every node of
the report must match exactly one row, and its compute dtype must be the
row's. Prints one line per mismatch and exits 1, or a count of matches.
"""
import json
import re
import sys

# (node-name pattern, expected compute dtype, torch op and autocast rule)
RESNET18 = [
    (r".*/Conv$", "f16", "conv2d: lower-precision list"),
    (r".*/BatchNormalization$", "f16",
     "batch_norm: not listed, runs on its f16 input (f32 statistics)"),
    (r".*/Relu$", "f16", "relu: not listed, input dtype (f16 from bn)"),
    (r"/maxpool/MaxPool$", "f16", "max_pool2d: not listed, input dtype"),
    (r".*/Add$", "f16", "residual add: f16 + f16 stays f16"),
    (r"/avgpool/GlobalAveragePool$", "f16",
     "adaptive_avg_pool2d: not listed, input dtype"),
    (r"/Flatten$", "f16", "flatten: view, input dtype"),
    (r"/fc/Gemm$", "f16", "linear: lower-precision list"),
]

# nn.TransformerEncoderLayer (batch_first, post-norm, ReLU) as torch 1.13's
# exporter writes it: eval mode folds the weight transposes away, training
# mode keeps them and adds Dropout nodes.
ENCODER = [
    (r"/self_attn/Transpose$", "f32",
     "query.transpose(1, 0) of the f32 input: view, input dtype"),
    (r"/self_attn/MatMul$", "f16", "linear (in_proj): lower-precision list"),
    (r"/self_attn/Add$", "f16", "bias of the same linear: part of the op"),
    (r"/self_attn/(Slice|Slice_1|Slice_2)$", "f16", "chunk of q, k, v: f16 views"),
    (r"/self_attn/Reshape(_[0-9])?$", "f16", "view of an f16 tensor"),
    (r"/self_attn/Div_1$", "f16",
     "q / sqrt(d): a Python scalar does not promote the f16 tensor"),
    (r"/self_attn/MatMul_1$", "f16", "bmm(q, k^T): lower-precision list"),
    (r"/self_attn/Softmax$", "f32", "softmax: fp32 list"),
    (r"/self_attn/Dropout$", "f32", "dropout of the f32 attention weights"),
    (r"/self_attn/MatMul_2$", "f16", "bmm(attn, v): lower-precision list"),
    (r"/self_attn/Gemm$", "f16", "linear (out_proj): lower-precision list"),
    (r"/dropout1/Dropout$", "f16", "dropout of the f16 attention output"),
    (r"/Add$", "f32", "x + sa(x): f32 input + f16 promotes to f32"),
    (r"/norm[12]/LayerNormalization$", "f32", "layer_norm: fp32 list"),
    (r"/linear[12]/MatMul$", "f16", "linear: lower-precision list"),
    (r"/linear[12]/Add$", "f16", "bias of the same linear: part of the op"),
    (r"/Relu$", "f16", "relu of the f16 linear1 output"),
    (r"/dropout/Dropout$", "f16", "dropout of the f16 activation"),
    (r"/dropout2/Dropout$", "f16", "dropout of the f16 linear2 output"),
    (r"/Add_1$", "f32", "x + ff(x): f32 + f16 promotes to f32"),
]

# Eval mode: every other Transpose moves f16 activations.
ENCODER_EVAL = ENCODER + [
    (r"/self_attn/Transpose_[1-5]$", "f16", "transpose of an f16 tensor"),
]
# Training mode: the first three Transposes are of weights, the rest move
# f16 activations.
ENCODER_TRAIN = ENCODER + [
    (r"/self_attn/Transpose_1$|/linear[12]/Transpose$", "f32",
     "weight transpose inside linear: a view of the f32 master weight"),
    (r"/self_attn/Transpose_[2-6]$", "f16", "transpose of an f16 tensor"),
]

TABLES = {"resnet18": RESNET18, "encoder": ENCODER_EVAL,
          "encoder_train": ENCODER_TRAIN}


def main():
    model, path = sys.argv[1], sys.argv[2]
    table = TABLES[model]
    with open(path) as f:
        report = json.load(f)
    failures = 0
    for node in report["nodes"]:
        rows = [r for r in table if re.fullmatch(r[0], node["name"])]
        if len(rows) != 1:
            print(f"{node['name']} ({node['op']}): matches {len(rows)} rows "
                  "of the PyTorch table, expected 1")
            failures += 1
            continue
        _, want, why = rows[0]
        if node["compute"] != want:
            print(f"{node['name']} ({node['op']}): ampc computes in "
                  f"{node['compute']}, PyTorch autocast in {want} ({why}); "
                  f"ampc's rule: {node['rule']}")
            failures += 1
    if not report["nodes"]:
        print("the report has no nodes")
        failures += 1
    if failures:
        sys.exit(1)
    print(f"{model}: {len(report['nodes'])} nodes match PyTorch CUDA autocast")


if __name__ == "__main__":
    main()
