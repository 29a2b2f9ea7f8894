#!/usr/bin/env python3
"""ONNX export of trained weights (ampc_model_export_onnx), checked.

usage: export_check.py WORKDIR [--perturb]

Uses WORKDIR/mlp.so from `checkpoint_roundtrip.py prepare` (fp16, AdamW):
trains it 6 steps, exports WORKDIR/trained.onnx, and checks that
- onnx.checker.check_model(full_check=True) accepts it;
- every initializer named after a parameter equals get_parameter's value
  bit for bit (same dtype and shape);
- `ampc trained.onnx --mode=infer --target=cpu -o trained_infer.so` compiles
  it, and its infer on a fresh batch gives the same output as the trained
  library's own infer (both fp16 autocast; its "output"), bit for bit.
--perturb changes one parameter of the trained library by 1e-3 after the
export, to show that both comparisons notice.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import training_common as tc  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("workdir")
    parser.add_argument("--perturb", action="store_true")
    args = parser.parse_args()
    work = args.workdir
    model = tc.Model(os.path.join(work, "mlp.so"))
    for x, label in tc.mlp_batches(6, 2):
        model.train_step(tc.inputs_of((x, label)))
    exported = os.path.join(work, "trained.onnx")
    model.export_onnx(exported)
    if args.perturb:
        p = model.parameters[0].name
        model.set_parameter(p, model.get_parameter(p) + np.float32(1e-3))
        print("export: perturbed %s by 1e-3 after the export" % p)

    proto = onnx.load(exported)
    onnx.checker.check_model(proto, full_check=True)
    print("export: checker (full_check) ok, opset %d, %d nodes" % (
        proto.opset_import[0].version, len(proto.graph.node)))
    initializers = {i.name: numpy_helper.to_array(i)
                    for i in proto.graph.initializer}
    problems = []
    for p in model.parameters:
        want = model.get_parameter(p.name)
        got = initializers.get(p.name)
        same = (got is not None and got.dtype == want.dtype and
                got.shape == want.shape and got.tobytes() == want.tobytes())
        print("export: initializer %s %s %s: %s" % (
            p.name, want.dtype, list(want.shape),
            "equals get_parameter" if same else "DIFFERS"))
        if not same:
            problems.append(p.name)

    library = os.path.join(work, "trained_infer.so")
    subprocess.run(["ampc", exported, "--mode=infer", "--target=cpu", "-o",
                    library], check=True)
    infer = tc.Model(library)
    x, label = tc.inputs_of(tc.mlp_batches(1, 99)[0]).values()
    got = infer.infer([x])[0]
    # The training library's infer takes the label too and gives the loss
    # and then the model's output.
    names = [o.name for o in model.outputs]
    want = model.infer([x, label])[names.index("output")]
    same = got.tobytes() == want.tobytes()
    print("export: re-imported %s (%s) infer against the trained library's: "
          "%s" % (os.path.basename(library), infer.info.precision,
                  "bit-identical" if same else "max difference %.3g" %
                  np.abs(got.astype(np.float64) - want).max()))
    if not same:
        problems.append("infer")
    print("PASSED" if not problems else "FAILED: " + ", ".join(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
