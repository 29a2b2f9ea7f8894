"""Writes a model whose initializer W lives in an external data file.

usage: make_external.py OUT_DIR CASE

Every case writes OUT_DIR/model.onnx (y = Add(x, W), W float[2, 3] =
1 .. 6) and OUT_DIR/weights.bin holding W's 24 bytes; CASE picks what W's
external_data says:
  valid     location=weights.bin
  outside   location=../outside.bin (the file exists, next to OUT_DIR)
  absolute  location=<absolute path of OUT_DIR/weights.bin>
  missing   location=missing.bin
  too-long  location=weights.bin, length=1000
  offset    location=weights.bin, offset=8, length=16 (W is float[2, 2])
  symlink   location=link.bin, a symlink in OUT_DIR to ../outside.bin
  bad-number location=weights.bin, length=twelve
  mismatch  location=weights.bin, but x is float[4, 3]: Add cannot broadcast
  short     location=weights.bin, which holds 12 bytes only
  fifo      location=weights.fifo, a FIFO (reading it would wait forever)
  huge      location=sparse.bin, W float[2^30, 2] (8 GiB) in a sparse file
            of that size
"""

import os
import struct
import sys

import onnx
from onnx import TensorProto, helper


def main():
    out_dir, case = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    values = struct.pack("<6f", 1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
    with open(os.path.join(out_dir, "weights.bin"), "wb") as f:
        f.write(values)
    outside = os.path.join(os.path.dirname(os.path.abspath(out_dir)),
                           "outside.bin")
    with open(outside, "wb") as f:
        f.write(values)

    entries = {
        "valid": [("location", "weights.bin")],
        "outside": [("location", "../outside.bin")],
        "absolute": [("location",
                      os.path.abspath(os.path.join(out_dir, "weights.bin")))],
        "missing": [("location", "missing.bin")],
        "too-long": [("location", "weights.bin"), ("length", "1000")],
        "offset": [("location", "weights.bin"), ("offset", "8"),
                   ("length", "16")],
        "symlink": [("location", "link.bin")],
        "bad-number": [("location", "weights.bin"), ("length", "twelve")],
        "mismatch": [("location", "weights.bin")],
        "short": [("location", "weights.bin")],
        "fifo": [("location", "weights.fifo")],
        "huge": [("location", "sparse.bin")],
    }[case]
    if case == "short":
        with open(os.path.join(out_dir, "weights.bin"), "wb") as f:
            f.write(values[:12])
    if case == "fifo":
        fifo = os.path.join(out_dir, "weights.fifo")
        if not os.path.exists(fifo):
            os.mkfifo(fifo)
    if case == "huge":
        with open(os.path.join(out_dir, "sparse.bin"), "wb") as f:
            f.truncate(2**30 * 2 * 4)
    if case == "symlink":
        link = os.path.join(out_dir, "link.bin")
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(outside, link)

    dims = {"offset": [2, 2], "huge": [2**30, 2]}.get(case, [2, 3])
    x_dims = [4, 3] if case == "mismatch" else dims
    w = TensorProto()
    w.name = "W"
    w.data_type = TensorProto.FLOAT
    w.dims.extend(dims)
    w.data_location = TensorProto.EXTERNAL
    for key, value in entries:
        entry = w.external_data.add()
        entry.key = key
        entry.value = value

    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "W"], ["y"], name="add_bias")],
        "external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)],
        initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    # No onnx.save: it would try to resolve the external data itself.
    with open(os.path.join(out_dir, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())


if __name__ == "__main__":
    main()
