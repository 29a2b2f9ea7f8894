"""What one training step of a --target=cuda-sim library runs on the device:
kernel launches, cuBLASLt GEMMs, copies, memsets and host functions, as the
CUDA execution on the CPU counts them when they run (include/ampc/CudaSim/
Counters.h).

usage:
  launch_count.py count LIBRARY [--check-prefix=P] [--full-names]
                  [--source LIBRARY.cu]
  launch_count.py encoder OUT.onnx [--d-model 256] [--heads 4] [--batch 8]
                  [--seq 64] [--feed-forward 2048] [--dropout 0] [--classes 10]
  launch_count.py gpt OUT.onnx [--d-model 32] [--heads 2] [--batch 2] [--seq 8]
  launch_count.py resnet18 OUT.onnx [--batch 2] [--size 32]
                  (torchvision's, 10 classes, seeded, training-mode export)

count: loads LIBRARY through the runtime C API (python/ampc/runtime.py),
runs one warm-up train_step, resets the counters, queues
exactly one train_step on the inputs sim_vs_cpu.py makes, synchronizes
(ampc_model_synchronize: that adds the read of the device error code, one
device-to-host copy) and prints

  launches N gemms N copies N memsets N host_functions N graphs N
  kernel NAME COUNT     one line per kernel, sorted by name
  gemm EPILOGUE COUNT   one line per cuBLASLt epilogue
  copy KIND COUNT, memset CALL COUNT, host_function CALL COUNT,
  graph cudaGraphLaunch COUNT (the step's kernels as one CUDA graph: its
  kernels, GEMMs and memsets are still counted one by one)
  cudnn CALL COUNT      one line per cuDNN function (cudnnConvolutionForward,
                        ...): the convolutions

The totals line ends with "convolutions N" only when the step makes cuDNN
calls, so that the pinned lines of models without convolutions keep their
form.

A kernel's name is the one ampc::cuda::launch (or launchCooperative, one
kernel however many blocks) gives it, without its
template arguments (stridedCopy<ampc::cuda::AsF16> and stridedCopy<float>
are both stridedCopy; the warp-per-row and block-per-row variants the CUDA
target picks by row length, reduceByWarp, reduceByBlock, softmaxByWarp,
layerNormGradByBlock and the others, are reduce, softmax, layerNormGrad
...), and the generated elementwise kernels (k0, k1, ...)
count as one name, k<N>; --full-names keeps every name as it is. The
totals on the first line are the sums of the lines below, so pinning every
line pins the whole step.
With --source (the library's generated source, ampc ... --emit=cuda), one
more line, "cast-only N": the launches of generated kernels whose body
only converts (loads its one input, stores it in another type: a cast
that no producer or consumer absorbed; issue 37, item 6).
Under `mpirun` only rank 0 prints (a data-parallel library's step needs
every rank; data-parallel-cuda.test counts one).
With --check-prefix=P the lines come out as FileCheck directives ("# P:",
then "# P-NEXT:"), ready to paste into launch-count.test.

encoder: exports the model issue 21 counted: torch's
nn.TransformerEncoderLayer (batch_first, ReLU, post-norm, feed-forward 2048
as torch's default, dropout 0 as the training tests use), the mean over the
sequence, and a Linear head to --classes; ampc attaches its default
cross-entropy loss. Exported in training mode, as the training tests export
(export_models.export_onnx).

gpt: exports the GPU benchmark's GPT block (bench/gpu/models.py: pre-norm,
separate Q/K/V Linears, causal mask as a registered buffer named `mask`,
erf GELU MLP 4x) at a small size; compile it with --loss=mse
--optimizer=adamw --freeze=mask, as bench/gpu/pack.py does. Issue 37's
acceptance counts its step.
"""

import argparse
import ctypes
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# The elementwise kernels the CUDA emitter generates, named k0, k1, ... in
# the order it writes them: one line for all, since the numbers shift with
# every kernel written before them.
GENERATED = re.compile(r"k[0-9]+$")
KINDS = ["kernel", "gemm", "copy", "memset", "host_function", "graph",
         "cudnn"]
