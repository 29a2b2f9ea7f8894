"""Helpers shared by the Python scripts of the tests (test/**/Inputs,
test/gpu) and the benchmarks (bench/, bench/gpu): rounding and measures for
comparing numbers, the torch side of ampc's losses and of an AMP step, ONNX
export and synthetic models, running ampc commands, timing.

Where it is found: lit puts this folder on PYTHONPATH (test/lit.cfg.py); a
script run by hand from bench/ or test/gpu/ puts it on sys.path itself; the
GPU packs copy it beside their scripts (docs/testing.md, "Python helpers").

numpy is imported here; torch and onnx only by the functions that need
them, so that numpy-only scripts do not pay for loading torch, and a
benchmark can set its thread counts before torch starts.
"""
import json
import os
import statistics
import subprocess
import time

import numpy as np

#===----------------------------------------------------------------------===#
# Rounding and measures.
#===----------------------------------------------------------------------===#


def round_bf16(x):
    """`x` as float32, rounded to the nearest bfloat16 (ties to even), as a
    float32 array of x's shape: the runtime's f32ToBf16Bits
    (include/ampc/Kernels/Common/Float16.h), NaN included (its sign and the kept
    half of its payload stay, the quiet bit is set)."""
    f = np.atleast_1d(np.asarray(x, np.float32))
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = (bits + np.uint64(0x7FFF) +
               ((bits >> np.uint64(16)) & np.uint64(1))) & np.uint64(0xFFFF0000)
    # A NaN is truncated: the carry of its payload could make it infinite.
    quiet_nan = (bits & np.uint64(0xFFFF0000)) | np.uint64(0x00400000)
    out = np.where(np.isnan(f), quiet_nan, rounded)
    return out.astype(np.uint32).view(np.float32).reshape(np.shape(x))


def relative_difference(got, want, absolute_at_zero=False):
    """max|got - want| / max|want|, in float64 (0 for empty arrays).

    When `want` is all zero there is no scale: the result is then 0 if `got`
    is all zero too, and otherwise infinite, or with absolute_at_zero the
    difference max|got| itself (for values that may legitimately be zero,
    where any error is already an absolute one)."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    error = float(np.abs(got - want).max(initial=0.0))
    scale = float(np.abs(want).max(initial=0.0))
    if scale == 0.0:
        if absolute_at_zero or error == 0.0:
            return error
        return float("inf")
    return error / scale


def report_failures(failures, separator=", "):
    """The closing line of a check script: "FAILED: a, b" or "PASSED"; the
    script's exit status."""
    if failures:
        print("FAILED: " + separator.join(failures))
        return 1
    print("PASSED")
    return 0

#===----------------------------------------------------------------------===#
# torch: ampc's losses, an AMP training step, export.
#===----------------------------------------------------------------------===#


def small_mlp():
    """Linear(20, 64), ReLU, Linear(64, 10): the MLP of the gradient,
    training and GPU tests."""
    import torch
    return torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 10))


def small_encoder():
    """nn.TransformerEncoderLayer(d_model 32, 4 heads, feed-forward 64,
    dropout 0, batch_first): the encoder of the same tests."""
    import torch
    return torch.nn.TransformerEncoderLayer(d_model=32, nhead=4,
                                            dim_feedforward=64, dropout=0.0,
                                            batch_first=True)


def torch_loss(kind, y, label):
    """torch's form of the loss ampc attaches for --loss=KIND
    (lib/Transforms/AttachLoss.cpp): mean cross-entropy against class ids,
    or the mean of (y - label)^2 over every element. FP16/BF16 outputs (under
    autocast) are widened to float32 first, as AMP computes its loss; float32
    and float64 stay as they are."""
    import torch
    if y.dtype in (torch.float16, torch.bfloat16):
        y = y.float()
    if kind == "mse":
        return ((y - label) ** 2).mean()
    if kind == "cross_entropy":
        return torch.nn.functional.cross_entropy(y, label)
    raise ValueError("no torch form of ampc's --loss=%s" % kind)


def amp_step(forward, optimizer, scaler, x, label, loss_kind):
    """One PyTorch CUDA AMP training step, the way ampc is measured against:
    zero_grad(set_to_none=True), forward under torch.autocast FP16, the loss
    of --loss=LOSS_KIND, GradScaler's scaled backward, step and update.
    Returns the loss."""
    import torch
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.float16):
        loss = torch_loss(loss_kind, forward(x), label)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss


