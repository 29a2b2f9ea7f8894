#!/usr/bin/env python3
"""Compiles an ONNX model with ampc's CPU target, runs it and checks it.

usage: run_node_test.py [options] MODEL WORKDIR

MODEL is one of
  - a folder of Debian's ONNX node tests (model.onnx, test_data_set_0/):
    the inputs are the test's, the reference its expected outputs; graph
    inputs that feed shapes or axes are bound with --bind-input, as a user
    would (and as test/Import/Inputs/node_sweep.py does);
  - an .onnx or .onnxtext model ('#' lines of an .onnxtext are comments):
    random inputs (normal floats; integers uniform in --int-range), and the
    reference interpreter below, which computes every node in float64
    (numpy; torch in float64 for Conv and the pools where torch has the same
    semantics) on the model ampc exports for the precision
    (`--mode=infer --emit=onnx`): ampc's precision decisions are taken as
    given, every Cast rounds, and every float tensor is rounded to the dtype
    it has in that model, which is where the CPU target stores it.

ampc (`--mode=infer --precision=P`, plus any --arg) writes WORKDIR/model.so,
ampc-embed runs it on WORKDIR/input_*.npy, and every output (or the first
--outputs) is compared:
  - integer and boolean outputs exactly;
  - fp32: |got - want| <= rtol * max(|want|, floor * max|want|) elementwise,
    rtol 1e-5 and floor 1e-2 unless given (the floor keeps a value that
    cancels to nearly zero from demanding more than FP32 accumulation
    gives);
  - fp16/bf16: within --ulps (default 1) units in the last place of
    max(|want|, floor * max|want|) in that dtype, the reference being
    rounded where the values are stored and exact elsewhere; ulps are those
    of the low-precision dtype for every float output, including those the
    model keeps in FP32. (A bf16 run needs ONNX schemas that take bf16:
    where `--emit=onnx` warns that it cannot express a decision, the
    exported model is no reference and the check stops.)
Prints the largest error of each output and "ok", or the mismatches and
exits 1. The numbers are kept in WORKDIR for inspection.
"""
import argparse
import glob
import itertools
import math
import os
import subprocess
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import onnx.parser
import onnx.shape_inference

from ampc_testing import round_bf16

torch = F = None


def need_torch():
    global torch, F
    if torch is None:
        import torch as t
        import torch.nn.functional as f
        torch, F = t, f

COMPILE_TIME_OPERANDS = {
    "Reshape": {1}, "Expand": {1}, "Slice": {1, 2, 3, 4}, "Squeeze": {1},
    "Unsqueeze": {1}, "ReduceSum": {1}, "ReduceMean": {1}, "ReduceMax": {1},
    "Dropout": {1, 2}, "Range": {0, 1, 2}, "ConstantOfShape": {0},
}
T = onnx.TensorProto
FLOATS = {T.FLOAT, T.FLOAT16, T.BFLOAT16, T.DOUBLE}
NUMPY = {T.FLOAT: np.float32, T.DOUBLE: np.float64, T.FLOAT16: np.float16,
         T.BFLOAT16: np.float32, T.INT64: np.int64, T.INT32: np.int32,
         T.INT8: np.int8, T.UINT8: np.uint8, T.BOOL: np.bool_,
         T.INT16: np.int16, T.UINT16: np.uint16, T.UINT32: np.uint32,
         T.UINT64: np.uint64}


def F32(value):
    """An ONNX float attribute's default: the float32 nearest `value`."""
    return float(np.float32(value))


# --precision=fp64: the library computes every FP32 tensor in FP64, so the
# reference does not round them.
WIDE = False


def round_to(x, dtype):
    """`x` rounded to ONNX dtype `dtype`, kept as float64 for floats."""
    x = np.asarray(x)
    if dtype == T.FLOAT:
        return x.astype(np.float64 if WIDE else np.float32).astype(np.float64)
    if dtype == T.FLOAT16:
        return x.astype(np.float16).astype(np.float64)
    if dtype == T.BFLOAT16:
        return round_bf16(x).astype(np.float64)
    if dtype == T.DOUBLE:
        return x.astype(np.float64)
    if dtype == T.BOOL:
        return x.astype(np.bool_)
    return x.astype(NUMPY[dtype])


def load_model(path):
    if path.endswith(".onnxtext"):
        with open(path) as f:
            text = "".join(l for l in f if not l.lstrip().startswith("#"))
        return onnx.parser.parse_model(text)
    return onnx.load(path)