TOTALS = {"kernel": "launches", "gemm": "gemms", "copy": "copies",
          "memset": "memsets", "host_function": "host_functions",
          "graph": "graphs", "cudnn": "convolutions"}
# Kinds whose total is shown only when not zero.
OPTIONAL = {"cudnn"}


class Failure(Exception):
    pass


def simulator():
    """The libampc_cudasim the loaded model library runs on: the one
    already in the process (RTLD_NOLOAD), never a second copy whose
    counters nothing would increment."""
    try:
        lib = ctypes.CDLL("libampc_cudasim.so",
                          mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    except OSError:
        raise Failure("libampc_cudasim.so is not loaded: not a "
                      "--target=cuda-sim library")
    lib.ampc_cudasim_counters_reset.restype = None
    lib.ampc_cudasim_counters_reset.argtypes = []
    lib.ampc_cudasim_counters.restype = ctypes.c_size_t
    lib.ampc_cudasim_counters.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return lib


def read_counters(lib):
    """{(kind, name): count} from ampc_cudasim_counters' text."""
    size = lib.ampc_cudasim_counters(None, 0)
    buffer = ctypes.create_string_buffer(size + 1)
    if lib.ampc_cudasim_counters(buffer, size + 1) != size:
        raise Failure("the counters changed while they were read")
    counts = {}
    for line in buffer.value.decode().splitlines():
        kind, count, name = line.split(" ", 2)
        counts[(kind, name)] = int(count)
    return counts


def one_step(path):
    """The counts of exactly one train_step of the library at `path`, after
    a warm-up step."""
    from ampc.runtime import AmpcError, Model
    from sim_vs_cpu import inputs_for
    try:
        with Model(path) as model:
            if model.info.target != "cuda" or model.info.mode != "train":
                raise Failure("not a CUDA training library (target %s, mode "
                              "%s)" % (model.info.target, model.info.mode))
            lib = simulator()
            inputs = inputs_for(model, 7)
            model.train_step(inputs)  # waits for it
            lib.ampc_cudasim_counters_reset()
            model.train_step(inputs, wait=False)
            model.synchronize()
            return read_counters(lib)
    except (AmpcError, OSError) as e:  # OSError: no runtime library found
        raise Failure(str(e))


# A generated kernel: its name, parameters and body.
KERNEL = re.compile(r"__global__ void __launch_bounds__\([^)]*\) (k[0-9]+)"
                    r"\(([^)]*)\) \{\n(.*?)\n\}\n", re.S)
# The two statements of a kernel that only converts its one input.
CAST_LOAD = re.compile(r"const \w+ x0 = (ampc::cuda::load\w+\()?a0\[o\]\)?;$")
CAST_STORE = re.compile(r"out\[o\] = (ampc::cuda::store\w+|static_cast<\w+>)"
                        r"\(\(x0\)\);$")


def cast_only_kernels(source):
    """The names of the generated kernels in `source` that only convert."""
    names = set()
    for m in KERNEL.finditer(source):
        if m.group(2).count("*") != 2:  # one input and the output
            continue
        body = [l.strip() for l in m.group(3).splitlines()
                if l.strip() and l.strip() != "}"
                and not l.strip().startswith("AMPC_FOR")]
        if (len(body) == 2 and CAST_LOAD.match(body[0])
                and CAST_STORE.match(body[1])):
            names.add(m.group(1))
    return names


def report(counts, full_names):
    merged = {}
    for (kind, name), count in counts.items():
        if kind == "kernel" and not full_names:
            name = "k<N>" if GENERATED.match(name) else name.split("<")[0]
            # A row kernel's warp- or block-per-row variant (chosen by
            # row length) counts as the kernel: one launch either way.
            for variant in ("ByBlock", "ByWarp"):
                if name.endswith(variant):
                    name = name[:-len(variant)]
            # A reduction split over blocks (reducePartials, then
            # reduceFinish) counts as one reduce and one reduceFinish.
            if name == "reducePartials":
                name = "reduce"
        merged[(kind, name)] = merged.get((kind, name), 0) + count
    unknown = sorted({k for k, _ in merged} - set(KINDS))
    if unknown:
        raise Failure("unknown kind of work in the counters: " + unknown[0])
    sums = {kind: sum(c for (k, _), c in merged.items() if k == kind)
            for kind in KINDS}
    totals = " ".join("%s %d" % (TOTALS[kind], sums[kind]) for kind in KINDS
                      if sums[kind] or kind not in OPTIONAL)
    lines = [totals]
    for kind in KINDS:
        lines += ["%s %s %d" % (kind, name, merged[(kind, name)])
                  for k, name in sorted(merged) if k == kind]
    return lines


def export_encoder(args):
    import torch
    from ampc_testing import export_onnx

    class EncoderClassifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = torch.nn.TransformerEncoderLayer(
                args.d_model, args.heads, dim_feedforward=args.feed_forward,
                dropout=args.dropout, batch_first=True)
            self.head = torch.nn.Linear(args.d_model, args.classes)

        def forward(self, x):
            return self.head(self.encoder(x).mean(dim=1))

    torch.manual_seed(0)
    export_onnx(EncoderClassifier(),
                torch.randn(args.batch, args.seq, args.d_model), args.out,
                training=True)


def export_gpt(args):
    import torch
    sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "..", "bench",
                                    "gpu"))
    import models
    from ampc_testing import export_onnx
    torch.manual_seed(0)
    block = models.GptBlock(d=args.d_model, heads=args.heads,
                            batch=args.batch, seq=args.seq)
    export_onnx(block, torch.randn(args.batch, args.seq, args.d_model),
                args.out, training=True)


