"""QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear (compositions
of Div, Round, Add, Clip, Cast, Sub, Mul and the reductions) against numpy
written from the ONNX operator spec: per-tensor and per-axis (axis 0 and
-1 of a rank-3 tensor), int8 and uint8 zero points, none (uint8), values
that saturate, halves that round to even, and a Q/DQ pair as quantization-
aware exports write them. Outputs are compared exactly (the float ones
too: every step is one IEEE operation in float32 on both sides).

usage: quantize_check.py WORKDIR TARGET
Prints one line per check; an assertion stops it (exit status 1)."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T, helper, numpy_helper

import ampc

work, target = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(3)
x = (rng.standard_normal((3, 4, 5)) * 40).astype(np.float32)
# x / 0.5 = 2.5, 3.5, -2.5: halves to even (2, 4, -2); 1000 saturates.
x[0, 0, :4] = [1.25, 1.75, -1.25, 1000.0]
scale_c = np.array([0.5, 1.0, 2.0], np.float32)            # axis 0
zp_c = np.array([-3, 0, 7], np.int8)
scale_l = np.array([0.25, 0.5, 1.0, 4.0, 8.0], np.float32)  # axis -1
zp_l = np.array([0, 128, 3, 255, 10], np.uint8)
scale_t = np.array(0.75, np.float32)


def quantize(v, scale, zp, dtype, axis=None):
    """ONNX QuantizeLinear: saturate(round_half_even(v / scale) + zp)."""
    if axis is not None:
        shape = [1] * v.ndim
        shape[axis] = -1
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    info = np.iinfo(dtype)
    q = np.rint(v / scale) + zp.astype(np.float32)
    return np.clip(q, info.min, info.max).astype(dtype)


def dequantize(q, scale, zp, axis=None):
    if axis is not None:
        shape = [1] * q.ndim
        shape[axis] = -1
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    return (q.astype(np.float32) - zp.astype(np.float32)) * scale


def dynamic(v):
    lo, hi = min(np.float32(0), v.min()), max(np.float32(0), v.max())
    scale = np.float32((hi - lo) / np.float32(255))
    zp = np.uint8(np.rint(np.clip(-lo / scale, 0, 255)))
    return quantize(v, scale, np.array(zp), np.uint8), scale, zp


inits = [numpy_helper.from_array(a, n) for a, n in
         [(scale_c, "scale_c"), (zp_c, "zp_c"), (scale_l, "scale_l"),
          (zp_l, "zp_l"), (scale_t, "scale_t")]]
nodes = [
    helper.make_node("QuantizeLinear", ["x", "scale_c", "zp_c"], ["q_c"], axis=0),
    helper.make_node("QuantizeLinear", ["x", "scale_l", "zp_l"], ["q_l"], axis=-1),
    helper.make_node("QuantizeLinear", ["x", "scale_t"], ["q_t"]),
    helper.make_node("DequantizeLinear", ["q_c", "scale_c", "zp_c"], ["d_c"], axis=0),
    helper.make_node("DequantizeLinear", ["q_l", "scale_l", "zp_l"], ["d_l"], axis=2),
    helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "y_scale", "y_zp"]),
    helper.make_node("QuantizeLinear", ["xi", "scale_t"], ["q_i"]),
]
out = [("q_c", T.INT8, [3, 4, 5]), ("q_l", T.UINT8, [3, 4, 5]),
       ("q_t", T.UINT8, [3, 4, 5]), ("d_c", T.FLOAT, [3, 4, 5]),
       ("d_l", T.FLOAT, [3, 4, 5]), ("y", T.UINT8, [3, 4, 5]),
       ("y_scale", T.FLOAT, []), ("y_zp", T.UINT8, []),
       ("q_i", T.UINT8, [7])]
graph = helper.make_graph(
    nodes, "quantize", [helper.make_tensor_value_info("x", T.FLOAT, [3, 4, 5]),
                        helper.make_tensor_value_info("xi", T.INT32, [7])],
    [helper.make_tensor_value_info(*o) for o in out], inits)
path = os.path.join(work, "quantize.onnx")
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)

lib = ampc.compile(path, output=os.path.join(work, "quantize-%s.so" % target),
                   target=target, mode="infer", precision="fp32")
# int32 data (opsets 10 to 18): quantized as float32.
xi = np.array([-5, 0, 1, 2, 3, 100, 1000], np.int32)
got = dict(zip([o[0] for o in out], lib.infer(x, xi)))
q_c = quantize(x, scale_c, zp_c, np.int8, 0)
q_l = quantize(x, scale_l, zp_l, np.uint8, 2)
y, y_scale, y_zp = dynamic(x)
want = {"q_c": q_c, "q_l": q_l,
        "q_t": quantize(x, scale_t, np.array(0, np.uint8), np.uint8),
        "d_c": dequantize(q_c, scale_c, zp_c, 0),
        "d_l": dequantize(q_l, scale_l, zp_l, 2),
        "y": y, "y_scale": y_scale, "y_zp": y_zp,
        "q_i": quantize(xi.astype(np.float32), scale_t, np.array(0, np.uint8), np.uint8)}
assert q_c[0, 0, :4].tolist() == [2 - 3, 4 - 3, -2 - 3, 127], q_c[0, 0, :4]
for name, _, _ in out:
    g, w = got[name], np.asarray(want[name])
    assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, w.dtype, g.shape)
    assert np.array_equal(g, w), (name, g, w)
print("QuantizeLinear: per axis 0 (int8), per axis -1 (uint8), per tensor, "
      "int32 data: exact")
print("DequantizeLinear: per axis 0 and 2: exact")
print("DynamicQuantizeLinear: y, scale %.6g, zero point %d: exact" % (y_scale, y_zp))
