#!/usr/bin/env python3
"""Training-step time of an ampc CPU library against PyTorch on this machine.

usage: /usr/bin/python3 bench/cpu_train.py [--build build] [--model mlp784]
           [--batch 128] [--threads 1 0] [--steps 200] [--warmup 20]
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
  vit        a ViT: 4x4 patches of a 3 x 32 x 32 image (Conv2d stride 4),
             64 tokens of width 128, 4 pre-LayerNorm encoder layers (4
             heads, MLP 512, GELU), mean over the tokens, Linear(128, 10);
             batch 8
  unet       a UNet: 3 x 64 x 64 input, two levels (Conv2d 3x3 + BatchNorm
             + ReLU twice per level, 16 and 32 channels, MaxPool 2,
             ConvTranspose2d 2x2 stride 2, the skip concatenated), a 1x1
             Conv2d to 10 channels, mean over the pixels; batch 8
  textcls    a text classifier: 128 tokens of a 5000-word vocabulary,
             Embedding(5000, 128), 2 encoder layers as vit's, mean over
             the tokens, Linear(128, 10); batch 8
  families   vit, conv1d_bn, unet, textcls and resnet18 in one run

--threads takes several counts (0: every core the process may run on,
as the library's num_threads): each model is measured at each, PyTorch
with torch.set_num_threads at the same count. The OpenBLAS build and the
kernel set it picked (openblas_get_config, openblas_get_corename) and
OPENBLAS_CORETYPE are printed first; OPENBLAS_CORETYPE, when unset, is
set to the kernel set the ampc runtime would choose for this CPU before
torch loads OpenBLAS (docs/design.md, "OpenBLAS's kernel set"). The sides
alternate in one process, so idle threads must not spin through the
other side's step: the script sets
OMP_WAIT_POLICY=PASSIVE and OPENBLAS_THREAD_TIMEOUT=4 unless set (without
them both sides' 2-thread steps were 2 to 40 times slower).

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
sides get the same number of threads: torch.set_num_threads, and the
library's num_threads (which also sets OpenBLAS's). Each side runs
--warmup steps, then --steps timed steps, alternating sides step by step so both see the same machine load;
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
          "conv1d_bn": (None, 8), "resnet18": (None, 8), "vit": (None, 8),
          "unet": (None, 8), "textcls": (None, 8)}
FAMILIES = ["vit", "conv1d_bn", "unet", "textcls", "resnet18"]


def encoder_layer(width, heads, hidden):
    """A pre-LayerNorm transformer encoder layer written out (Linear,
    MatMul, Softmax, GELU), as torch.onnx exports it op by op."""
    import torch

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = torch.nn.LayerNorm(width)
            self.qkv = torch.nn.Linear(width, 3 * width)
            self.proj = torch.nn.Linear(width, width)
            self.norm2 = torch.nn.LayerNorm(width)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(width, hidden),
                                           torch.nn.GELU(),
                                           torch.nn.Linear(hidden, width))

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.norm1(x)).reshape(
                b, t, 3, heads, width // heads).permute(2, 0, 3, 1, 4).unbind(0)
            a = torch.softmax(q @ k.transpose(-2, -1) *
                              (width // heads) ** -0.5, dim=-1)
            x = x + self.proj((a @ v).transpose(1, 2).reshape(b, t, width))
            return x + self.mlp(self.norm2(x))

    return Layer()


def build_cnn(name, size):
    """(module, input shape without the batch) of a CNN of MODELS."""
    import torch
    torch.manual_seed(0)
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(num_classes=10), (3, size, size)
    if name == "vit":
        class ViT(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.patches = torch.nn.Conv2d(3, 128, 4, stride=4)
                self.position = torch.nn.Parameter(
                    torch.randn(1, 64, 128) * 0.02)
                self.layers = torch.nn.Sequential(
                    *[encoder_layer(128, 4, 512) for _ in range(4)])
                self.norm = torch.nn.LayerNorm(128)
                self.head = torch.nn.Linear(128, 10)

            def forward(self, x):
                x = self.patches(x).flatten(2).transpose(1, 2) + self.position
                return self.head(self.norm(self.layers(x)).mean(dim=1))
        return ViT(), (3, 32, 32)
    if name == "unet":
        def block(i, o):
            return torch.nn.Sequential(
                torch.nn.Conv2d(i, o, 3, padding=1), torch.nn.BatchNorm2d(o),
                torch.nn.ReLU(), torch.nn.Conv2d(o, o, 3, padding=1),
                torch.nn.BatchNorm2d(o), torch.nn.ReLU())

        class UNet(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.down = block(3, 16)
                self.bottom = block(16, 32)
                self.up = torch.nn.ConvTranspose2d(32, 16, 2, stride=2)
                self.merge = block(32, 16)
                self.out = torch.nn.Conv2d(16, 10, 1)

            def forward(self, x):
                skip = self.down(x)
                x = self.bottom(torch.nn.functional.max_pool2d(skip, 2))
                x = self.merge(torch.cat([self.up(x), skip], dim=1))
                return self.out(x).mean(dim=(2, 3))
        return UNet(), (3, 64, 64)
    if name == "textcls":
        class TextClassifier(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = torch.nn.Embedding(5000, 128)
                self.layers = torch.nn.Sequential(
                    *[encoder_layer(128, 4, 512) for _ in range(2)])
                self.head = torch.nn.Linear(128, 10)

            def forward(self, tokens):
                return self.head(self.layers(self.embed(tokens)).mean(dim=1))
        return TextClassifier(), (128,)

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


def blas_core_for_cpu():
    """The OPENBLAS_CORETYPE the runtime would choose for this CPU
    (ampc.runtime._blas_core_for_cpu, run in a child process so that this
    one has not loaded OpenBLAS yet); "" for none."""
    python = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                          "python")
    r = subprocess.run([sys.executable, "-c",
                        "import sys; sys.path.insert(0, sys.argv[1]); "
                        "from ampc.runtime import _blas_core_for_cpu; "
                        "print(_blas_core_for_cpu())", python],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def choose_blas_core(environ):
    """Sets OPENBLAS_CORETYPE in `environ` to blas_core_for_cpu() unless it
    is set or there is none. torch loads OpenBLAS (through NumPy) before
    any model, so the runtime cannot choose its kernel set
    (docs/design.md, "OpenBLAS's kernel set"): an OpenBLAS that does not
    know this CPU would time ampc's GEMMs on its SSE3 kernels (resnet18
    3.8x PyTorch's step instead of 1.2x on an Emerald Rapids Xeon). Call
    before torch is imported."""
    if "OPENBLAS_CORETYPE" not in environ:
        core = blas_core_for_cpu()
        if core:
            environ["OPENBLAS_CORETYPE"] = core


def blas_kernels():
    """The OpenBLAS the libraries link: its build and the kernel set it
    picked (libopenblas.so.0 as loaded in this process)."""
    import ctypes
    try:
        blas = ctypes.CDLL("libopenblas.so.0")
    except OSError as e:
        return "libopenblas.so.0 not loadable: %s" % e
    blas.openblas_get_config.restype = ctypes.c_char_p
    blas.openblas_get_corename.restype = ctypes.c_char_p
    return "%s; kernels %s; OPENBLAS_CORETYPE=%s" % (
        blas.openblas_get_config().decode(),
        blas.openblas_get_corename().decode(),
        os.environ.get("OPENBLAS_CORETYPE", "(unset)"))


def bench_model(args, name, threads_list, build, work):
    """The table rows of one model: (precision, threads, ampc s, torch s,
    loss1 rel diff)."""
    import numpy as np
    import torch
    from ampc.runtime import Model
    from ampc_testing import median_times

    sizes, default_batch = MODELS[name]
    batch = args.batch or default_batch
    onnx_path = os.path.join(work, f"{name}.onnx")
    rng = np.random.default_rng(0)
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
        x_np = rng.random((batch,) + shape, dtype=np.float32)
    else:
        from ampc_testing import export_onnx
        model, shape = build_cnn(name, args.size)
        if name == "textcls":
            x_np = rng.integers(0, 5000, (batch,) + shape, dtype=np.int64)
        else:
            x_np = rng.random((batch,) + shape, dtype=np.float32)
        export_onnx(model, torch.from_numpy(x_np), onnx_path, training=True)
        classes = 10
        description = "x".join(map(str, shape)) + " input"
    model.train()
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    y_np = rng.integers(0, classes, size=batch, dtype=np.int64)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)

    runtime = os.path.join(build, "lib", "libampc_runtime.so")
    rows = []
    for precision in args.precision:
        so = os.path.join(work, f"{name}_{precision}.so")
        batch_flag = ["--batch", str(batch)] if sizes else []
        subprocess.run([os.path.join(build, "bin", "ampc"), onnx_path,
                        "--target=cpu", f"--precision={precision}", "-o",
                        so] + batch_flag + args.ampc_flag, check=True)
        for threads in threads_list:
            count = threads or len(os.sched_getaffinity(0))
            torch.set_num_threads(count)
            library = Model(so, runtime=runtime, num_threads=threads)
            loss_np = np.zeros((), np.float32)
            step = library.bind_train_step([x_np, y_np], loss_np)
            ampc_losses = []

            def run_ampc():
                step()
                ampc_losses.append(float(loss_np))

            # A fresh torch model and optimizer from the same weights per
            # row.
            model.load_state_dict(initial)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            torch_losses = []

            def run_torch():
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
                torch_losses.append(loss.item())

            ta, tt = median_times([run_ampc, run_torch], args.warmup,
                                  args.steps)
            diff = abs(ampc_losses[0] - torch_losses[0]) / abs(torch_losses[0])
            rows.append((precision, count, ta, tt, diff))
            library.close()
    return f"{description} ({name}), batch {batch}", rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--model", default="mlp784",
                   choices=sorted(MODELS) + ["families"])
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 0],
                   help="thread counts to measure at (0: every core)")
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
    # The two sides alternate in one process: neither's idle threads may
    # spin through the other's step (OpenMP's wait policy; OpenBLAS's
    # workers spin 2^28 cycles after a call unless told less). Read when
    # the libraries load, so before torch and the first model.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    choose_blas_core(os.environ)
    import torch
    build = os.path.abspath(args.build)
    work = tempfile.mkdtemp(prefix="ampc-bench-train-")
    names = FAMILIES if args.model == "families" else [args.model]
    tables = [bench_model(args, name, args.threads, build, work)
              for name in names]
    print(f"OpenBLAS: {blas_kernels()}; OMP_WAIT_POLICY="
          f"{os.environ['OMP_WAIT_POLICY']}, OPENBLAS_THREAD_TIMEOUT="
          f"{os.environ['OPENBLAS_THREAD_TIMEOUT']}")
    print(f"load average {' '.join('%.2f' % l for l in os.getloadavg())}; "
          f"AdamW; median of {args.steps} steps after {args.warmup} "
          f"warm-up; torch {torch.__version__} fp32 eager, AdamW "
          f"foreach=False")
    for title, rows in tables:
        print(title)
        print(f"{'ampc precision':<15}{'threads':>8}{'ampc ms':>10}"
              f"{'torch ms':>10}{'ampc/torch':>12}{'vs 1 thread':>13}"
              f"{'loss1 rel diff':>16}")
        single = {pr: a for pr, c, a, _, _ in rows if c == 1}
        for precision, count, a, t, diff in rows:
            against = (f"{a / single[precision]:>13.2f}"
                       if precision in single else f"{'-':>13}")
            print(f"{precision:<15}{count:>8}{a * 1e3:>10.3f}{t * 1e3:>10.3f}"
                  f"{a / t:>12.2f}{against}{diff:>16.2e}")


if __name__ == "__main__":
    main()
