#!/usr/bin/env python3
"""ONNX LSTM, GRU and RNN with sequence_lens shorter than the sequence,
against torch's packed sequences (the oracle of ONNX's semantics: Y is zero
past each batch entry's length, Y_h and Y_c are the state at its last valid
step, and the reverse direction starts at that step).

usage: recurrent_lengths.py WORKDIR [--arg=AMPC_FLAG]...

For each op, one layer of torch's module (seed 0; nn.RNN with tanh, nn.GRU,
which ONNX writes with linear_before_reset=1, nn.LSTM) in both directions is
written as an ONNX node (its weights as initializers, torch's gate order
rearranged to ONNX's: LSTM ifgo to iofc, GRU rzn to zrh; B the input and
the hidden biases), with sequence_lens a run-time int32 input, and compiled
with `ampc --mode=infer --target=cpu --precision=fp32`. Its outputs on
lengths [T, 2, 1, 3] (and, as a second run of the same library, all T)
must be within 1e-5 (max|ampc - torch| / max|torch|) of torch's on the
packed batch. Prints a line per op and length set, then PASSED, or FAILED
with exit status 1.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

from ampc.runtime import Model
from ampc_testing import relative_difference, report_failures

T, BATCH, INPUT, HIDDEN = 4, 4, 3, 5

# op: (torch module, ONNX gate blocks in torch's order, extra attributes)
CASES = {
    "RNN": (torch.nn.RNN, [0], {}),
    "GRU": (torch.nn.GRU, [1, 0, 2], {"linear_before_reset": 1}),
    "LSTM": (torch.nn.LSTM, [0, 3, 1, 2], {}),
}


def onnx_weights(module, blocks):
    """W, R and B of both directions from torch's parameters."""
    def reorder(t):
        parts = t.detach().numpy().reshape(len(blocks), HIDDEN, -1)
        return np.concatenate([parts[b] for b in blocks]).reshape(t.shape)
    w, r, b = [], [], []
    for suffix in ("", "_reverse"):
        p = {n: getattr(module, n + suffix)
             for n in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0",
                       "bias_hh_l0")}
        w.append(reorder(p["weight_ih_l0"]))
        r.append(reorder(p["weight_hh_l0"]))
        b.append(np.concatenate([reorder(p["bias_ih_l0"]),
                                 reorder(p["bias_hh_l0"])]).ravel())
    return [np.stack(v).astype(np.float32) for v in (w, r, b)]


def write_model(path, op, weights, attrs):
    outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    w, r, b = weights
    node = helper.make_node(op, ["X", "W", "R", "B", "lens"], outputs,
                            name=op.lower(), hidden_size=HIDDEN,
                            direction="bidirectional", **attrs)
    state = [2, BATCH, HIDDEN]
    graph = helper.make_graph(
        [node], op.lower(),
        [helper.make_tensor_value_info("X", TensorProto.FLOAT,
                                       [T, BATCH, INPUT]),
         helper.make_tensor_value_info("lens", TensorProto.INT32, [BATCH])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT,
                                       [T, 2, BATCH, HIDDEN])] +
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, state)
         for n in outputs[1:]],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R"),
         numpy_helper.from_array(b, "B")])
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.save(model, path)


def torch_outputs(module, x, lens):
    packed = torch.nn.utils.rnn.pack_padded_sequence(
        x, torch.tensor(lens), enforce_sorted=False)
    with torch.no_grad():
        out, state = module(packed)
    y, _ = torch.nn.utils.rnn.pad_packed_sequence(out, total_length=T)
    y = y.reshape(T, BATCH, 2, HIDDEN).permute(0, 2, 1, 3)
    states = list(state) if isinstance(state, tuple) else [state]
    return [y.numpy()] + [s.numpy() for s in states]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("workdir")
    p.add_argument("--arg", action="append", default=[])
    args = p.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(T, BATCH, INPUT, generator=g)
    failures = []
    for op, (make, blocks, attrs) in CASES.items():
        torch.manual_seed(0)
        module = make(INPUT, HIDDEN, bidirectional=True)
        onnx_path = os.path.join(args.workdir, op + ".onnx")
        library = os.path.join(args.workdir, op + ".so")
        write_model(onnx_path, op, onnx_weights(module, blocks), attrs)
        subprocess.run(["ampc", onnx_path, "--mode=infer", "--target=cpu",
                        "--precision=fp32", "-o", library] + args.arg,
                       check=True)
        with Model(library) as m:
            for lens in ([T, 2, 1, 3], [T] * BATCH):
                got = m.infer(x.numpy(), np.array(lens, np.int32))
                want = torch_outputs(module, x, lens)
                worst = max(relative_difference(a, b)
                            for a, b in zip(got, want))
                ok = worst <= 1e-5
                print("%s lengths %s: %d outputs, max relative difference "
                      "%.2e: %s" % (op, lens, len(got), worst,
                                    "ok" if ok else "FAILED"))
                if not ok:
                    failures.append("%s %s" % (op, lens))
    return report_failures(failures)


if __name__ == "__main__":
    sys.exit(main())
