#!/usr/bin/env python3
"""Rewrites an elementwise Max node test of int64 or uint64 in FOLDER so
that its inputs hold values near 2^60 (uint64: near 2^64, past int64's
range) and its expected output is the true maximum plus OFFSET at element
0: with OFFSET 1 the expectation is wrong by one part in 2^60, which a
comparison through double cannot see.

usage: large_integers.py FOLDER OFFSET
"""
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper as nh

folder, offset = sys.argv[1], int(sys.argv[2])
data = os.path.join(folder, "test_data_set_0")


def rewrite(name, make):
    path = os.path.join(data, name)
    t = onnx.load_tensor(path)
    a = nh.to_array(t)
    b = make(a.dtype.type).astype(a.dtype)
    onnx.save_tensor(nh.from_array(b, t.name), path)
    return b


dtype = nh.to_array(onnx.load_tensor(os.path.join(data, "output_0.pb"))).dtype
big = (1 << 64) - 64 if dtype == np.uint64 else 1 << 60
x = rewrite("input_0.pb", lambda t: np.array([big, 3, big + 5], dtype=t))
y = rewrite("input_1.pb", lambda t: np.array([big - 7, 4, big + 3], dtype=t))
expected = np.maximum(x, y)
expected[0] += expected.dtype.type(offset)  # a Python int would go through double
rewrite("output_0.pb", lambda t: expected)
