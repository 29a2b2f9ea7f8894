#!/usr/bin/env python3
"""Checkpoint round trips of an ampc training library, one process per run.

usage: checkpoint_roundtrip.py prepare WORKDIR
       checkpoint_roundtrip.py run WORKDIR --out RESULT.npz [--start N]
                               --steps M [--load CKPT] [--save CKPT]
                               [--reset-scaler]
       checkpoint_roundtrip.py compare FULL.npz FIRST.npz SECOND.npz
       checkpoint_roundtrip.py refuse WORKDIR CKPT

prepare exports the mlp of training_common and compiles it twice:
mlp.so (--precision=fp16, AdamW, dynamic scaling with --growth-interval 3,
so the state holds FP32 master weights, two moments per parameter, f16
weight copies, the step count and a moving scaler) and mlp_sgd.so (the same
model with SGD and momentum: another list of state tensors).

run loads mlp.so in this process, optionally loads a checkpoint, trains on
batches start .. start+M-1 of the seeded sequence (batch 3 carries an input
of 1e5, an f16 overflow, so one step is skipped and the scale backs off),
optionally saves a checkpoint, and writes the losses, the final parameters
and the scaler state to RESULT.npz. --reset-scaler puts the scaler back to
its initial state after loading, to show that compare notices.

compare checks that FIRST's losses followed by SECOND's are bit-identical
to FULL's, and that SECOND's final parameters and scaler state are
bit-identical to FULL's.

refuse trains a fresh mlp.so for 2 steps, then offers it a truncated copy
of CKPT, a copy with one data byte flipped, a file that is no checkpoint, a
missing file and a checkpoint of mlp_sgd.so; each must be refused with
ampc_last_error()'s message (printed), and a checkpoint saved after each
refusal must be byte-identical to one saved before (the model unchanged).
"""
import argparse
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import training_common as tc  # noqa: E402

OVERFLOW_STEP = 3  # batch index (from 0) whose input overflows in f16


def prepare(args):
    _, onnx_path = tc.make_model("mlp", args.workdir)
    common = ["--precision=fp16", "--loss-scale=dynamic",
              "--growth-interval=3"]
    tc.compile_commands([
        (onnx_path, os.path.join(args.workdir, "mlp.so"),
         common + tc.ampc_optimizer_flags("adamw")),
        (onnx_path, os.path.join(args.workdir, "mlp_sgd.so"),
         common + tc.ampc_optimizer_flags("sgd"))])


def batch(k):
    inputs = tc.inputs_of(tc.mlp_batches(k + 1, 1)[k])
    if k == OVERFLOW_STEP:
        inputs["input"][0, 0] = 1e5
    return inputs


def run(args):
    model = tc.Model(os.path.join(args.workdir, "mlp.so"))
    if args.load:
        model.load_checkpoint(args.load)
    if args.reset_scaler:
        state = model.scaler_state()
        model.set_scaler_state(65536.0, 0, state["steps"],
                               state["skipped_steps"])
    losses = [model.train_step(batch(k))
              for k in range(args.start, args.start + args.steps)]
    if args.save:
        model.save_checkpoint(args.save)
    state = model.scaler_state()
    result = {"losses": np.array(losses, np.float32).reshape(-1),
              "scaler": np.array([state["scale"], state["growth_tracker"],
                                  state["steps"], state["skipped_steps"]],
                                 np.float64)}
    for p in model.parameters:
        result["param:" + p.name] = model.get_parameter(p.name)
    np.savez(args.out, **result)
    print("run: steps %d..%d%s, scaler %s" % (
        args.start, args.start + args.steps - 1,
        ", from " + os.path.basename(args.load) if args.load else "",
        " ".join("%s=%g" % kv for kv in state.items())))


def compare(args):
    full, first, second = (np.load(p) for p in (args.full, args.first,
                                                 args.second))
    resumed = np.concatenate([first["losses"], second["losses"]])
    losses_same = resumed.tobytes() == full["losses"].tobytes()
    differing = [k for k in full.files if k.startswith("param:") and
                 full[k].tobytes() != second[k].tobytes()]
    scaler_same = full["scaler"].tobytes() == second["scaler"].tobytes()
    print("compare: %d + %d losses against %d uninterrupted: %s" % (
        len(first["losses"]), len(second["losses"]), len(full["losses"]),
        "bit-identical" if losses_same else "DIFFERENT (largest %.3g)" % (
            np.abs(resumed.astype(np.float64) - full["losses"]).max())))
    print("compare: final parameters: %s" % (
        "bit-identical" if not differing else
        "DIFFERENT: " + ", ".join(k[6:] for k in differing)))
    print("compare: final scaler state %s: %s" % (
        full["scaler"].tolist(), "identical" if scaler_same else
        "DIFFERENT (resumed %s)" % second["scaler"].tolist()))
    ok = losses_same and not differing and scaler_same
    print("PASSED" if ok else "FAILED")
    return 0 if ok else 1


def refuse(args):
    work = args.workdir
    model = tc.Model(os.path.join(work, "mlp.so"))
    for k in range(2):
        model.train_step(batch(k))
    reference = os.path.join(work, "refuse_reference.ckpt")
    model.save_checkpoint(reference)
    with open(reference, "rb") as f:
        reference_bytes = f.read()
    with open(args.checkpoint, "rb") as f:
        good = f.read()
    bad = {}
    bad["truncated"] = good[:len(good) * 2 // 3]
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0x01
    bad["one byte flipped"] = bytes(flipped)
    bad["not a checkpoint"] = b"this is not a checkpoint\n" * 4
    paths = {}
    for what, data in bad.items():
        paths[what] = os.path.join(work, what.replace(" ", "_") + ".ckpt")
        with open(paths[what], "wb") as f:
            f.write(data)
    paths["missing"] = os.path.join(work, "no_such.ckpt")
    other = tc.Model(os.path.join(work, "mlp_sgd.so"))
    other.train_step(batch(0))
    paths["other model's"] = os.path.join(work, "sgd.ckpt")
    other.save_checkpoint(paths["other model's"])
    other.close()

    failures = 0
    for what, path in paths.items():
        try:
            model.load_checkpoint(path)
            message = None
        except tc.AmpcError as e:
            message = str(e).replace(work + "/", "")
        after = os.path.join(work, "refuse_after.ckpt")
        model.save_checkpoint(after)
        with open(after, "rb") as f:
            unchanged = f.read() == reference_bytes
        print("refuse: %s: %s; model unchanged: %s" % (
            what, "refused: " + message if message else "LOADED",
            "yes" if unchanged else "NO"))
        failures += message is None or not unchanged
    # The good checkpoint still loads into the same model afterwards.
    model.load_checkpoint(args.checkpoint)
    print("refuse: the intact checkpoint loads")
    print("PASSED" if not failures else "FAILED")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("workdir")
    p = sub.add_parser("run")
    p.add_argument("workdir")
    p.add_argument("--out", required=True)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--load")
    p.add_argument("--save")
    p.add_argument("--reset-scaler", action="store_true")
    p = sub.add_parser("compare")
    p.add_argument("full")
    p.add_argument("first")
    p.add_argument("second")
    p = sub.add_parser("refuse")
    p.add_argument("workdir")
    p.add_argument("checkpoint")
    args = parser.parse_args()
    return {"prepare": prepare, "run": run, "compare": compare,
            "refuse": refuse}[args.command](args) or 0


if __name__ == "__main__":
    sys.exit(main())