def optimizer_steps(model, inputs, steps, max_skips=16):
    """Calls model.train_step(inputs) (an ampc.runtime.Model) until `steps`
    optimizer steps were taken or `steps + max_skips` calls were made: the
    dynamic loss scaler starts at 2^16 and skips the steps whose FP16
    gradients overflow, halving the scale (GradScaler's warm-up). Returns
    (losses, calls, skipped): losses[k] is the loss before optimizer step
    k + 1."""
    losses, skipped, calls = [], 0, 0
    while len(losses) < steps and calls < steps + max_skips:
        loss = float(model.train_step(inputs))
        calls += 1
        now = model.scaler_state()["skipped_steps"]
        if now == skipped:
            losses.append(loss)
        skipped = now
    return losses, calls, skipped


def export_onnx(model, example, path, training):
    """torch.onnx.export as the tests do: opset 17, one input "input" and
    one output "output", static shapes; in training mode nothing is
    constant-folded, so every parameter stays an initializer named after
    it."""
    import torch
    mode = (torch.onnx.TrainingMode.TRAINING if training
            else torch.onnx.TrainingMode.EVAL)
    model.train(training)
    torch.onnx.export(model, example, path, opset_version=17, training=mode,
                      do_constant_folding=not training,
                      input_names=["input"], output_names=["output"])

#===----------------------------------------------------------------------===#
# Synthetic ONNX models.
#===----------------------------------------------------------------------===#


def write_mlp_onnx(path, batch, sizes, weight, name="mlp"):
    """An MLP through onnx.helper (opset 17, IR version 8): input "x" of
    batch x sizes[0], then Gemm(transB=1) layers to each following size with
    a Relu between two of them, output "logits" of batch x sizes[-1]. The
    layers' initializers are fcI_weight / fcI_bias, the last layer's
    head_weight / head_bias; `weight(rows, cols)` gives each weight, layer by
    layer, the biases are zero."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits, nodes = [], []
    x = "x"
    layers = len(sizes) - 1
    for i in range(layers):
        last = i + 1 == layers
        layer = "head" if last else "fc%d" % i
        w = np.asarray(weight(sizes[i + 1], sizes[i]), np.float32)
        inits += [numpy_helper.from_array(w, layer + "_weight"),
                  numpy_helper.from_array(np.zeros(sizes[i + 1], np.float32),
                                          layer + "_bias")]
        out = "logits" if last else layer
        nodes.append(helper.make_node(
            "Gemm", [x, layer + "_weight", layer + "_bias"], [out],
            name="/%s/Gemm" % layer, transB=1))
        if not last:
            x = "relu%d" % i
            nodes.append(helper.make_node("Relu", [out], [x],
                                          name="/relu%d/Relu" % i))
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                       [batch, sizes[0]])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                       [batch, sizes[-1]])],
        inits)
    model = helper.make_model(graph, producer_name="ampc bench",
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)

#===----------------------------------------------------------------------===#
# Running commands, timing.
#===----------------------------------------------------------------------===#


def run_commands(commands, jobs=2):
    """Runs every command (an argument list), `jobs` at a time (the machine
    has two cores); raises RuntimeError with the first failing command's
    exit status and standard error."""
    pending = list(commands)
    running = []
    while pending or running:
        while pending and len(running) < jobs:
            command = pending.pop(0)
            running.append((command, subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)))
        command, process = running.pop(0)
        _, err = process.communicate()
        if process.returncode != 0:
            raise RuntimeError("%s exited with %d: %s" % (
                " ".join(command), process.returncode, err.strip()))


def median_times(functions, warmup, runs):
    """Calls each function `warmup` times, then times `runs` calls of each,
    the functions taking turns call by call so that all see the same machine
    load; the median seconds of each, in order."""
    for _ in range(warmup):
        for function in functions:
            function()
    times = [[] for _ in functions]
    for _ in range(runs):
        for function, measured in zip(functions, times):
            start = time.perf_counter()
            function()
            measured.append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def save_results(work, results):
    """Each entry of `results` as WORK/KEY.json (one process's results, for
    a later process to compare)."""
    for key, result in results.items():
        with open(os.path.join(work, key + ".json"), "w") as f:
            json.dump(result, f)


def load_result(work, key):
    """What save_results wrote for `key` in `work`."""
    with open(os.path.join(work, key + ".json")) as f:
        return json.load(f)
