#!/usr/bin/env python3
"""A model whose parameters take more than 2 GiB (one 24000 x 24000 FP32
MatMul weight, 2.3 GB, stored as ONNX external data), compiled for
inference and for training (SGD, MSE) on the CPU target, run, and checked:
the library links (its blob in .lrodata, blob_sections.py), the inference
output is what FP16 arithmetic gives, and two SGD steps lower the loss.
Needs about 6 GB of disk and 12 GB of memory and takes about 6 minutes on
2 cores: not part of CI (README.md, Tests).

usage: over_2gib.py WORKDIR AMPC RUNTIME
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "python"))
from ampc.runtime import Model  # noqa: E402

N = 24000


def main():
    work, ampc, runtime = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    w = np.full((N, N), 0.001, np.float32)
    w[0, :3] = [1, 2, 3]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "over_2gib",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, N])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, N])],
        [numpy_helper.from_array(w, "w")])
    del w
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = os.path.join(work, "over_2gib.onnx")
    onnx.save(m, path, save_as_external_data=True, location="over_2gib.data")
    del m, graph
    failed = False
    infer, train = (os.path.join(work, n) for n in ("infer.so", "train.so"))
    subprocess.run([ampc, path, "--mode=infer", "--target=cpu", "-o", infer],
                   check=True)
    subprocess.run([ampc, path, "--optimizer=sgd", "--loss=mse",
                    "--target=cpu", "-o", train], check=True)
    for lib in (infer, train):
        r = subprocess.run([sys.executable,
                            os.path.join(HERE, "blob_sections.py"), lib])
        failed |= r.returncode != 0
    x = np.ones((1, N), np.float32)
    with Model(infer, runtime) as model:
        y = model.infer([x])[0]
    # FP16: 0.001 rounds to 0.0010004, 23999 of them plus w[0, j]; the
    # output rounds to FP16 (a step of 1/64 at 25).
    expected = np.float16(np.float32(np.float16(0.001)) * (N - 1) +
                          np.array([1, 2, 3, 0.001], np.float32))
    ok = np.allclose(y[0, [0, 1, 2, 3]], expected.astype(np.float32),
                     rtol=2e-3)
    failed |= not ok
    print("infer: y[0, :4] %s, expected about %s: %s" % (
        y[0, :4].tolist(), expected.astype(np.float32).tolist(),
        "ok" if ok else "FAILED"))
    with Model(train, runtime) as model:
        labels = np.zeros((1, N), np.float32)
        losses = [float(model.train_step({"x": x, "label": labels}))
                  for _ in range(2)]
    ok = all(np.isfinite(losses)) and losses[1] < losses[0]
    failed |= not ok
    print("train: losses %s: %s" % (losses, "ok" if ok else "FAILED"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