# --------------------------------------------------------------------------
# The float64 reference interpreter.
# --------------------------------------------------------------------------

def window_geometry(x, attrs, kernel):
    n = x.ndim - 2
    strides = list(attrs.get("strides", [1] * n))
    dilations = list(attrs.get("dilations", [1] * n))
    pads = list(attrs.get("pads", [0] * 2 * n))
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise NotImplementedError("auto_pad in the reference interpreter")
    ceil = bool(attrs.get("ceil_mode", 0))
    out = []
    for d in range(n):
        span = (kernel[d] - 1) * dilations[d] + 1
        num = x.shape[2 + d] + pads[d] + pads[d + n] - span
        o = (-(-num // strides[d]) if ceil else num // strides[d]) + 1
        if ceil and (o - 1) * strides[d] >= x.shape[2 + d] + pads[d]:
            o -= 1
        out.append(o)
    return strides, dilations, pads[:n], pads[n:], out


def pool_numpy(x, attrs, kind):
    """MaxPool / AveragePool by enumerating windows (any padding)."""
    kernel = list(attrs["kernel_shape"])
    strides, dilations, begin, end, out = window_geometry(x, attrs, kernel)
    n = x.ndim - 2
    spatial = x.shape[2:]
    y = np.zeros(x.shape[:2] + tuple(out))
    idx = np.zeros(x.shape[:2] + tuple(out), np.int64)
    plane = int(np.prod(spatial))
    column = attrs.get("storage_order", 0) == 1
    for o in itertools.product(*[range(v) for v in out]):
        coords = [[o[d] * strides[d] - begin[d] + k * dilations[d]
                   for k in range(kernel[d])] for d in range(n)]
        valid = [[c for c in cs if 0 <= c < spatial[d]]
                 for d, cs in enumerate(coords)]
        padded = [sum(1 for c in cs if c < spatial[d] + end[d])
                  for d, cs in enumerate(coords)]
        window = x[(slice(None), slice(None)) + np.ix_(*valid)]
        flat = window.reshape(x.shape[0], x.shape[1], -1)
        at = (slice(None), slice(None)) + o
        if kind == "max":
            arg = np.argmax(flat, axis=2)
            # NaN wins (np.argmax picks the first NaN).
            y[at] = np.take_along_axis(flat, arg[..., None], 2)[..., 0]
            pos = np.unravel_index(arg, [len(v) for v in valid])
            real = [np.asarray(valid[d])[pos[d]] for d in range(n)]
            offset = np.zeros_like(arg)
            dims = range(n - 1, -1, -1) if column else range(n)
            for d in dims:
                offset = offset * spatial[d] + real[d]
            planes = (np.arange(x.shape[0])[:, None] * x.shape[1]
                      + np.arange(x.shape[1])[None, :])
            idx[at] = planes * plane + offset
        else:
            count = (np.prod(padded) if attrs.get("count_include_pad", 0)
                     else flat.shape[2])
            y[at] = flat.sum(axis=2) / count
    return y, idx


def torch_pool_ok(x, attrs, kind):
    """Whether torch's pooling computes this ONNX pool (symmetric pads of at
    most half the kernel, no dilation for AveragePool, 1-3 dimensions)."""
    n = x.ndim - 2
    kernel = list(attrs["kernel_shape"])
    pads = list(attrs.get("pads", [0] * 2 * n))
    dil = list(attrs.get("dilations", [1] * n))
    return (1 <= n <= 3 and pads[:n] == pads[n:]
            and all(2 * p <= k for p, k in zip(pads, kernel))
            and (kind == "max" or dil == [1] * n)
            and attrs.get("storage_order", 0) == 0)


def pool(x, attrs, kind):
    if not torch_pool_ok(x, attrs, kind):
        return pool_numpy(x, attrs, kind)
    need_torch()
    n = x.ndim - 2
    kernel = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides", [1] * n))
    pads = list(attrs.get("pads", [0] * 2 * n))[:n]
    ceil = bool(attrs.get("ceil_mode", 0))
    t = torch.from_numpy(np.ascontiguousarray(x, np.float64))
    if kind == "max":
        fn = [F.max_pool1d, F.max_pool2d, F.max_pool3d][n - 1]
        y, i = fn(t, kernel, strides, pads,
                  list(attrs.get("dilations", [1] * n)), ceil, True)
        plane = int(np.prod(x.shape[2:]))
        base = (np.arange(x.shape[0] * x.shape[1]) * plane).reshape(
            x.shape[:2] + (1,) * n)
        return y.numpy(), i.numpy() + base
    fn = [F.avg_pool1d, F.avg_pool2d, F.avg_pool3d][n - 1]
    y = fn(t, kernel, strides, pads, ceil,
           bool(attrs.get("count_include_pad", 0)))
    return y.numpy(), None


def conv(x, w, b, attrs):
    n = x.ndim - 2
    strides, dilations, begin, end, _ = window_geometry(
        x, attrs, list(w.shape[2:]))
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(begin, end)))
    need_torch()
    fn = [F.conv1d, F.conv2d, F.conv3d][n - 1]
    y = fn(torch.from_numpy(np.ascontiguousarray(xp, np.float64)),
           torch.from_numpy(np.ascontiguousarray(w, np.float64)),
           None if b is None else torch.from_numpy(np.asarray(b, np.float64)),
           strides, 0, dilations, attrs.get("group", 1))
    return y.numpy()


