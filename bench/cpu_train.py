#!/usr/bin/env python3
"""Training-step time of an ampc CPU library against PyTorch on this machine.

usage: /usr/bin/python3 bench/cpu_train.py [--build build] [--model mlp784]
           [--batch 128] [--threads N] [--steps 200] [--warmup 20]
           [--precision fp32 fp16]

Models (torch modules, seeded default initialisation, exported to ONNX at
opset 17 with a symbolic batch):
  mlp784  784-512-512-10 with ReLU (MNIST-sized), default batch 128
  digits  64-128-128-10 with ReLU (examples/digits, the demo), batch 64

For each --precision the model is compiled with
    ampc MODEL.onnx --batch B --precision=P -o train.so
(the defaults: cross-entropy loss, AdamW lr 1e-3 weight decay 0.01 on FP32
master weights, dynamic loss scaling at fp16, none at fp32), and timed in
this one process, on one fixed batch of random inputs and labels, against
PyTorch eager FP32 training of the same module from the same weights:
    loss = cross_entropy(model(x), y); loss.backward(); opt.step();
    opt.zero_grad()
with torch.optim.AdamW(lr=1e-3) at its defaults (torch 1.13 on the CPU: the
single-tensor loop, foreach=False, not fused). One ampc step is one
`ampc_model_train_step` call through libampc_runtime.so (forward, loss,
backward, unscale/overflow check, AdamW update, FP16 weight copies). Both
sides get the same number of threads: OPENBLAS_NUM_THREADS and
OMP_NUM_THREADS are set before numpy and torch load, and
torch.set_num_threads. Each side runs --warmup steps, then --steps timed
steps, alternating sides step by step so both see the same machine load;
the table shows the median step time and the ratio ampc/torch (below 1:
ampc is faster). "loss1 rel diff" compares the first step's loss (same
weights, same batch), a check that both sides train the same model.
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODELS = {"mlp784": ([784, 512, 512, 10], 128),
          "digits": ([64, 128, 128, 10], 64)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--model", default="mlp784", choices=sorted(MODELS))
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--precision", nargs="+", default=["fp32", "fp16"],
                   choices=["fp32", "fp16", "bf16"])
    args = p.parse_args()
    # Before numpy/torch load their BLAS.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import numpy as np
    import torch
    torch.set_num_threads(args.threads)

    sizes, default_batch = MODELS[args.model]
    batch = args.batch or default_batch
    build = os.path.abspath(args.build)
    work = tempfile.mkdtemp(prefix="ampc-bench-train-")

    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(torch.nn.ReLU())
    torch.manual_seed(0)
    model = torch.nn.Sequential(*layers)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    onnx_path = os.path.join(work, f"{args.model}.onnx")
    torch.onnx.export(model, torch.zeros(batch, sizes[0]), onnx_path,
                      opset_version=17, input_names=["x"],
                      output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})

    rng = np.random.default_rng(0)
    x_np = rng.random((batch, sizes[0]), dtype=np.float32)
    y_np = rng.integers(0, sizes[-1], size=batch, dtype=np.int64)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)

    rt = ctypes.CDLL(os.path.join(build, "lib", "libampc_runtime.so"))
    rt.ampc_last_error.restype = ctypes.c_char_p

    class Tensor(ctypes.Structure):
        _fields_ = [("dtype", ctypes.c_int), ("rank", ctypes.c_int32),
                    ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("data", ctypes.c_void_p), ("size_bytes", ctypes.c_size_t)]

    def tensor(array, dtype):
        shape = (ctypes.c_int64 * array.ndim)(*array.shape)
        t = Tensor(dtype, array.ndim, shape, array.ctypes.data, array.nbytes)
        t._keep = shape
        return t

    F32, I64 = 1, 7
    rows = []
    for precision in args.precision:
        so = os.path.join(work, f"{args.model}_{precision}.so")
        subprocess.run([os.path.join(build, "bin", "ampc"), onnx_path,
                        "--batch", str(batch), f"--precision={precision}",
                        "-o", so], check=True)
        handle = ctypes.c_void_p()
        if rt.ampc_model_load(so.encode(), None, ctypes.byref(handle)):
            sys.exit(f"load: {rt.ampc_last_error().decode()}")
        inputs = (Tensor * 2)(tensor(x_np, F32), tensor(y_np, I64))
        loss_np = np.zeros((), np.float32)
        loss_t = tensor(loss_np, F32)
        ampc_losses = []

        def run_ampc():
            if rt.ampc_model_train_step(handle, inputs, 2,
                                        ctypes.byref(loss_t)):
                sys.exit(f"train_step: {rt.ampc_last_error().decode()}")
            ampc_losses.append(float(loss_np))

        # A fresh torch model and optimizer from the same weights per row.
        model.load_state_dict(initial)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        torch_losses = []

        def run_torch():
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            torch_losses.append(loss.item())

        for _ in range(args.warmup):
            run_ampc()
            run_torch()
        ta, tt = [], []
        for _ in range(args.steps):
            for fn, times in ((run_ampc, ta), (run_torch, tt)):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
        diff = abs(ampc_losses[0] - torch_losses[0]) / abs(torch_losses[0])
        rows.append((precision, statistics.median(ta), statistics.median(tt),
                     diff))
        rt.ampc_model_release(handle)

    dims = "-".join(map(str, sizes))
    print(f"MLP {dims} ({args.model}), batch {batch}, AdamW, "
          f"{args.threads} thread(s), median of {args.steps} steps after "
          f"{args.warmup} warm-up; torch {torch.__version__} fp32 eager, "
          f"AdamW foreach=False")
    print(f"{'ampc precision':<15}{'ampc ms':>10}{'torch ms':>10}"
          f"{'ampc/torch':>12}{'loss1 rel diff':>16}")
    for precision, a, t, diff in rows:
        print(f"{precision:<15}{a * 1e3:>10.3f}{t * 1e3:>10.3f}{a / t:>12.2f}"
              f"{diff:>16.2e}")


if __name__ == "__main__":
    main()
