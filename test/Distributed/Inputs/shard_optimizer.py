"""ZeRO-1, --shard-optimizer (issue 41, item 3): the MLP of data_parallel.py,
2 ranks x batch B with the optimizer sharded against 2 ranks without it and
against 1 rank x 2B.

    shard_optimizer.py compile WORK      the libraries
    shard_optimizer.py reference WORK    the one-process runs (and a
                                         checkpoint at step HALF)
    shard_optimizer.py rank WORK         one rank's runs (mpirun -np 2)
    shard_optimizer.py compare WORK      the checks; one line each

Runs: fp32, fp16, bf16 (20 AdamW steps), overflow (fp16; rank 1's rows of
step 5 overflow), clip (fp32, --clip-grad-norm small enough to clip every
step) and sgd (fp32, SGD with momentum). Each is trained by the sharded
library ("shard") and the data-parallel one ("dp") on 2 ranks, and by the
library without --data-parallel at 2B ("one") in one process. Checkpoints
(fp32): the sharded ranks save at step HALF (every rank calls save; rank 0
writes), the "one" library loads it in one process and takes the remaining
steps; the "one" library's checkpoint of step HALF is loaded by the sharded
ranks, which take the remaining steps.
"""
import ctypes
import os
import subprocess
import sys

import numpy as np

import ampc_testing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data_parallel as dp  # noqa: E402  (the MLP, its batches, difference)

B, STEPS, HALF = dp.B, dp.STEPS, 10
RUNS = {"fp32": ("fp32", []), "fp16": ("fp16", []), "bf16": ("bf16", []),
        "clip": ("fp32", ["--clip-grad-norm=0.05"]),
        "sgd": ("fp32", ["--optimizer=sgd", "--momentum=0.9"])}


def library(work, name, kind):
    return os.path.join(work, "%s-%s.so" % (name, kind))


def compile_all(work):
    with open(os.path.join(work, "mlp.onnxtext"), "w") as f:
        f.write(dp.MLP)
    jobs = []
    for name, (precision, extra) in RUNS.items():
        for kind, batch, flags in (("shard", B, ["--data-parallel",
                                                 "--shard-optimizer"]),
                                   ("dp", B, ["--data-parallel"]),
                                   ("one", 2 * B, [])):
            if kind == "one" and name in ("clip", "sgd"):
                continue
            command = ["ampc", os.path.join(work, "mlp.onnxtext"), "-o",
                       library(work, name, kind), "--batch", str(batch),
                       "--precision=" + precision]
            if not any(f.startswith("--optimizer") for f in extra):
                command.append("--optimizer=adamw")
            jobs.append(subprocess.Popen(command + flags + extra))
    assert all(job.wait() == 0 for job in jobs)


def train(path, rows, overflow=False, steps=range(STEPS), model=None,
          save=None, load=None):
    import ampc
    model = model or ampc.Model(path)
    if load:
        model.load_checkpoint(load)
    losses = []
    for step, (x, y) in enumerate(dp.batches()):
        if step not in steps:
            continue
        if overflow and step == 5:
            x = x.copy()
            x[B + 1, 0] = np.float32(1e30)
        losses.append(float(np.asarray(model.train_step(x[rows], y[rows]))))
        if save and step == HALF - 1:
            model.save_checkpoint(save)
    result = {p: np.asarray(model.get_parameter(p)).tolist()
              for p in dp.PARAMETERS}
    result["losses"] = losses
    try:
        result["skipped"] = model.scaler_state()["skipped_steps"]
    except ampc.AmpcError:  # a library without loss scaling
        result["skipped"] = 0
    result.update(model.data_parallel())
    return result


def state_size(path):
    """The library's state block (ampc_model_abi.state_size), in bytes."""
    lib = ctypes.CDLL(path)
    lib.ampc_model_entry.restype = ctypes.POINTER(ctypes.c_size_t * 13)
    return lib.ampc_model_entry().contents[12]


save, load = ampc_testing.save_results, ampc_testing.load_result


def main():
    mode, work = sys.argv[1], sys.argv[2]
    if mode == "compile":
        return compile_all(work)
    results = {}
    if mode == "reference":
        whole = slice(0, 2 * B)
        for name in ("fp32", "fp16", "bf16"):
            results[name + "-one"] = train(library(work, name, "one"), whole)
        results["overflow-one"] = train(library(work, "fp16", "one"), whole,
                                        overflow=True)
        train(library(work, "fp32", "one"), whole, steps=range(HALF),
              save=os.path.join(work, "one.ckpt"))
    elif mode == "rank":
        rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
        rows = slice(rank * B, rank * B + B)
        for name in RUNS:
            for kind in ("shard", "dp"):
                results["%s-%s%d" % (name, kind, rank)] = train(
                    library(work, name, kind), rows)
        for kind in ("shard", "dp"):
            results["overflow-%s%d" % (kind, rank)] = train(
                library(work, "fp16", kind), rows, overflow=True)
        # The sharded ranks' checkpoint of step HALF, and the rest of the
        # steps from the one-process checkpoint.
        train(library(work, "fp32", "shard"), rows, steps=range(HALF),
              save=os.path.join(work, "shard.ckpt"))
        results["resume-shard%d" % rank] = train(
            library(work, "fp32", "shard"), rows, steps=range(HALF, STEPS),
            load=os.path.join(work, "one.ckpt"))
    elif mode == "compare":
        compare(work)
        return
    save(work, results)


