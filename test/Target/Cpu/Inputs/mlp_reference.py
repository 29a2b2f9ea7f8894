#!/usr/bin/env python3
"""Checks ampc-embed's output for examples/mlp.onnxtext against numpy.

usage: mlp_reference.py MODEL.onnxtext INPUT.npy EMBED_OUTPUT.txt fp32|fp16|bf16

The reference computes Gemm -> Relu -> Gemm the way ampc's CPU target must:
fp32 in float32; fp16 with inputs and weights rounded to float16, products
accumulated in float32 and every stored activation rounded to float16 (bf16
likewise, ampc_testing.round_bf16: to nearest, ties to even). Prints the largest
relative error and "ok", or the mismatches and exits 1.
"""
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import onnx.parser

from ampc_testing import round_bf16


def main():
    model_path, input_path, output_path, precision = sys.argv[1:5]
    with open(model_path) as f:
        text = "".join(l for l in f if not l.lstrip().startswith("#"))
    model = onnx.parser.parse_model(text)
    w = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    x = np.load(input_path)
    rnd = {"fp32": lambda a: np.asarray(a, np.float32),
           "fp16": lambda a: np.asarray(a, np.float32).astype(np.float16).astype(np.float32),
           "bf16": round_bf16}[precision]

    def gemm(a, weight, bias):
        # Inputs rounded, products accumulated in float32, one rounding on store.
        acc = rnd(a).astype(np.float32) @ rnd(weight).T.astype(np.float32)
        return rnd(acc + rnd(bias))

    hidden = gemm(x, w["fc1_weight"], w["fc1_bias"])
    activated = rnd(np.maximum(hidden, 0))
    want = gemm(activated, w["fc2_weight"], w["fc2_bias"]).astype(np.float32)

    got = []
    with open(output_path) as f:
        lines = f.read().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("output logits"))
    got = np.array([float(v) for v in lines[start + 1:]], dtype=np.float32)
    want = want.reshape(-1)
    # Accumulation order may differ from numpy's: allow one rounding step of
    # the stored dtype.
    ulp = {"fp32": 1e-6, "fp16": 1e-3, "bf16": 8e-3}[precision]
    err = np.abs(got - want) / np.maximum(np.abs(want), 1e-3)
    print(f"largest relative error {err.max():.3g}")
    if got.shape != want.shape or (err > ulp).any():
        print("mismatch: got", got, "want", want)
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
