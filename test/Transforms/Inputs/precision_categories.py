"""Every ampc op's precision category, through `ampc --report` JSON.

usage: precision_categories.py --ampc AMPC --table TABLE --out DIR
           [--loss LOSS MODEL]... MODEL...

Writes the report of each model (each .onnxtext part of a split-file) at
fp16 (`ampc MODEL --report=R.json`: the report only, no library; a model
whose output takes no default loss with --mode=infer; `--loss` compiles
one model with --loss=LOSS) and holds each node the report lists to
TABLE (precision-categories.txt, "ampc.op category" per line):

  - the node's category is its op's in TABLE, but for the one documented
    exception, the bias add of a linear layer (rule "allow list (bias add
    of a linear layer)");
  - a deny or fp32_output node computes in f32, an allow node in f16;
  - every op TABLE gives a category appears in some report, but for the
    three that never reach one (NOT_REPORTED, with the reason).

The nodes of an attached loss (named "ampc.loss") of a model given with
--loss are printed, "LOSS --loss=LOSS: ampc.op category computes DTYPE", for the
test to pin (bce_with_logits' Softplus in f32, ...).

Prints, per op, its category, the nodes seen and the compute dtypes, then
"N ops with a category, N covered, N mismatched" and exits 1 on any
mismatch or an op not covered. --print-covering lists the models needed
(each model that adds an op not yet seen), to keep the RUN line short.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "Target", "Cuda", "Inputs"))
from compile_all import parts  # noqa: E402

LOW = {"allow": "f16"}  # what the category computes in at fp16
F32 = {"deny", "fp32_output"}
BIAS_ADD = "allow list (bias add of a linear layer)"
# Ops with a category that no report can show; the unit test
# (DialectTest.cpp, PrecisionCategories) still pins their category.
NOT_REPORTED = {
    "ampc.identity": "folds to its input before precision is assigned",
    "ampc.batched_gemm": "made by ampc-fold-transposes in the kernel part, "
                         "after precision assignment",
    "ampc.bit_shift": "integers only; precision assignment decides float "
                      "data only",
}


def read_table(path):
    table = {}
    with open(path) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                op, category = line.split()
                table[op] = category
    return table


def report(ampc, model, flags, out):
    """The report's nodes, or the error of both attempts."""
    path = out + ".json"
    errors = []
    for mode in ([], ["--mode=infer"]):
        p = subprocess.run([ampc, model, "--report=" + path] + flags + mode,
                           capture_output=True, text=True)
        if p.returncode == 0:
            with open(path) as f:
                return json.load(f)["nodes"], None
        errors.append(p.stderr.strip().splitlines()[-1:])
    return [], "%s: %s" % (model, errors)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ampc", default="ampc")
    p.add_argument("--table", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--loss", nargs=2, action="append", default=[],
                   metavar=("LOSS", "MODEL"))
    p.add_argument("--print-covering", action="store_true")
    p.add_argument("models", nargs="*")
    args = p.parse_args()
    table = read_table(args.table)
    os.makedirs(args.out, exist_ok=True)

    work = [(m, []) for m in args.models] + \
        [(m, ["--loss=" + loss]) for loss, m in args.loss]
    seen = {}  # ampc op -> {compute dtype}
    counts = {}
    problems, covering = [], []
    index = 0
    for path, flags in work:
        for model in (parts(path, args.out) if path.endswith(".onnxtext")
                      else [path]):
            index += 1
            nodes, error = report(args.ampc, model, flags,
                                  os.path.join(args.out, "r%d" % index))
            if error:
                problems.append("no report: " + error)
            new = {n["ampc_op"] for n in nodes} - set(seen)
            if new:
                covering.append((model, sorted(new)))
            for n in nodes:
                op, category = n["ampc_op"], n["category"]
                if flags and n["name"] == "ampc.loss":
                    print("LOSS %s: %s %s computes %s" % (
                        " ".join(flags), op, category, n["compute"]))
                seen.setdefault(op, set()).add(n["compute"])
                counts[op] = counts.get(op, 0) + 1
                where = "%s: node '%s' (%s)" % (os.path.basename(model),
                                                n["name"], op)
                want = table.get(op)
                if want is None or want == "-":
                    problems.append("%s: no category in the table, the "
                                    "report says %s" % (where, category))
                elif category != want and not (category == "allow" and
                                               n["rule"] == BIAS_ADD):
                    problems.append("%s: category %s, the table says %s" %
                                    (where, category, want))
                elif category in F32 and n["compute"] != "f32":
                    problems.append("%s: %s computes in %s" %
                                    (where, category, n["compute"]))
                elif category in LOW and n["compute"] != LOW[category] and \
                        "keep_fp32" not in n["rule"]:
                    problems.append("%s: %s computes in %s" %
                                    (where, category, n["compute"]))
    if args.print_covering:
        for model, ops in covering:
            print("%s: %s" % (model, " ".join(ops)))
    categorized = sorted(op for op, c in table.items() if c != "-")
    for op in categorized:
        if op in seen:
            print("%s %s: %d nodes, computes %s" % (
                op, table[op], counts[op], ", ".join(sorted(seen[op]))))
        elif op in NOT_REPORTED:
            print("%s %s: not reported (%s)" % (op, table[op],
                                                 NOT_REPORTED[op]))
        else:
            problems.append("%s (%s): in no report" % (op, table[op]))
    for line in problems:
        print("MISMATCH: " + line)
    print("%d ops with a category, %d in the reports, %d not reportable, "
          "%d mismatched" % (len(categorized), len(set(categorized) & set(seen)),
                             len(NOT_REPORTED), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
