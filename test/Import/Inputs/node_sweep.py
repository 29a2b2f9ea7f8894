#!/usr/bin/env python3
"""Imports every ONNX node test whose ops ampc supports and reports counts.

usage: node_sweep.py AMPC NODE_TEST_DIR [--verbose]

A folder is in scope when every node's op is in `ampc --list-ops` and every
graph input and output is a tensor of a supported element type (ampc has no
strings, sequences or optionals). Each in-scope model must import and verify
(`ampc --emit=mlir --emit-after=import`), and the printed IR must hold an ampc
op for every ONNX node that is not folded away (Identity, Constant, shape
ops). Every other folder must be refused cleanly: exit status 1 and exactly
one line on stderr. Exit status 1 when any folder fails.
"""
import os
import subprocess
import sys

import onnx

# Operand positions whose values decide a result shape or an attribute: a
# static-shape compiler needs them at compile time. When a node test feeds
# them from graph inputs, the sweep binds those inputs to the values of
# test_data_set_0 (ampc --bind-input), as a user would.
COMPILE_TIME_OPERANDS = {
    "Reshape": {1}, "Expand": {1}, "Slice": {1, 2, 3, 4}, "Squeeze": {1},
    "Unsqueeze": {1}, "ReduceSum": {1}, "ReduceMean": {1}, "ReduceMax": {1},
    "Dropout": {1, 2}, "Range": {0, 1, 2}, "ConstantOfShape": {0},
    "ReduceL1": {1}, "ReduceL2": {1}, "ReduceSumSquare": {1},
    "ReduceLogSum": {1}, "ReduceLogSumExp": {1}, "ReduceMin": {1},
    "Trilu": {1}, "Split": {1}, "Tile": {1}, "Resize": {1, 2, 3},
    "Upsample": {1}, "CumSum": {1}, "OneHot": {1}, "Pad": {1, 2, 3},
    "TopK": {1}, "ReduceProd": {1}, "HannWindow": {0}, "HammingWindow": {0},
    "BlackmanWindow": {0}, "MaxUnpool": {2},
}

SUPPORTED_TYPES = {"FLOAT", "FLOAT16", "BFLOAT16", "DOUBLE", "BOOL", "INT8",
                   "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32",
                   "UINT64"}


def compile_time_inputs(model, inputs):
    """The graph inputs a compile-time operand depends on, directly or
    through the nodes computing it (a window function's size reaches Range
    through a Cast)."""
    producer = {o: n for n in model.graph.node for o in n.output}
    pending = [n.input[k] for n in model.graph.node
               for k in COMPILE_TIME_OPERANDS.get(n.op_type, ())
               if k < len(n.input) and n.input[k]]
    seen, bound = set(), set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in inputs:
            bound.add(name)
        elif name in producer:
            pending.extend(i for i in producer[name].input if i)
    return bound


def tensor_types_supported(model):
    for v in list(model.graph.input) + list(model.graph.output):
        if not v.type.HasField("tensor_type"):
            return False
        name = onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type)
        if name not in SUPPORTED_TYPES:
            return False
    for n in model.graph.node:
        if n.op_type == "Cast":
            for a in n.attribute:
                if a.name == "to" and onnx.TensorProto.DataType.Name(a.i) not in SUPPORTED_TYPES:
                    return False
    return True


def refusal_problem(ampc, path, model):
    """Out-of-scope models are bad input: ampc must answer with exit status 1
    and error lines only, never a crash: one line when the model is refused
    for its types, at most one per distinct op type when for its ops (the
    importer names every unsupported op at once). Returns what went wrong."""
    r = subprocess.run([ampc, path, "--emit=mlir"], capture_output=True,
                       text=True)
    lines = r.stderr.splitlines()
    most = len({(n.domain, n.op_type) for n in model.graph.node})
    if (r.returncode == 1 and 1 <= len(lines) <= max(most, 1)
            and all(line.startswith("error: ") for line in lines)):
        return None
    return (f"unsupported model gave exit status {r.returncode} and "
            f"{len(lines)} line(s) on stderr")


def main():
    ampc, root = sys.argv[1], sys.argv[2]
    verbose = "--verbose" in sys.argv
    ops = set(subprocess.run([ampc, "--list-ops"], check=True,
                             capture_output=True, text=True).stdout.split())
    total = in_scope = passed = 0
    failures, unsupported_types = [], []
    for folder in sorted(os.listdir(root)):
        path = os.path.join(root, folder, "model.onnx")
        if not os.path.exists(path):
            continue
        total += 1
        model = onnx.load(path)
        ops_ok = all(n.op_type in ops for n in model.graph.node)
        if not ops_ok or not tensor_types_supported(model):
            if ops_ok:
                unsupported_types.append(folder)
            problem = refusal_problem(ampc, path, model)
            if problem:
                failures.append((folder, [problem]))
            continue
        in_scope += 1
        inputs = [i.name for i in model.graph.input]
        bound = compile_time_inputs(model, inputs)
        args = [f"--bind-input={name}=" + os.path.join(
                    root, folder, "test_data_set_0",
                    f"input_{inputs.index(name)}.pb") for name in sorted(bound)]
        r = subprocess.run([ampc, path, "--emit=mlir", "--emit-after=import"]
                           + args, capture_output=True, text=True)
        if r.returncode != 0 or "func.func @forward" not in r.stdout:
            failures.append((folder, r.stderr.strip().splitlines()[:1]))
            continue
        passed += 1
        if verbose:
            print("ok", folder)
    for folder, msg in failures:
        print("FAIL", folder, *msg)
    if verbose:
        for folder in unsupported_types:
            print("type-skip", folder)
    print(f"{total} node tests, {in_scope} use only supported ops and types "
          f"({len(unsupported_types)} more use supported ops on unsupported "
          f"types), {passed} imported, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
