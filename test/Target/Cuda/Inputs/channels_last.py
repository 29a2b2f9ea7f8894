#!/usr/bin/env python3
"""A small CNN step with hand-set `channels_last`, under the CUDA execution
on the CPU, against the same step in NCHW.

usage: channels_last.py WORKDIR

One module per layout and type (f32; f16 data with FP32 BatchNorm
parameters): a grouped, padded convolution with bias, training-mode
BatchNormalization, ReLU, MaxPool (with Indices), AveragePool, then the
adjoints from an upstream gradient of the AveragePool's result:
average_pool_grad, max_pool_grad, relu_grad, batch_norm_grad,
conv_backward_data and conv_backward_weight. The channels-last module takes
and returns NHWC tensors (the weight and its gradient OHWI) and marks every
conv, pool and BatchNorm op `channels_last`; each is compiled with ampc-opt,
ampc-translate --ampc-to-cuda and `ampc SOURCE.cu --target=cuda-sim`, run on
the same data (permuted), and its results, permuted back (MaxPool's NHWC
flat indices mapped to NCHW's), must be the NCHW module's bits.

Then the driver: test/Gradcheck/cnn.onnxtext (Conv, training BatchNorm,
ReLU, MaxPool, Conv with bias, GlobalAveragePool, Gemm) compiled for
cuda-sim with --channels-last=on and =off, training at fp32 with AdamW:
the channels-last source has NHWC cuDNN plans, and three training steps
give the same losses, parameters and checkpointed state, bit for bit.
(At fp16 the channels-last step's weight copies go wrong after a skipped
step: the transpose into the copy reads a cast the skipped optimizer did
not write; not this script's subject.)

Prints one line per check, "ok" or "FAILED".
"""
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "..", "python"))
# checkpoint_format (the checkpoint reader the training tests share).
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "Training", "Inputs"))
from ampc.runtime import Model  # noqa: E402

N, C, H, W, M, GROUP = 2, 4, 6, 5, 8, 2
PH, PW = 3, 3  # MaxPool k3 s2 p1 over 6x5; AveragePool k2 s1 pads end 1


def tensor(shape, t):
    return "tensor<%sx%s>" % ("x".join(str(d) for d in shape), t)


