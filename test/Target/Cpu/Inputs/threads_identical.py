"""Trains every model it is given on the CPU target with several thread
counts (ampc_model_options.num_threads: 1, 2 and 4 by default) and checks
that the results are the same bits (issue 43, docs/design.md "CPU
threads"): the loss of each step, every parameter, the whole training state
of a checkpoint (moments, BatchNorm's running statistics, the scaler, the
step) and the eval-mode forward after training. Models that do not train
are compared on their fp32 inference library's outputs.

The kernels split only work whose every output element is computed by one
chunk with the serial loop's arithmetic, and OpenBLAS splits a product over
output tiles, so no tolerance applies: any difference is a bug.

Sources are emitted with their own --symbol-suffix and compiled many to a
library (compile_all.compile_batches, as sim_vs_cpu.py does); each model is
checked in a child process. Prints one line per model ("IDENTICAL",
"DIFFERENT" with the first differing value, "FAILED" with the reason,
"SKIPPED" where the CPU target refuses the generated inputs) and ends with
"N identical, N different, N failed, N skipped".
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "Cuda", "Inputs"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "Training", "Inputs"))
from compile_all import compile_batches, parts  # noqa: E402


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    errors = [l for l in p.stderr.splitlines() if "error" in l]
    return p.returncode, errors[0] if errors else p.stderr.strip()[-300:]


def applies(ampc, model, flags):
    return run([ampc, model, "--target=cpu", "--emit=mlir", "-o", "-"] +
               flags)[0] == 0


def child(spec):
    import numpy as np
    from sim_vs_cpu import inputs_for
    from ampc.runtime import AmpcError, Model
    import checkpoint_format

    def outcome(threads):
        """Every value the run produces, as (what, bytes) in order."""
        values = []
        with Model(spec["library"], entry=spec["entry"],
                   num_threads=threads) as m:
            x = inputs_for(m, 7)
            if spec["kind"] == "infer":
                for i, y in enumerate(m.infer(x)):
                    values.append(("output %d" % i, np.asarray(y).tobytes()))
                return values
            for s in range(spec["steps"]):
                loss = m.train_step(inputs_for(m, 100 + s))
                values.append(("loss %d" % s, np.asarray(loss).tobytes()))
            for p in m.parameters:
                values.append(("parameter " + p.name,
                               np.asarray(m.get_parameter(p.name)).tobytes()))
            values.append(("scaler state", repr(m.scaler_state()).encode()))
            path = os.path.join(spec["folder"], "t%d.ckpt" % threads)
            m.save_checkpoint(path)
            state = checkpoint_format.read(path, verify_checksum=False)[1]
            for name in sorted(state):
                values.append(("state " + name,
                               np.asarray(state[name]).tobytes()))
            for i, y in enumerate(m.infer(x)):
                values.append(("eval output %d after training" % i,
                               np.asarray(y).tobytes()))
        return values

    try:
        reference = outcome(spec["threads"][0])
    except AmpcError as e:
        return {"skipped": "the CPU target refuses the generated inputs: " +
                str(e)}
    for threads in spec["threads"][1:]:
        other = outcome(threads)
        for (what, a), (_, b) in zip(reference, other):
            if a != b:
                return {"different": "%s with %d threads" % (what, threads)}
        if len(other) != len(reference):
            return {"different": "%d values with %d threads, %d with %d" % (
                len(other), threads, len(reference), spec["threads"][0])}
    return {"values": len(reference)}


def check(args, index, job, library, out):
    model, label, kind = job
    name = "%s [%s]" % (label, kind)
    path, error = library
    if error:
        return "FAILED", "%s: %s" % (name, error)
    folder = os.path.join(out, "c%d.work" % index)
    os.makedirs(folder, exist_ok=True)
    spec = {"library": path, "entry": "ampc_model_entry_c%d" % index,
            "kind": kind, "steps": args.steps, "folder": folder,
            "threads": [int(t) for t in args.threads.split(",")]}
    p = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        last = [l for l in p.stderr.splitlines() if l.strip()]
        return "FAILED", "%s: %s" % (name, last[-1] if last else "crashed")
    result = json.loads(p.stdout.strip().splitlines()[-1])
    if "skipped" in result:
        return "SKIPPED", "%s: %s" % (name, result["skipped"])
    if "different" in result:
        return "DIFFERENT", "%s: %s" % (name, result["different"])
    return "IDENTICAL", "%s: %d values, threads %s" % (name, result["values"],
                                                       args.threads)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ampc", default="ampc")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--threads", default="1,2,4",
                   help="the thread counts, the first the reference")
    p.add_argument("--per-library", type=int, default=20)
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("models", nargs="*")
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    counts = {"IDENTICAL": 0, "DIFFERENT": 0, "FAILED": 0, "SKIPPED": 0}
    with tempfile.TemporaryDirectory() as out, \
            concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        jobs = []
        for path in sorted(args.models):
            for m in (parts(path, out) if path.endswith(".onnxtext") else [path]):
                label = os.path.relpath(m, out) if m.startswith(out) else \
                    os.path.join(os.path.basename(os.path.dirname(path)),
                                 os.path.basename(path))
                jobs.append((m, label))

        # The default training library (fp16, dynamic loss scaling, AdamW)
        # where the model trains, else the fp32 inference library.
        def emit(numbered):
            index, (model, label) = numbered
            kind, flags = "train", []
            if not applies(args.ampc, model, []):
                kind, flags = "infer", ["--mode=infer", "--precision=fp32"]
            source = os.path.join(out, "c%d.cpp" % index)
            rc, err = run([args.ampc, model, "--target=cpu", "--emit=cpp",
                           "--symbol-suffix=_c%d" % index, "-o", source] +
                          flags)
            return index, (model, label, kind), (source if rc == 0 else None,
                                                 err)
        emitted = list(pool.map(emit, enumerate(jobs)))
        libraries, _ = compile_batches(
            args.ampc, {i: s for i, _, (s, _) in emitted if s},
            args.per_library, [], os.path.join(out, "cpu"), pool)
        for i, _, (s, err) in emitted:
            if not s:
                libraries[i] = (None, err)
        results = pool.map(
            lambda e: check(args, e[0], e[1], libraries[e[0]], out), emitted)
        for status, line in results:
            counts[status] += 1
            print("%s: %s" % (status, line), flush=True)
    print("%d identical, %d different, %d failed, %d skipped" % (
        counts["IDENTICAL"], counts["DIFFERENT"], counts["FAILED"],
        counts["SKIPPED"]))
    return 0 if counts["IDENTICAL"] and not counts["DIFFERENT"] and \
        not counts["FAILED"] else 1


if __name__ == "__main__":
    sys.exit(main())