def log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    z = x - m
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def nll(logp, labels, weights, reduction, ignore):
    labels = labels.astype(np.int64)
    ignored = labels == ignore if ignore is not None else np.zeros_like(labels, bool)
    safe = np.where(ignored, 0, labels)
    picked = np.take_along_axis(logp, np.expand_dims(safe, 1), 1)[:, 0]
    w = np.ones(labels.shape) if weights is None else weights[safe]
    w = np.where(ignored, 0.0, w)
    loss = -picked * w
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.array(loss.sum())
    return np.array(loss.sum() / w.sum())


def scatter_combine(old, update, attrs):
    r = attrs.get("reduction", "none")
    if r == "none":
        return update
    if r == "add":
        return old + update
    if r == "mul":
        return old * update
    return (np.maximum if r == "max" else np.minimum)(old, update)


def reduce_axes(node, ins, attrs):
    axes = attrs.get("axes")
    if axes is None and len(ins) > 1 and ins[1] is not None:
        axes = ins[1]
    if axes is None or len(axes) == 0:
        if attrs.get("noop_with_empty_axes", 0):
            return None
        return tuple(range(ins[0].ndim))
    return tuple(int(a) % ins[0].ndim for a in axes)


def run_node(node, ins, attrs, opset):
    op = node.op_type
    x = ins[0] if ins else None
    if op in ("Identity",):
        return [x]
    if op == "Relu":
        return [np.maximum(x, 0)]
    if op in ("Tanh", "Exp", "Sqrt", "Neg"):
        return [{"Tanh": np.tanh, "Exp": np.exp, "Sqrt": np.sqrt,
                 "Neg": np.negative}[op](x)]
    if op == "Erf":
        return [np.vectorize(math.erf)(x)]
    if op in ("Add", "Sub", "Mul", "Div"):
        return [{"Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
                 "Div": np.divide}[op](x, ins[1])]
    if op == "Cast":
        return [x]  # the rounding to `to` happens on the output
    if op == "MatMul":
        return [np.matmul(x, ins[1])]
    if op == "Gemm":
        a = x.T if attrs.get("transA", 0) else x
        b = ins[1].T if attrs.get("transB", 0) else ins[1]
        y = attrs.get("alpha", 1.0) * (a @ b)
        if len(ins) > 2 and ins[2] is not None:
            y = y + attrs.get("beta", 1.0) * ins[2]
        return [y]
    if op == "Conv":
        return [conv(x, ins[1], ins[2] if len(ins) > 2 else None, attrs)]
    if op == "MaxPool":
        y, i = pool(x, attrs, "max")
        return [y, i]
    if op == "AveragePool":
        return [pool(x, attrs, "avg")[0]]
    if op == "GlobalAveragePool":
        return [x.mean(axis=tuple(range(2, x.ndim)), keepdims=True)]
    if op in ("Softmax", "LogSoftmax"):
        axis = attrs.get("axis", -1 if opset >= 13 else 1)
        lp = log_softmax(x, axis)
        return [lp if op == "LogSoftmax" else np.exp(lp)]
    if op == "LayerNormalization":
        axis = attrs.get("axis", -1) % x.ndim
        axes = tuple(range(axis, x.ndim))
        eps = attrs.get("epsilon", F32(1e-5))
        mean = x.mean(axis=axes, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
        inv = 1 / np.sqrt(var + eps)
        y = (x - mean) * inv * ins[1]
        if len(ins) > 2 and ins[2] is not None:
            y = y + ins[2]
        return [y, mean, inv]
    if op == "BatchNormalization":
        s, b, m, v = ins[1:5]
        eps = attrs.get("epsilon", F32(1e-5))
        mom = attrs.get("momentum", F32(0.9))
        shape = (1, -1) + (1,) * (x.ndim - 2)
        if attrs.get("training_mode", 0):
            axes = (0,) + tuple(range(2, x.ndim))
            bm, bv = x.mean(axis=axes), x.var(axis=axes)
            y = (x - bm.reshape(shape)) / np.sqrt(bv.reshape(shape) + eps)
            rm, rv = m * mom + bm * (1 - mom), v * mom + bv * (1 - mom)
        else:
            y = (x - m.reshape(shape)) / np.sqrt(v.reshape(shape) + eps)
            rm, rv = m, v
        return [y * s.reshape(shape) + b.reshape(shape), rm, rv]
    if op == "Dropout":
        training = attrs.get("training_mode", 0)
        if len(ins) > 2 and ins[2] is not None:
            training = bool(ins[2])
        ratio = attrs.get("ratio", 0.5)
        if len(ins) > 1 and ins[1] is not None:
            ratio = float(ins[1])
        if training and ratio > 0:
            raise NotImplementedError("random dropout")
        return [x, np.ones(x.shape, np.bool_)]
    if op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceProd"):
        axes = reduce_axes(node, ins, attrs)
        if axes is None:
            return [x]
        fn = {"ReduceSum": np.sum, "ReduceMean": np.mean,
              "ReduceMax": np.max, "ReduceProd": np.prod}[op]
        return [fn(x, axis=axes, keepdims=bool(attrs.get("keepdims", 1)))]
    if op == "Concat":
        return [np.concatenate(ins, axis=attrs["axis"])]
    if op == "Gather":
        axis = attrs.get("axis", 0) % x.ndim
        idx = ins[1].astype(np.int64)
        idx = np.where(idx < 0, idx + x.shape[axis], idx)
        return [np.take(x, idx, axis=axis)]
    if op == "GatherElements":
        axis = attrs.get("axis", 0) % x.ndim
        idx = ins[1].astype(np.int64)
        pos = [np.arange(n).reshape([-1 if d == e else 1 for e in range(idx.ndim)])
               for d, n in enumerate(idx.shape)]
        pos[axis] = np.where(idx < 0, idx + x.shape[axis], idx)
        return [x[tuple(pos)]]
    if op == "ScatterElements":
        axis = attrs.get("axis", 0) % x.ndim
        idx = ins[1].astype(np.int64)
        out = x.copy()
        for at in np.ndindex(*idx.shape):
            k = int(idx[at]) + (x.shape[axis] if idx[at] < 0 else 0)
            to = at[:axis] + (k,) + at[axis + 1:]
            out[to] = scatter_combine(out[to], ins[2][at], attrs)
        return [out]
    if op in ("GatherND", "ScatterND"):
        idx = ins[1].astype(np.int64)
        batch = attrs.get("batch_dims", 0)
        k = idx.shape[-1]
        out = [] if op == "GatherND" else x.copy()
        for at in np.ndindex(*idx.shape[:-1]):
            tup = tuple(int(i) + (x.shape[batch + j] if i < 0 else 0)
                        for j, i in enumerate(idx[at]))
            where = at[:batch] + tup
            if op == "GatherND":
                out.append(x[where])
            else:
                out[where] = scatter_combine(out[where], ins[2][at], attrs)
        if op == "GatherND":
            shape = idx.shape[:-1] + x.shape[batch + k:]
            return [np.array(out, x.dtype).reshape(shape)]
        return [out]
    if op == "TopK":
        axis = attrs.get("axis", -1) % x.ndim
        k = int(ins[1][0])
        largest = attrs.get("largest", 1)
        moved = np.moveaxis(x, axis, -1)
        order = np.zeros(moved.shape[:-1] + (k,), np.int64)
        for at in np.ndindex(*moved.shape[:-1]):
            row = moved[at]
            # NaN beyond every number; equal values by position.
            key = lambda i: ((1 if math.isnan(row[i]) else 0,
                              0 if math.isnan(row[i]) else row[i]) if largest
                             else (-1 if math.isnan(row[i]) else 0,
                                   0 if math.isnan(row[i]) else -row[i]))
            order[at] = sorted(range(len(row)), key=lambda i: (key(i), -i),
                               reverse=True)[:k]
        order = np.moveaxis(order, -1, axis)
        return [np.take_along_axis(x, order, axis), order]
    if op == "Slice":
        starts, ends = ins[1], ins[2]
        axes = ins[3] if len(ins) > 3 and ins[3] is not None else range(len(starts))
        steps = ins[4] if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
        index = [slice(None)] * x.ndim
        for s, e, a, st in zip(starts, ends, axes, steps):
            index[int(a) % x.ndim] = slice(int(s), int(e), int(st))
        return [x[tuple(index)]]
    if op == "Shape":
        start = attrs.get("start", 0)
        end = attrs.get("end", x.ndim)
        return [np.array(x.shape[slice(start, end)], np.int64)]
    if op == "Reshape":
        shape = [d if d != 0 else x.shape[i] for i, d in enumerate(ins[1])]
        return [x.reshape(shape)]
    if op == "Transpose":
        return [np.transpose(x, attrs.get("perm"))]
    if op == "Flatten":
        axis = attrs.get("axis", 1) % (x.ndim + 1) if x.ndim else 0
        return [x.reshape(int(np.prod(x.shape[:axis])), -1)]
    if op == "SoftmaxCrossEntropyLoss":
        lp = log_softmax(x, 1)
        weights = ins[2] if len(ins) > 2 and ins[2] is not None else None
        loss = nll(lp, ins[1], weights, attrs.get("reduction", "mean"),
                   attrs.get("ignore_index"))
        return [loss, lp]
    if op == "NegativeLogLikelihoodLoss":
        weights = ins[2] if len(ins) > 2 and ins[2] is not None else None
        return [nll(x, ins[1], weights, attrs.get("reduction", "mean"),
                    attrs.get("ignore_index"))]
    raise NotImplementedError(f"the reference interpreter has no {op}")


def attributes(node):
    out = {}
    for a in node.attribute:
        v = onnx.helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


def interpret(model, feeds):
    """Runs `model` in float64, rounding every tensor to its dtype."""
    # Only the dtypes are wanted: drop the declared shapes, which ONNX 1.12's
    # shape inference may dispute (it lacks the ceil_mode rule that drops a
    # window starting in the end padding, which ampc and torch have).
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for vi in list(model.graph.output) + list(model.graph.value_info):
        vi.type.tensor_type.ClearField("shape")
    model = onnx.shape_inference.infer_shapes(model)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    dtypes = {}
    for vi in list(model.graph.input) + list(model.graph.output) + list(model.graph.value_info):
        dtypes[vi.name] = vi.type.tensor_type.elem_type
    values = {}
    for t in model.graph.initializer:
        values[t.name] = round_to(onnx.numpy_helper.to_array(t), t.data_type)
        dtypes[t.name] = t.data_type
    for name, v in feeds.items():
        values[name] = round_to(v, dtypes[name])
    for node in model.graph.node:
        attrs = attributes(node)
        if node.op_type == "Constant":
            if "value" in attrs:
                outs = [onnx.numpy_helper.to_array(attrs["value"])]
                dtypes.setdefault(node.output[0], attrs["value"].data_type)
            else:
                (key, v), = attrs.items()
                outs = [np.array(v, np.int64 if "int" in key else np.float32)]
        else:
            ins = [values[i] if i else None for i in node.input]
            outs = run_node(node, ins, attrs, opset)
        for name, v in zip(node.output, outs):
            if not name:
                continue
            dtype = attrs["to"] if node.op_type == "Cast" else dtypes.get(name)
            values[name] = round_to(v, dtype) if dtype else np.asarray(v)
            if dtype:
                dtypes[name] = dtype
    return [values[o.name] for o in model.graph.output], dtypes


# --------------------------------------------------------------------------
# Running ampc and comparing.
# --------------------------------------------------------------------------

INTEGER_NAMES = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool")


def parse_embed(text):
    """ampc-embed's outputs: float64 arrays, and integer ones as arrays of
    Python ints (exact: a double holds neither i64 nor u64)."""
    outputs, current, integer = [], None, []
    for line in text.splitlines():
        if line.startswith("output "):
            current = []
            outputs.append(current)
            integer.append(line.split("(", 1)[1].split(",")[0] in INTEGER_NAMES)
        elif current is not None and integer[-1]:
            current.append(int(line))
        elif current is not None:
            current.append(float(line) if line not in ("nan", "-nan") else np.nan)
    return [np.array(o, object) if exact else np.array(o, np.float64)
            for o, exact in zip(outputs, integer)]


def compare(name, got, want, dtype, args):
    want = np.asarray(want).reshape(-1)
    if got.shape != want.shape:
        return f"{name}: {got.size} values, expected {want.size}", 0.0
    if dtype not in FLOATS:  # exactly, as Python ints
        bad = [k for k, (g, w) in enumerate(zip(got.tolist(), want.tolist()))
               if int(g) != int(w)]
        return (f"{name}: {len(bad)} values differ, first at {bad[0]}: got "
                f"{got[bad[0]]}, want {want[bad[0]]}" if bad else None), 0.0
    if dtype == T.FLOAT and not WIDE:  # embed prints 9 digits: the float
        got = got.astype(np.float32).astype(np.float64)
    want = want.astype(np.float64)
    nan = np.isnan(want)
    if (np.isnan(got) != nan).any():
        i = np.nonzero(np.isnan(got) != nan)[0][0]
        return f"{name}: NaN mismatch at {i}: got {got[i]}, want {want[i]}", 0.0
    got, want = got[~nan], want[~nan]
    same = got == want  # infinities included
    finite = np.isfinite(want) & ~same
    if (~np.isfinite(want) & ~same).any():
        return f"{name}: infinity mismatch", 0.0
    err = np.zeros(want.shape)
    if args.precision in ("fp32", "fp64"):
        scale = np.abs(want[np.isfinite(want)]).max(initial=0.0)
        denom = np.maximum(np.abs(want), args.floor * scale)
        denom = np.where(denom == 0, 1.0, denom)
        err[finite] = np.abs(got - want)[finite] / denom[finite]
        limit = args.rtol
    else:
        # ulps of the reference, or of a floor for results that cancel to
        # nearly zero (FP32 accumulation is not exact either).
        scale = np.abs(want[np.isfinite(want)]).max(initial=0.0)
        lowp = np.float16 if args.precision == "fp16" else None
        ref = np.maximum(np.abs(want), args.floor * scale)
        if lowp is not None:
            ulp = np.spacing(ref.astype(np.float16)).astype(np.float64)
        else:
            e = np.floor(np.log2(np.maximum(ref, 2.0 ** -126)))
            ulp = 2.0 ** (e - 7)
        err[finite] = np.abs(got - want)[finite] / ulp[finite]
        limit = args.ulps
    worst = float(err.max(initial=0.0))
    if worst > limit:
        i = int(np.argmax(err))
        return (f"{name}: error {worst:.3g} > {limit:g} at {i}: got {got[i]!r},"
                f" want {want[i]!r}"), worst
    return None, worst


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("workdir")
    p.add_argument("--ampc", default="ampc")
    p.add_argument("--embed", default="ampc-embed")
    p.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "bf16", "fp64"])
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--floor", type=float, default=1e-2)
    p.add_argument("--ulps", type=float, default=1.0)
    p.add_argument("--int-range", default="0:2")
    p.add_argument("--scale", type=float, default=1.0,
                   help="standard deviation of random float inputs")
    p.add_argument("--quantize", type=float, default=0.0,
                   help="round random float inputs to multiples of this "
                        "(ties for MaxPool's first-maximum rule)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--outputs", type=int, default=None)
    p.add_argument("--arg", action="append", default=[],
                   help="an extra ampc argument")
    p.add_argument("--input-npy", action="append", default=[],
                   help="the inputs, in order, instead of random ones")
    p.add_argument("--expect-npy", action="append", default=[],
                   help="the reference outputs, in order, instead of the "
                        "interpreter's")
    args = p.parse_args()
    global WIDE
    WIDE = args.precision == "fp64"
    os.makedirs(args.workdir, exist_ok=True)
    rng = np.random.default_rng(args.seed)

    node_test = os.path.isdir(args.model)
    model_path = os.path.join(args.model, "model.onnx") if node_test else args.model
    model = load_model(model_path)
    if model_path.endswith(".onnxtext"):
        model_path = os.path.join(args.workdir, "model.onnx")
        onnx.save(model, model_path)
    init_names = {t.name for t in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in init_names]
    bind = []
    if node_test:
        names = [i.name for i in model.graph.input]
        bound = {n.input[k] for n in model.graph.node
                 for k in COMPILE_TIME_OPERANDS.get(n.op_type, ())
                 if k < len(n.input) and n.input[k] in names}
        data = os.path.join(args.model, "test_data_set_0")
        feeds = {}
        for i, name in enumerate(names):
            pb = os.path.join(data, f"input_{i}.pb")
            if name in bound:
                bind.append(f"--bind-input={name}={pb}")
            else:
                feeds[name] = onnx.numpy_helper.to_array(onnx.load_tensor(pb))
        wants = [onnx.numpy_helper.to_array(onnx.load_tensor(f)) for f in
                 sorted(glob.glob(os.path.join(data, "output_*.pb")))]
    elif args.input_npy:
        feeds = {i.name: np.load(f) for i, f in zip(graph_inputs, args.input_npy)}
    else:
        lo, hi = (int(v) for v in args.int_range.split(":"))
        feeds = {}
        for i in graph_inputs:
            tt = i.type.tensor_type
            shape = [d.dim_value for d in tt.shape.dim]
            if tt.elem_type in FLOATS:
                v = rng.standard_normal(shape) * args.scale
                if args.quantize:
                    v = np.round(v / args.quantize) * args.quantize
                feeds[i.name] = v.astype(
                    np.float64 if tt.elem_type == T.DOUBLE or WIDE
                    else np.float32)
            elif tt.elem_type == T.BOOL:
                feeds[i.name] = rng.integers(0, 2, shape).astype(np.bool_)
            else:
                feeds[i.name] = rng.integers(lo, hi, shape).astype(NUMPY[tt.elem_type])

    # Compile, run.
    so = os.path.join(args.workdir, "model.so")
    # The ops as written: a training-mode Dropout or BatchNormalization (and
    # a torch model exported in training mode) keeps its mode in `infer`.
    common = [args.ampc, model_path, "--mode=infer", "--infer-training-mode",
              f"--precision={args.precision}"] + bind + args.arg
    # The CPU target by name: on a machine with nvcc and a CUDA driver the
    # default would be the CUDA target.
    r = subprocess.run(common + ["--target=cpu", "-o", so], capture_output=True,
                       text=True)
    if r.returncode != 0:
        print("ampc failed:", r.stderr.strip())
        return 1
    npys = []
    for k, name in enumerate(feeds):
        path = os.path.join(args.workdir, f"input_{k}.npy")
        np.save(path, feeds[name])
        npys.append(path)
    r = subprocess.run([args.embed, so] + npys, capture_output=True, text=True)
    if r.returncode != 0:
        print("ampc-embed failed:", r.stderr.strip())
        return 1
    with open(os.path.join(args.workdir, "embed.txt"), "w") as f:
        f.write(r.stdout)
    gots = parse_embed(r.stdout)

    # Reference.
    out_types = [o.type.tensor_type.elem_type for o in model.graph.output]
    if args.expect_npy:
        wants = [np.load(f) for f in args.expect_npy]
    elif not node_test:
        ref_model = model
        if args.precision not in ("fp32", "fp64"):
            exported = os.path.join(args.workdir, "reference.onnx")
            r = subprocess.run(common + ["--emit=onnx", "-o", exported],
                               capture_output=True, text=True)
            if r.returncode != 0 or "warning" in r.stderr:
                # A warning says the ONNX model cannot express a decision
                # (an op schema without bf16): it would not be a reference.
                print("ampc --emit=onnx failed:", r.stderr.strip())
                return 1
            ref_model = onnx.load(exported)
        wants, _ = interpret(ref_model, feeds)

    count = len(wants) if args.outputs is None else args.outputs
    if len(gots) < count:
        print(f"the library gives {len(gots)} outputs, the reference {len(wants)}")
        return 1
    failures = []
    for k in range(count):
        name = model.graph.output[k].name
        problem, worst = compare(name, gots[k], wants[k], out_types[k], args)
        unit = "relative" if args.precision in ("fp32", "fp64") else "ulps"
        print(f"{name}: largest error {worst:.3g} ({unit})")
        if problem:
            failures.append(problem)
    for f in failures:
        print("mismatch:", f)
    if failures:
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
