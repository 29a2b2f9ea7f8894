"""Checks that no CUDA kernel of the given models gives one thread a loop
over a whole row or column of an activation (issue 37, item 9).

Emits each model's CUDA source as compile_all.py does (the training library,
else inference; no nvcc) and reads the comment the emitter puts after each launch of a row op,
"// ampc.parallelism: KIND ROWS rows of LENGTH (OP)" (none: element),
KIND from KernelGeometry.h's cudaParallelism: element, row-by-thread,
row-by-warp, row-by-block, split or serial. A model fails when
  - a kernel that loops over a row in one thread (ROW_KERNELS) is launched
    for an op not stated row-by-thread, or for rows longer than its bound
    (shorter than kCudaWarpRowMinLength; a reduction's, shorter than
    kCudaBlockRowMinLength), or
  - an op is `serial` and not one of the ops docs/design.md lists as still
    serial (STILL_SERIAL, "Row-parallel normalisation").
Prints "SERIAL: model: ..." per offence, then "N models, N row ops (KIND N
...), N serial offences"; exit status 1 when there is one.
"""
import argparse
import collections
import concurrent.futures
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compile_all  # noqa: E402

# Kernels whose thread loops over a whole row (a thread per row or output),
# and the longest row each may take: kCudaWarpRowMinLength - 1, and for a
# reduction kCudaBlockRowMinLength - 1 (a thread per output keeps the CPU's
# pairwise order, bit for bit; docs/design.md lists it as still serial).
ROW_KERNELS = {"softmax": 7, "layerNorm": 7, "layerNormGrad": 7,
               "reduce": 255}
# Still serial (docs/design.md, "Row-parallel normalisation").
STILL_SERIAL = {"ampc.softmax_cross_entropy_loss",
                "ampc.negative_log_likelihood_loss", "ampc.nll_loss_grad"}

COMMENT = re.compile(r"// ampc\.parallelism: (\S+) (\d+) rows of (\d+) \((\S+)\)")
# A plain or a cooperative launch (BatchNorm's, issue 39).
LAUNCH = re.compile(r'ampc::cuda::launch(?:Cooperative)?\("([A-Za-z0-9_]+)')


def check(source):
    """(offences, {kind: count}) of one generated source: each launch line
    is followed by its AMPC_LAUNCHED line, which carries the op's
    parallelism where it is not `element`."""
    offences, kinds = [], collections.Counter()
    kernel = None
    with open(source) as f:
        for line in f:
            m = LAUNCH.search(line)
            if m:
                kernel = m.group(1)
                continue
            if "AMPC_LAUNCHED" not in line or kernel is None:
                continue
            m = COMMENT.search(line)
            kind, length, op = ("element", 0, "") if not m else \
                (m.group(1), int(m.group(3)), m.group(4))
            kinds[kind] += 1
            if kind == "serial" and op not in STILL_SERIAL:
                offences.append(f"{kernel}: {op} serial over {length} elements")
            if kernel in ROW_KERNELS and op not in STILL_SERIAL:
                if kind != "row-by-thread":
                    offences.append(f"{kernel}: a thread per row where "
                                    f"{op or 'the op'} is {kind}")
                elif length > ROW_KERNELS[kernel]:
                    offences.append(f"{kernel}: a thread per row of "
                                    f"{length} elements ({op})")
            kernel = None
    return offences, kinds


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--ampc", default="ampc")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("models", nargs="+")
    args = p.parse_args()
    total, offences = collections.Counter(), 0
    with tempfile.TemporaryDirectory() as out:
        models = []
        for path in sorted(args.models):
            parts = [path] if path.endswith(".onnx") else \
                compile_all.parts(path, out)
            models += [(path, m) for m in parts]
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            emitted = list(pool.map(
                lambda im: compile_all.emit_model(args.ampc, im[1][1], im[0], out),
                enumerate(models)))
        failed = 0
        for (path, model), (status, mode, err, source) in zip(models, emitted):
            if source is None:
                failed += 1
                print(f"FAILED: {model}: {err}")
                continue
            found, kinds = check(source)
            total.update(kinds)
            for o in found:
                offences += 1
                print(f"SERIAL: {model}: {o}")
    summary = " ".join(f"{k} {total[k]}" for k in sorted(total))
    print(f"{len(models)} models, {failed} failed, row ops: {summary}, "
          f"{offences} serial offences")
    return 1 if offences or failed else 0


if __name__ == "__main__":
    sys.exit(main())
