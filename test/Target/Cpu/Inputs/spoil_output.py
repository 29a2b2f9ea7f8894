#!/usr/bin/env python3
"""Adds 1 to element INDEX of a serialized ONNX tensor, in place.

usage: spoil_output.py TENSOR.pb INDEX
"""
import sys

import onnx
import onnx.numpy_helper as nh

path, index = sys.argv[1], int(sys.argv[2])
t = onnx.TensorProto()
with open(path, "rb") as f:
    t.ParseFromString(f.read())
a = nh.to_array(t).copy()
a.flat[index] += 1
with open(path, "wb") as f:
    f.write(nh.from_array(a, t.name).SerializeToString())
