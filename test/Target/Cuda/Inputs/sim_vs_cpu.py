"""Runs each test model's CUDA library under the CUDA execution on the CPU
(--target=cuda-sim) and compares it with the CPU target, the numerical
reference.

For every model (a file, or each .onnxtext part of a split-file), with the
same inputs and the same ampc flags for both targets:

  forward   at fp32: every output of the training library's forward (the
            loss and the model's outputs), and of the --mode=infer library
            for a model that does not train and for --full models
  gradients --optimizer=none at fp32: the loss and every parameter gradient
  training  the default library (fp16, dynamic loss scaling, AdamW): the
            losses of --steps steps, then every parameter and the scaler
            state; then every state tensor the library keeps, read from a
            checkpoint of each (parameters' masters, optimizer moments and
            momentum buffers, BatchNorm's running statistics and counters,
            gradient accumulators and the micro-batch counter, the scaler,
            the step and the learning rate: the same names, floats within
            the training tolerance, integers exact); then the eval-mode
            forward of the trained model (`infer`: BatchNorm on its running
            statistics), which a wrong running-statistics update changes
A model that cannot take the default loss is compared in the forward only.
With --full (the MLP, CNN and transformer in CI) also: SGD with momentum at
fp32, Adam at bf16, and SGD without momentum at fp16 with dynamic loss
scaling, --accumulate=2 and --clip-grad-norm=100 (AdamW divides each
gradient by its own magnitude, so a wrong unscale, accumulation sum or
clip factor hardly moves its weights; SGD's move with the gradients'
scale), each with the state and eval checks above; the overflow skip (a scale of 3e38 overflows: the
step must leave parameters, moments and optimizer state bit for bit, back
off the scale and count the skip); a checkpoint saved after two steps,
loaded into a fresh instance, and the next step compared; the ONNX export of
the trained weights.

Inputs: N(0, 1) values, under which a softmax's max subtraction never
matters; make_models.py's dominant.onnx puts +100 or -100 in each of its
long rows (see there) so that a kernel that subtracts a wrong max
overflows.

Tolerance (why not bit for bit): the targets differ only in accumulation
order (docs/design.md): cuBLASLt's operands reach OpenBLAS transposed (row-
major mapped onto column-major calls), and the CUDA kernels sum some
reductions in a different order (atomics, per-thread partial sums). An FP32
result may differ in its last bits and, where a value is then rounded to
f16/bf16, by one f16/bf16 unit. So: FP32 values within 1e-5 relative (plus
1e-6 absolute), values through f16 within 2e-3 relative (bf16: 1.6e-2)
plus 1e-4 absolute, training at most 4e-3 relative on the losses and
parameters after --steps steps. The largest differences are printed.

Compiling is most of the time, and most of a small model's compile is the
compiler parsing the kernel headers: every comparison's two sources are
emitted with their own --symbol-suffix and compiled 20 to a library
(--per-library; compile_all.compile_batches), and each comparison loads its
model by entry symbol (ampc_model_load_entry).

Each model's checks run in a child process: a fault is sticky in a CUDA
process, and one model's must not poison the next. Prints one line per
model ("MATCH", "MISMATCH" or "FAILED" with the reason, or "SKIPPED" when
the CPU target itself refuses the generated inputs, e.g. class labels for a
class axis of size 0) and ends with "N matched, N mismatched, N failed, N
skipped".
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                "Training", "Inputs"))
sys.path.insert(0, os.path.dirname(__file__))
from compile_all import compile_batches, parts  # noqa: E402

TOLERANCE = {  # (relative, absolute) by the precision the values went through
    "fp32": (1e-5, 1e-6),
    "fp64": (1e-12, 1e-14),
    "fp16": (2e-3, 1e-4),
    "bf16": (1.6e-2, 1e-3),
    "train": (4e-3, 1e-5),
}


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    errors = [l for l in p.stderr.splitlines() if "error" in l]
    return p.returncode, errors[0] if errors else p.stderr.strip()[-300:]


def emit_pair(ampc, model, flags, index, out):
    """The CPU target's and the CUDA target's sources of `model` with
    `flags`, their symbols suffixed `_c<index>` (so that many compile into
    one library): {"cpu": path, "cuda-sim": path}; raises RuntimeError with
    the first error."""
    sources = {}
    for target, emit, ext in (("cpu", "cpp", ".cpp"), ("cuda-sim", "cuda", ".cu")):
        # A stem per target: each source's blob and model files are written
        # beside it (STEM.params.bin, STEM.model.onnx), and the two
        # targets' initial states need not be laid out alike.
        stem = "c%d_%s" % (index, "cpu" if target == "cpu" else "sim")
        path = os.path.join(out, stem + ext)
        # Both targets compute the same graph: attention is fused only
        # where the CUDA kernels take it (the CPU kernels take any head
        # dimension and FP32, and the fused and unfused graphs round
        # differently at FP16).
        rc, err = run([ampc, model, "--target=" + target, "--emit=" + emit,
                       f"--symbol-suffix=_c{index}", "-o", path,
                       "--fuse-attention=cuda"] + flags)
        if rc != 0:
            raise RuntimeError("%s: %s" % (target, err))
        sources[target] = path
    return sources


def applies(ampc, model, flags):
    return run([ampc, model, "--target=cpu", "--emit=mlir", "-o", "-"] +
               flags)[0] == 0


# ---------------------------------------------------------------------------
# The child: one model's comparisons, printed as JSON.
# ---------------------------------------------------------------------------

def inputs_for(model, seed):
    rng = np.random.default_rng(seed)
    arrays = []
    for info in model.inputs:
        if info.dtype.kind == "f":
            arrays.append(rng.standard_normal(info.shape).astype(info.dtype))
        elif info.dtype.kind == "b":
            arrays.append(rng.integers(0, 2, info.shape).astype(info.dtype))
        elif info.ampc_dtype == 16:  # bf16 bits of N(0, 1) values
            f = rng.standard_normal(info.shape).astype(np.float32)
            arrays.append((f.view(np.uint32) >> 16).astype(np.uint16))
        elif info.name == "label":  # the loss ampc attaches: class 0 exists
            arrays.append(np.zeros(info.shape, info.dtype))
        else:  # indices and a model's own labels: 0 or 1 fits every axis
            arrays.append(rng.integers(0, 2, info.shape).astype(info.dtype))
    return arrays


def as_float(a, bf16):
    a = np.asarray(a)
    if bf16:
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


class Differences:
    def __init__(self):
        self.worst = {}  # what -> (relative excess, abs diff, rel diff)
        self.failures = []

    def compare(self, what, cpu, sim, tolerance, info=None):
        """`info`: the tensor's TensorInfo where known; without it a uint16
        array is bf16 bits (parameters and gradients are never u16)."""
        rtol, atol = TOLERANCE[tolerance]
        bf16 = info.ampc_dtype == 16 if info else \
            np.asarray(cpu).dtype == np.uint16
        a, b = as_float(cpu, bf16), as_float(sim, bf16)
        if a.shape != b.shape:
            self.failures.append("%s: shapes %s and %s" % (what, a.shape, b.shape))
            return
        if np.issubdtype(np.asarray(cpu).dtype, np.integer) and not bf16:
            if not np.array_equal(a, b):
                self.failures.append("%s: integers differ" % what)
            return
        # NaN where both are NaN, and equal infinities, are equal.
        same = (np.isnan(a) & np.isnan(b)) | (np.isinf(a) & (a == b))
        diff = np.where(same, 0.0, np.abs(a - b))
        bound = np.where(same, 1.0, atol + rtol * np.abs(a))
        if diff.size:
            excess = float(np.nanmax(diff / bound)) if np.all(np.isfinite(diff)) else np.inf
            scale = np.maximum(np.abs(a), 1e-30)
            self.worst[what] = (excess, float(np.nanmax(diff)),
                                float(np.nanmax(diff / scale)))
            if not excess <= 1.0:
                i = int(np.nanargmax(diff / bound)) if np.isfinite(excess) else \
                    int(np.argmax(~np.isfinite(diff)))
                self.failures.append(
                    "%s: element %d: cpu %r, cuda-sim %r (tolerance %s)" %
                    (what, i, a.flat[i], b.flat[i], tolerance))

    def exact(self, what, before, after):
        if np.asarray(before).tobytes() != np.asarray(after).tobytes():
            self.failures.append("%s: not bit-identical" % what)


def child(args):
    print(json.dumps(run_child(args)))


def cpu_refuses(spec, inputs):
    """The CPU target's error on these inputs (a model whose inputs the
    generator cannot make valid: a class axis of size 0 or 1), else None."""
    from ampc.runtime import AmpcError, Model
    try:
        with Model(spec["cpu"], entry=spec["entry"]) as probe:
            if spec["kind"] == "infer":
                probe.infer(inputs)
            elif spec["kind"] == "gradients":
                probe.gradients(inputs)
            else:
                probe.train_step(inputs)
    except AmpcError as e:
        return str(e)
    return None


def run_child(args):
    from ampc.runtime import Model
    d = Differences()
    spec = json.loads(args.child)
    kind = spec["kind"]
    with Model(spec["cpu"], entry=spec["entry"]) as cpu, \
            Model(spec["sim"], entry=spec["entry"]) as sim:
        x = inputs_for(cpu, 7)
        refused = cpu_refuses(spec, x)
        if refused:
            return {"skipped": "the CPU target refuses the generated inputs: "
                               + refused}
        if kind == "infer":
            for i, (a, b) in enumerate(zip(cpu.infer(x), sim.infer(x))):
                d.compare("output %d" % i, a, b, spec["precision"],
                          cpu.outputs[i])
        elif kind == "gradients":
            # The forward of a training library: the loss, then the model's
            # outputs.
            for i, (a, b) in enumerate(zip(cpu.infer(x), sim.infer(x))):
                d.compare("forward output %d" % i, a, b, spec["precision"],
                          cpu.outputs[i])
            la, ga = cpu.gradients(x)
            lb, gb = sim.gradients(x)
            d.compare("loss", la, lb, spec["precision"])
            for name in ga:
                d.compare("gradient " + name, ga[name], gb[name], spec["precision"])
        else:
            batches = [inputs_for(cpu, 100 + s) for s in range(spec["steps"])]
            for s, batch in enumerate(batches):
                d.compare("loss %d" % s, cpu.train_step(batch),
                          sim.train_step(batch), "train")
            for p in cpu.parameters:
                d.compare("parameter " + p.name, cpu.get_parameter(p.name),
                          sim.get_parameter(p.name), "train")
            sa, sb = cpu.scaler_state(), sim.scaler_state()
            if sa != sb:
                d.failures.append("scaler state: cpu %s, cuda-sim %s" % (sa, sb))
            compare_state(spec["folder"], cpu, sim, d)
            # The eval-mode forward of the trained model (BatchNorm on its
            # running statistics, no dropout): a wrong running-statistics
            # update shows here as well as in the state.
            for i, (a, b) in enumerate(zip(cpu.infer(x), sim.infer(x))):
                d.compare("eval output %d after training" % i, a, b, "train",
                          cpu.outputs[i])
            if spec["full"]:
                full_checks(spec, cpu, sim, batches, d)
    return {"worst": d.worst, "failures": d.failures}


def compare_state(folder, cpu, sim, d):
    """Every state tensor of the two trained libraries, read from a
    checkpoint of each: the parameters' masters, the optimizer's moments and
    momentum buffers, BatchNorm's running statistics and counters, the
    gradient accumulators and micro-batch counter, the scaler, the step and
    the learning rate. Floats within the training tolerance, integers
    exact, the same names in both."""
    import checkpoint_format
    state = {}
    for name, model in (("cpu", cpu), ("sim", sim)):
        path = os.path.join(folder, name + "-state.ckpt")
        model.save_checkpoint(path)
        state[name] = checkpoint_format.read(path, verify_checksum=False)[1]
    if list(state["cpu"]) != list(state["sim"]):
        d.failures.append("state tensors: cpu %s, cuda-sim %s" % (
            list(state["cpu"]), list(state["sim"])))
        return
    for n, a in state["cpu"].items():
        d.compare("state " + n, a, state["sim"][n], "train")


def full_checks(spec, cpu, sim, batches, d):
    from ampc.runtime import Model
    folder = spec["folder"]
    # A checkpoint after the steps so far, into fresh instances, then one
    # more step on each: resumed training matches.
    for name, model in (("cpu", cpu), ("sim", sim)):
        model.save_checkpoint(os.path.join(folder, name + ".ckpt"))
    with Model(spec["cpu"], entry=spec["entry"]) as cpu2, \
            Model(spec["sim"], entry=spec["entry"]) as sim2:
        cpu2.load_checkpoint(os.path.join(folder, "cpu.ckpt"))
        sim2.load_checkpoint(os.path.join(folder, "sim.ckpt"))
        d.compare("resumed loss", cpu2.train_step(batches[0]),
                  sim2.train_step(batches[0]), "train")
        for p in cpu.parameters:
            d.compare("resumed parameter " + p.name, cpu2.get_parameter(p.name),
                      sim2.get_parameter(p.name), "train")
    # The ONNX export of the trained weights: the same initializers.
    for name, model in (("cpu", cpu), ("sim", sim)):
        model.export_onnx(os.path.join(folder, name + ".onnx"))
    import onnx
    from onnx import numpy_helper
    inits = {}
    for name in ("cpu", "sim"):
        m = onnx.load(os.path.join(folder, name + ".onnx"))
        inits[name] = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    trained = {p.name for p in cpu.parameters}
    for n in sorted(trained & set(inits["cpu"])):
        d.compare("exported " + n, inits["cpu"][n], inits["sim"].get(n), "train")
    # The overflow skip, when the library scales the loss: a scale of 3e38
    # overflows every gradient; the step must change nothing but the scaler.
    if sim.training_info()[2] == "dynamic":
        before = {p.name: sim.get_parameter(p.name) for p in sim.parameters}
        state = sim.scaler_state()
        sim.set_scaler_state(3e38, state["growth_tracker"], state["steps"],
                             state["skipped_steps"])
        sim.save_checkpoint(os.path.join(folder, "before-skip.ckpt"))
        sim.train_step(batches[0])
        after = sim.scaler_state()
        for n, v in before.items():
            d.exact("after the skipped step, " + n, v, sim.get_parameter(n))
        sim.save_checkpoint(os.path.join(folder, "after-skip.ckpt"))
        if after["skipped_steps"] != state["skipped_steps"] + 1 or \
                after["scale"] != np.float32(3e38) * np.float32(0.5):
            d.failures.append("overflow skip: scaler state %s" % after)
        # Every state tensor (moments, step, learning rate): only the
        # scaler's own changed, and the model's buffers (BatchNorm's
        # statistics and counters), which the forward updates as torch's
        # does; those match the CPU target's after the same step.
        import checkpoint_format
        _, a = checkpoint_format.read(os.path.join(folder, "before-skip.ckpt"))
        _, b = checkpoint_format.read(os.path.join(folder, "after-skip.ckpt"))
        buffers = {t.name for t in sim.buffers}
        for n in a:
            if n not in buffers and n not in (
                    "ampc.loss_scale", "ampc.growth_tracker",
                    "ampc.skipped_steps"):
                d.exact("after the skipped step, state " + n, a[n], b[n])
        if buffers:
            cpu.set_scaler_state(3e38, state["growth_tracker"],
                                 state["steps"], state["skipped_steps"])
            cpu.train_step(batches[0])
            for n in sorted(buffers):
                d.compare("after the skipped step, buffer " + n,
                          cpu.get_buffer(n), sim.get_buffer(n), "train")


# ---------------------------------------------------------------------------
# The parent
# ---------------------------------------------------------------------------

def check(args, job, libraries, out):
    start = time.time()
    status, line, result = compare(args, job, libraries, out)
    return status, "%s (%.1f s)" % (line, time.time() - start), result


def compare(args, job, libraries, out):
    index, (model, label, kind, flags, precision, full), seed = job
    name = "%s [%s]" % (label, kind) + (" (seed %s)" % seed if seed else "")
    if isinstance(libraries, str):
        return "FAILED", "%s: %s" % (name, libraries), {}
    (cpu, cpu_error), (sim, sim_error) = libraries
    if cpu_error or sim_error:
        return "FAILED", "%s: %s" % (
            name, "cpu: " + cpu_error if cpu_error else "cuda-sim: " + sim_error), {}
    folder = os.path.join(out, f"c{index}.{seed or 'default'}.work")
    os.makedirs(folder, exist_ok=True)
    spec = {"cpu": cpu, "sim": sim, "entry": f"ampc_model_entry_c{index}",
            "kind": kind, "precision": precision, "steps": args.steps,
            "full": full, "folder": folder}
    env = dict(os.environ)
    if seed:
        env["AMPC_CUDA_SIM_SEED"] = seed
    p = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)],
                       capture_output=True, text=True, env=env)
    if p.returncode != 0:
        last = [l for l in p.stderr.splitlines() if l.strip()]
        return "FAILED", "%s: %s" % (name, last[-1] if last else "crashed"), {}
    result = json.loads(p.stdout.strip().splitlines()[-1])
    if "skipped" in result:
        return "SKIPPED", "%s: %s" % (name, result["skipped"]), result
    worst = max(result["worst"].items(), key=lambda kv: kv[1][0],
                default=("-", (0, 0, 0)))
    summary = "%s: largest difference %s: abs %.3g, rel %.3g" % (
        name, worst[0], worst[1][1], worst[1][2])
    if result["failures"]:
        return "MISMATCH", summary + "; " + "; ".join(result["failures"][:3]), result
    return "MATCH", summary, result


def plan(args, model, label):
    """The comparisons that apply to `model`."""
    jobs = []
    full = any(label.endswith(f) for f in args.full)
    trains = applies(args.ampc, model, [])
    if any(label.endswith(f) for f in args.train_only):
        return [(model, label, "train", [], "train", False)]
    # A model that trains has its forward compared by the gradients job
    # (the training library's infer); the inference library only for the
    # others and for the models that get every check.
    wants_infer = full or not trains or any(label.endswith(f) for f in args.infer)
    if wants_infer and applies(args.ampc, model, ["--mode=infer"]):
        jobs.append(("infer", ["--mode=infer", "--precision=fp32"], "fp32", False))
    if trains:
        jobs.append(("gradients", ["--optimizer=none", "--precision=fp32"],
                     "fp32", False))
        jobs.append(("train", [], "train", full))
        if full:
            # SGD without momentum follows the gradients' scale, which AdamW
            # normalises away: a wrong unscale, accumulation sum or clip
            # factor moves its weights (the threshold, far above these
            # models' gradient norms, is far below a gradient left scaled).
            for name, opt in (
                    ("sgd fp32", ["--optimizer=sgd", "--momentum=0.9",
                                  "--precision=fp32"]),
                    ("adam bf16", ["--optimizer=adam", "--precision=bf16"]),
                    ("sgd fp16 accumulate clip",
                     ["--optimizer=sgd", "--momentum=0", "--precision=fp16",
                      "--accumulate=2", "--clip-grad-norm=100"])):
                jobs.append(("train " + name, opt, "train", False))
    return [(model, label, kind, flags, precision, full)
            for kind, flags, precision, full in jobs]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ampc", default="ampc")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--per-library", type=int, default=20,
                   help="comparisons whose libraries compile together (1: "
                        "each alone)")
    p.add_argument("--full", action="append", default=[],
                   help="models (path suffixes) that get every check")
    p.add_argument("--infer", action="append", default=[],
                   help="models (path suffixes) whose inference library is "
                        "compared although they train")
    p.add_argument("--train-only", action="append", default=[],
                   help="models (path suffixes) compared in training only")
    p.add_argument("--seeds", default="",
                   help="comma-separated AMPC_CUDA_SIM_SEED values: every "
                        "comparison runs under the first (default: the "
                        "variable as set, else the execution's default "
                        "order), the --every-seed models under each")
    p.add_argument("--every-seed", action="append", default=[],
                   help="models (path suffixes) compared under every seed of "
                        "--seeds (the compile is shared: each seed costs one "
                        "more run of the comparison)")
    p.add_argument("--list", action="store_true",
                   help="print the comparisons that would run, and their count")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("models", nargs="*")
    args = p.parse_args()
    if args.child:
        return child(args)
    counts = {"MATCH": 0, "MISMATCH": 0, "FAILED": 0, "SKIPPED": 0}
    with tempfile.TemporaryDirectory() as out:
        work = []
        for path in sorted(args.models):
            for m in (parts(path, out) if path.endswith(".onnxtext") else [path]):
                label = os.path.relpath(m, out) if m.startswith(out) else \
                    os.path.join(os.path.basename(os.path.dirname(path)),
                                 os.path.basename(path))
                work += plan(args, m, label)
        # Each comparison under the first seed; the --every-seed models'
        # also under the others (the libraries are the same: only the
        # execution's order of blocks and threads changes).
        seeds = [s for s in args.seeds.split(",") if s] or [None]
        runs = [(i, w, seed) for i, w in enumerate(work)
                for seed in (seeds if any(w[1].endswith(f)
                                          for f in args.every_seed)
                             else seeds[:1])]
        if args.list:
            for _, w, seed in runs:
                print("%s [%s]%s" % (w[1], w[2],
                                     " (seed %s)" % seed if seed else ""))
            print("%d comparisons" % len(runs))
            return 0
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            # Both targets' sources of every comparison, then each target's
            # compiled many to a library, then the comparisons.
            def emit(numbered):
                index, w = numbered
                try:
                    return index, emit_pair(args.ampc, w[0], w[3], index, out)
                except RuntimeError as e:
                    return index, str(e)
            emitted = dict(pool.map(emit, enumerate(work)))
            ready = {i: e for i, e in emitted.items() if not isinstance(e, str)}
            cpu, _ = compile_batches(
                args.ampc, {i: e["cpu"] for i, e in ready.items()},
                args.per_library, [], os.path.join(out, "cpu"), pool)
            sim, _ = compile_batches(
                args.ampc, {i: e["cuda-sim"] for i, e in ready.items()},
                args.per_library, ["--target=cuda-sim",
                                   "--cuda-resource-check=false"],
                os.path.join(out, "sim"), pool)
            libraries = {i: e if isinstance(e, str) else (cpu[i], sim[i])
                         for i, e in emitted.items()}
            results = pool.map(
                lambda run: check(args, run, libraries[run[0]], out), runs)
            for status, line, _ in results:
                counts[status] += 1
                print("%s: %s" % (status, line), flush=True)
    print("%d matched, %d mismatched, %d failed, %d skipped" %
          (counts["MATCH"], counts["MISMATCH"], counts["FAILED"],
           counts["SKIPPED"]))
    return 0 if counts["MATCH"] and not counts["MISMATCH"] and not counts["FAILED"] else 1


if __name__ == "__main__":
    sys.exit(main())