def export_resnet18(args):
    import torch
    import torchvision
    from ampc_testing import export_onnx
    torch.manual_seed(0)
    export_onnx(torchvision.models.resnet18(num_classes=10),
                torch.randn(args.batch, 3, args.size, args.size), args.out,
                training=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    count = sub.add_parser("count")
    count.add_argument("library")
    count.add_argument("--check-prefix")
    count.add_argument("--full-names", action="store_true")
    count.add_argument("--source")
    encoder = sub.add_parser("encoder")
    encoder.add_argument("out")
    encoder.add_argument("--d-model", type=int, default=256)
    encoder.add_argument("--heads", type=int, default=4)
    encoder.add_argument("--batch", type=int, default=8)
    encoder.add_argument("--seq", type=int, default=64)
    encoder.add_argument("--feed-forward", type=int, default=2048)
    encoder.add_argument("--dropout", type=float, default=0.0)
    encoder.add_argument("--classes", type=int, default=10)
    gpt = sub.add_parser("gpt")
    gpt.add_argument("out")
    gpt.add_argument("--d-model", type=int, default=32)
    gpt.add_argument("--heads", type=int, default=2)
    gpt.add_argument("--batch", type=int, default=2)
    gpt.add_argument("--seq", type=int, default=8)
    resnet = sub.add_parser("resnet18")
    resnet.add_argument("out")
    resnet.add_argument("--batch", type=int, default=2)
    resnet.add_argument("--size", type=int, default=32)
    args = parser.parse_args()
    if args.command == "resnet18":
        export_resnet18(args)
        return 0
    if args.command == "gpt":
        export_gpt(args)
        return 0
    if args.command == "encoder":
        export_encoder(args)
        return 0
    try:
        counts = one_step(args.library)
        lines = report(counts, args.full_names)
        if args.source:
            with open(args.source) as f:
                cast_only = cast_only_kernels(f.read())
            lines.append("cast-only %d" % sum(
                c for (k, name), c in counts.items()
                if k == "kernel" and name in cast_only))
    except Failure as e:
        print("launch_count.py: error: %s: %s" % (args.library, e),
              file=sys.stderr)
        return 1
    # Under mpirun (a data-parallel library: every rank runs the step, whose
    # all-reduces need them all) rank 0 alone prints.
    if os.environ.get("OMPI_COMM_WORLD_RANK", "0") != "0":
        return 0
    for i, line in enumerate(lines):
        if args.check_prefix:
            line = "# %s%s: %s" % (args.check_prefix, "-NEXT" if i else "",
                                   line)
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