def module(nhwc, t):
    def data(n, c, h, w):  # an activation's type
        return tensor((n, h, w, c) if nhwc else (n, c, h, w), t)
    p = "f32"
    cl = "channels_last, " if nhwc else ""
    x, y = data(N, C, H, W), data(N, M, H, W)
    wt = tensor((M, 3, 3, C // GROUP) if nhwc else (M, C // GROUP, 3, 3), t)
    pooled = data(N, M, PH, PW)
    idx = tensor((N, PH, PW, M) if nhwc else (N, M, PH, PW), "i64")
    vec, vecp = tensor((M,), t), tensor((M,), p)
    conv = "{%sgroup = %d : i64, pads = array<i64: 1, 1, 1, 1>}" % (cl, GROUP)
    maxp = ("{%skernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, "
            "strides = array<i64: 2, 2>}" % cl)
    avgp = ("{%skernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 1, 1>, "
            "count_include_pad = 0 : i64}" % cl)
    bn = ("{%sepsilon = 1.0e-03 : f32, momentum = 0.9 : f32, "
          "training_mode = 1 : i64, saved_statistics}" % cl)
    bng = "{%straining_mode = 1 : i64}" % cl
    return f"""func.func @forward(%x: {x}, %w: {wt}, %b: {vec}, %s: {vecp}, %bb: {vecp}, %m: {vecp}, %v: {vecp}, %g: {pooled}) -> ({pooled}, {idx}, {pooled}, {vecp}, {vecp}, {x}, {wt}, {vecp}, {vecp}) {{
  %c = ampc.conv %x, %w, %b {conv} : ({x}, {wt}, {vec}) -> {y}
  %n:5 = ampc.batch_normalization %c, %s, %bb, %m, %v {bn} : ({y}, {vecp}, {vecp}, {vecp}, {vecp}) -> ({y}, {vecp}, {vecp}, {vecp}, {vecp})
  %r = ampc.relu %n#0 : {y}
  %p:2 = ampc.max_pool %r {maxp} : ({y}) -> ({pooled}, {idx})
  %a = ampc.average_pool %p#0 {avgp} : ({pooled}) -> {pooled}
  %da = ampc.average_pool_grad %g {avgp} : ({pooled}) -> {pooled}
  %dr = ampc.max_pool_grad %da, %p#1 {maxp} : ({pooled}, {idx}) -> {y}
  %dn = ampc.relu_grad %dr, %r : {y}
  %dc:3 = ampc.batch_norm_grad %dn, %c, %s, %n#3, %n#4 {bng} : ({y}, {y}, {vecp}, {vecp}, {vecp}) -> ({y}, {vecp}, {vecp})
  %dx = ampc.conv_backward_data %dc#0, %w {conv} : ({y}, {wt}) -> {x}
  %dw = ampc.conv_backward_weight %x, %dc#0 {conv} : ({x}, {y}) -> {wt}
  return %p#0, %p#1, %a, %n#1, %n#2, %dx, %dw, %dc#1, %dc#2 : {pooled}, {idx}, {pooled}, {vecp}, {vecp}, {x}, {wt}, {vecp}, {vecp}
}}
"""


def build(work, name, text):
    source = os.path.join(work, name + ".mlir")
    with open(source, "w") as f:
        f.write(text)
    ir = subprocess.run(
        ["ampc-opt", source, "--ampc-fuse-epilogues", "--ampc-fuse",
         "--ampc-assign-accumulation",
         "--ampc-assign-launch-geometry=target=cuda",
         "--ampc-plan-memory=target=cuda stage-inputs=1"],
        check=True, capture_output=True, text=True).stdout
    cuda = subprocess.run(["ampc-translate", "--ampc-to-cuda"], input=ir,
                          check=True, capture_output=True, text=True).stdout
    cu, lib = os.path.join(work, name + ".cu"), os.path.join(work, name + ".so")
    with open(cu, "w") as f:
        f.write(cuda)
    subprocess.run(["ampc", cu, "--target=cuda-sim", "-o", lib], check=True)
    return lib, cuda


def to_nhwc(a):
    return np.ascontiguousarray(np.moveaxis(a, 1, -1))


def to_nchw(a):
    return np.ascontiguousarray(np.moveaxis(a, -1, 1))


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(39)
    failed = False
    for t, dtype in (("f32", np.float32), ("f16", np.float16)):
        x = rng.standard_normal((N, C, H, W)).astype(dtype)
        w = (rng.standard_normal((M, C // GROUP, 3, 3)) * 0.3).astype(dtype)
        b = rng.standard_normal(M).astype(dtype)
        s = rng.standard_normal(M).astype(np.float32)
        bb = rng.standard_normal(M).astype(np.float32)
        m = rng.standard_normal(M).astype(np.float32)
        v = rng.random(M).astype(np.float32) + 0.5
        g = rng.standard_normal((N, M, PH, PW)).astype(dtype)
        # Ties for MaxPool: a few repeated values in X.
        x[:, :, ::2, ::2] = x[:, :, :1, :1]
        results = {}
        for nhwc in (False, True):
            lib, cuda = build(work, "%s-%s" % (t, "nhwc" if nhwc else "nchw"),
                              module(nhwc, t))
            if nhwc and ", true, " not in cuda.split("kConvolutions[]")[1].split("};")[0]:
                print("%s: the channels-last convolutions are not NHWC plans "
                      "FAILED" % t)
                failed = True
            args = [x, w, b, s, bb, m, v, g]
            if nhwc:
                args = [to_nhwc(x), to_nhwc(w), b, s, bb, m, v, to_nhwc(g)]
            with Model(lib) as model:
                out = [np.array(o) for o in model.infer(*args)]
            if nhwc:
                for i in (0, 2, 5, 6):
                    out[i] = to_nchw(out[i])
                # NHWC flat index ((n*H + h)*W + w)*C + c -> NCHW's.
                flat = to_nchw(out[1])
                n_, rest = np.divmod(flat, H * W * M)
                hw, c_ = np.divmod(rest, M)
                out[1] = np.where(flat < 0, -1, (n_ * M + c_) * H * W + hw)
            results[nhwc] = out
        names = ["pooled", "indices", "averaged", "running mean",
                 "running var", "dX", "dW", "dScale", "dBias"]
        differ = [nm for nm, a, bt in zip(names, results[False], results[True])
                  if a.shape != bt.shape or a.tobytes() != bt.tobytes()]
        ties = int(np.sum(np.unique(results[False][1], return_counts=True)[1] > 1))
        ok = not differ and ties > 0
        failed |= not ok
        print("%s: channels-last equals NCHW bit for bit (%d outputs, %d "
              "shared argmaxes)%s %s" % (
                  t, len(names), ties,
                  "" if not differ else ", differ: " + ", ".join(differ),
                  "ok" if ok else "FAILED"))
    failed |= not driver(work)
    return 1 if failed else 0


def train_steps(lib, checkpoint):
    """Three training steps of `lib` on seeded data (the labels ampc
    attaches drawn from 0 and 1): each step's loss, every parameter and the
    checkpointed state (written to `checkpoint`), as bytes."""
    import checkpoint_format
    with Model(lib) as m:
        losses = []
        for step in range(3):
            rng = np.random.default_rng(100 + step)
            batch = []
            for info in m.inputs:
                if info.dtype.kind == "f":
                    batch.append(rng.standard_normal(info.shape)
                                 .astype(info.dtype))
                else:  # the label ampc attaches
                    batch.append(rng.integers(0, 2, info.shape)
                                 .astype(info.dtype))
            losses.append(np.array(m.train_step(batch)).tobytes())
        params = {p.name: np.array(m.get_parameter(p.name)).tobytes()
                  for p in m.parameters}
        m.save_checkpoint(checkpoint)
        state = checkpoint_format.read(checkpoint, verify_checksum=False)[1]
        state = {k: np.asarray(v).tobytes() for k, v in state.items()}
    return losses, params, state


def driver(work):
    text = open(os.path.join(HERE, "..", "..", "..", "Gradcheck",
                             "cnn.onnxtext")).read()
    model = os.path.join(work, "cnn.onnxtext")
    with open(model, "w") as f:
        f.write(text.split("#--- cnn.onnxtext\n", 1)[1])
    libs, plans = {}, {}
    for layout in ("on", "off"):
        flags = [model, "--target=cuda-sim", "--precision=fp32",
                 "--channels-last=" + layout]
        source = os.path.join(work, "cnn-%s.cu" % layout)
        subprocess.run(["ampc"] + flags + ["--emit=cuda", "-o", source],
                       check=True)
        table = open(source).read().split("kConvolutions[] = {", 1)[1]
        table = table.split("};", 1)[0]
        # {..., beta, channels-last, workspace slot}
        plans[layout] = (table.count(", true, "), table.count(", false, "))
        libs[layout] = os.path.join(work, "cnn-%s.so" % layout)
        subprocess.run(["ampc", source, "--target=cuda-sim", "-o",
                        libs[layout]], check=True)
    results = {layout: train_steps(libs[layout],
                                   os.path.join(work, "cnn-%s.ckpt" % layout))
               for layout in ("on", "off")}
    on, off = results["on"], results["off"]
    differ = [k for k in off[1] if on[1].get(k) != off[1][k]] + \
        [k for k in off[2] if on[2].get(k) != off[2][k]]
    ok = (plans["on"][0] > 0 and plans["on"][1] == 0 and
          plans["off"][0] == 0 and on[0] == off[0] and not differ and
          set(on[2]) == set(off[2]))
    print("cnn fp32 --channels-last=on: %d NHWC cuDNN plans (off: %d NCHW); 3 "
          "steps' losses %s, %d parameters and %d state tensors %s %s" % (
              plans["on"][0], plans["off"][1],
              "equal" if on[0] == off[0] else "DIFFER",
              len(off[1]), len(off[2]),
              "bit-identical" if not differ else "differ: " + ", ".join(differ),
              "ok" if ok else "FAILED"))
    return ok


if __name__ == "__main__":
    sys.exit(main())
