#!/usr/bin/env python3
"""Training-step time of an ampc CPU library against PyTorch on this machine.

usage: /usr/bin/python3 bench/cpu_train.py [--build build] [--model mlp784]
           [--batch 128] [--threads N] [--steps 200] [--warmup 20]
           [--precision fp32 fp16]

Models (torch modules, seeded default initialisation, exported to ONNX at
opset 17; the MLPs with a symbolic batch, the CNNs in training mode at
their batch, BatchNorm on batch statistics on both sides):
  mlp784     784-512-512-10 with ReLU (MNIST-sized), default batch 128
  digits     64-128-128-10 with ReLU (examples/digits, the demo), batch 64
  conv1d_bn  Conv1d(16, 64, 5) BatchNorm ReLU, Conv1d(64, 64, 5) BatchNorm
             ReLU, mean over time, Linear(64, 10); input 16 x 256, batch 8
  resnet18   torchvision's, 10 classes, input 3 x --size x --size (224),
             batch 8

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
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "utils", "python"))
# The Python module (python/ampc) for the runtime binding.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))

MODELS = {"mlp784": ([784, 512, 512, 10], 128),
          "digits": ([64, 128, 128, 10], 64),
          "conv1d_bn": (None, 8), "resnet18": (None, 8)}


def build_cnn(name, size):
    """(module, input shape without the batch) of a CNN of MODELS."""
    import torch
    torch.manual_seed(0)
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(num_classes=10), (3, size, size)

    class Conv1dBn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Sequential(
                torch.nn.Conv1d(16, 64, 5, padding=2),
                torch.nn.BatchNorm1d(64), torch.nn.ReLU(),
                torch.nn.Conv1d(64, 64, 5, padding=2),
                torch.nn.BatchNorm1d(64), torch.nn.ReLU())
            self.head = torch.nn.Linear(64, 10)

        def forward(self, x):
            return self.head(self.body(x).mean(dim=2))

    return Conv1dBn(), (16, 256)


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
    p.add_argument("--ampc-flag", action="append", default=[],
                   help="one more flag for the ampc compile (repeatable), "
                   "e.g. --ampc-flag=--skip-pass=ampc-fuse-batch-norm-epilogue")
    p.add_argument("--size", type=int, default=224,
                   help="resnet18's image size")
    args = p.parse_args()
    # Before numpy/torch load their BLAS.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import numpy as np
    import torch
    from ampc.runtime import Model
    from ampc_testing import median_times
    torch.set_num_threads(args.threads)

    sizes, default_batch = MODELS[args.model]
    batch = args.batch or default_batch
    build = os.path.abspath(args.build)
    work = tempfile.mkdtemp(prefix="ampc-bench-train-")

    onnx_path = os.path.join(work, f"{args.model}.onnx")
    if sizes:
        layers = []
        for i in range(len(sizes) - 1):
            layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
            if i + 2 < len(sizes):
                layers.append(torch.nn.ReLU())
        torch.manual_seed(0)
        model = torch.nn.Sequential(*layers)
        torch.onnx.export(model, torch.zeros(batch, sizes[0]), onnx_path,
                          opset_version=17, input_names=["x"],
                          output_names=["logits"],
                          dynamic_axes={"x": {0: "batch"},
                                        "logits": {0: "batch"}})
        shape, classes = (sizes[0],), sizes[-1]
        description = "MLP " + "-".join(map(str, sizes))
    else:
        from ampc_testing import export_onnx
        model, shape = build_cnn(args.model, args.size)
        export_onnx(model, torch.zeros((batch,) + shape), onnx_path,
                    training=True)
        classes = 10
        description = "x".join(map(str, shape)) + " input"
    model.train()
    initial = {k: v.clone() for k, v in model.state_dict().items()}

    rng = np.random.default_rng(0)
    x_np = rng.random((batch,) + shape, dtype=np.float32)
    y_np = rng.integers(0, classes, size=batch, dtype=np.int64)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)

    runtime = os.path.join(build, "lib", "libampc_runtime.so")
    rows = []
    for precision in args.precision:
        so = os.path.join(work, f"{args.model}_{precision}.so")
        batch_flag = ["--batch", str(batch)] if sizes else []
        subprocess.run([os.path.join(build, "bin", "ampc"), onnx_path,
                        "--target=cpu", f"--precision={precision}", "-o",
                        so] + batch_flag + args.ampc_flag, check=True)
        library = Model(so, runtime=runtime)
        loss_np = np.zeros((), np.float32)
        step = library.bind_train_step([x_np, y_np], loss_np)
        ampc_losses = []

        def run_ampc():
            step()
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

        ta, tt = median_times([run_ampc, run_torch], args.warmup, args.steps)
        diff = abs(ampc_losses[0] - torch_losses[0]) / abs(torch_losses[0])
        rows.append((precision, ta, tt, diff))
        library.close()

    print(f"{description} ({args.model}), batch {batch}, AdamW, "
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
