"""MaxUnpool against torch: MaxPool's values and indices (torch's
max_pool2d with return_indices, N=2, C=3, odd sizes) unpooled by ampc and
by torch.nn.functional.max_unpool2d at the default size, exactly; with a
larger output_shape, ampc's result is the default one padded at the end of
each axis (ONNX's reference).

usage: unpool_check.py WORKDIR TARGET
Prints one line per check; an assertion stops it (exit status 1)."""
import os
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto as T, helper, numpy_helper

import ampc

work, target = sys.argv[1], sys.argv[2]
x = torch.from_numpy(np.random.default_rng(2).standard_normal((2, 3, 7, 9)).astype(np.float32))
values, indices = torch.nn.functional.max_pool2d(x, 3, stride=2, return_indices=True)
default = torch.nn.functional.max_unpool2d(values, indices, 3, stride=2, output_size=(7, 9))
# torch's indices count within each (n, c) plane; ONNX's over the tensor.
plane = 7 * 9
flat = indices + (torch.arange(2 * 3).reshape(2, 3, 1, 1) * plane)

nodes = [helper.make_node("MaxUnpool", ["v", "i"], ["y"], kernel_shape=[3, 3], strides=[2, 2]),
         helper.make_node("MaxUnpool", ["v", "i", "shape"], ["z"], kernel_shape=[3, 3], strides=[2, 2])]
shape = numpy_helper.from_array(np.array([2, 3, 9, 10], np.int64), "shape")
graph = helper.make_graph(
    nodes, "unpool",
    [helper.make_tensor_value_info("v", T.FLOAT, list(values.shape)),
     helper.make_tensor_value_info("i", T.INT64, list(values.shape))],
    [helper.make_tensor_value_info("y", T.FLOAT, [2, 3, 7, 9]),
     helper.make_tensor_value_info("z", T.FLOAT, [2, 3, 9, 10])], [shape])
path = os.path.join(work, "unpool.onnx")
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), path)
lib = ampc.compile(path, output=os.path.join(work, "unpool-%s.so" % target),
                   target=target, mode="infer", precision="fp32")
y, z = lib.infer(values.numpy(), flat.numpy())
assert np.array_equal(y, default.numpy()), (y, default)
padded = np.zeros((2, 3, 9, 10), np.float32)
padded[:, :, :7, :9] = default.numpy()
assert np.array_equal(z, padded)
print("MaxUnpool matches torch's max_unpool2d (%d values placed); output_shape "
      "pads at the end" % int((y != 0).sum()))