def compare(work):
    for name in ("fp32", "fp16", "bf16", "clip", "sgd"):
        s0, s1 = load(work, name + "-shard0"), load(work, name + "-shard1")
        d0 = load(work, name + "-dp0")
        assert (s0["rank"], s0["world_size"], s1["rank"]) == (0, 2, 1), s0
        assert dp.difference(s0, s1) == 0, (name, "ranks differ")
        against_dp = dp.difference(s0, d0)
        line = ("%s: sharded 2 ranks x %d, %d steps: ranks bit-identical; "
                "against 2 ranks without --shard-optimizer %s"
                % (name, B, STEPS, "bit-identical" if against_dp == 0 else
                   "within %.1e" % against_dp))
        tolerance = {"fp32": 1e-6, "fp16": 2e-3, "bf16": 1e-2, "clip": 1e-6,
                     "sgd": 1e-6}[name]
        assert against_dp <= 1e-6, (name, against_dp)
        assert s0["skipped"] == d0["skipped"], (name, s0, d0)
        if name in ("fp32", "fp16", "bf16"):
            one = load(work, name + "-one")
            d = dp.difference(s0, one)
            assert d <= tolerance, (name, d)
            assert s0["skipped"] == one["skipped"], (name, s0, one)
            line += "; against 1 x %d within %.1e (tolerance %.0e)" % (
                2 * B, d, tolerance)
        print(line + "; %d skipped" % s0["skipped"])
    s0, s1 = load(work, "overflow-shard0"), load(work, "overflow-shard1")
    d0, one = load(work, "overflow-dp0"), load(work, "overflow-one")
    assert s0["skipped"] == s1["skipped"] == d0["skipped"] == one["skipped"] \
        == 1, (s0["skipped"], s1["skipped"], d0["skipped"], one["skipped"])
    assert dp.difference(s0, s1) == 0 and dp.difference(s0, d0) <= 1e-6
    print("overflow on rank 1 only at step 5: skipped on both sharded ranks "
          "(%d, %d) as without sharding and in one process"
          % (s0["skipped"], s1["skipped"]))
    b_dp = load(work, "fp16-dp0")["bytes_all_reduced"] // STEPS
    b_shard = load(work, "fp16-shard0")["bytes_all_reduced"] // STEPS
    print("bytes sent per rank per step, fp16: %d without sharding, %d "
          "sharded" % (b_dp, b_shard))
    # Checkpoints: 2 ranks -> 1 process, 1 process -> 2 ranks.
    reference = load(work, "fp32-shard0")
    one = train(library(work, "fp32", "one"), slice(0, 2 * B),
                steps=range(HALF, STEPS), load=os.path.join(work,
                                                             "shard.ckpt"))
    d = dp.difference(one, reference)
    assert d <= 1e-6, d
    print("checkpoint of the sharded ranks at step %d, resumed by the library "
          "without the flag in one process at %d: steps %d-%d within %.1e of "
          "the sharded run" % (HALF, 2 * B, HALF, STEPS - 1, d))
    r0, r1 = load(work, "resume-shard0"), load(work, "resume-shard1")
    whole = load(work, "fp32-one")
    d = dp.difference(r0, whole)
    assert dp.difference(r0, r1) == 0 and d <= 1e-6, d
    print("checkpoint of one process at step %d, resumed by 2 sharded ranks: "
          "steps %d-%d within %.1e of the one-process run" % (HALF, HALF,
                                                              STEPS - 1, d))
    # The optimizer state a rank keeps: the moments of its shard.
    sharded = state_size(library(work, "fp32", "shard"))
    plain = state_size(library(work, "fp32", "dp"))
    elements = sum(np.asarray(reference[p]).size for p in dp.PARAMETERS)
    moments = 2 * elements * 4
    per_rank = 2 * ((elements + 1) // 2) * 4
    assert plain - sharded >= moments - 64, (plain, sharded, moments)
    print("AdamW moments of %d parameters: %d bytes in the state block "
          "without --shard-optimizer (state %d bytes), %d bytes per rank at 2 "
          "ranks with it (state %d bytes)" % (elements, moments, plain,
                                              per_rank, sharded))


if __name__ == "__main__":
    main()
