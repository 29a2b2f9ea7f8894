"""The element types past the common ones through the Python module:
int16, uint16, uint32 and uint64 inputs and outputs (Max, Min, Mod, Add;
values past int64's range for uint64) on the CPU target and under the
CUDA execution on the CPU (TARGET) against numpy, exactly; and a bf16 input given as a uint16 array of its bits, which the
module passes as bf16 because the model declares bf16. Prints one line per
check; an assertion stops it (exit status 1)."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

import ampc

work, target = sys.argv[1], sys.argv[2]
types = [("i16", TensorProto.INT16, np.int16), ("u16", TensorProto.UINT16, np.uint16),
         ("u32", TensorProto.UINT32, np.uint32), ("u64", TensorProto.UINT64, np.uint64)]
nodes, inputs, outputs = [], [], []
for name, code, _ in types:
    a, b = "a_" + name, "b_" + name
    inputs += [helper.make_tensor_value_info(a, code, [5]),
               helper.make_tensor_value_info(b, code, [5])]
    for op in ["Max", "Min", "Mod", "Add"]:
        out = op.lower() + "_" + name
        nodes.append(helper.make_node(op, [a, b], [out]))
        outputs.append(helper.make_tensor_value_info(out, code, [5]))
inputs.append(helper.make_tensor_value_info("h", TensorProto.BFLOAT16, [3]))
nodes.append(helper.make_node("Cast", ["h"], ["h_f32"], to=TensorProto.FLOAT))
outputs.append(helper.make_tensor_value_info("h_f32", TensorProto.FLOAT, [3]))
# BitShift (unsigned only), by counts up to the width + 1: a shift by the
# width or more gives 0.
for name, code, _ in types[1:]:
    for direction in ["LEFT", "RIGHT"]:
        out = direction.lower() + "_" + name
        nodes.append(helper.make_node("BitShift", ["a_" + name, "n_" + name],
                                      [out], direction=direction))
        outputs.append(helper.make_tensor_value_info(out, code, [5]))
    inputs.append(helper.make_tensor_value_info("n_" + name, code, [5]))
graph = helper.make_graph(nodes, "element_types", inputs, outputs)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
path = os.path.join(work, "element_types.onnx")
onnx.save(model, path)

lib = ampc.compile(path, output=os.path.join(work, target + ".so"),
                   target=target, mode="infer", precision="fp32")
rng = np.random.default_rng(0)
feed = []
for name, _, dt in types:
    info = np.iinfo(dt)
    # Both signs for int16; for uint64 values past 2^63 (no int64 holds
    # them, a double rounds them). Mod's divisor is never 0.
    lo = info.min // 2 if info.min < 0 else 0
    a = rng.integers(lo, info.max // 2, 5, dtype=dt, endpoint=True)
    b = rng.integers(1, info.max // 2, 5, dtype=dt, endpoint=True)
    if dt == np.uint64:
        a[0], b[0] = dt(2**64 - 3), dt(2**63 + 1)
    if dt == np.int16:
        a[1], b[1] = dt(-7), dt(3)   # Mod: the divisor's sign
    feed += [a, b]
bits = np.array([0x3F80, 0xC040, 0x4049], np.uint16)   # 1.0, -3.0, 3.140625
feed.append(bits)
shifts = {}
for name, _, dt in types[1:]:
    width = np.iinfo(dt).bits
    shifts[name] = np.array([0, 1, width - 1, width, width + 1], dt)
    feed.append(shifts[name])
got = lib.infer(*feed)
k = 0
for i, (name, _, dt) in enumerate(types):
    a, b = feed[2 * i], feed[2 * i + 1]
    want = {"Max": np.maximum(a, b), "Min": np.minimum(a, b),
            "Mod": np.mod(a, b), "Add": (a + b).astype(dt)}
    for op in ["Max", "Min", "Mod", "Add"]:
        assert got[k].dtype == dt, (op, name, got[k].dtype)
        assert np.array_equal(got[k], want[op]), (op, name, a, b, got[k], want[op])
        k += 1
    print("%s: Max, Min, Mod, Add exact" % name)
assert lib.inputs[8].ampc_dtype == 16 and lib.inputs[0].ampc_dtype == 5
assert np.array_equal(got[k], np.array([1.0, -3.0, 3.140625], np.float32)), got[k]
print("bf16 from uint16 bits: %s" % got[k].tolist())
k += 1
for i, (name, _, dt) in enumerate(types[1:], start=1):
    width = np.iinfo(dt).bits
    a = [int(v) for v in feed[2 * i]]
    n = [int(v) for v in shifts[name]]
    for left in [True, False]:
        want = [0 if c >= width else
                ((v << c) & ((1 << width) - 1) if left else v >> c)
                for v, c in zip(a, n)]
        assert [int(v) for v in got[k]] == want, (name, left, got[k], want)
        k += 1
    print("%s: BitShift left and right exact, shifts past the width 0" % name)
